//! coro's `collect_all` barriers against what tokio and async-executor users write by hand, each
//! runtime with the same number of worker threads ([`WORKERS`]):
//!
//! - `collect_10k`: a task on the runtime gathers [`NUM_CHILDREN`] trivial children
//!   (`async move { i }`). `coro::collect_all_range` polls its children inline, in the one
//!   task, as `futures::future::join_all` does: the like-for-like peers are `join_all` of the
//!   same children in one task on tokio (`tokio_join_all_inline`) and on async-executor
//!   (`async_executor_join_all_inline`), and "coro / best" is taken over those. Beside them,
//!   what tokio and async-executor users write to run children as tasks of their own (which
//!   `collect_all_range` does not): tokio's `JoinSet`, `join_all` over `tokio::spawn` handles,
//!   and `join_all` over `async_executor::Executor::spawn` tasks; 10,000 spawns cost far more
//!   than 10,000 inline polls, so coro / these is no like-for-like figure.
//! - `collect_3_ready`: [`READY_LOOPS`] `coro::collect_all!(a, b, c)` of three already-ready
//!   children in a row inside one task, against the same loop of `futures::join!(a, b, c)` on
//!   the same pool; `(collect - join) / 3` is the per-child cost of the barrier.
//! - `dag`: a fan-out/fan-in DAG of about 1,000 nodes (root -> [`MIDS`] mid nodes ->
//!   [`GROUPS_PER_MID`] leaf groups each -> [`LEAVES_PER_GROUP`] leaves each) where 10% of the
//!   leaf slots point at a shared leaf used by several groups: coro with `collect_all_range` at
//!   each level (children polled inline, as in `collect_10k`) and `Task::shared` leaves (each
//!   a task of its own: a `SharedTask` spawns its computation at its first poll, 30 spawns per
//!   iteration); tokio with `join_all` at each level in one task (`tokio_inline`: no task but
//!   the root's, the shared leaves polled by their first awaiter), and with `tokio::spawn` +
//!   `join_all` at each level (`tokio`, a task per node); both with `futures::future::Shared`
//!   leaves. Neither is exactly coro's shape: `tokio_inline` spawns less, `tokio` more.
//!
//! Every group has one function per runtime, side by side. Runtimes are built once per bench
//! function, outside `b.iter`.
//!
//! Run with `cargo bench -p coro-benches --bench collect`.

use coro_benches::AsyncExecutorRt;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use futures::future::{FutureExt, Shared, join_all};
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Worker threads of every runtime.
const WORKERS: usize = 2;
/// Children gathered per iteration of `collect_10k`.
const NUM_CHILDREN: u64 = 10_000;
/// `collect_all!`s (or `join!`s) of three ready children per iteration of `collect_3_ready`.
/// Enough that the iteration's hop to the pool and back (10-25 µs, and bimodal on a 2-core
/// machine) is a few percent of even the `join!` loop, so that `collect - join` measures the
/// barrier rather than the hop's noise.
const READY_LOOPS: u64 = 10_000;
/// Mid nodes under the root of `dag`.
const MIDS: usize = 10;
/// Leaf groups under each mid node of `dag`.
const GROUPS_PER_MID: usize = 10;
/// Leaf slots in each leaf group of `dag`.
const LEAVES_PER_GROUP: usize = 9;
/// Every `SHARED_EVERY`-th leaf slot of `dag` is a shared leaf (10%).
const SHARED_EVERY: usize = 10;
/// Distinct shared leaves of `dag`; each is used by `LEAF_SLOTS / SHARED_EVERY / SHARED_LEAVES`
/// (= 3) groups, under different mid nodes.
const SHARED_LEAVES: usize = 30;
/// Leaf slots of `dag` in all.
const LEAF_SLOTS: usize = MIDS * GROUPS_PER_MID * LEAVES_PER_GROUP;

type Group<'a> = BenchmarkGroup<'a, WallTime>;

fn coro_pool() -> coro::ThreadPool {
    coro::ThreadPool::new(WORKERS).expect("coro thread pool")
}

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

// ---------------------------------------------------------------------------------------------
// collect_10k

/// The sum every `collect_10k` iteration must produce.
const SUM_10K: u64 = NUM_CHILDREN * (NUM_CHILDREN - 1) / 2;

