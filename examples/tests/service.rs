//! Integration tests of the `service` example's server over real TCP on loopback: page bodies,
//! the deadline (504, and no task of the request left afterwards), single-flight sharing,
//! bad requests, the debug pages, and bad input on the wire (garbage, oversized heads, clients
//! that send nothing, thousands of idle connections) leaving the server serving everyone else;
//! and, on Unix, the example binary run with `--serve` draining its requests in flight and
//! exiting 0 on SIGTERM and on SIGINT.
//!
//! Run them with `cargo test -p coro-examples --test service`.

#[path = "../service/server.rs"]
mod server;
#[path = "../service/store.rs"]
mod store;

use coro::net::TcpStream;
use coro::time::{sleep, timeout};
use futures::{AsyncReadExt, AsyncWriteExt};
use server::{Config, Server};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

async fn start(config: Config) -> Server {
    Server::start(([127, 0, 0, 1], 0).into(), config)
        .await
        .expect("bind a loopback port")
}

/// Sends `request` as is on a new connection and reads until the server closes it; returns
/// the status and the body. Panics rather than hangs: every step is bounded.
async fn send(addr: SocketAddr, request: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        std::io::Result::Ok(answer)
    };
    let answer = timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| panic!("no answer within 10 s to {request:?}"))
        .unwrap_or_else(|e| panic!("I/O error on {request:?}: {e}"));
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in answer {answer:?}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
    (status.expect("a status code"), body.to_string())
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    send(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"),
    )
    .await
}

/// Waits (at most 5 s) until `cond` holds for the current task dump; true if it did.
async fn dump_eventually(cond: impl Fn(&coro::trace::TaskDump) -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if cond(&coro::trace::dump_all()) {
            return true;
        }
        let _ = sleep(Duration::from_millis(5)).await;
    }
    false
}

/// Whether any live task is, or is inside, a frame with one of these names.
fn mentions(dump: &coro::trace::TaskDump, names: &[&str]) -> bool {
    dump.tasks().iter().any(|task| {
        names.contains(&task.name()) || task.frames().iter().any(|f| names.contains(&f.name()))
    })
}

