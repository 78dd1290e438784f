//! Graceful shutdown: in-flight requests finish, idle connections close, the listener closes,
//! `serve` returns `Ok`.

use crate::common;

use common::{SLOW, Server, get, http1_client, http2_client, read, read_until_closed, within};
use hyper::StatusCode;
use std::time::{Duration, Instant};

/// Waits until connecting to `addr` is refused (the listener is closed), within 5 s.
async fn until_refused(addr: std::net::SocketAddr) {
    within(Duration::from_secs(5), async {
        while coro::net::TcpStream::connect(addr).await.is_ok() {
            coro::time::sleep(Duration::from_millis(5)).await.unwrap();
        }
    })
    .await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn in_flight_requests_finish_and_new_connections_are_refused() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let addr = server.addr;

    // An idle keep-alive connection, which the shutdown closes at once.
    let (mut idle, idle_conn) = http1_client(addr).await;
    assert_eq!(
        read(idle.send_request(get("/warm")).await.unwrap()).await,
        (StatusCode::OK, "hello /warm".to_owned())
    );
    assert_eq!(server.started.recv().await.unwrap(), "/warm");

    // A slow request in flight when the signal comes.
    let (mut busy, _busy_conn) = http1_client(addr).await;
    let slow = coro::spawn(async move {
        let response = busy.send_request(get("/slow")).await.unwrap();
        (read(response).await, Instant::now())
    });
    assert_eq!(server.started.recv().await.unwrap(), "/slow");

    let signalled = Instant::now();
    server.signal_stop();
    until_refused(addr).await;
    let refused = Instant::now();
    // The idle connection is closed by the server, cleanly.
    within(Duration::from_secs(5), idle_conn)
        .await
        .unwrap()
        .unwrap();
    let idle_closed = Instant::now();

    let ((status, body), answered) = within(Duration::from_secs(5), slow).await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "slow done"));
    within(Duration::from_secs(5), server.task)
        .await
        .unwrap()
        .expect("a graceful shutdown returns Ok");
    let stopped = Instant::now();

    // Listener closed and idle connection gone before the slow request was answered; the
    // server returned after it.
    assert!(
        refused < answered,
        "the listener stayed open during the drain"
    );
    assert!(
        idle_closed < answered,
        "the idle connection stayed open during the drain"
    );
    assert!(stopped >= answered);
    assert!(stopped - signalled < SLOW + Duration::from_secs(2));
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn http2_streams_in_flight_finish() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let addr = server.addr;
    let (sender, conn) = http2_client(addr).await;
    let slow: Vec<_> = (0..3)
        .map(|_| {
            let mut sender = sender.clone();
            coro::spawn(async move { read(sender.send_request(get("/slow")).await.unwrap()).await })
        })
        .collect();
    for _ in 0..3 {
        assert_eq!(server.started.recv().await.unwrap(), "/slow");
    }
    server.signal_stop();
    for request in slow {
        let (status, body) = within(Duration::from_secs(5), request).await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "slow done"));
    }
    within(Duration::from_secs(5), server.task)
        .await
        .unwrap()
        .unwrap();
    // GOAWAY was sent and the connection closed: the client connection ends.
    drop(sender);
    within(Duration::from_secs(5), conn).await.unwrap().unwrap();
    until_refused(addr).await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_connection_that_sent_nothing_is_closed_at_once() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let mut silent = coro::net::TcpStream::connect(server.addr).await.unwrap();
    // Let the server accept it.
    coro::time::sleep(Duration::from_millis(50)).await.unwrap();
    let start = Instant::now();
    server.stop().await;
    let (got, _) = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(got.is_empty());
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_panicking_handler_closes_only_its_connection() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let (mut ok_sender, _ok_conn) = http1_client(server.addr).await;
    let (mut panic_sender, _panic_conn) = http1_client(server.addr).await;
    assert!(panic_sender.send_request(get("/panic")).await.is_err());
    let (status, body) = read(ok_sender.send_request(get("/after")).await.unwrap()).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "hello /after"));
    assert_eq!(
        common::get_once(server.addr, "/new").await,
        (StatusCode::OK, "hello /new".to_owned())
    );
    // The panic is not kept for the shutdown: it returns Ok.
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn a_drain_bounded_by_a_timeout_drops_the_rest() {
    common::watchdog();
    // A request that never finishes holds the drain; a timeout drops the server with it.
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = hyper::service::service_fn(|_req| async {
        std::future::pending::<()>().await;
        Ok::<_, std::convert::Infallible>(hyper::Response::new(String::new()))
    });
    let (stop, stopped) = coro::channel::oneshot::<()>();
    let server = coro_hyper::serve(listener, service).with_graceful_shutdown(async {
        stopped.await.ok();
    });
    let server = coro::spawn(coro::time::timeout(Duration::from_millis(300), server));
    let (mut sender, conn) = http1_client(addr).await;
    let stuck = coro::spawn(async move { sender.send_request(get("/stuck")).await });
    coro::time::sleep(Duration::from_millis(50)).await.unwrap();
    stop.send(()).unwrap();
    let outcome = within(Duration::from_secs(5), server).await.unwrap();
    assert_eq!(outcome.unwrap_err(), coro::time::Elapsed);
    // The connection was dropped with the server: the client sees it closed.
    assert!(
        within(Duration::from_secs(5), stuck)
            .await
            .unwrap()
            .is_err()
    );
    within(Duration::from_secs(5), conn).await.unwrap().ok();
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn cancelling_the_server_task_ends_serve_with_the_cancellation() {
    use coro::cancel::{CancellationSource, CancelledOutcome};
    common::watchdog();
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = hyper::service::service_fn(|_req| async {
        Ok::<_, std::convert::Infallible>(hyper::Response::new(String::from("up")))
    });
    let source = CancellationSource::new();
    let server = coro::Task::new(coro_hyper::serve(listener, service).into_future())
        .with_cancellation(source.token());
    let server = coro::spawn(server);
    let (status, body) = common::get_once(addr, "/").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "up"));
    source.request_cancellation();
    let err = within(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    until_refused(addr).await;
}
