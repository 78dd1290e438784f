//! coro's synchronisation primitives (`coro::sync`) against tokio's and async-lock's, each
//! group with one function per competitor:
//!
//! - `rwlock_uncontended`: [`UNCONTENDED_OPS`] read (or write) lock+unlock of a lock nobody
//!   else touches, inside one future driven by `futures::executor::block_on` (no runtime: the
//!   lock alone): `SharedMutexFair`, `tokio::sync::RwLock`, `async_lock::RwLock`.
//! - `rwlock_contended`: [`RW_TASKS`] tasks x [`RW_OPS`] operations, 90% reads and 10% writes
//!   with a tiny critical section, the three locks on the same coro `ThreadPool` (only the lock
//!   differs), plus tokio's lock on tokio's runtime as the native reference.
//! - `fanout_10k` / `fanout_10k_wake`: one fulfilment waking [`FANOUT_WAITERS`] waiting tasks:
//!   `SharedPromise`, a `tokio::sync::watch` channel, a `futures::future::Shared` oneshot
//!   receiver. `fanout_10k` times the whole iteration (spawn, register, fulfil, all done);
//!   `fanout_10k_wake` only the fulfil-to-last-waiter-done part.
//! - `semaphore`: the shapes of tokio's `benches/sync_semaphore.rs` (uncontended,
//!   uncontended_concurrent, contended_concurrent), coro's `Semaphore` against tokio's on the
//!   same coro pool.
//! - `mutex`: coro's `Mutex` against `tokio::sync::Mutex`, contended and uncontended, on the same
//!   coro pool.
//!
//! Every runtime has [`WORKERS`] worker threads and is built once per bench function (or per
//! group, for the functions that share "the same coro pool"), outside `b.iter`. Every iteration
//! checks its counts, so a bench cannot silently measure nothing.
//!
//! Run with `cargo bench -p coro-benches --bench sync`.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use futures::channel::oneshot;
use futures::future::{BoxFuture, FutureExt, Shared, join_all, poll_fn};
use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// Worker threads of every runtime.
const WORKERS: usize = 2;
/// Lock+unlock per iteration of `rwlock_uncontended`.
const UNCONTENDED_OPS: u64 = 1_000;
/// Tasks of `rwlock_contended`.
const RW_TASKS: u64 = 8;
/// Operations per task of `rwlock_contended`; operation `i` is a write when `i % 10 == 0`.
const RW_OPS: u64 = 20_000;
/// Waiting tasks of `fanout_10k`.
const FANOUT_WAITERS: u64 = 10_000;
/// The value the fan-out waiters receive.
const FANOUT_VALUE: u64 = 42;
/// Acquire+release (lock+unlock) per iteration of the single-task `semaphore` and `mutex`
/// shapes, which run on the pool (more than [`UNCONTENDED_OPS`], to dilute the round trip to
/// the pool).
const POOL_UNCONTENDED_OPS: u64 = 10_000;
/// Tasks of the concurrent `semaphore` shapes (tokio's: 6).
const SEM_TASKS: u64 = 6;
/// Acquire, yield, release per task of the concurrent `semaphore` shapes.
const SEM_OPS: u64 = 1_000;
/// Permits of the uncontended `semaphore` shapes (tokio's: 10, more than there are tasks).
const SEM_PERMITS_UNCONTENDED: usize = 10;
/// Permits of `semaphore/contended_concurrent`: fewer than the tasks, so they queue.
const SEM_PERMITS_CONTENDED: usize = 2;
/// Tasks of `mutex/contended`.
const MUTEX_TASKS: u64 = 8;
/// Lock, increment, unlock per task of `mutex/contended`.
const MUTEX_OPS: u64 = 5_000;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

// ---------------------------------------------------------------------------------------------
// Runtimes

/// What the shapes need from a runtime: run a root future from the bench thread, and spawn from
/// inside a task (through the runtime's thread-local spawn).
trait Rt {
    fn run<T: Send + 'static>(&self, root: impl Future<Output = T> + Send + 'static) -> T;
    /// Spawns `fut` and returns its joined output (panicking if the task failed).
    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> BoxFuture<'static, T>;
    fn spawn_detached(fut: impl Future<Output = ()> + Send + 'static);
}

