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

use coro::Task;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue, SERVER};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::net::SocketAddr;

/// The CPU job of a `/dag` child: `rounds` steps of a xorshift, seeded by the child's index, so
/// the compiler cannot fold it away.
fn spin(seed: u64, rounds: u32) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// One `/dag` child: half its job, a `yield_now`, the other half.
async fn child(seed: u64) -> u64 {
    let first = spin(seed, 200);
    coro::yield_now().await;
    first ^ spin(first, 200)
}

async fn handle(req: Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, body) = match req.uri().path() {
        "/plaintext" => (StatusCode::OK, Bytes::from_static(b"Hello, World!")),
        "/dag" => {
            let (a, b, c) = coro::collect_all!(child(1), child(2), child(3)).await;
            (StatusCode::OK, Bytes::from((a ^ b ^ c).to_string()))
        }
        _ => (StatusCode::NOT_FOUND, Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static("coro"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = match (args.next().as_deref(), args.next()) {
        (Some("--serve"), Some(addr)) => addr.parse().expect("--serve takes an IP:port"),
        _ => {
            eprintln!("usage: throughput_coro --serve IP:PORT");
            std::process::exit(2);
        }
    };
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
