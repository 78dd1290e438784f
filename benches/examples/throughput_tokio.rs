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

#[path = "throughput/shared.rs"]
mod shared;

use hyper::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use shared::{HALF_JOB, respond, serve_addr, spin};
use std::convert::Infallible;

/// One `/dag` child: half its job, a `yield_now`, the other half (as coro's).
async fn child(seed: u64) -> u64 {
    let first = spin(seed, HALF_JOB);
    tokio::task::yield_now().await;
    first ^ spin(first, HALF_JOB)
}

async fn handle(
    req: Request<Incoming>,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    respond(req.uri().path(), "tokio", || async {
        let (a, b, c) = tokio::join!(child(1), child(2), child(3));
        a ^ b ^ c
    })
    .await
}

fn main() -> std::io::Result<()> {
    let addr = serve_addr("throughput_tokio");
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
