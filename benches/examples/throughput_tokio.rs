//! The twin of `throughput_coro.rs` on tokio: hyper 1.x's standard server loop (a
//! `tokio::net::TcpListener`, one spawned task per connection serving hyper-util's
//! `server::conn::auto` over `TokioIo`) on a 2-worker multi-thread runtime, for
//! `benches/wrk-throughput.sh`.
//!
//! - `GET /plaintext`: "Hello, World!".
//! - `GET /dag`: the same three children as coro's, joined with `tokio::join!` (polled inside
//!   the connection's task), each around one `tokio::task::yield_now`.
//!
//! ```text
//! cargo run --release -p coro-benches --example throughput_tokio -- --serve 127.0.0.1:8083
//! ```

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, SERVER};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::convert::Infallible;
use std::net::SocketAddr;

/// The CPU job of a `/dag` child (the same as coro's).
fn spin(seed: u64, rounds: u32) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

async fn child(seed: u64) -> u64 {
    let first = spin(seed, 200);
    tokio::task::yield_now().await;
    first ^ spin(first, 200)
}

async fn handle(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, body) = match req.uri().path() {
        "/plaintext" => (StatusCode::OK, Bytes::from_static(b"Hello, World!")),
        "/dag" => {
            let (a, b, c) = tokio::join!(child(1), child(2), child(3));
            (StatusCode::OK, Bytes::from((a ^ b ^ c).to_string()))
        }
        _ => (StatusCode::NOT_FOUND, Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("tokio"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = match (args.next().as_deref(), args.next()) {
        (Some("--serve"), Some(addr)) => addr.parse().expect("--serve takes an IP:port"),
        _ => {
            eprintln!("usage: throughput_tokio --serve IP:PORT");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        println!("listening on http://{}", listener.local_addr()?);
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(async move {
                let service = service_fn(|req| async { Ok::<_, Infallible>(handle(req).await) });
                let mut builder = Builder::new(TokioExecutor::new());
                builder.http1().timer(TokioTimer::new());
                // A connection's error (a reset at the end of a wrk run) ends that connection.
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}
