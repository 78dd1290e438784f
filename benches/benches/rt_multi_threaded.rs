//! The shapes of tokio's `benches/rt_multi_threaded.rs`, each run on three multi-threaded
//! runtimes with the same number of worker threads ([`WORKERS`]):
//!
//! - `coro`: `coro::ThreadPool`, spawning inside with the engine's `coro::executor::spawn`;
//! - `tokio`: tokio's multi-thread scheduler;
//! - `async_executor`: an `async_executor::Executor` driven by [`WORKERS`] std threads, each
//!   running `futures_lite::future::block_on(ex.run(..))`.
//!
//! Every shape is one criterion group with one function per runtime, so the report reads
//! `spawn_many_local/coro`, `spawn_many_local/tokio`, `spawn_many_local/async_executor`. The
//! shape code is written once, generically over [`Runtime`] and [`Spawner`], so that the three
//! runtimes run exactly the same tasks and the bench thread waits with the same primitive
//! (`futures::executor::block_on` or a std `mpsc` channel); only spawning, joining and yielding
//! differ. Each runtime is built once per bench function, outside `b.iter`.
//!
//! Run with `cargo bench -p coro-benches --bench rt_multi_threaded`; `benches/ratios.py` turns
//! criterion's estimates into the table of `benches/README.md`.

use coro_benches::AsyncExecutorRt;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Worker threads of every runtime.
const WORKERS: usize = 2;
/// Tasks spawned per iteration by the `spawn_many_*` shapes (tokio's `NUM_SPAWN`).
const NUM_SPAWN: usize = 10_000;
/// Tasks of `yield_many` (tokio's `TASKS`).
const YIELD_TASKS: usize = 200;
/// Yields per task in `yield_many` (tokio's `NUM_YIELD`).
const NUM_YIELD: usize = 1_000;
/// Ping-pong pairs per iteration of `ping_pong` (tokio's `NUM_PINGS`).
const NUM_PINGS: usize = 1_000;
/// Depth of the spawn chain of `chained_spawn` (tokio's `ITER`).
const CHAIN_DEPTH: usize = 1_000;

/// How a task already running on a runtime spawns more tasks and yields: a `Copy` value moved
/// into the tasks themselves.
trait Spawner: Copy + Send + Sync + 'static {
    /// Spawns `fut` on the runtime this task runs on, detached (from inside a task).
    fn spawn<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// The runtime's own `yield_now`.
    fn yield_now() -> impl Future<Output = ()> + Send;
}

/// A runtime under test, as the bench thread sees it.
trait Runtime {
    /// The function id in each group.
    const NAME: &'static str;
    /// Spawning from inside this runtime's tasks.
    type Spawner: Spawner;
    /// What a spawn from outside returns.
    type Handle;

    /// A runtime with `workers` worker threads.
    fn build(workers: usize) -> Self;
    /// The spawner to move into tasks.
    fn spawner(&self) -> Self::Spawner;
    /// Spawns `fut` from outside the runtime (a remote spawn), keeping its handle.
    fn spawn<F>(&self, fut: F) -> Self::Handle
    where
        F: Future<Output = ()> + Send + 'static;
    /// Spawns `fut` from outside the runtime, detached.
    fn spawn_detached<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static;
    /// Waits for the task behind `handle` (panics if it failed).
    fn join(handle: Self::Handle) -> impl Future<Output = ()>;
}

// ---------------------------------------------------------------------------------------------
// coro

/// Spawns inside a coro pool with the engine's `coro::executor::spawn` (the current worker's
/// pool). `coro::spawn` is the Task layer's spawn on top of it (it also frames the future for
/// traces and captures the cancellation token and task-locals); these benches measure the engine,
/// as tokio's and async-executor's bare spawns are.
#[derive(Clone, Copy)]
struct CoroSpawner;

impl Spawner for CoroSpawner {
    fn spawn<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::executor::spawn(fut).detach();
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        coro::executor::yield_now()
    }
}

impl Runtime for coro::ThreadPool {
    const NAME: &'static str = "coro";
    type Spawner = CoroSpawner;
    type Handle = coro::JoinHandle<()>;

    fn build(workers: usize) -> Self {
        coro::ThreadPool::new(workers).expect("coro thread pool")
    }

    fn spawner(&self) -> CoroSpawner {
        CoroSpawner
    }

    fn spawn<F>(&self, fut: F) -> Self::Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::ThreadPool::spawn(self, fut)
    }

    fn spawn_detached<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::ThreadPool::spawn(self, fut).detach();
    }

    async fn join(handle: Self::Handle) {
        handle.await.expect("coro task failed");
    }
}

// ---------------------------------------------------------------------------------------------
// coro, through the Task layer

/// The same pool driven through coro's Task layer, as applications use it: `coro::spawn` inside
/// (each task gets a frame, a trace cell for dumps, and inherits the spawner's cancellation
/// token and task-locals) and `Task::schedule_on(..).start()` from outside. Its ratio to `coro`
/// is the cost of tracing and context propagation.
struct CoroTasks(coro::ThreadPool);

