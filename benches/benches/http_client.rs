//! An HTTP client as a service uses one to call its backends: `coro_hyper::client()` against a
//! `coro_hyper::serve` server, side by side with hyper-util's legacy client
//! (`build_http`, its `HttpConnector`) against hyper-util's auto server on a tokio runtime.
//! Both sides are hyper 1.x; what differs is the runtime under them: coro's pool, IO driver,
//! executor and timer against tokio's.
//!
//! One group, `http_client/get`, with the function ids `coro` and `tokio`. Each runtime has
//! [`WORKERS`] worker threads and runs both the server and the client. Per iteration, a root
//! task spawns [`CONCURRENCY`] tasks that share one client and each send [`REQUESTS_PER_TASK`]
//! GETs back to back, reading every body and checking it; the root joins them. The server, the
//! client and its pool are made once per bench function, outside `b.iter`, so an iteration
//! measures requests over warm keep-alive connections (plus the few a pool opens when a request
//! comes before a connection is back in it, as in any service). Time per element
//! (criterion's throughput) is the time of one request.
//!
//! Run with `cargo bench -p coro-benches --bench http_client` (or `-- --test` to run each once);
//! `python3 benches/ratios.py --bench http_client` prints the medians and coro / tokio.

use coro_benches::WORKERS;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, Uri};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

/// Client tasks per iteration, sharing one client.
const CONCURRENCY: usize = 16;
/// Sequential GETs of each client task per iteration.
const REQUESTS_PER_TASK: usize = 64;
/// What the server answers.
const BODY: &str = "hello from the backend";

/// The server's handler, the same on both runtimes.
async fn handler(_req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(
        BODY.as_bytes(),
    ))))
}

/// Checks one response's status and body.
async fn check(response: Response<Incoming>) {
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, BODY);
}

fn uri(addr: SocketAddr) -> Uri {
    format!("http://{addr}/backend").parse().unwrap()
}

fn coro_client(c: &mut Criterion) {
    let pool = coro::ThreadPool::new(WORKERS).expect("coro thread pool");
    let stop = coro::cancel::CancellationSource::new();
    let signal = stop.token();
    // The server's connections run on the pool of the task that awaits it: this one.
    let (addr, server) = coro::block_wait(
        coro::Task::new(async move {
            let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let service = hyper::service::service_fn(handler);
            let server =
                coro_hyper::serve(listener, service).with_graceful_shutdown(signal.cancelled());
            (addr, coro::spawn(server))
        })
        .schedule_on(&pool),
    );
    let client = coro_hyper::client::<Empty<Bytes>>();
    let mut group = c.benchmark_group("http_client/get");
    group.throughput(Throughput::Elements(
        (CONCURRENCY * REQUESTS_PER_TASK) as u64,
    ));
    group.bench_function("coro", |b| {
        b.iter(|| {
            let client = client.clone();
            let root = async move {
                let tasks = (0..CONCURRENCY).map(|_| {
                    let client = client.clone();
                    coro::Task::new(async move {
                        for _ in 0..REQUESTS_PER_TASK {
                            check(client.get(uri(addr)).await.unwrap()).await;
                        }
                    })
                });
                coro::collect_all_range(tasks).await;
            };
            coro::block_wait(coro::Task::new(root).schedule_on(&pool));
        })
    });
    group.finish();
    drop(client);
    stop.request_cancellation();
    coro::block_wait(server)
        .expect("the server task")
        .expect("the server");
}

fn tokio_client(c: &mut Criterion) {
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto::Builder;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = rt.spawn(async move {
        let mut builder = Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new());
        builder.http2().timer(TokioTimer::new());
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            stream.set_nodelay(true).unwrap();
            let builder = builder.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(handler);
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    // As coro_hyper::client(): pooled, with the runtime's timer, TCP_NODELAY on.
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .build(connector);
    let mut group = c.benchmark_group("http_client/get");
    group.throughput(Throughput::Elements(
        (CONCURRENCY * REQUESTS_PER_TASK) as u64,
    ));
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let client = client.clone();
            rt.block_on(async move {
                let tasks: Vec<_> = (0..CONCURRENCY)
                    .map(|_| {
                        let client = client.clone();
                        tokio::spawn(async move {
                            for _ in 0..REQUESTS_PER_TASK {
                                check(client.get(uri(addr)).await.unwrap()).await;
                            }
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
            });
        })
    });
    group.finish();
    drop(client);
    server.abort();
}

/// Short runs: the whole file takes well under a minute on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = http_client;
    config = config();
    targets = coro_client, tokio_client
}
criterion_main!(http_client);
