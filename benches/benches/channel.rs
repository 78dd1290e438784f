//! `coro::channel` side by side with the channels users of the other runtimes take, each on its
//! runtime with [`WORKERS`] workers, as in `user_path` (the same `Runtime`/`Spawner` shim of
//! `coro_benches`, every task spawned with the runtime's public spawn):
//!
//! | function id | channel | runtime |
//! |---|---|---|
//! | `coro` | `coro::channel::{bounded, unbounded}` | `coro::ThreadPool`, `coro::spawn`, the root driven by `coro::block_wait` |
//! | `tokio` | `tokio::sync::mpsc::{channel, unbounded_channel}` | tokio `multi_thread`, `tokio::spawn`, `rt.block_on` |
//! | `async_channel` | `async_channel::{bounded, unbounded}` (smol's) | `async_executor::Executor` run by [`WORKERS`] threads, `futures_lite::future::block_on` |
//! | `flume` | `flume::{bounded, unbounded}`, `send_async` / `recv_async` | the same async-executor set-up |
//!
//! Shapes, one criterion group each:
//!
//! - `channel/ping_pong`: two tasks bounce a value over a pair of bounded(1) channels,
//!   [`ROUND_TRIPS`] round trips per iteration: the root task pings, a spawned task pongs.
//!   A wake-up between two tasks on every message.
//! - `channel/mpmc_bounded`: [`PRODUCERS`] producer tasks and [`CONSUMERS`] consumer tasks move
//!   [`MPMC_MESSAGES`] `u64`s in total through one bounded([`MPMC_CAPACITY`]) channel; the
//!   consumers sum what they get, and the total is checked after each iteration (one compare).
//!   tokio's `mpsc` has a single consumer: the tokio row shares its receiver between the
//!   consumers behind a `tokio::sync::Mutex` (`rx.lock().await.recv().await`), which is how a
//!   tokio user gets MPMC out of tokio itself.
//! - `channel/mpmc_unbounded`: the same through unbounded channels.
//! - `channel/pipeline`: three tasks connected by bounded([`PIPELINE_CAPACITY`]) channels pass
//!   [`PIPELINE_ITEMS`] items: the first produces `0..N`, the second maps `x * 2 + 1` and
//!   forwards, the third sums (checked against `N * N`).
//! - `channel/ping_pong_fresh_pool`: `ping_pong`, but every iteration builds a fresh pool
//!   (coro and tokio only), runs the shape on it and drops it (shutdown and the join of its
//!   threads included): the cold start that the warm rows hide.
//!
//! Apart from `ping_pong_fresh_pool`, every runtime is built once per bench function, outside
//! `b.iter`; the channels are made inside the root task of each iteration, as part of it.
//!
//! Run with `cargo bench -p coro-benches --bench channel` (or `-- --test` to run each benchmark
//! once); `python3 benches/ratios.py --bench channel --runs 3` runs it in three processes and
//! prints each function's median and coro / best peer.

use coro_benches::{AsyncExecutorRt, Runtime, Spawner, WORKERS, with_console_stats};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use criterion::{criterion_group, criterion_main};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Round trips per iteration of the ping-pong shapes.
const ROUND_TRIPS: u64 = 1_000;
/// Producer tasks of the `mpmc_*` shapes.
const PRODUCERS: u64 = 4;
/// Consumer tasks of the `mpmc_*` shapes.
const CONSUMERS: u64 = 4;
/// Messages per iteration of the `mpmc_*` shapes, over all producers.
const MPMC_MESSAGES: u64 = 1_000_000;
/// Capacity of `mpmc_bounded`'s channel.
const MPMC_CAPACITY: usize = 1024;
/// Items per iteration of `pipeline`.
const PIPELINE_ITEMS: u64 = 100_000;
/// Capacity of each of `pipeline`'s two channels.
const PIPELINE_CAPACITY: usize = 128;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

// ---------------------------------------------------------------------------------------------
// Channels

/// The sending half of a channel of `u64`s, as the shapes use it.
trait BenchSender: Clone + Send + Sync + 'static {
    /// Sends `value`, waiting for room; panics if the channel is closed.
    fn send_value(&self, value: u64) -> impl Future<Output = ()> + Send + '_;
}

/// The receiving half of a channel of `u64`s, owned by one task.
trait BenchReceiver: Send + 'static {
    /// The receiving half shared by several consumer tasks.
    type Shared: SharedReceiver;

    /// The next value; `None` once the channel is closed and drained.
    fn recv_value(&mut self) -> impl Future<Output = Option<u64>> + Send + '_;

    /// This receiver, made shareable between consumers.
    fn share(self) -> Self::Shared;
}