#[coro::test(timeout_ms = 30000)]
async fn user_page_has_profile_friends_and_feed() {
    let server = start(Config::default()).await;
    let (status, body) = get(server.addr(), "/user/1").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        "id: 1\nname: user1\nfriends: 2 3 4\nfeed: post from user2; post from user3; post from user4\n"
    );
    // The second time the profile comes from the cache.
    assert_eq!(get(server.addr(), "/user/1").await, (200, body));
    let stats = server.stats();
    assert_eq!(
        (
            stats.requests,
            stats.ok,
            stats.backend_calls,
            stats.cache_hits
        ),
        (2, 2, 1, 1)
    );
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn deadline_returns_504_and_cancels_the_whole_dag() {
    let config = Config {
        deadline: Duration::from_millis(200),
        slow_latency: Duration::from_secs(60),
        ..Config::default()
    };
    let server = start(config).await;
    let addr = server.addr();
    let marker = ["user 4242", "slow feed backend"];
    let started = Instant::now();
    let request = coro::spawn(async move { get(addr, "/user/4242?slow=1").await });
    // While it waits, the request's tasks are visible: the check below can see them.
    assert!(
        dump_eventually(|d| mentions(d, &marker)).await,
        "the slow request never showed up in the task dump:\n{}",
        coro::trace::dump_all()
    );
    let (status, body) = request.await.expect("the client task");
    assert_eq!((status, body.as_str()), (504, "deadline exceeded\n"));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "504 came late: {:?}",
        started.elapsed()
    );
    // Cancelling the DAG dropped every branch, the shared friends computation included.
    assert!(
        dump_eventually(|d| !mentions(d, &marker)).await,
        "tasks of the timed-out request are still alive:\n{}",
        coro::trace::dump_all()
    );
    assert_eq!(server.stats().timeouts, 1);
    // The server still answers in time.
    assert_eq!(get(addr, "/user/4242").await.0, 200);
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn concurrent_duplicate_requests_call_the_backend_once() {
    const N: usize = 16;
    let config = Config {
        // A slow profile load, so that the requests overlap it; a long TTL, so that any late
        // request is a cache hit rather than a second load.
        profile_latency: Duration::from_millis(100),
        fresh_for: Duration::from_secs(60),
        expire_after: Duration::from_secs(120),
        deadline: Duration::from_secs(5),
        ..Config::default()
    };
    let server = start(config).await;
    let addr = server.addr();
    let requests = (0..N).map(|_| coro::Task::new(async move { get(addr, "/user/7").await }));
    let answers = coro::collect_all_range(requests).await;
    for (status, body) in &answers {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body, &answers[0].1);
    }
    let stats = server.stats();
    assert_eq!(stats.requests, N as u64);
    assert_eq!(stats.backend_calls, 1, "{stats:?}");
    assert_eq!(
        stats.shared_waits + stats.cache_hits,
        N as u64 - 1,
        "{stats:?}"
    );
    assert!(
        stats.shared_waits > 0,
        "no request joined the load in flight: {stats:?}"
    );
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn bad_requests_get_4xx_and_the_server_keeps_serving() {
    let server = start(Config::default()).await;
    let addr = server.addr();
    assert_eq!(send(addr, "NONSENSE\r\n\r\n").await.0, 400);
    assert_eq!(
        send(addr, "GET /user/1 HTTP/1.1\r\nno colon here\r\n\r\n")
            .await
            .0,
        400
    );
    assert_eq!(send(addr, "GET /user/1 SMTP\r\n\r\n").await.0, 400);
    assert_eq!(get(addr, "/user/abc").await.0, 400);
    assert_eq!(get(addr, "/user/").await.0, 400);
    assert_eq!(get(addr, "/nowhere").await.0, 404);
    assert_eq!(
        send(addr, "POST /user/1 HTTP/1.1\r\nConnection: close\r\n\r\n")
            .await
            .0,
        405
    );
    let (status, body) = get(addr, "/user/2").await;
    assert_eq!(status, 200);
    assert!(body.starts_with("id: 2\nname: user2\n"), "{body}");
    // The first three never reach the handler: hyper's parser answers them.
    let stats = server.stats();
    assert_eq!((stats.bad_requests, stats.not_found, stats.ok), (3, 1, 1));
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let server = start(Config::default()).await;
    let two = "GET /user/3 HTTP/1.1\r\n\r\nGET /user/4 HTTP/1.1\r\nConnection: close\r\n\r\n";
    let (status, rest) = send(server.addr(), two).await;
    assert_eq!(status, 200);
    assert!(
        rest.contains("HTTP/1.1 200 OK") && rest.ends_with("post from user7\n"),
        "{rest}"
    );
    assert_eq!(server.stats().ok, 2);
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn debug_pages_answer() {
    let server = start(Config::default()).await;
    let addr = server.addr();
    let (status, dump) = get(addr, "/debug/tasks").await;
    assert_eq!(status, 200);
    // The dump is taken while the server serves it: the accept loop is in it.
    assert!(
        dump.contains("live task") && dump.contains("accept loop"),
        "{dump}"
    );
    let (status, metrics) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("backend_calls") && metrics.contains("live_tasks"),
        "{metrics}"
    );
    let drained = server.shutdown().await;
    assert!(drained.complete, "nothing was in flight to cut off");
    assert_eq!(drained.stats.requests, 2);
    // After shutdown nobody listens any more.
    let refused = timeout(Duration::from_secs(5), TcpStream::connect(addr)).await;
    assert!(
        matches!(refused, Ok(Err(_))),
        "still accepting after shutdown"
    );
}

// Bad input on the wire. Each test keeps a well-behaved client going beside the bad ones and
// checks that it is served promptly, then that the bad connections were closed by the server.

/// A config whose header (and idle) timeout is short, so that the tests see it fire.
fn short_timeouts() -> Config {
    Config {
        header_timeout: Duration::from_millis(500),
        ..Config::default()
    }
}

/// Reads until the server closes the connection (or resets it, or 10 s pass: a panic); returns
/// what arrived.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let closed = timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept a bad connection open");
    got
}

/// The status of an HTTP/1.1 answer, if `answer` starts with one.
fn status_of(answer: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(answer);
    let rest = text.strip_prefix("HTTP/1.1 ")?;
    rest.get(..3)?.parse().ok()
}

/// A good request on a fresh connection must be answered 200 within `within`.
async fn served_within(addr: SocketAddr, within: Duration) {
    let started = Instant::now();
    let (status, body) = get(addr, "/user/5").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < within,
        "a good request took {:?} beside the bad ones",
        started.elapsed()
    );
}

