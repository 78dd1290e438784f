//! What the two throughput servers (`throughput_coro.rs`, `throughput_tokio.rs`) share: the
//! `/dag` children's CPU job and the response, so that the twins differ only in their runtime.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CONTENT_TYPE, HeaderValue, SERVER};
use hyper::{Response, StatusCode};
use std::net::SocketAddr;

/// The CPU job of a `/dag` child: `rounds` steps of a xorshift, seeded by the child's index, so
/// the compiler cannot fold it away.
pub fn spin(seed: u64, rounds: u32) -> u64 {
    let mut x = seed | 1;
    for _ in 0..rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Steps of each half of a `/dag` child's job (one half before its yield, one after).
pub const HALF_JOB: u32 = 200;

/// What a route answers: "Hello, World!" for `/plaintext`, the children's result for `/dag`
/// (`dag` computes it, and is called only for that route), 404 elsewhere.
pub async fn respond<F: std::future::Future<Output = u64>>(
    path: &str,
    server: &'static str,
    dag: impl FnOnce() -> F,
) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/plaintext" => (StatusCode::OK, Bytes::from_static(b"Hello, World!")),
        "/dag" => (StatusCode::OK, Bytes::from(dag().await.to_string())),
        _ => (StatusCode::NOT_FOUND, Bytes::new()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(SERVER, HeaderValue::from_static(server));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// The address of `--serve IP:PORT`; exits with a usage message otherwise.
pub fn serve_addr(name: &str) -> SocketAddr {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (Some("--serve"), Some(addr)) => addr.parse().expect("--serve takes an IP:port"),
        _ => {
            eprintln!("usage: {name} --serve IP:PORT");
            std::process::exit(2);
        }
    }
}