/// A receiving half that several consumer tasks clone and receive from.
trait SharedReceiver: Clone + Send + Sync + 'static {
    /// The next value; `None` once the channel is closed and drained.
    fn recv_shared(&self) -> impl Future<Output = Option<u64>> + Send + '_;
}

impl BenchSender for coro::channel::Sender<u64> {
    async fn send_value(&self, value: u64) {
        self.send(value).await.expect("coro channel closed");
    }
}

impl BenchReceiver for coro::channel::Receiver<u64> {
    type Shared = Self;

    async fn recv_value(&mut self) -> Option<u64> {
        self.recv_shared().await
    }

    fn share(self) -> Self {
        self
    }
}

impl SharedReceiver for coro::channel::Receiver<u64> {
    async fn recv_shared(&self) -> Option<u64> {
        self.recv().await.ok()
    }
}

impl BenchSender for tokio::sync::mpsc::Sender<u64> {
    async fn send_value(&self, value: u64) {
        self.send(value).await.expect("tokio channel closed");
    }
}

impl BenchSender for tokio::sync::mpsc::UnboundedSender<u64> {
    async fn send_value(&self, value: u64) {
        self.send(value).expect("tokio channel closed");
    }
}

impl BenchReceiver for tokio::sync::mpsc::Receiver<u64> {
    type Shared = TokioShared<Self>;

    async fn recv_value(&mut self) -> Option<u64> {
        self.recv().await
    }

    fn share(self) -> TokioShared<Self> {
        TokioShared(Arc::new(tokio::sync::Mutex::new(self)))
    }
}

impl BenchReceiver for tokio::sync::mpsc::UnboundedReceiver<u64> {
    type Shared = TokioShared<Self>;

    async fn recv_value(&mut self) -> Option<u64> {
        self.recv().await
    }

    fn share(self) -> TokioShared<Self> {
        TokioShared(Arc::new(tokio::sync::Mutex::new(self)))
    }
}

/// A tokio `mpsc` receiver shared by several consumers the way tokio users do it: behind a
/// `tokio::sync::Mutex` that a consumer holds while it waits for the next value (tokio has no
/// multi-consumer channel of its own).
struct TokioShared<R>(Arc<tokio::sync::Mutex<R>>);

impl<R> Clone for TokioShared<R> {
    fn clone(&self) -> Self {
        TokioShared(self.0.clone())
    }
}

impl<R: BenchReceiver> SharedReceiver for TokioShared<R> {
    async fn recv_shared(&self) -> Option<u64> {
        self.0.lock().await.recv_value().await
    }
}

impl BenchSender for async_channel::Sender<u64> {
    async fn send_value(&self, value: u64) {
        self.send(value).await.expect("async-channel closed");
    }
}

impl BenchReceiver for async_channel::Receiver<u64> {
    type Shared = Self;

    async fn recv_value(&mut self) -> Option<u64> {
        self.recv_shared().await
    }

    fn share(self) -> Self {
        self
    }
}

impl SharedReceiver for async_channel::Receiver<u64> {
    async fn recv_shared(&self) -> Option<u64> {
        self.recv().await.ok()
    }
}

impl BenchSender for flume::Sender<u64> {
    async fn send_value(&self, value: u64) {
        self.send_async(value).await.expect("flume channel closed");
    }
}

impl BenchReceiver for flume::Receiver<u64> {
    type Shared = Self;

    async fn recv_value(&mut self) -> Option<u64> {
        self.recv_shared().await
    }

    fn share(self) -> Self {
        self
    }
}

impl SharedReceiver for flume::Receiver<u64> {
    async fn recv_shared(&self) -> Option<u64> {
        self.recv_async().await.ok()
    }
}

// ---------------------------------------------------------------------------------------------
// The shapes, as root tasks

/// [`ROUND_TRIPS`] round trips between the root and a spawned task over two channels made by
/// `make`; returns the value bounced last (each pong adds one, so [`ROUND_TRIPS`]).
async fn ping_pong_root<Sp, S, R>(spawner: Sp, make: fn() -> (S, R)) -> u64
where
    Sp: Spawner,
    S: BenchSender,
    R: BenchReceiver,
{
    let (ping_tx, mut ping_rx) = make();
    let (pong_tx, mut pong_rx) = make();
    let ponger = spawner.spawn(async move {
        while let Some(value) = ping_rx.recv_value().await {
            pong_tx.send_value(value + 1).await;
        }
    });
    let mut value = 0;
    for _ in 0..ROUND_TRIPS {
        ping_tx.send_value(value).await;
        value = pong_rx.recv_value().await.expect("the ponger stopped");
    }
    drop(ping_tx);
    ponger.await;
    value
}

