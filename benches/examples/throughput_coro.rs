//! A throughput-bound HTTP server on coro (`coro_hyper::serve` on the default pool, one worker
//! per core), the twin of `throughput_tokio.rs`, for `benches/wrk-throughput.sh`. Nothing in it
//! waits on a clock, so wrk measures the IO path and the scheduler rather than sleeps.
//!
//! - `GET /plaintext`: "Hello, World!" (TechEmpower's plaintext response, served without
//!   pipelining).
//! - `GET /dag`: three children joined with `coro::collect_all!`, each a small fixed CPU job
//!   around one `yield_now`; the answer is their sum.
//!
//! ```text
//! cargo run --release -p coro-benches --example throughput_coro -- --serve 127.0.0.1:8082
//! ```

#[path = "throughput/shared.rs"]
mod shared;

use coro::Task;
use hyper::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use shared::{HALF_JOB, respond, serve_addr, spin};
use std::convert::Infallible;

/// One `/dag` child: half its job, a `yield_now`, the other half.
async fn child(seed: u64) -> u64 {
    let first = spin(seed, HALF_JOB);
    coro::yield_now().await;
    first ^ spin(first, HALF_JOB)
}

async fn handle(
    req: Request<Incoming>,
) -> hyper::Response<http_body_util::Full<hyper::body::Bytes>> {
    respond(req.uri().path(), "coro", || async {
        let (a, b, c) = coro::collect_all!(child(1), child(2), child(3)).await;
        a ^ b ^ c
    })
    .await
}

fn main() -> std::io::Result<()> {
    let addr = serve_addr("throughput_coro");
    coro::block_wait(
        Task::new(async move {
            let listener = coro::net::TcpListener::bind(addr).await?;
            let service = service_fn(|req| async { Ok::<_, Infallible>(handle(req).await) });
            println!("listening on http://{}", listener.local_addr()?);
            coro_hyper::serve(listener, service).await
        })
        .schedule_on(coro::default_pool()),
    )
}
