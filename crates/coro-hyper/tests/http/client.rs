//! `coro_hyper::client()` against `coro_hyper::serve` on loopback: keep-alive reuse, HTTP/2,
//! many tasks at once, and the errors a caller can meet (a refused connect, a bad URI, a
//! connect cancelled by the task's token).

use crate::common;

use common::{Server, io_error_in_chain, read_any, within};
use coro::cancel::{CancellationSource, CancelledOutcome};
use coro_hyper::{CoroConnector, client, client_builder};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Uri, Version};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tower_service::Service;

/// How long a sequential client waits after a response before its next request: ample time for
/// hyper-util's background task to put the connection back in the pool.
const IDLE_PAUSE: Duration = Duration::from_millis(5);

fn uri(addr: SocketAddr, path: &str) -> Uri {
    format!("http://{addr}{path}").parse().unwrap()
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn sequential_requests_reuse_one_keep_alive_connection() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let client = client::<Full<Bytes>>();
    for i in 0..20 {
        let path = format!("/get/{i}");
        let response = client.get(uri(server.addr, &path)).await.unwrap();
        assert_eq!(response.version(), Version::HTTP_11);
        assert_eq!(
            read_any(response).await,
            (StatusCode::OK, format!("hello {path}"))
        );
        let body = format!("posted {i}");
        let post = Request::post(uri(server.addr, "/echo"))
            .body(Full::new(Bytes::from(body.clone())))
            .unwrap();
        let response = client.request(post).await.unwrap();
        assert_eq!(read_any(response).await, (StatusCode::OK, body));
        // hyper-util hands a connection back to its pool from a background task once the
        // response has been read, so a request sent at once may find the pool empty and open
        // a second connection (both are then pooled). A short pause lets the pool take it back.
        coro::time::sleep(IDLE_PAUSE).await.unwrap();
    }
    // Without pooling it would be 40; with it, one (two if a pause was not enough once).
    let accepted = server.accepted();
    assert!(
        (1..=2).contains(&accepted),
        "40 sequential requests used {accepted} connections, not one keep-alive connection"
    );
    drop(client);
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn http2_only_multiplexes_concurrent_requests_on_one_connection() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let client = client_builder()
        .http2_only(true)
        .build::<_, Full<Bytes>>(CoroConnector::new());
    let requests = (0..32).map(|i| {
        let client = client.clone();
        let uri = uri(server.addr, &format!("/h2/{i}"));
        coro::Task::new(async move {
            let response = client.get(uri).await.unwrap();
            assert_eq!(response.version(), Version::HTTP_2);
            read_any(response).await
        })
    });
    let answers = within(Duration::from_secs(10), coro::collect_all_range(requests)).await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(answer, (StatusCode::OK, format!("hello /h2/{i}")));
    }
    // The first request opens the connection; the rest wait for it and share it (hyper-util
    // may open a second one if two requests race to connect before the first is pooled).
    assert!(
        (1..=2).contains(&server.accepted()),
        "{} connections for 32 HTTP/2 requests",
        server.accepted()
    );
    drop(client);
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn many_tasks_share_one_client() {
    common::watchdog();
    const TASKS: usize = 64;
    const EACH: usize = 10;
    let server = Server::start(|s| s).await;
    let client = client::<Full<Bytes>>();
    let tasks = (0..TASKS).map(|t| {
        let client = client.clone();
        let addr = server.addr;
        coro::Task::new(async move {
            for i in 0..EACH {
                let path = format!("/t{t}/r{i}");
                let response = client.get(uri(addr, &path)).await.unwrap();
                assert_eq!(
                    read_any(response).await,
                    (StatusCode::OK, format!("hello {path}"))
                );
            }
        })
    });
    within(Duration::from_secs(20), coro::collect_all_range(tasks)).await;
    // The pool reuses connections: far fewer than one per request. (Each task may open more
    // than one, when its next request comes before the last connection is back in the pool.)
    let accepted = server.accepted();
    assert!(
        (1..=TASKS * EACH / 2).contains(&accepted),
        "{accepted} connections for {} requests from {TASKS} tasks",
        TASKS * EACH
    );
    drop(client);
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_closed_port_gives_connection_refused() {
    common::watchdog();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    // From the connector itself.
    let err = CoroConnector::new().call(uri(addr, "/")).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused, "{err}");
    // And through the client, as the source of its connect error.
    let err = client::<Full<Bytes>>()
        .get(uri(addr, "/"))
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert!(
        io_error_in_chain(&err, |e| e.kind() == io::ErrorKind::ConnectionRefused),
        "{err:?}"
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn bad_uris_get_clear_errors() {
    common::watchdog();
    let mut connector = CoroConnector::new();
    // No host.
    let err = connector
        .call("/relative".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("has no host"), "{err}");
    // A scheme that is not HTTP.
    let err = connector
        .call("ftp://127.0.0.1:21/file".parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(
        err.to_string().contains("unsupported URI scheme \"ftp\""),
        "{err}"
    );
    // Through the client: its connect error carries the connector's.
    let client = client::<Full<Bytes>>();
    let err = client
        .get("ftp://127.0.0.1:21/file".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        io_error_in_chain(&err, |e| e.kind() == io::ErrorKind::InvalidInput
            && e.to_string().contains("use http:// or https://")),
        "{err:?}"
    );
    // A relative URI never reaches the connector: hyper-util refuses it first.
    let err = client.get("/relative".parse().unwrap()).await.unwrap_err();
    assert!(!err.is_connect(), "{err:?}");
}

/// A listener whose accept queue is full and never drained: a further connect's SYN is dropped
/// by the kernel, so that connect stays pending.
fn saturated_listener() -> (socket2::Socket, SocketAddr, Vec<std::net::TcpStream>) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&any.into()).unwrap();
    socket.listen(0).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let mut filled = Vec::new();
    while let Ok(stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
        filled.push(stream);
        assert!(filled.len() < 64, "the accept queue never filled");
    }
    (socket, addr, filled)
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_connect_cancelled_by_the_tasks_token_returns_promptly() {
    common::watchdog();
    let (_listener, addr, _filled) = saturated_listener();
    let client = client::<Full<Bytes>>();
    let source = CancellationSource::new();
    let request = coro::Task::new(async move { client.get(uri(addr, "/")).await })
        .with_cancellation(source.token());
    let request = coro::spawn(request);
    coro::time::sleep(Duration::from_millis(200)).await.unwrap();
    let cancelled_at = Instant::now();
    source.request_cancellation();
    let err = within(Duration::from_secs(5), request)
        .await
        .expect("the request task panicked")
        .expect_err("a request to a saturated listener cannot succeed");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(1),
        "took {:?} after the cancellation",
        cancelled_at.elapsed()
    );
    assert!(err.is_connect(), "{err:?}");
    assert!(io_error_in_chain(&err, |e| e.is_cancelled()), "{err:?}");
}
