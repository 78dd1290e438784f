//! Integration tests of the `service` example's server over real TCP on loopback: page bodies,
//! the deadline (504, and no task of the request left afterwards), single-flight sharing,
//! bad requests, and the debug pages.
//!
//! Run them with `cargo test -p coro-examples --test service`.

#[path = "../service/server.rs"]
mod server;

use async_net::TcpStream;
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
    let stats = server.stats();
    assert_eq!((stats.bad_requests, stats.not_found, stats.ok), (6, 1, 1));
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
    server.shutdown().await;
    // After shutdown nobody listens any more.
    let refused = timeout(Duration::from_secs(5), TcpStream::connect(addr)).await;
    assert!(
        matches!(refused, Ok(Err(_))),
        "still accepting after shutdown"
    );
}
