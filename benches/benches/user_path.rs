//! coro as an application uses it, side by side with tokio and async-executor: every runtime
//! through its ordinary public API, on four shapes that a service built on coro runs all the
//! time. For coro that means the Task layer (`coro::spawn`, `coro::Task`,
//! `Task::schedule_on(..).start()`, `coro::sync`), not the engine's `coro::executor::spawn`
//! that `rt_multi_threaded` measures: what users pay is the engine plus the frame, trace cell
//! and context of every task, and this file shows that total against the peers.
//!
//! Each shape is one criterion group, `user_path/<shape>`, with one function per runtime:
//!
//! - `user_path/spawn_many_local`: a root task spawns [`NUM_SPAWN`] tasks that each decrement a
//!   shared counter; the last one completes a `futures` oneshot that the root awaits. Spawning
//!   from inside a worker (`coro::spawn`, `tokio::spawn`, `ex.spawn(..).detach()`), the cost
//!   that dominates fine-grained fan-out.
//! - `user_path/task_chain`: [`CHAINS`] chains of [`CHAIN_DEPTH`] nested levels (each level
//!   awaits the next, then adds one), spawned and joined by a root task, so the two workers
//!   run them in parallel. coro's levels are `coro::Task<u64>`s, each with its frame for async
//!   stack traces; the peers', `Pin<Box<dyn Future<Output = u64> + Send>>`, the cheapest
//!   type-erased recursive async call in Rust. Time per element (criterion's throughput) is
//!   the cost of one level: what a deep call graph of named tasks costs against plain boxed
//!   futures. `coro_boxed` runs the boxed levels on the coro pool, telling the Task level's cost
//!   from the pool's.
//! - `user_path/fanout_10k`: one value for [`FANOUT_WAITERS`] tasks. The root spawns the
//!   waiters, then provides the value, then waits until every waiter has summed it into an
//!   atomic. coro: `coro::sync::SharedPromise` and `get_future()`; the peers:
//!   `futures::future::Shared` of a `futures` oneshot receiver, the runtime-neutral way to
//!   share one result; `tokio_watch`: a `tokio::sync::watch` channel, tokio's own broadcast of a
//!   value. Waiters that run before the value is set register and are woken; those that run
//!   after find it ready (on 2 workers, the other worker starts running waiters while the root
//!   still spawns), as in a service where requests keep arriving for a result being computed.
//! - `user_path/rwlock_mixed`: a reader-writer lock around a `u64`; [`RW_TASKS`] tasks each do
//!   [`RW_OPS`] operations, every [`RW_WRITE_EVERY`]th a write (increment), the others a read
//!   added into a local sum: `coro::sync::SharedMutexFair`, `tokio::sync::RwLock`,
//!   `async_lock::RwLock` (the lock async-executor users take), each on its own runtime. A
//!   read-mostly cache under contention, where a fair lock hands over between readers and
//!   writers.
//!
//! Function ids: `coro`, `tokio`, `async_executor`, plus the diagnostic rows `coro_stats` (coro
//! with the per-poll statistics of an attached console on), `coro_boxed`
//! (`task_chain`) and `tokio_watch` (`fanout_10k`). Every runtime has [`WORKERS`] worker
//! threads and is built once per bench function, outside `b.iter`; async-executor is run as in
//! `rt_multi_threaded` (a leaked `Executor<'static>` run by [`WORKERS`] std threads). The shape
//! code is written once, generic over the small [`Runtime`]/[`Spawner`] traits of
//! `coro_benches`, so every runtime runs the same tasks: only spawning, joining and the
//! primitive under test differ. The root
//! task is started from the bench thread (coro: `Task::new(..).schedule_on(&pool).start()`)
//! and hands its result back through a `futures` oneshot that the bench thread waits on with
//! `futures::executor::block_on`, the same primitive for every runtime. An iteration ends only
//! once all its tasks have run, and checks its result where it has one (the chains' sum, the
//! waiters' sum, the lock's final count), so a bench cannot silently measure nothing.
//!
//! The groups are prefixed with `user_path/` so that their criterion directories
//! (`target/criterion/user_path_<shape>/`) do not overwrite the `spawn_many_local` of
//! `rt_multi_threaded` or the `task_chain` and `fanout_10k` of `task_chain` and `sync`.
//!
//! Run with `cargo bench -p coro-benches --bench user_path` (or `-- --test` to run each
//! benchmark once); `python3 benches/ratios.py --bench user_path` prints each runtime's median
//! and coro / best peer from criterion's estimates.

