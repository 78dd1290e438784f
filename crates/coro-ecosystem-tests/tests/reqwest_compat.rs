//! reqwest, a client bound to tokio's reactor, inside coro tasks through the tokio bridge
//! (`coro::compat::tokio`, feature `tokio-compat`), against a `coro_hyper::serve` server.

use coro_hyper::hyper::body::{Bytes, Incoming};
use coro_hyper::hyper::{Request, Response};
use http_body_util::{BodyExt, Full};
use std::convert::Infallible;

async fn echo(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect().await.unwrap().to_bytes();
    let answer = format!("{path}: {}", String::from_utf8_lossy(&body));
    Ok(Response::new(Full::new(Bytes::from(answer))))
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn reqwest_through_the_bridge_from_many_coro_tasks() {
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = coro::cancel::CancellationSource::new();
    let server = coro::spawn(
        coro_hyper::serve(listener, coro_hyper::hyper::service::service_fn(echo))
            .with_graceful_shutdown(stop.token().cancelled()),
    );
    // reqwest::Client::new() starts nothing; its connections live on the bridge's runtime.
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for t in 0..32 {
        let client = client.clone();
        tasks.push(coro::spawn(async move {
            for i in 0..10 {
                let url = format!("http://{addr}/task/{t}");
                let text = coro::compat::tokio(async {
                    client
                        .post(&url)
                        .body(format!("{i}"))
                        .send()
                        .await?
                        .text()
                        .await
                })
                .await
                .unwrap();
                assert_eq!(text, format!("/task/{t}: {i}"));
                // The task resumes on its own pool after each bridged call.
                let name = std::thread::current().name().unwrap_or("").to_owned();
                assert!(name.starts_with("coro-worker"), "resumed on {name}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // A connection refused is reqwest's error, not a panic or a hang.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/");
    let refused = coro::compat::tokio(async { client.get(&url).send().await }).await;
    assert!(refused.unwrap_err().is_connect());
    drop(client);
    stop.request_cancellation();
    server.await.unwrap().unwrap();
}