fn collect_10k_coro(group: &mut Group<'_>) {
    let pool = coro_pool();
    group.bench_function("coro", |b| {
        b.iter(|| {
            let all = coro::block_wait(
                coro::Task::new(async {
                    coro::collect_all_range((0..NUM_CHILDREN).map(|i| async move { i })).await
                })
                .schedule_on(&pool),
            );
            assert_eq!(all.iter().sum::<u64>(), SUM_10K);
        })
    });
}

/// `JoinSet` inside a task spawned from `rt.block_on` (so that the spawns are local to a worker,
/// as coro's are; `block_on`'s own future runs on the bench thread).
fn collect_10k_tokio_joinset(group: &mut Group<'_>) {
    let rt = tokio_rt();
    group.bench_function("tokio_joinset", |b| {
        b.iter(|| {
            let sum = rt.block_on(async {
                tokio::spawn(async {
                    let mut set = tokio::task::JoinSet::new();
                    for i in 0..NUM_CHILDREN {
                        set.spawn(async move { i });
                    }
                    let mut sum = 0;
                    while let Some(value) = set.join_next().await {
                        sum += value.expect("tokio task failed");
                    }
                    sum
                })
                .await
                .expect("tokio task failed")
            });
            assert_eq!(sum, SUM_10K);
        })
    });
}

fn collect_10k_tokio_join_all(group: &mut Group<'_>) {
    let rt = tokio_rt();
    group.bench_function("tokio_join_all", |b| {
        b.iter(|| {
            let all = rt.block_on(async {
                tokio::spawn(async {
                    join_all((0..NUM_CHILDREN).map(|i| tokio::spawn(async move { i }))).await
                })
                .await
                .expect("tokio task failed")
            });
            let sum: u64 = all.into_iter().map(|r| r.expect("tokio task failed")).sum();
            assert_eq!(sum, SUM_10K);
        })
    });
}

/// The like-for-like peer of `coro`: the children polled inline by `join_all` in one task.
fn collect_10k_tokio_join_all_inline(group: &mut Group<'_>) {
    let rt = tokio_rt();
    group.bench_function("tokio_join_all_inline", |b| {
        b.iter(|| {
            let all = rt
                .block_on(
                    rt.spawn(async { join_all((0..NUM_CHILDREN).map(|i| async move { i })).await }),
                )
                .expect("tokio task failed");
            assert_eq!(all.iter().sum::<u64>(), SUM_10K);
        })
    });
}

/// The like-for-like peer of `coro` on async-executor: `join_all` inline in one task.
fn collect_10k_async_executor_join_all_inline(group: &mut Group<'_>) {
    let rt = AsyncExecutorRt::new(WORKERS);
    let ex = rt.ex;
    group.bench_function("async_executor_join_all_inline", |b| {
        b.iter(|| {
            let all =
                futures::executor::block_on(ex.spawn(async move {
                    join_all((0..NUM_CHILDREN).map(|i| async move { i })).await
                }));
            assert_eq!(all.iter().sum::<u64>(), SUM_10K);
        })
    });
}

fn collect_10k_async_executor(group: &mut Group<'_>) {
    let rt = AsyncExecutorRt::new(WORKERS);
    let ex = rt.ex;
    group.bench_function("async_executor", |b| {
        b.iter(|| {
            let all = futures::executor::block_on(ex.spawn(async move {
                join_all((0..NUM_CHILDREN).map(|i| ex.spawn(async move { i }))).await
            }));
            assert_eq!(all.iter().sum::<u64>(), SUM_10K);
        })
    });
}