/// `coro::ThreadPool`: the root goes through the Task layer (`Task::schedule_on` +
/// `block_wait`), spawns through the engine's `coro::executor::spawn`.
struct CoroRt(coro::ThreadPool);

impl CoroRt {
    fn new() -> Self {
        CoroRt(coro::ThreadPool::new(WORKERS).expect("coro thread pool"))
    }
}

impl Rt for CoroRt {
    fn run<T: Send + 'static>(&self, root: impl Future<Output = T> + Send + 'static) -> T {
        coro::block_wait(coro::Task::new(root).schedule_on(&self.0))
    }

    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> BoxFuture<'static, T> {
        let handle = coro::executor::spawn(fut);
        async move { handle.await.expect("coro task failed") }.boxed()
    }

    fn spawn_detached(fut: impl Future<Output = ()> + Send + 'static) {
        coro::executor::spawn(fut).detach();
    }
}

/// tokio's multi-thread runtime: `rt.block_on(rt.spawn(root))`, `tokio::spawn` inside.
struct TokioRt(tokio::runtime::Runtime);

impl TokioRt {
    fn new() -> Self {
        TokioRt(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .expect("tokio runtime"),
        )
    }
}

impl Rt for TokioRt {
    fn run<T: Send + 'static>(&self, root: impl Future<Output = T> + Send + 'static) -> T {
        self.0
            .block_on(self.0.spawn(root))
            .expect("tokio task failed")
    }

    fn spawn<T: Send + 'static>(
        fut: impl Future<Output = T> + Send + 'static,
    ) -> BoxFuture<'static, T> {
        let handle = tokio::spawn(fut);
        async move { handle.await.expect("tokio task failed") }.boxed()
    }

    fn spawn_detached(fut: impl Future<Output = ()> + Send + 'static) {
        drop(tokio::spawn(fut));
    }
}

// ---------------------------------------------------------------------------------------------
// Reader-writer locks

/// A reader-writer lock over a `u64`, as the shapes use it.
trait BenchRwLock: Send + Sync + 'static {
    fn with_value(value: u64) -> Self;
    /// Read-locks, reads the value, unlocks.
    fn read_value(&self) -> impl Future<Output = u64> + Send + '_;
    /// Write-locks, increments the value, unlocks.
    fn increment(&self) -> impl Future<Output = ()> + Send + '_;
}