/// Spawns with `coro::spawn`.
#[derive(Clone, Copy)]
struct CoroTaskSpawner;

impl Spawner for CoroTaskSpawner {
    fn spawn<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::spawn(fut).detach();
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        coro::yield_now()
    }
}

impl Runtime for CoroTasks {
    const NAME: &'static str = "coro_tasks";
    type Spawner = CoroTaskSpawner;
    type Handle = coro::JoinHandle<()>;

    fn build(workers: usize) -> Self {
        CoroTasks(coro::ThreadPool::new(workers).expect("coro thread pool"))
    }

    fn spawner(&self) -> CoroTaskSpawner {
        CoroTaskSpawner
    }

    fn spawn<F>(&self, fut: F) -> Self::Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::Task::new(fut).schedule_on(&self.0).start()
    }

    fn spawn_detached<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::Task::new(fut).schedule_on(&self.0).start().detach();
    }

    async fn join(handle: Self::Handle) {
        handle.await.expect("coro task failed");
    }
}

// ---------------------------------------------------------------------------------------------
// tokio

/// Spawns inside a tokio runtime with `tokio::spawn` (the current runtime).
#[derive(Clone, Copy)]
struct TokioSpawner;

impl Spawner for TokioSpawner {
    fn spawn<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(tokio::spawn(fut));
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        tokio::task::yield_now()
    }
}

impl Runtime for tokio::runtime::Runtime {
    const NAME: &'static str = "tokio";
    type Spawner = TokioSpawner;
    type Handle = tokio::task::JoinHandle<()>;

    fn build(workers: usize) -> Self {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .expect("tokio runtime")
    }

    fn spawner(&self) -> TokioSpawner {
        TokioSpawner
    }

    fn spawn<F>(&self, fut: F) -> Self::Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::runtime::Runtime::spawn(self, fut)
    }

    fn spawn_detached<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(tokio::runtime::Runtime::spawn(self, fut));
    }

    async fn join(handle: Self::Handle) {
        handle.await.expect("tokio task failed");
    }
}

// ---------------------------------------------------------------------------------------------
// async-executor

/// Spawns inside an async-executor through the `&'static` executor.
#[derive(Clone, Copy)]
struct AsyncExecutorSpawner(&'static async_executor::Executor<'static>);

impl Spawner for AsyncExecutorSpawner {
    fn spawn<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn(fut).detach();
    }

    fn yield_now() -> impl Future<Output = ()> + Send {
        futures_lite::future::yield_now()
    }
}

impl Runtime for AsyncExecutorRt {
    const NAME: &'static str = "async_executor";
    type Spawner = AsyncExecutorSpawner;
    type Handle = async_executor::Task<()>;

    fn build(workers: usize) -> Self {
        AsyncExecutorRt::new(workers)
    }

    fn spawner(&self) -> AsyncExecutorSpawner {
        AsyncExecutorSpawner(self.ex)
    }

    fn spawn<F>(&self, fut: F) -> Self::Handle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.ex.spawn(fut)
    }

    fn spawn_detached<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.ex.spawn(fut).detach();
    }

    async fn join(handle: Self::Handle) {
        handle.await;
    }
}

// ---------------------------------------------------------------------------------------------
// The shapes

/// The group of one shape.
type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Runs `shape` on the three runtimes, side by side in the group `name`.
fn compare(c: &mut Criterion, name: &str, shapes: [fn(&mut Group<'_>); 4]) {
    let mut group = c.benchmark_group(name);
    for shape in shapes {
        shape(&mut group);
    }
    group.finish();
}

/// The counter and the completion signal shared by the tasks of `spawn_many_local`.
struct Countdown {
    remaining: AtomicUsize,
    done: Mutex<Option<oneshot::Sender<()>>>,
}

/// A task on the runtime spawns `NUM_SPAWN` tasks that each bump a counter; the last one
/// signals the root, which then signals the bench thread.
fn spawn_many_local<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            let (root_done, root_finished) = oneshot::channel();
            rt.spawn_detached(async move {
                let (done, all_ran) = oneshot::channel();
                let countdown = Arc::new(Countdown {
                    remaining: AtomicUsize::new(NUM_SPAWN),
                    done: Mutex::new(Some(done)),
                });
                for _ in 0..NUM_SPAWN {
                    let countdown = countdown.clone();
                    spawner.spawn(async move {
                        if countdown.remaining.fetch_sub(1, Relaxed) == 1 {
                            let done = countdown.done.lock().unwrap().take().unwrap();
                            done.send(()).unwrap();
                        }
                    });
                }
                drop(countdown);
                all_ran.await.unwrap();
                root_done.send(()).unwrap();
            });
            block_on(root_finished).unwrap();
        })
    });
}

/// The bench thread spawns `NUM_SPAWN` empty tasks and awaits every handle.
fn spawn_many_remote_idle<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let mut handles = Vec::with_capacity(NUM_SPAWN);
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            for _ in 0..NUM_SPAWN {
                handles.push(rt.spawn(async {}));
            }
            block_on(async {
                for handle in handles.drain(..) {
                    R::join(handle).await;
                }
            });
        })
    });
}