fn collect_10k(c: &mut Criterion) {
    let mut group = c.benchmark_group("collect_10k");
    collect_10k_coro(&mut group);
    collect_10k_tokio_join_all_inline(&mut group);
    collect_10k_async_executor_join_all_inline(&mut group);
    collect_10k_tokio_joinset(&mut group);
    collect_10k_tokio_join_all(&mut group);
    collect_10k_async_executor(&mut group);
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// collect_3_ready

/// The sum every `collect_3_ready` iteration must produce (each round adds 3i + 3).
const SUM_READY: u64 = 3 * READY_LOOPS * (READY_LOOPS - 1) / 2 + 3 * READY_LOOPS;

fn collect_3_ready(c: &mut Criterion) {
    let mut group = c.benchmark_group("collect_3_ready");
    group.throughput(Throughput::Elements(READY_LOOPS * 3));
    let pool = coro_pool();
    group.bench_function("coro_collect_all", |b| {
        b.iter(|| {
            let sum = coro::block_wait(
                coro::Task::new(async {
                    let mut sum = 0;
                    for i in 0..READY_LOOPS {
                        let (x, y, z) = coro::collect_all!(
                            async move { black_box(i) },
                            async move { black_box(i + 1) },
                            async move { black_box(i + 2) },
                        )
                        .await;
                        sum += x + y + z;
                    }
                    sum
                })
                .schedule_on(&pool),
            );
            assert_eq!(sum, SUM_READY);
        })
    });
    group.bench_function("futures_join", |b| {
        b.iter(|| {
            let sum = coro::block_wait(
                coro::Task::new(async {
                    let mut sum = 0;
                    for i in 0..READY_LOOPS {
                        let (x, y, z) = futures::join!(
                            async move { black_box(i) },
                            async move { black_box(i + 1) },
                            async move { black_box(i + 2) },
                        );
                        sum += x + y + z;
                    }
                    sum
                })
                .schedule_on(&pool),
            );
            assert_eq!(sum, SUM_READY);
        })
    });
    group.finish();
}

// ---------------------------------------------------------------------------------------------
// dag

type BoxFuture = Pin<Box<dyn Future<Output = u64> + Send>>;

/// The leaf computation: sums a few numbers.
fn leaf_work(seed: u64) -> u64 {
    (black_box(seed)..seed + 8).sum()
}

/// One iteration's DAG: the shared leaves, fresh each iteration (both kinds keep their output).
/// The shape itself is fixed: leaf slot `s` (0..`LEAF_SLOTS`, group `s / LEAVES_PER_GROUP`) is
/// shared leaf `(s / SHARED_EVERY) % SHARED_LEAVES` if `s` is a multiple of `SHARED_EVERY`, else a private
/// leaf with seed `s`.
struct Dag {
    shared: SharedLeaves,
}

/// The shared leaves as each side writes them: coro's memoised `SharedTask` (run once, on the
/// first awaiter's executor), and for tokio a `futures::future::Shared` (polled by its awaiters).
enum SharedLeaves {
    Tasks(Vec<coro::sync::SharedTask<u64>>),
    Futures(Vec<Shared<BoxFuture>>),
}

impl Dag {
    fn with_shared_tasks() -> Arc<Dag> {
        let shared = (0..SHARED_LEAVES as u64)
            .map(|k| coro::Task::new(async move { leaf_work(1_000_000 + k) }).shared())
            .collect();
        Arc::new(Dag {
            shared: SharedLeaves::Tasks(shared),
        })
    }

    fn with_shared_futures() -> Arc<Dag> {
        let shared = (0..SHARED_LEAVES as u64)
            .map(|k| {
                let fut: BoxFuture = Box::pin(async move { leaf_work(1_000_000 + k) });
                fut.shared()
            })
            .collect();
        Arc::new(Dag {
            shared: SharedLeaves::Futures(shared),
        })
    }

    /// Leaf slot `slot`: the same future body in both implementations.
    fn leaf(self: &Arc<Self>, slot: usize) -> impl Future<Output = u64> + Send + 'static {
        let shared: Option<BoxFuture> = slot.is_multiple_of(SHARED_EVERY).then(|| {
            let k = (slot / SHARED_EVERY) % SHARED_LEAVES;
            match &self.shared {
                SharedLeaves::Tasks(tasks) => Box::pin(tasks[k].clone()) as BoxFuture,
                SharedLeaves::Futures(futures) => Box::pin(futures[k].clone()),
            }
        });
        async move {
            match shared {
                Some(shared) => shared.await,
                None => leaf_work(slot as u64),
            }
        }
    }

    /// What the root must return.
    fn expected() -> u64 {
        (0..LEAF_SLOTS)
            .map(|slot| {
                if slot.is_multiple_of(SHARED_EVERY) {
                    leaf_work(1_000_000 + ((slot / SHARED_EVERY) % SHARED_LEAVES) as u64)
                } else {
                    leaf_work(slot as u64)
                }
            })
            .sum()
    }
}