impl BenchRwLock for coro::sync::SharedMutexFair<u64> {
    fn with_value(value: u64) -> Self {
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
    fn with_value(value: u64) -> Self {
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
    fn with_value(value: u64) -> Self {
        async_lock::RwLock::new(value)
    }
    async fn read_value(&self) -> u64 {
        *self.read().await
    }
    async fn increment(&self) {
        *self.write().await += 1;
    }
}

fn rwlock_uncontended_read<L: BenchRwLock>(group: &mut Group<'_>, name: &str) {
    let lock = L::with_value(7);
    group.bench_function(name, |b| {
        b.iter(|| {
            let sum = futures::executor::block_on(async {
                let mut sum = 0;
                for _ in 0..UNCONTENDED_OPS {
                    sum += black_box(lock.read_value().await);
                }
                sum
            });
            assert_eq!(sum, 7 * UNCONTENDED_OPS);
        })
    });
}

fn rwlock_uncontended_write<L: BenchRwLock>(group: &mut Group<'_>, name: &str) {
    let lock = L::with_value(0);
    group.bench_function(name, |b| {
        b.iter(|| {
            let (before, after) = futures::executor::block_on(async {
                let before = lock.read_value().await;
                for _ in 0..UNCONTENDED_OPS {
                    black_box(&lock).increment().await;
                }
                (before, lock.read_value().await)
            });
            assert_eq!(after - before, UNCONTENDED_OPS);
        })
    });
}

fn rwlock_uncontended(c: &mut Criterion) {
    let mut group = c.benchmark_group("rwlock_uncontended");
    rwlock_uncontended_read::<coro::sync::SharedMutexFair<u64>>(&mut group, "coro_read");
    rwlock_uncontended_read::<tokio::sync::RwLock<u64>>(&mut group, "tokio_read");
    rwlock_uncontended_read::<async_lock::RwLock<u64>>(&mut group, "async_lock_read");
    rwlock_uncontended_write::<coro::sync::SharedMutexFair<u64>>(&mut group, "coro_write");
    rwlock_uncontended_write::<tokio::sync::RwLock<u64>>(&mut group, "tokio_write");
    rwlock_uncontended_write::<async_lock::RwLock<u64>>(&mut group, "async_lock_write");
    group.finish();
}

/// One `rwlock_contended` task: returns (reads, writes) done.
async fn rw_worker<L: BenchRwLock>(lock: Arc<L>) -> (u64, u64) {
    let (mut reads, mut writes) = (0, 0);
    for i in 0..RW_OPS {
        if i % 10 == 0 {
            lock.increment().await;
            writes += 1;
        } else {
            black_box(lock.read_value().await);
            reads += 1;
        }
    }
    (reads, writes)
}

fn rwlock_contended_on<R: Rt, L: BenchRwLock>(group: &mut Group<'_>, name: &str, rt: &R) {
    let lock = Arc::new(L::with_value(0));
    group.bench_function(name, |b| {
        b.iter(|| {
            let lock = lock.clone();
            let (before, after, done) = rt.run(async move {
                let before = lock.read_value().await;
                let tasks = (0..RW_TASKS).map(|_| R::spawn(rw_worker(lock.clone())));
                let done = join_all(tasks).await;
                (before, lock.read_value().await, done)
            });
            let writes: u64 = done.iter().map(|&(_, w)| w).sum();
            let reads: u64 = done.iter().map(|&(r, _)| r).sum();
            assert_eq!(writes, RW_TASKS * RW_OPS / 10);
            assert_eq!(reads + writes, RW_TASKS * RW_OPS);
            assert_eq!(after - before, writes);
        })
    });
}

fn rwlock_contended(c: &mut Criterion) {
    let mut group = c.benchmark_group("rwlock_contended");
    let pool = CoroRt::new();
    rwlock_contended_on::<_, coro::sync::SharedMutexFair<u64>>(&mut group, "coro", &pool);
    rwlock_contended_on::<_, tokio::sync::RwLock<u64>>(&mut group, "tokio", &pool);
    rwlock_contended_on::<_, async_lock::RwLock<u64>>(&mut group, "async_lock", &pool);
    drop(pool);
    let rt = TokioRt::new();
    rwlock_contended_on::<_, tokio::sync::RwLock<u64>>(&mut group, "tokio_on_tokio", &rt);
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// Fan-out

/// One value, many waiters: a fresh one per iteration.
trait Fanout: Send + Sync + 'static {
    fn create() -> Self;
    /// A future of the value, for one waiter.
    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static;
    /// Provides the value, waking every waiter.
    fn fulfil(&self, value: u64);
}

struct CoroSharedPromise(coro::sync::SharedPromise<u64>);

impl Fanout for CoroSharedPromise {
    fn create() -> Self {
        CoroSharedPromise(coro::sync::SharedPromise::new())
    }
    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        self.0
            .get_future()
            .map(|value| value.expect("broken promise"))
    }
    fn fulfil(&self, value: u64) {
        self.0.set_value(value).expect("promise fulfilled twice");
    }
}

/// A `tokio::sync::watch` channel; each waiter awaits `changed()` on its own receiver clone.
struct TokioWatch {
    tx: tokio::sync::watch::Sender<u64>,
    rx: tokio::sync::watch::Receiver<u64>,
}

impl Fanout for TokioWatch {
    fn create() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(0);
        TokioWatch { tx, rx }
    }
    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        let mut rx = self.rx.clone();
        async move {
            rx.changed().await.expect("watch sender dropped");
            *rx.borrow_and_update()
        }
    }
    fn fulfil(&self, value: u64) {
        self.tx.send(value).expect("no watch receiver");
    }
}

/// `futures::future::Shared` of a `futures` oneshot receiver.
struct FuturesShared {
    tx: Mutex<Option<oneshot::Sender<u64>>>,
    rx: Shared<oneshot::Receiver<u64>>,
}

impl Fanout for FuturesShared {
    fn create() -> Self {
        let (tx, rx) = oneshot::channel();
        FuturesShared {
            tx: Mutex::new(Some(tx)),
            rx: rx.shared(),
        }
    }
    fn waiter(&self) -> impl Future<Output = u64> + Send + 'static {
        self.rx
            .clone()
            .map(|value| value.expect("oneshot sender dropped"))
    }
    fn fulfil(&self, value: u64) {
        let tx = self.tx.lock().unwrap().take().expect("fulfilled twice");
        tx.send(value).expect("oneshot receiver dropped");
    }
}