/// `spawn_many_remote_idle` while `WORKERS` tasks keep the workers busy yielding in a loop.
fn spawn_many_remote_busy<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let running = Arc::new(AtomicBool::new(true));
    let busy: Vec<_> = (0..WORKERS)
        .map(|_| {
            let running = running.clone();
            rt.spawn(async move {
                while running.load(Relaxed) {
                    <R::Spawner as Spawner>::yield_now().await;
                }
            })
        })
        .collect();
    let mut handles = Vec::with_capacity(NUM_SPAWN);
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            for _ in 0..NUM_SPAWN {
                handles.push(rt.spawn(async {}));
            }
            block_on(async {
                for handle in handles.drain(..) {
                    R::join(handle).await;
                }
            });
        })
    });
    running.store(false, Relaxed);
    block_on(async {
        for handle in busy {
            R::join(handle).await;
        }
    });
}

/// `YIELD_TASKS` tasks, spawned from the bench thread, each yield `NUM_YIELD` times.
fn yield_many<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let (tx, rx) = mpsc::sync_channel(YIELD_TASKS);
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            for _ in 0..YIELD_TASKS {
                let tx = tx.clone();
                rt.spawn_detached(async move {
                    for _ in 0..NUM_YIELD {
                        <R::Spawner as Spawner>::yield_now().await;
                    }
                    tx.send(()).unwrap();
                });
            }
            for _ in 0..YIELD_TASKS {
                rx.recv().unwrap();
            }
        })
    });
}

/// A root task spawns `NUM_PINGS` tasks; each spawns a partner, sends it a ping and waits for
/// its pong (two `futures` oneshots). The last pair to finish signals the bench thread.
fn ping_pong<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    let remaining = Arc::new(AtomicUsize::new(0));
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            let done_tx = done_tx.clone();
            let remaining = remaining.clone();
            remaining.store(NUM_PINGS, Relaxed);
            rt.spawn_detached(async move {
                for _ in 0..NUM_PINGS {
                    let remaining = remaining.clone();
                    let done_tx = done_tx.clone();
                    spawner.spawn(async move {
                        let (ping_tx, ping_rx) = oneshot::channel();
                        let (pong_tx, pong_rx) = oneshot::channel();
                        spawner.spawn(async move {
                            ping_rx.await.unwrap();
                            pong_tx.send(()).unwrap();
                        });
                        ping_tx.send(()).unwrap();
                        pong_rx.await.unwrap();
                        if remaining.fetch_sub(1, Relaxed) == 1 {
                            done_tx.send(()).unwrap();
                        }
                    });
                }
            });
            done_rx.recv().unwrap();
        })
    });
}

/// One link of `chained_spawn`: spawns the next link, or signals the end of the chain.
fn chain<S: Spawner>(spawner: S, done: mpsc::SyncSender<()>, n: usize) {
    if n == 0 {
        done.send(()).unwrap();
    } else {
        spawner.spawn(async move { chain(spawner, done, n - 1) });
    }
}

/// A task spawns a task which spawns a task ... `CHAIN_DEPTH` deep; the last signals the bench
/// thread.
fn chained_spawn<R: Runtime>(group: &mut Group<'_>) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    let (done_tx, done_rx) = mpsc::sync_channel(1);
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            let done_tx = done_tx.clone();
            rt.spawn_detached(async move { chain(spawner, done_tx, CHAIN_DEPTH) });
            done_rx.recv().unwrap();
        })
    });
}

/// Expands to the three instantiations of a shape, in report order.
macro_rules! on_all_runtimes {
    ($shape:ident) => {
        [
            $shape::<coro::ThreadPool>,
            $shape::<CoroTasks>,
            $shape::<tokio::runtime::Runtime>,
            $shape::<AsyncExecutorRt>,
        ]
    };
}

fn rt_spawn_many_local(c: &mut Criterion) {
    compare(c, "spawn_many_local", on_all_runtimes!(spawn_many_local));
}

fn rt_spawn_many_remote_idle(c: &mut Criterion) {
    compare(
        c,
        "spawn_many_remote_idle",
        on_all_runtimes!(spawn_many_remote_idle),
    );
}

fn rt_spawn_many_remote_busy(c: &mut Criterion) {
    compare(
        c,
        "spawn_many_remote_busy",
        on_all_runtimes!(spawn_many_remote_busy),
    );
}

fn rt_yield_many(c: &mut Criterion) {
    compare(c, "yield_many", on_all_runtimes!(yield_many));
}

fn rt_ping_pong(c: &mut Criterion) {
    compare(c, "ping_pong", on_all_runtimes!(ping_pong));
}

fn rt_chained_spawn(c: &mut Criterion) {
    compare(c, "chained_spawn", on_all_runtimes!(chained_spawn));
}

/// Modest settings, so that the whole file runs in a few minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = rt_multi_threaded;
    config = config();
    targets = rt_spawn_many_local,
        rt_spawn_many_remote_idle,
        rt_spawn_many_remote_busy,
        rt_yield_many,
        rt_ping_pong,
        rt_chained_spawn
}
criterion_main!(rt_multi_threaded);
