//! HTTP/2 with prior knowledge: many concurrent streams on one connection.

use crate::common;

use common::{Server, get, http2_client, read, within};
use hyper::{StatusCode, Version};
use std::time::{Duration, Instant};

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn prior_knowledge_streams_run_concurrently_on_one_connection() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let (sender, conn) = http2_client(server.addr).await;
    let start = Instant::now();
    let requests: Vec<_> = (0..10)
        .map(|i| {
            let mut sender = sender.clone();
            coro::spawn(async move {
                let path = if i % 2 == 0 {
                    "/slow".to_owned()
                } else {
                    format!("/s{i}")
                };
                let response = sender.send_request(get(&path)).await.unwrap();
                assert_eq!(response.version(), Version::HTTP_2);
                (path, read(response).await)
            })
        })
        .collect();
    for request in requests {
        let (path, (status, body)) = within(Duration::from_secs(10), request).await.unwrap();
        assert_eq!(status, StatusCode::OK);
        let expected = if path == "/slow" {
            "slow done".to_owned()
        } else {
            format!("hello {path}")
        };
        assert_eq!(body, expected);
    }
    // Five slow streams at once on one connection: about one SLOW, not five.
    assert!(
        start.elapsed() < common::SLOW * 3,
        "took {:?}",
        start.elapsed()
    );
    assert!(!conn.is_finished());
    drop(sender);
    within(Duration::from_secs(5), conn).await.unwrap().unwrap();
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn configured_stream_limit_is_applied() {
    common::watchdog();
    // One stream at a time: the slow requests queue behind each other in the client.
    let server = Server::start(|s| {
        s.configure(|b| {
            b.http2().max_concurrent_streams(1);
        })
    })
    .await;
    let (mut sender, _conn) = http2_client(server.addr).await;
    // A first request, so that the client has the server's SETTINGS before the others: requests
    // sent earlier than that are refused by the server, not queued by the client.
    let first = within(Duration::from_secs(5), sender.send_request(get("/first")))
        .await
        .unwrap();
    assert_eq!(read(first).await.0, StatusCode::OK);
    let start = Instant::now();
    let requests: Vec<_> = (0..3)
        .map(|_| {
            let mut sender = sender.clone();
            coro::spawn(async move {
                let response = sender.send_request(get("/slow")).await?;
                Ok::<_, hyper::Error>(response.status())
            })
        })
        .collect();
    for request in requests {
        let status = within(Duration::from_secs(10), request).await.unwrap();
        assert_eq!(status.unwrap(), StatusCode::OK);
    }
    assert!(
        start.elapsed() >= common::SLOW * 3,
        "took {:?}",
        start.elapsed()
    );
    drop(sender);
    server.stop().await;
}