/// [`PRODUCERS`] tasks send `0..MPMC_MESSAGES` between them through one channel made by `make`,
/// [`CONSUMERS`] tasks receive and sum; returns the consumers' total.
async fn mpmc_root<Sp, S, R>(spawner: Sp, make: fn() -> (S, R)) -> u64
where
    Sp: Spawner,
    S: BenchSender,
    R: BenchReceiver,
{
    let (tx, rx) = make();
    let rx = rx.share();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let rx = rx.clone();
            spawner.spawn(async move {
                let mut sum = 0;
                while let Some(value) = rx.recv_shared().await {
                    sum += value;
                }
                sum
            })
        })
        .collect();
    drop(rx);
    let per_producer = MPMC_MESSAGES / PRODUCERS;
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let tx = tx.clone();
            spawner.spawn(async move {
                for value in p * per_producer..(p + 1) * per_producer {
                    tx.send_value(value).await;
                }
            })
        })
        .collect();
    // The channel closes when the last producer is done.
    drop(tx);
    for producer in producers {
        producer.await;
    }
    let mut total = 0;
    for consumer in consumers {
        total += consumer.await;
    }
    total
}

/// Three tasks, connected by two channels made by `make`: `0..PIPELINE_ITEMS`, mapped by
/// `x * 2 + 1`, summed; returns the sum.
async fn pipeline_root<Sp, S, R>(spawner: Sp, make: fn() -> (S, R)) -> u64
where
    Sp: Spawner,
    S: BenchSender,
    R: BenchReceiver,
{
    let (source_tx, mut source_rx) = make();
    let (mapped_tx, mut mapped_rx) = make();
    let produce = spawner.spawn(async move {
        for value in 0..PIPELINE_ITEMS {
            source_tx.send_value(value).await;
        }
    });
    let map = spawner.spawn(async move {
        while let Some(value) = source_rx.recv_value().await {
            mapped_tx.send_value(value * 2 + 1).await;
        }
    });
    let sum = spawner.spawn(async move {
        let mut sum = 0;
        while let Some(value) = mapped_rx.recv_value().await {
            sum += value;
        }
        sum
    });
    produce.await;
    map.await;
    sum.await
}

// ---------------------------------------------------------------------------------------------
// Bench functions

/// `ping_pong` on a runtime `Rt` built once.
fn ping_pong<Rt, S, R>(group: &mut Group<'_>, name: &str, make: fn() -> (S, R))
where
    Rt: Runtime,
    S: BenchSender,
    R: BenchReceiver,
{
    let rt = Rt::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| assert_eq!(rt.block_on(ping_pong_root(spawner, make)), ROUND_TRIPS))
    });
}

/// `ping_pong` on a runtime `Rt` built, and dropped, in every iteration.
fn ping_pong_fresh_pool<Rt, S, R>(group: &mut Group<'_>, name: &str, make: fn() -> (S, R))
where
    Rt: Runtime,
    S: BenchSender,
    R: BenchReceiver,
{
    group.bench_function(name, |b| {
        b.iter(|| {
            let rt = Rt::build(WORKERS);
            assert_eq!(rt.block_on(ping_pong_root(rt.spawner(), make)), ROUND_TRIPS);
            drop(rt);
        })
    });
}

/// An `mpmc_*` shape on a runtime `Rt` built once, with channels made by `make`.
fn mpmc<Rt, S, R>(group: &mut Group<'_>, name: &str, make: fn() -> (S, R))
where
    Rt: Runtime,
    S: BenchSender,
    R: BenchReceiver,
{
    let rt = Rt::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            let total = rt.block_on(mpmc_root(spawner, make));
            assert_eq!(total, MPMC_MESSAGES * (MPMC_MESSAGES - 1) / 2);
        })
    });
}

/// `pipeline` on a runtime `Rt` built once.
fn pipeline<Rt, S, R>(group: &mut Group<'_>, name: &str, make: fn() -> (S, R))
where
    Rt: Runtime,
    S: BenchSender,
    R: BenchReceiver,
{
    let rt = Rt::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            let sum = rt.block_on(pipeline_root(spawner, make));
            assert_eq!(sum, PIPELINE_ITEMS * PIPELINE_ITEMS);
        })
    });
}

// ---------------------------------------------------------------------------------------------
// The groups

type TokioRt = tokio::runtime::Runtime;

/// Settings of the groups whose iterations take about a millisecond or less.
fn short_iterations(group: &mut Group<'_>) {
    group
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
}