use coro_benches::{AsyncExecutorRt, Runtime, Spawner, WORKERS, run, with_console_stats};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use futures::channel::oneshot;
use futures::future::{FutureExt, Shared};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tasks spawned per iteration of `spawn_many_local` (tokio's `NUM_SPAWN`).
const NUM_SPAWN: usize = 10_000;
/// Chains run in parallel per iteration of `task_chain`.
const CHAINS: u64 = 100;
/// Nested levels of each `task_chain` chain.
const CHAIN_DEPTH: u64 = 1_000;
/// Waiting tasks of `fanout_10k`.
const FANOUT_WAITERS: usize = 10_000;
/// The value the `fanout_10k` waiters receive.
const FANOUT_VALUE: u64 = 42;
/// Tasks of `rwlock_mixed`.
const RW_TASKS: u64 = 8;
/// Operations per task of `rwlock_mixed`.
const RW_OPS: u64 = 20_000;
/// Operation `i` of a `rwlock_mixed` task is a write when `i % RW_WRITE_EVERY == 0`.
const RW_WRITE_EVERY: u64 = 10;

// ---------------------------------------------------------------------------------------------
// spawn_many_local

/// The group of one shape.
type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// A count of tasks still to finish; the one that brings it to zero completes a oneshot.
struct Countdown {
    /// Tasks still to finish.
    remaining: AtomicUsize,
    /// Completed by the last task.
    done: Mutex<Option<oneshot::Sender<()>>>,
}

impl Countdown {
    /// A countdown of `tasks` that completes `done`.
    fn new(tasks: usize, done: oneshot::Sender<()>) -> Arc<Self> {
        Arc::new(Countdown {
            remaining: AtomicUsize::new(tasks),
            done: Mutex::new(Some(done)),
        })
    }

    /// Counts one task as finished. `AcqRel`, so that whoever the last task signals sees the
    /// writes of every task before it.
    fn finish_one(&self) {
        if self.remaining.fetch_sub(1, AcqRel) == 1 {
            let done = self.done.lock().unwrap().take();
            // The root waits on the receiver, so the send cannot fail.
            let _ = done.expect("counted down twice").send(());
        }
    }
}

/// A root task spawns [`NUM_SPAWN`] tasks that each count down; the last one completes the
/// oneshot the root awaits.
fn spawn_many_local<R: Runtime>(group: &mut Group<'_>, name: &str) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            run(&rt, async move {
                let (done, all_ran) = oneshot::channel();
                let countdown = Countdown::new(NUM_SPAWN, done);
                for _ in 0..NUM_SPAWN {
                    let countdown = countdown.clone();
                    spawner.spawn_detached(async move { countdown.finish_one() });
                }
                drop(countdown);
                all_ran.await.expect("a task was dropped");
            })
        })
    });
}

// ---------------------------------------------------------------------------------------------
// task_chain

/// One level of the peers' chains: a boxed, type-erased future.
type BoxedLevel = Pin<Box<dyn Future<Output = u64> + Send>>;

/// A chain of `depth` nested `coro::Task`s: each awaits the next, then adds one.
fn task_chain_levels(depth: u64) -> coro::Task<u64> {
    coro::Task::new(async move {
        if depth == 0 {
            black_box(0)
        } else {
            task_chain_levels(depth - 1).await + 1
        }
    })
}

/// A chain of `depth` nested boxed futures: each awaits the next, then adds one.
fn boxed_chain_levels(depth: u64) -> BoxedLevel {
    Box::pin(async move {
        if depth == 0 {
            black_box(0)
        } else {
            boxed_chain_levels(depth - 1).await + 1
        }
    })
}

/// A root task spawns [`CHAINS`] chains built by `chain` and joins them in order.
fn task_chain<R, L>(group: &mut Group<'_>, name: &str, chain: fn(u64) -> L)
where
    R: Runtime,
    L: Future<Output = u64> + Send + 'static,
{
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            let total = run(&rt, async move {
                let chains: Vec<_> = (0..CHAINS)
                    .map(|_| spawner.spawn(chain(CHAIN_DEPTH)))
                    .collect();
                let mut total = 0;
                for chain in chains {
                    total += chain.await;
                }
                total
            });
            assert_eq!(total, CHAINS * CHAIN_DEPTH);
        })
    });
}

// ---------------------------------------------------------------------------------------------
// fanout_10k

/// One value handed to many waiters, made fresh for each iteration.
trait Fanout: Send + 'static {
    /// A value not provided yet.
    fn new() -> Self;
    /// A future of the value, for one waiter.
    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static;
    /// Provides the value, waking every waiter.
    fn fulfil(self, value: u64);
}