/// The counters of one fan-out iteration. Waiters only count (a panic in a detached task would
/// hang the root); the root checks the counts.
#[derive(Default)]
struct FanoutState {
    /// Waiters whose first poll returned `Pending` (registered).
    registered: AtomicU64,
    /// Waiters whose first poll returned `Ready`: must stay 0 (the value is only set once every
    /// waiter is registered), else the bench would not measure wake-ups.
    early: AtomicU64,
    /// Waiters finished.
    done: AtomicU64,
    /// Waiters that received [`FANOUT_VALUE`].
    correct: AtomicU64,
    all_registered: Mutex<Option<oneshot::Sender<()>>>,
    all_done: Mutex<Option<oneshot::Sender<Instant>>>,
}

impl FanoutState {
    fn arrive(&self) {
        if self.registered.fetch_add(1, Ordering::AcqRel) + 1 == FANOUT_WAITERS {
            let tx = self.all_registered.lock().unwrap().take();
            let _ = tx.expect("registered twice").send(());
        }
    }
}

/// One waiter: counts its registration (its first `Pending`), then the value it gets.
async fn fanout_waiter(waiter: impl Future<Output = u64> + Send, state: Arc<FanoutState>) {
    let mut waiter = pin!(waiter);
    let mut first = true;
    let value = poll_fn(|cx| {
        let poll = waiter.as_mut().poll(cx);
        if std::mem::take(&mut first) {
            match poll {
                Poll::Pending => state.arrive(),
                Poll::Ready(_) => {
                    state.early.fetch_add(1, Ordering::Relaxed);
                    state.arrive();
                }
            }
        }
        poll
    })
    .await;
    if value == FANOUT_VALUE {
        state.correct.fetch_add(1, Ordering::Relaxed);
    }
    if state.done.fetch_add(1, Ordering::AcqRel) + 1 == FANOUT_WAITERS {
        let end = Instant::now();
        let tx = state.all_done.lock().unwrap().take();
        let _ = tx.expect("done twice").send(end);
    }
}

/// One fan-out iteration on `R`: spawns the waiters, waits until all are registered, fulfils,
/// waits for all to finish. Returns the time from just before the fulfilment to the last
/// waiter's end.
fn fanout_iteration<R: Rt, F: Fanout>(rt: &R) -> Duration {
    let (registered_tx, registered_rx) = oneshot::channel();
    let (done_tx, done_rx) = oneshot::channel();
    let state = Arc::new(FanoutState {
        all_registered: Mutex::new(Some(registered_tx)),
        all_done: Mutex::new(Some(done_tx)),
        ..FanoutState::default()
    });
    let root_state = state.clone();
    let wake = rt.run(async move {
        let state = root_state;
        let fanout = F::create();
        for _ in 0..FANOUT_WAITERS {
            R::spawn_detached(fanout_waiter(fanout.waiter(), state.clone()));
        }
        registered_rx.await.expect("registration signal dropped");
        let start = Instant::now();
        fanout.fulfil(FANOUT_VALUE);
        let end = done_rx.await.expect("done signal dropped");
        end - start
    });
    assert_eq!(
        state.early.load(Ordering::Relaxed),
        0,
        "a waiter never waited"
    );
    assert_eq!(state.registered.load(Ordering::Relaxed), FANOUT_WAITERS);
    assert_eq!(state.done.load(Ordering::Relaxed), FANOUT_WAITERS);
    assert_eq!(state.correct.load(Ordering::Relaxed), FANOUT_WAITERS);
    wake
}

/// `fanout_10k` (whole iteration) or, with `wake_only`, `fanout_10k_wake` (fulfil to done).
fn fanout_on<R: Rt, F: Fanout>(group: &mut Group<'_>, name: &str, rt: &R, wake_only: bool) {
    if wake_only {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| fanout_iteration::<R, F>(rt)).sum())
        });
    } else {
        group.bench_function(name, |b| b.iter(|| fanout_iteration::<R, F>(rt)));
    }
}