/// `channel/ping_pong`.
fn channel_ping_pong(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/ping_pong");
    short_iterations(&mut group);
    group.throughput(Throughput::Elements(ROUND_TRIPS));
    ping_pong::<coro::ThreadPool, _, _>(&mut group, "coro", || coro::channel::bounded(1));
    with_console_stats(|| {
        ping_pong::<coro::ThreadPool, _, _>(&mut group, "coro_stats", || coro::channel::bounded(1))
    });
    ping_pong::<TokioRt, _, _>(&mut group, "tokio", || tokio::sync::mpsc::channel(1));
    ping_pong::<AsyncExecutorRt, _, _>(&mut group, "async_channel", || async_channel::bounded(1));
    ping_pong::<AsyncExecutorRt, _, _>(&mut group, "flume", || flume::bounded(1));
    group.finish();
}

/// `channel/ping_pong_fresh_pool`: coro and tokio.
fn channel_ping_pong_fresh_pool(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/ping_pong_fresh_pool");
    short_iterations(&mut group);
    ping_pong_fresh_pool::<coro::ThreadPool, _, _>(&mut group, "coro", || {
        coro::channel::bounded(1)
    });
    ping_pong_fresh_pool::<TokioRt, _, _>(&mut group, "tokio", || tokio::sync::mpsc::channel(1));
    group.finish();
}

/// Settings of the groups whose iterations take tens of milliseconds or more: ten samples, each
/// of the same number of iterations.
fn long_iterations(group: &mut Group<'_>, messages: u64) {
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(messages));
}

/// `channel/mpmc_bounded`.
fn channel_mpmc_bounded(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/mpmc_bounded");
    long_iterations(&mut group, MPMC_MESSAGES);
    mpmc::<coro::ThreadPool, _, _>(&mut group, "coro", || coro::channel::bounded(MPMC_CAPACITY));
    with_console_stats(|| {
        mpmc::<coro::ThreadPool, _, _>(&mut group, "coro_stats", || {
            coro::channel::bounded(MPMC_CAPACITY)
        })
    });
    // tokio's receiver behind a `tokio::sync::Mutex` shared by the consumers (`TokioShared`).
    mpmc::<TokioRt, _, _>(&mut group, "tokio", || {
        tokio::sync::mpsc::channel(MPMC_CAPACITY)
    });
    mpmc::<AsyncExecutorRt, _, _>(&mut group, "async_channel", || {
        async_channel::bounded(MPMC_CAPACITY)
    });
    mpmc::<AsyncExecutorRt, _, _>(&mut group, "flume", || flume::bounded(MPMC_CAPACITY));
    group.finish();
}

/// `channel/mpmc_unbounded`.
fn channel_mpmc_unbounded(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/mpmc_unbounded");
    long_iterations(&mut group, MPMC_MESSAGES);
    mpmc::<coro::ThreadPool, _, _>(&mut group, "coro", coro::channel::unbounded);
    // tokio's receiver behind a `tokio::sync::Mutex` shared by the consumers (`TokioShared`).
    mpmc::<TokioRt, _, _>(&mut group, "tokio", tokio::sync::mpsc::unbounded_channel);
    mpmc::<AsyncExecutorRt, _, _>(&mut group, "async_channel", async_channel::unbounded);
    mpmc::<AsyncExecutorRt, _, _>(&mut group, "flume", flume::unbounded);
    group.finish();
}

/// `channel/pipeline`.
fn channel_pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("channel/pipeline");
    long_iterations(&mut group, PIPELINE_ITEMS);
    pipeline::<coro::ThreadPool, _, _>(&mut group, "coro", || {
        coro::channel::bounded(PIPELINE_CAPACITY)
    });
    with_console_stats(|| {
        pipeline::<coro::ThreadPool, _, _>(&mut group, "coro_stats", || {
            coro::channel::bounded(PIPELINE_CAPACITY)
        })
    });
    pipeline::<TokioRt, _, _>(&mut group, "tokio", || {
        tokio::sync::mpsc::channel(PIPELINE_CAPACITY)
    });
    pipeline::<AsyncExecutorRt, _, _>(&mut group, "async_channel", || {
        async_channel::bounded(PIPELINE_CAPACITY)
    });
    pipeline::<AsyncExecutorRt, _, _>(&mut group, "flume", || flume::bounded(PIPELINE_CAPACITY));
    group.finish();
}

criterion_group!(
    channel,
    channel_ping_pong,
    channel_mpmc_bounded,
    channel_mpmc_unbounded,
    channel_pipeline,
    channel_ping_pong_fresh_pool
);
criterion_main!(channel);
