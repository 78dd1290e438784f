//! Bad input on the wire: garbage, oversized headers, silent and half-silent clients, and
//! thousands of idle connections. None of them may disturb a normal request.

use crate::common;

use common::{Server, get_once, raw, read_until_closed, within};
use futures::AsyncWriteExt;
use hyper::StatusCode;
use std::time::{Duration, Instant};

/// What a normal request must still get, promptly.
async fn still_serves(addr: std::net::SocketAddr) {
    let start = Instant::now();
    let got = within(Duration::from_secs(5), get_once(addr, "/ok")).await;
    assert_eq!(got, (StatusCode::OK, "hello /ok".to_owned()));
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn garbage_gets_400_or_a_close() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    for garbage in [
        &b"\x00\x01\x02\xff\xfe garbage \r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
        // The HTTP/2 preface, then a 13-byte CONTINUATION frame where SETTINGS must come.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x0d\x09\x00\x00\x00\x00\x00garbage-frame",
    ] {
        let mut stream = raw(server.addr, garbage).await;
        println!("sending {:?}", String::from_utf8_lossy(garbage));
        let (got, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
        let text = String::from_utf8_lossy(&got);
        assert!(
            got.is_empty() || text.starts_with("HTTP/1.1 400") || garbage.starts_with(b"PRI"),
            "unexpected answer to garbage: {text:?}"
        );
    }
    still_serves(server.addr).await;
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn an_oversized_header_gets_431_or_a_close() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    // 1 MiB of header, past hyper's default 400 KiB buffer. Written from its own task: the
    // server stops reading (and closes) long before the end, which may fail the write.
    let stream = coro::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut read_half, mut write_half) = stream.into_split();
    let writer = coro::spawn(async move {
        let mut request = b"GET / HTTP/1.1\r\nHost: test\r\nX-Big: ".to_vec();
        request.resize(request.len() + (1 << 20), b'a');
        request.extend_from_slice(b"\r\n\r\n");
        let _ = write_half.write_all(&request).await; // may be cut off: that is fine
        write_half
    });
    let mut got = Vec::new();
    within(Duration::from_secs(5), async {
        use futures::AsyncReadExt;
        let mut buf = [0; 4096];
        loop {
            match read_half.read(&mut buf).await {
                Ok(0) | Err(_) => break, // closed or reset
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&got);
    assert!(
        got.is_empty() || text.starts_with("HTTP/1.1 431"),
        "unexpected answer to an oversized header: {text:?}"
    );
    drop(within(Duration::from_secs(5), writer).await);
    still_serves(server.addr).await;
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_configured_header_count_limit_applies() {
    common::watchdog();
    let server = Server::start(|s| {
        s.configure(|b| {
            b.http1().max_headers(4);
        })
    })
    .await;
    let mut request = String::from("GET / HTTP/1.1\r\nHost: test\r\n");
    for i in 0..10 {
        request.push_str(&format!("X-H{i}: v\r\n"));
    }
    request.push_str("\r\n");
    let mut stream = raw(server.addr, request.as_bytes()).await;
    let (got, _) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&got);
    assert!(
        got.is_empty() || text.starts_with("HTTP/1.1 431"),
        "unexpected answer to too many headers: {text:?}"
    );
    still_serves(server.addr).await;
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn silent_and_stalled_clients_are_dropped_after_the_header_read_timeout() {
    common::watchdog();
    const TIMEOUT: Duration = Duration::from_millis(300);
    let server = Server::start(|s| s.header_read_timeout(TIMEOUT)).await;
    let addr = server.addr;
    let cases: [(&str, &[u8]); 4] = [
        // Never lets HTTP/1 be told from HTTP/2.
        ("sends nothing", b""),
        ("stops inside the HTTP/2 preface", b"PRI * HTTP/2.0\r\n"),
        (
            "stops inside an HTTP/1 request head",
            b"GET / HTTP/1.1\r\nHost: te",
        ),
        (
            "sends only the HTTP/2 preface",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ),
    ];
    let clients: Vec<_> = cases
        .into_iter()
        .map(|(what, bytes)| {
            coro::spawn(async move {
                let mut stream = raw(addr, bytes).await;
                let (_, took) = read_until_closed(&mut stream, Duration::from_secs(5)).await;
                (what, took)
            })
        })
        .collect();
    // Meanwhile, normal requests go through.
    still_serves(addr).await;
    for client in clients {
        let (what, took) = client.await.unwrap();
        assert!(
            took >= TIMEOUT - Duration::from_millis(50),
            "a client that {what} was dropped too early, after {took:?}"
        );
        assert!(
            took < TIMEOUT + Duration::from_secs(2),
            "a client that {what} was dropped late, after {took:?}"
        );
    }
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_keep_alive_connection_idle_past_the_header_read_timeout_is_closed() {
    common::watchdog();
    const TIMEOUT: Duration = Duration::from_millis(300);
    let server = Server::start(|s| s.header_read_timeout(TIMEOUT)).await;
    let (mut sender, conn) = common::http1_client(server.addr).await;
    let response = sender.send_request(common::get("/one")).await.unwrap();
    assert_eq!(common::read(response).await.0, StatusCode::OK);
    let idle_since = Instant::now();
    within(Duration::from_secs(5), conn).await.unwrap().ok();
    let idle = idle_since.elapsed();
    assert!(
        idle >= TIMEOUT - Duration::from_millis(50),
        "closed after {idle:?}"
    );
    server.stop().await;
}

/// The soft limit on open file descriptors (`ulimit -n`).
fn open_file_limit() -> libc::rlim_t {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    assert_eq!(
        rc,
        0,
        "getrlimit failed: {}",
        std::io::Error::last_os_error()
    );
    limit.rlim_cur
}

#[coro::test(worker_threads = 2, timeout_ms = 60_000)]
async fn thousands_of_idle_connections_do_not_hold_up_a_new_one() {
    common::watchdog();
    const WANTED: usize = 2_000;
    // Each idle connection costs two descriptors here (client and server side); keep 200 spare.
    let limit = open_file_limit();
    let fit = (limit.saturating_sub(200) / 2) as usize;
    let count = WANTED.min(fit);
    if count < WANTED {
        println!(
            "note: ulimit -n is {limit}, room for {count} idle connections, not {WANTED}: \
             testing with {count} (raise the limit to test the full number)"
        );
    }
    assert!(
        count >= 100,
        "ulimit -n ({limit}) is too low to test idle connections"
    );

    let server = Server::start(|s| s).await; // default header read timeout: 30 s
    let addr = server.addr;
    let start = Instant::now();
    let mut idle = Vec::with_capacity(count);
    while idle.len() < count {
        let batch: Vec<_> = (0..100.min(count - idle.len()))
            .map(|_| coro::spawn(coro::net::TcpStream::connect(addr)))
            .collect();
        for connect in batch {
            idle.push(
                within(Duration::from_secs(10), connect)
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
    }
    println!("{count} idle connections open in {:?}", start.elapsed());
    // Let the server accept them all, then ask on a new connection.
    coro::time::sleep(Duration::from_millis(200)).await.unwrap();
    for _ in 0..3 {
        still_serves(addr).await;
    }
    // The idle ones are still open (none was dropped to make room): a request on one works.
    let (mut sender, _conn) = {
        let stream = idle.pop().unwrap();
        let (sender, conn) = hyper::client::conn::http1::handshake(coro_hyper::CoroIo::new(stream))
            .await
            .unwrap();
        (sender, coro::spawn(conn))
    };
    let response = within(
        Duration::from_secs(5),
        sender.send_request(common::get("/late")),
    )
    .await
    .unwrap();
    assert_eq!(common::read(response).await.1, "hello /late");
    // Shutdown closes them all at once.
    let stopping = Instant::now();
    server.stop().await;
    for stream in idle.iter_mut().take(50) {
        let (got, _) = read_until_closed(stream, Duration::from_secs(5)).await;
        assert!(got.is_empty());
    }
    assert!(stopping.elapsed() < Duration::from_secs(5));
}