fn fanout_group(c: &mut Criterion, group_name: &str, wake_only: bool) {
    let mut group = c.benchmark_group(group_name);
    let pool = CoroRt::new();
    fanout_on::<_, CoroSharedPromise>(&mut group, "coro_shared_promise", &pool, wake_only);
    fanout_on::<_, TokioWatch>(&mut group, "tokio_watch", &pool, wake_only);
    fanout_on::<_, FuturesShared>(&mut group, "futures_shared", &pool, wake_only);
    drop(pool);
    let rt = TokioRt::new();
    fanout_on::<_, TokioWatch>(&mut group, "tokio_watch_on_tokio", &rt, wake_only);
    group.finish();
}

fn fanout_10k(c: &mut Criterion) {
    fanout_group(c, "fanout_10k", false);
}

fn fanout_10k_wake(c: &mut Criterion) {
    fanout_group(c, "fanout_10k_wake", true);
}

// ---------------------------------------------------------------------------------------------
// Semaphore

trait BenchSemaphore: Send + Sync + 'static {
    fn with_permits(permits: usize) -> Self;
    /// Acquires one permit and gives it back at once.
    fn acquire_release(&self) -> impl Future<Output = ()> + Send + '_;
    /// Acquires one permit, yields to the executor holding it, gives it back.
    fn acquire_yield_release(&self) -> impl Future<Output = ()> + Send + '_;
    fn available(&self) -> usize;
}

impl BenchSemaphore for coro::sync::Semaphore {
    fn with_permits(permits: usize) -> Self {
        coro::sync::Semaphore::new(permits)
    }
    async fn acquire_release(&self) {
        drop(self.acquire(1).await);
    }
    async fn acquire_yield_release(&self) {
        let permit = self.acquire(1).await;
        coro::executor::yield_now().await;
        drop(permit);
    }
    fn available(&self) -> usize {
        self.available_permits()
    }
}

impl BenchSemaphore for tokio::sync::Semaphore {
    fn with_permits(permits: usize) -> Self {
        tokio::sync::Semaphore::new(permits)
    }
    async fn acquire_release(&self) {
        drop(self.acquire().await.expect("semaphore closed"));
    }
    async fn acquire_yield_release(&self) {
        let permit = self.acquire().await.expect("semaphore closed");
        coro::executor::yield_now().await;
        drop(permit);
    }
    fn available(&self) -> usize {
        self.available_permits()
    }
}

/// `uncontended`: one task acquires and releases [`POOL_UNCONTENDED_OPS`] times.
fn semaphore_uncontended<S: BenchSemaphore>(group: &mut Group<'_>, name: &str, rt: &CoroRt) {
    let sem = Arc::new(S::with_permits(SEM_PERMITS_UNCONTENDED));
    group.bench_function(BenchmarkId::new("uncontended", name), |b| {
        b.iter(|| {
            let root_sem = sem.clone();
            let ops = rt.run(async move {
                let mut ops = 0;
                for _ in 0..POOL_UNCONTENDED_OPS {
                    root_sem.acquire_release().await;
                    ops += 1;
                }
                ops
            });
            assert_eq!(ops, POOL_UNCONTENDED_OPS);
            assert_eq!(sem.available(), SEM_PERMITS_UNCONTENDED);
        })
    });
}

/// The concurrent shapes: [`SEM_TASKS`] tasks each acquire, yield, release [`SEM_OPS`] times.
fn semaphore_concurrent<S: BenchSemaphore>(
    group: &mut Group<'_>,
    shape: &str,
    name: &str,
    permits: usize,
    rt: &CoroRt,
) {
    let sem = Arc::new(S::with_permits(permits));
    group.bench_function(BenchmarkId::new(shape, name), |b| {
        b.iter(|| {
            let root_sem = sem.clone();
            let ops: u64 = rt.run(async move {
                let tasks = (0..SEM_TASKS).map(|_| {
                    let sem = root_sem.clone();
                    CoroRt::spawn(async move {
                        let mut ops = 0;
                        for _ in 0..SEM_OPS {
                            sem.acquire_yield_release().await;
                            ops += 1;
                        }
                        ops
                    })
                });
                join_all(tasks).await.into_iter().sum()
            });
            assert_eq!(ops, SEM_TASKS * SEM_OPS);
            assert_eq!(sem.available(), permits);
        })
    });
}