async fn coro_group(dag: Arc<Dag>, group: usize) -> u64 {
    let first = group * LEAVES_PER_GROUP;
    coro::collect_all_range((first..first + LEAVES_PER_GROUP).map(|slot| dag.leaf(slot)))
        .await
        .into_iter()
        .sum()
}

async fn coro_mid(dag: Arc<Dag>, mid: usize) -> u64 {
    let first = mid * GROUPS_PER_MID;
    coro::collect_all_range((first..first + GROUPS_PER_MID).map(|g| coro_group(dag.clone(), g)))
        .await
        .into_iter()
        .sum()
}

async fn coro_root(dag: Arc<Dag>) -> u64 {
    coro::collect_all_range((0..MIDS).map(|m| coro_mid(dag.clone(), m)))
        .await
        .into_iter()
        .sum()
}

async fn inline_group(dag: Arc<Dag>, group: usize) -> u64 {
    let first = group * LEAVES_PER_GROUP;
    join_all((first..first + LEAVES_PER_GROUP).map(|slot| dag.leaf(slot)))
        .await
        .into_iter()
        .sum()
}

async fn inline_mid(dag: Arc<Dag>, mid: usize) -> u64 {
    let first = mid * GROUPS_PER_MID;
    join_all((first..first + GROUPS_PER_MID).map(|g| inline_group(dag.clone(), g)))
        .await
        .into_iter()
        .sum()
}

/// The DAG with `join_all` at each level in one task: children polled inline, as coro's are.
async fn inline_root(dag: Arc<Dag>) -> u64 {
    join_all((0..MIDS).map(|m| inline_mid(dag.clone(), m)))
        .await
        .into_iter()
        .sum()
}

async fn tokio_join<T>(handles: Vec<tokio::task::JoinHandle<T>>) -> impl Iterator<Item = T> {
    join_all(handles)
        .await
        .into_iter()
        .map(|r| r.expect("tokio task failed"))
}

async fn tokio_group(dag: Arc<Dag>, group: usize) -> u64 {
    let first = group * LEAVES_PER_GROUP;
    let leaves = (first..first + LEAVES_PER_GROUP)
        .map(|slot| tokio::spawn(dag.leaf(slot)))
        .collect();
    tokio_join(leaves).await.sum()
}

async fn tokio_mid(dag: Arc<Dag>, mid: usize) -> u64 {
    let first = mid * GROUPS_PER_MID;
    let groups = (first..first + GROUPS_PER_MID)
        .map(|g| tokio::spawn(tokio_group(dag.clone(), g)))
        .collect();
    tokio_join(groups).await.sum()
}

async fn tokio_root(dag: Arc<Dag>) -> u64 {
    let mids = (0..MIDS)
        .map(|m| tokio::spawn(tokio_mid(dag.clone(), m)))
        .collect();
    tokio_join(mids).await.sum()
}

fn dag(c: &mut Criterion) {
    let expected = Dag::expected();
    let mut group = c.benchmark_group("dag");
    let pool = coro_pool();
    group.bench_function("coro", |b| {
        b.iter(|| {
            let dag = Dag::with_shared_tasks();
            let sum = coro::block_wait(coro::Task::new(coro_root(dag)).schedule_on(&pool));
            assert_eq!(sum, expected);
        })
    });
    drop(pool);
    let rt = tokio_rt();
    group.bench_function("tokio_inline", |b| {
        b.iter(|| {
            let dag = Dag::with_shared_futures();
            let sum = rt
                .block_on(rt.spawn(inline_root(dag)))
                .expect("tokio task failed");
            assert_eq!(sum, expected);
        })
    });
    group.bench_function("tokio", |b| {
        b.iter(|| {
            let dag = Dag::with_shared_futures();
            let sum = rt
                .block_on(rt.spawn(tokio_root(dag)))
                .expect("tokio task failed");
            assert_eq!(sum, expected);
        })
    });
    group.finish();
}

/// Modest settings, so that the whole file runs in a few minutes on 2 cores.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = collect;
    config = config();
    targets = collect_10k, collect_3_ready, dag
}
criterion_main!(collect);