impl Fanout for coro::sync::SharedPromise<u64> {
    fn new() -> Self {
        coro::sync::SharedPromise::new()
    }

    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        let value = self.get_future();
        async move { value.await.expect("promise dropped unfulfilled") }
    }

    fn fulfil(self, value: u64) {
        self.set_value(value).expect("promise fulfilled twice");
    }
}

/// A `futures` oneshot whose receiver is made cloneable with `.shared()`.
struct FuturesShared {
    /// Provides the value.
    tx: oneshot::Sender<u64>,
    /// Cloned for each waiter.
    rx: Shared<oneshot::Receiver<u64>>,
}

impl Fanout for FuturesShared {
    fn new() -> Self {
        let (tx, rx) = oneshot::channel();
        FuturesShared {
            tx,
            rx: rx.shared(),
        }
    }

    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        let value = self.rx.clone();
        async move { value.await.expect("oneshot sender dropped") }
    }

    fn fulfil(self, value: u64) {
        self.tx.send(value).expect("oneshot receiver dropped");
    }
}

/// A `tokio::sync::watch` channel; each waiter awaits `changed()` on its own receiver clone.
struct TokioWatch {
    /// Provides the value.
    tx: tokio::sync::watch::Sender<u64>,
    /// Cloned for each waiter (a clone sees a change sent after it was made).
    rx: tokio::sync::watch::Receiver<u64>,
}

impl Fanout for TokioWatch {
    fn new() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(0);
        TokioWatch { tx, rx }
    }

    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        let mut value = self.rx.clone();
        async move {
            value.changed().await.expect("watch sender dropped");
            *value.borrow_and_update()
        }
    }

    fn fulfil(self, value: u64) {
        self.tx.send(value).expect("no watch receiver");
    }
}

/// A root task spawns [`FANOUT_WAITERS`] tasks that each await the value `V` and add it to a
/// sum, provides the value, and waits until every waiter has counted down.
fn fanout_10k<R: Runtime, V: Fanout>(group: &mut Group<'_>, name: &str) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            let sum = run(&rt, async move {
                let value = V::new();
                let sum = Arc::new(AtomicU64::new(0));
                let (done, all_done) = oneshot::channel();
                let countdown = Countdown::new(FANOUT_WAITERS, done);
                for _ in 0..FANOUT_WAITERS {
                    let waiter = value.waiter();
                    let sum = sum.clone();
                    let countdown = countdown.clone();
                    spawner.spawn_detached(async move {
                        sum.fetch_add(waiter.await, Relaxed);
                        countdown.finish_one();
                    });
                }
                drop(countdown);
                value.fulfil(FANOUT_VALUE);
                all_done.await.expect("a waiter was dropped");
                sum.load(Relaxed)
            });
            assert_eq!(sum, FANOUT_WAITERS as u64 * FANOUT_VALUE);
        })
    });
}

// ---------------------------------------------------------------------------------------------
// rwlock_mixed

/// A reader-writer lock around a `u64`, as `rwlock_mixed` uses it.
trait BenchRwLock: Send + Sync + 'static {
    /// A lock around `value`.
    fn new(value: u64) -> Self;
    /// Read-locks, reads the value, unlocks.
    fn read_value(&self) -> impl Future<Output = u64> + Send + '_;
    /// Write-locks, increments the value, unlocks.
    fn increment(&self) -> impl Future<Output = ()> + Send + '_;
}

impl BenchRwLock for coro::sync::SharedMutexFair<u64> {
    fn new(value: u64) -> Self {
        coro::sync::SharedMutexFair::new(value)
    }

    async fn read_value(&self) -> u64 {
        *self.read().await
    }

    async fn increment(&self) {
        *self.write().await += 1;
    }
}

impl BenchRwLock for tokio::sync::RwLock<u64> {
    fn new(value: u64) -> Self {
        tokio::sync::RwLock::new(value)
    }

    async fn read_value(&self) -> u64 {
        *self.read().await
    }

    async fn increment(&self) {
        *self.write().await += 1;
    }
}

impl BenchRwLock for async_lock::RwLock<u64> {
    fn new(value: u64) -> Self {
        async_lock::RwLock::new(value)
    }

    async fn read_value(&self) -> u64 {
        *self.read().await
    }

    async fn increment(&self) {
        *self.write().await += 1;
    }
}