fn semaphore(c: &mut Criterion) {
    let mut group = c.benchmark_group("semaphore");
    let pool = CoroRt::new();
    semaphore_uncontended::<coro::sync::Semaphore>(&mut group, "coro", &pool);
    semaphore_uncontended::<tokio::sync::Semaphore>(&mut group, "tokio", &pool);
    for (shape, permits) in [
        ("uncontended_concurrent", SEM_PERMITS_UNCONTENDED),
        ("contended_concurrent", SEM_PERMITS_CONTENDED),
    ] {
        semaphore_concurrent::<coro::sync::Semaphore>(&mut group, shape, "coro", permits, &pool);
        semaphore_concurrent::<tokio::sync::Semaphore>(&mut group, shape, "tokio", permits, &pool);
    }
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// Mutex

trait BenchMutex: Send + Sync + 'static {
    fn with_value(value: u64) -> Self;
    /// Locks, increments, unlocks; returns the value it wrote.
    fn increment(&self) -> impl Future<Output = u64> + Send + '_;
    /// Locks, reads, unlocks.
    fn value(&self) -> impl Future<Output = u64> + Send + '_;
}

impl BenchMutex for coro::sync::Mutex<u64> {
    fn with_value(value: u64) -> Self {
        coro::sync::Mutex::new(value)
    }
    async fn increment(&self) -> u64 {
        let mut guard = self.lock().await;
        *guard += 1;
        *guard
    }
    async fn value(&self) -> u64 {
        *self.lock().await
    }
}

impl BenchMutex for tokio::sync::Mutex<u64> {
    fn with_value(value: u64) -> Self {
        tokio::sync::Mutex::new(value)
    }
    async fn increment(&self) -> u64 {
        let mut guard = self.lock().await;
        *guard += 1;
        *guard
    }
    async fn value(&self) -> u64 {
        *self.lock().await
    }
}

/// `uncontended`: one task locks, increments, unlocks [`POOL_UNCONTENDED_OPS`] times.
fn mutex_uncontended<M: BenchMutex>(group: &mut Group<'_>, name: &str, rt: &CoroRt) {
    let mutex = Arc::new(M::with_value(0));
    group.bench_function(BenchmarkId::new("uncontended", name), |b| {
        b.iter(|| {
            let mutex = mutex.clone();
            let (first, last) = rt.run(async move {
                let first = mutex.increment().await;
                let mut last = first;
                for _ in 1..POOL_UNCONTENDED_OPS {
                    last = mutex.increment().await;
                }
                (first, last)
            });
            assert_eq!(last - first, POOL_UNCONTENDED_OPS - 1);
        })
    });
}

/// `contended`: [`MUTEX_TASKS`] tasks each lock, increment, unlock [`MUTEX_OPS`] times.
fn mutex_contended<M: BenchMutex>(group: &mut Group<'_>, name: &str, rt: &CoroRt) {
    let mutex = Arc::new(M::with_value(0));
    group.bench_function(BenchmarkId::new("contended", name), |b| {
        b.iter(|| {
            let mutex = mutex.clone();
            let (before, after, ops) = rt.run(async move {
                let before = mutex.value().await;
                let tasks = (0..MUTEX_TASKS).map(|_| {
                    let mutex = mutex.clone();
                    CoroRt::spawn(async move {
                        for _ in 0..MUTEX_OPS {
                            black_box(mutex.increment().await);
                        }
                        MUTEX_OPS
                    })
                });
                let ops: u64 = join_all(tasks).await.into_iter().sum();
                (before, mutex.value().await, ops)
            });
            assert_eq!(ops, MUTEX_TASKS * MUTEX_OPS);
            assert_eq!(after - before, ops, "lost increments");
        })
    });
}

fn mutex(c: &mut Criterion) {
    let mut group = c.benchmark_group("mutex");
    let pool = CoroRt::new();
    mutex_uncontended::<coro::sync::Mutex<u64>>(&mut group, "coro", &pool);
    mutex_uncontended::<tokio::sync::Mutex<u64>>(&mut group, "tokio", &pool);
    mutex_contended::<coro::sync::Mutex<u64>>(&mut group, "coro", &pool);
    mutex_contended::<tokio::sync::Mutex<u64>>(&mut group, "tokio", &pool);
    group.finish();
}

/// Modest settings, so that the whole file runs in a few minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = sync;
    config = config();
    targets = rwlock_uncontended, rwlock_contended, fanout_10k, fanout_10k_wake, semaphore, mutex
}
criterion_main!(sync);
