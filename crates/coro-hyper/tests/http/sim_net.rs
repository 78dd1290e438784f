//! coro-hyper over `coro::sim`'s simulated network, unchanged: `serve` on a server host,
//! `client()` on the main host, a partition mid-request, and the client's deadline firing in
//! virtual time; after `heal`, requests go through again.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use std::convert::Infallible;
use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// A server host: answers every request after 100 ms of (virtual) work, counting requests.
async fn server(requests: Arc<AtomicUsize>) {
    let listener = coro::net::TcpListener::bind("0.0.0.0:80").await.unwrap();
    let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
        let requests = requests.clone();
        async move {
            requests.fetch_add(1, Ordering::SeqCst);
            coro::time::sleep(Duration::from_millis(100)).await.unwrap();
            let body = format!("hello {}", request.uri().path());
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
        }
    });
    coro_hyper::serve(listener, service)
        .into_future()
        .await
        .unwrap();
}

#[test]
fn a_partition_mid_request_fires_the_clients_deadline_in_virtual_time() {
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let wall = std::time::Instant::now();
    let (deadline_after, body) = coro::sim::Builder::new()
        .seed(17)
        .host("server", move || server(requests.clone()))
        .run(async move {
            let client = coro_hyper::client::<Full<Bytes>>();
            // A first request: the client and the server talk over the simulated network.
            let response = client
                .get("http://server/warm".parse().unwrap())
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "hello /warm");
            // A second one, cut off once the server has it: the reply is held in flight.
            let pending = coro::spawn({
                let client = client.clone();
                async move {
                    let start = coro::time::Instant::now();
                    let get = client.get("http://server/slow".parse().unwrap());
                    let outcome = coro::time::timeout(Duration::from_secs(2), get).await;
                    assert!(outcome.is_err(), "a response crossed the partition");
                    start.elapsed()
                }
            });
            while seen.load(Ordering::SeqCst) < 2 {
                coro::time::sleep(Duration::from_millis(1)).await.unwrap();
            }
            coro::sim::net::partition("main", "server");
            let deadline_after = pending.await.unwrap();
            coro::sim::net::heal("main", "server");
            let response = client
                .get("http://server/after".parse().unwrap())
                .await
                .unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (deadline_after, body)
        });
    assert_eq!(deadline_after, Duration::from_secs(2));
    assert_eq!(body, "hello /after");
    assert!(
        wall.elapsed() < Duration::from_secs(20),
        "virtual time took real time"
    );
}
