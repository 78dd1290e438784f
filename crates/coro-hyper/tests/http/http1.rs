//! HTTP/1.1: keep-alive on one connection, and several connections at once.

use crate::common;

use common::{Server, get, http1_client, read, within};
use hyper::{StatusCode, Version};
use std::time::Duration;

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn keep_alive_serves_several_requests_on_one_connection() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let (mut sender, conn) = http1_client(server.addr).await;
    for i in 0..5 {
        within(Duration::from_secs(5), sender.ready())
            .await
            .unwrap();
        let response = within(
            Duration::from_secs(5),
            sender.send_request(get(&format!("/r{i}"))),
        )
        .await
        .unwrap();
        assert_eq!(response.version(), Version::HTTP_11);
        assert_eq!(
            read(response).await,
            (StatusCode::OK, format!("hello /r{i}"))
        );
    }
    // Still one connection: the client would report it closed otherwise.
    assert!(!sender.is_closed());
    assert!(!conn.is_finished());
    drop(sender);
    within(Duration::from_secs(5), conn).await.unwrap().unwrap();
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn connections_are_served_concurrently() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let addr = server.addr;
    // Each connection's slow request holds its connection; together they take one SLOW, not 8.
    let start = std::time::Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| coro::spawn(async move { common::get_once(addr, "/slow").await }))
        .collect();
    for client in clients {
        let (status, body) = within(Duration::from_secs(10), client).await.unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "slow done"));
    }
    assert!(
        start.elapsed() < common::SLOW * 4,
        "took {:?}",
        start.elapsed()
    );
    server.stop().await;
}