/// A root task makes a lock `L` around 0, spawns [`RW_TASKS`] tasks of [`RW_OPS`] operations
/// on it, joins them and returns the final value, which must count every write.
fn rwlock_mixed<R: Runtime, L: BenchRwLock>(group: &mut Group<'_>, name: &str) {
    let rt = R::build(WORKERS);
    let spawner = rt.spawner();
    group.bench_function(name, |b| {
        b.iter(|| {
            let writes = run(&rt, async move {
                let lock = Arc::new(L::new(0));
                let tasks: Vec<_> = (0..RW_TASKS)
                    .map(|_| {
                        let lock = lock.clone();
                        spawner.spawn(async move {
                            let mut sum = 0;
                            for i in 0..RW_OPS {
                                if i % RW_WRITE_EVERY == 0 {
                                    lock.increment().await;
                                } else {
                                    sum += lock.read_value().await;
                                }
                            }
                            sum
                        })
                    })
                    .collect();
                for task in tasks {
                    black_box(task.await);
                }
                lock.read_value().await
            });
            assert_eq!(writes, RW_TASKS * RW_OPS / RW_WRITE_EVERY);
        })
    });
}

// ---------------------------------------------------------------------------------------------
// The groups

/// `user_path/spawn_many_local`: coro, tokio, async-executor.
fn user_spawn_many_local(c: &mut Criterion) {
    let mut group = c.benchmark_group("user_path/spawn_many_local");
    spawn_many_local::<coro::ThreadPool>(&mut group, "coro");
    with_console_stats(|| spawn_many_local::<coro::ThreadPool>(&mut group, "coro_stats"));
    spawn_many_local::<tokio::runtime::Runtime>(&mut group, "tokio");
    spawn_many_local::<AsyncExecutorRt>(&mut group, "async_executor");
    group.finish();
}

/// `user_path/task_chain`: coro's Task levels, the same pool with boxed levels, and boxed
/// levels on tokio and async-executor; throughput in levels.
fn user_task_chain(c: &mut Criterion) {
    let mut group = c.benchmark_group("user_path/task_chain");
    group.throughput(Throughput::Elements(CHAINS * CHAIN_DEPTH));
    task_chain::<coro::ThreadPool, _>(&mut group, "coro", task_chain_levels);
    with_console_stats(|| {
        task_chain::<coro::ThreadPool, _>(&mut group, "coro_stats", task_chain_levels)
    });
    task_chain::<coro::ThreadPool, _>(&mut group, "coro_boxed", boxed_chain_levels);
    task_chain::<tokio::runtime::Runtime, _>(&mut group, "tokio", boxed_chain_levels);
    task_chain::<AsyncExecutorRt, _>(&mut group, "async_executor", boxed_chain_levels);
    group.finish();
}

/// `user_path/fanout_10k`: `SharedPromise` on coro, a shared oneshot on tokio and
/// async-executor, and tokio's `watch` on tokio.
fn user_fanout_10k(c: &mut Criterion) {
    let mut group = c.benchmark_group("user_path/fanout_10k");
    fanout_10k::<coro::ThreadPool, coro::sync::SharedPromise<u64>>(&mut group, "coro");
    with_console_stats(|| {
        fanout_10k::<coro::ThreadPool, coro::sync::SharedPromise<u64>>(&mut group, "coro_stats")
    });
    fanout_10k::<tokio::runtime::Runtime, FuturesShared>(&mut group, "tokio");
    fanout_10k::<tokio::runtime::Runtime, TokioWatch>(&mut group, "tokio_watch");
    fanout_10k::<AsyncExecutorRt, FuturesShared>(&mut group, "async_executor");
    group.finish();
}

/// `user_path/rwlock_mixed`: each runtime with its users' reader-writer lock.
fn user_rwlock_mixed(c: &mut Criterion) {
    let mut group = c.benchmark_group("user_path/rwlock_mixed");
    rwlock_mixed::<coro::ThreadPool, coro::sync::SharedMutexFair<u64>>(&mut group, "coro");
    with_console_stats(|| {
        rwlock_mixed::<coro::ThreadPool, coro::sync::SharedMutexFair<u64>>(&mut group, "coro_stats")
    });
    rwlock_mixed::<tokio::runtime::Runtime, tokio::sync::RwLock<u64>>(&mut group, "tokio");
    rwlock_mixed::<AsyncExecutorRt, async_lock::RwLock<u64>>(&mut group, "async_executor");
    group.finish();
}

/// `rt_multi_threaded`'s settings, so that the whole file runs in a few minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = user_path;
    config = config();
    targets = user_spawn_many_local, user_task_chain, user_fanout_10k, user_rwlock_mixed
}
criterion_main!(user_path);