#[coro::test(timeout_ms = 30000)]
async fn garbage_gets_400_or_a_close_and_others_are_served() {
    let server = start(short_timeouts()).await;
    let addr = server.addr();
    let garbage: Vec<Vec<u8>> = vec![
        b"\x00\x01\x02\x03\xff\xfe\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n".to_vec(),
        b"GET /\x7f HTTP/1.1\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
        // The HTTP/2 preface, then junk instead of a SETTINGS frame.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nthis is not a frame at all".to_vec(),
        (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect(),
    ];
    let bad = garbage.into_iter().map(|bytes| {
        coro::Task::new(async move {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            // The server may close before it has read it all: a failed write is fine.
            let _ = stream.write_all(&bytes).await;
            let answer = read_until_closed(&mut stream).await;
            (bytes, answer)
        })
    });
    let (answers, ()) = coro::collect_all!(
        coro::collect_all_range(bad),
        served_within(addr, Duration::from_secs(2))
    )
    .await;
    for (bytes, answer) in answers {
        let status = status_of(&answer);
        assert!(
            status.is_none() || status.is_some_and(|s| (400..500).contains(&s)),
            "{:?} got {:?}",
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&answer)
        );
    }
    assert_eq!(send(addr, "NONSENSE\r\n\r\n").await.0, 400);
    served_within(addr, Duration::from_secs(2)).await;
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn oversized_heads_get_431_and_others_are_served() {
    let config = short_timeouts();
    let limit = config.max_head_bytes;
    let max_headers = config.max_headers;
    let server = start(config).await;
    let addr = server.addr();
    // One huge header line, a head past the buffer limit made of many small lines, and too
    // many header fields in a small head.
    let huge = format!(
        "GET /user/1 HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(4 * limit)
    );
    let long: String = (0..limit / 16)
        .map(|i| format!("X-H{i}: 0123456789\r\n"))
        .collect();
    let long = format!("GET /user/1 HTTP/1.1\r\n{long}\r\n");
    let many: String = (0..max_headers + 8)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let many = format!("GET /user/1 HTTP/1.1\r\n{many}\r\n");
    assert!(many.len() < limit);
    for request in [huge, long, many] {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let _ = stream.write_all(request.as_bytes()).await;
        let answer = read_until_closed(&mut stream).await;
        // The server closes with part of the request unread, which may reset the connection
        // before its answer is read; when the answer arrives it is 431.
        let status = status_of(&answer);
        assert!(
            status.is_none() || status == Some(431),
            "a {}-byte head got {:?}",
            request.len(),
            String::from_utf8_lossy(&answer)
        );
        served_within(addr, Duration::from_secs(2)).await;
    }
    // The handler never saw them.
    assert_eq!(server.stats().requests, 3);
    server.shutdown().await;
}

#[coro::test(timeout_ms = 30000)]
async fn silent_and_slow_clients_are_dropped_after_the_header_timeout() {
    let config = short_timeouts();
    let header_timeout = config.header_timeout;
    let server = start(config).await;
    let addr = server.addr();
    let opened = Instant::now();
    // Sends nothing; sends half a head; sends one request, then idles on keep-alive.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    let mut half = TcpStream::connect(addr).await.expect("connect");
    half.write_all(b"GET /user/1 HTTP/1.1\r\nHost: t\r\nX-Slow")
        .await
        .expect("write");
    let mut idle = TcpStream::connect(addr).await.expect("connect");
    idle.write_all(b"GET /user/2 HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .expect("write");
    // Meanwhile everyone else is served.
    for _ in 0..5 {
        served_within(addr, Duration::from_secs(1)).await;
    }
    for (name, stream) in [
        ("silent", &mut silent),
        ("half", &mut half),
        ("idle", &mut idle),
    ] {
        let answer = read_until_closed(stream).await;
        let closed_after = opened.elapsed();
        let status = status_of(&answer);
        match name {
            "idle" => assert_eq!(status, Some(200), "{:?}", String::from_utf8_lossy(&answer)),
            // hyper may answer a timed-out partial head with 408; nothing at all is fine too.
            _ => assert!(
                status.is_none() || status == Some(408),
                "{name}: {answer:?}"
            ),
        }
        assert!(
            closed_after >= header_timeout
                && closed_after < header_timeout + Duration::from_secs(5),
            "{name} closed after {closed_after:?}, header timeout {header_timeout:?}"
        );
    }
    served_within(addr, Duration::from_secs(1)).await;
    server.shutdown().await;
}

/// Half the soft file descriptor limit less a margin, as both ends of each connection are in
/// this process; at most `want`.
fn connections_allowed(want: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        limit.rlim_cur as usize
    } else {
        1024
    };
    want.min(soft.saturating_sub(256) / 2)
}

#[coro::test(timeout_ms = 60000)]
async fn thousands_of_idle_connections_do_not_stop_the_service() {
    let n = connections_allowed(2_000);
    let config = short_timeouts();
    // Long enough that all of them are open at once even on a loaded machine (opening 2,000
    // took 0.5-4 s on the 2-core one).
    let header_timeout = Duration::from_secs(8);
    let server = start(Config {
        header_timeout,
        ..config
    })
    .await;
    let addr = server.addr();
    let opened = Instant::now();
    let mut idle = Vec::with_capacity(n);
    // In batches, so that the listen backlog never overflows.
    for batch in (0..n).collect::<Vec<_>>().chunks(100) {
        let connects = batch
            .iter()
            .map(|_| coro::Task::new(async move { TcpStream::connect(addr).await }));
        for stream in coro::collect_all_range(connects).await {
            idle.push(stream.expect("connect an idle client"));
        }
    }
    assert!(
        opened.elapsed() < header_timeout,
        "opening {n} connections took {:?}",
        opened.elapsed()
    );
    eprintln!("{n} idle connections open in {:?}", opened.elapsed());
    // With all of them open, the service answers others at once.
    for _ in 0..10 {
        served_within(addr, Duration::from_secs(1)).await;
    }
    // And it closes them at the header timeout: every read sees the end of the stream.
    let closes = idle.into_iter().map(|mut stream| {
        coro::Task::new(async move {
            let mut byte = [0u8; 1];
            timeout(
                header_timeout + Duration::from_secs(10),
                stream.read(&mut byte),
            )
            .await
        })
    });
    let closed = coro::collect_all_range(closes).await;
    let still_open = closed.iter().filter(|r| r.is_err()).count();
    let answered = closed
        .iter()
        .filter(|r| matches!(r, Ok(Ok(n)) if *n > 0))
        .count();
    assert_eq!((still_open, answered), (0, 0), "of {n} idle connections");
    assert!(opened.elapsed() >= header_timeout);
    served_within(addr, Duration::from_secs(1)).await;
    server.shutdown().await;
}

/// The page of user 1, as every store seeds it.
const USER_1: &str =
    "id: 1\nname: user1\nfriends: 2 3 4\nfeed: post from user2; post from user3; post from user4\n";

#[coro::test(timeout_ms = 60000)]
async fn pages_come_from_the_sqlite_store_and_an_unknown_user_is_404() {
    let server = start(Config::default()).await;
    assert!(server.store().starts_with("SQLite"), "{}", server.store());
    assert_eq!(
        get(server.addr(), "/user/1").await,
        (200, USER_1.to_string())
    );
    let (status, body) = get(server.addr(), "/user/99999999").await;
    assert_eq!((status, body.as_str()), (404, "no such user\n"));
    server.shutdown().await;
}

#[test]
fn pages_come_from_postgres_with_profiles_cached_in_redis() {
    let Some(pg) = coro_test_servers::Postgres::start() else {
        return;
    };
    let Some(redis) = coro_test_servers::Redis::start() else {
        return;
    };
    let config = Config {
        store: store::StoreConfig {
            postgres: Some(pg.url()),
            redis: Some(redis.url()),
        },
        ..Config::default()
    };
    let redis_url = redis.url();
    coro::block_wait(
        coro::Task::new(async move {
            let server = start(config).await;
            assert!(server.store().contains("PostgreSQL"), "{}", server.store());
            assert!(server.store().contains("Redis"), "{}", server.store());
            let addr = server.addr();
            let requests =
                (0..64).map(|_| coro::Task::new(async move { get(addr, "/user/1").await }));
            for answer in coro::collect_all_range(requests).await {
                assert_eq!(answer, (200, USER_1.to_string()));
            }
            assert_eq!(get(addr, "/user/4242").await.0, 200);
            assert_eq!(get(addr, "/user/99999999").await.0, 404);
            // The profile loads went through Redis: the cache holds user 1's name.
            let client = redis::Client::open(redis_url).unwrap();
            let mut connection = coro::compat::tokio(client.get_multiplexed_async_connection())
                .await
                .unwrap();
            let cached: Option<String> = coro::compat::tokio(async {
                redis::AsyncCommands::get(&mut connection, "coro-service:profile:1").await
            })
            .await
            .unwrap();
            assert_eq!(cached.as_deref(), Some("user1"));
            server.shutdown().await;
        })
        .schedule_on(&coro::ThreadPool::new(2).unwrap()),
    );
}

#[coro::test(timeout_ms = 30000)]
async fn debug_sleep_answers_after_the_time_asked_and_refuses_bad_times() {
    let server = start(Config::default()).await;
    let addr = server.addr();
    let asked = Instant::now();
    let (status, body) = get(addr, "/debug/sleep?ms=50").await;
    assert_eq!((status, body.as_str()), (200, "slept 50 ms\n"));
    assert!(asked.elapsed() >= Duration::from_millis(50));
    for bad in ["/debug/sleep", "/debug/sleep?ms=x", "/debug/sleep?ms=5001"] {
        let (status, body) = get(addr, bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body, "want ?ms=N with N at most 5000\n");
    }
    server.shutdown().await;
}

// The example binary itself, run with `--serve` and stopped by a signal.

#[cfg(unix)]
mod support;

/// Sends `GET path` on a new blocking connection and reads the answer to its end.
#[cfg(unix)]
fn blocking_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(15)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

/// Runs `service --serve 127.0.0.1:0`, holds a request in flight, and sends the process
/// `signum`: the held request gets its whole answer, new connections are refused while it is
/// still in flight, the example says it drained, and it exits 0 within a few seconds.
#[cfg(unix)]
fn serve_drains_and_exits_on(signum: i32, name: &str) {
    let mut example = support::Example::start("service", &["--serve", "127.0.0.1:0"]);
    let serving = example.expect_line_where("serving on http://ADDR/...", |line| {
        line.starts_with("serving on http://")
    });
    let addr: SocketAddr = serving["serving on http://".len()..]
        .split('/')
        .next()
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no address in {serving:?}"));

    // Held for a second: long enough to watch, bounded whatever happens.
    let held = std::thread::spawn(move || {
        let answer = blocking_get(addr, "/debug/sleep?ms=1000");
        (answer, Instant::now())
    });
    // In flight once the server's task dump shows its sleep.
    let until = Instant::now() + support::STEP;
    loop {
        let dump = blocking_get(addr, "/debug/tasks").expect("GET /debug/tasks");
        if dump.contains("debug sleep") {
            break;
        }
        assert!(
            Instant::now() < until,
            "the held request never arrived:\n{dump}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    example.signal(signum);
    example.expect_line(&format!(
        "{name}: stopped accepting, draining the requests in flight"
    ));
    // The listener closes at once: connections are refused while the held request runs on.
    let until = Instant::now() + Duration::from_secs(5);
    let refused_at = loop {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break Instant::now(),
            // A handshake that the listener's close cut off: try again.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                assert!(Instant::now() < until, "still accepting 5 s after {name}");
            }
            Err(e) => panic!("connecting after {name}: {e}"),
            Ok(_accepted_by_the_kernel_before_the_close) => {
                assert!(Instant::now() < until, "still accepting 5 s after {name}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };

    let (answer, answered_at) = held.join().expect("the held request's thread");
    let answer = answer.unwrap_or_else(|e| panic!("the held request failed after {name}: {e}"));
    assert!(
        answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nslept 1000 ms\n"),
        "{answer:?}"
    );
    assert!(
        refused_at < answered_at,
        "new connections were only refused after the request in flight had finished"
    );
    let drained =
        example.expect_line_where("drained in ...", |line| line.starts_with("drained in "));
    assert!(
        drained.ends_with("requests answered in all; exiting"),
        "{drained}"
    );
    let status = example.exit_status(Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(0),
        "{status}; stderr:\n{}",
        example.stderr()
    );
}

#[cfg(unix)]
#[test]
fn serve_drains_requests_in_flight_and_exits_0_on_sigterm() {
    serve_drains_and_exits_on(libc::SIGTERM, "SIGTERM");
}

#[cfg(unix)]
#[test]
fn serve_drains_requests_in_flight_and_exits_0_on_sigint() {
    serve_drains_and_exits_on(libc::SIGINT, "SIGINT");
}
