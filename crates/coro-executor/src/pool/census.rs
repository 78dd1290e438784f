//! [`census`]: every live pool with its counters and its tasks, for consoles; and the registry
//! of live pools it reads.
//!
//! Rule: nothing here stops a worker. Counters are relaxed reads; each pool's tasks are copied
//! shard by shard under the task list's short locks (`trace::snapshot_list`), never while a
//! task runs.

use super::shared::{Remote, Shared};
use super::{PoolMetrics, WorkerMetrics};
use crate::trace::{TaskSnapshot, snapshot_list};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// Live pools, in the order they were built (dead ones are pruned as they are found).
static POOLS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Makes `pool` visible to [`census`] for as long as it lives.
pub(crate) fn register(pool: &Arc<Shared>) {
    let mut pools = POOLS.lock().unwrap();
    pools.retain(|p| p.strong_count() > 0);
    pools.push(Arc::downgrade(pool));
}

/// One live pool as [`census`] found it.
///
/// ```
/// let pool = coro_executor::ThreadPool::builder().thread_name("census-doc").worker_threads(2).build().unwrap();
/// let (pools, _others) = coro_executor::trace::census();
/// let mine = pools.iter().find(|p| p.name == "census-doc").unwrap();
/// assert_eq!(mine.metrics.workers.len(), 2);
/// drop(pool);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PoolCensus {
    /// The pool's thread name (its workers are `{name}-{index}`).
    pub name: String,
    /// Its counters, per worker and in total (as [`ThreadPool::metrics`](crate::ThreadPool::metrics)).
    pub metrics: PoolMetrics,
    /// Sockets registered with its IO driver.
    pub io_sources: usize,
    /// Timers pending on its timer wheel.
    pub timers: usize,
    /// A poll longer than this is a long poll: the stall threshold if set, else the handoff
    /// threshold.
    pub long_poll_after: Duration,
    /// Its live tasks.
    pub tasks: Vec<TaskSnapshot>,
}

/// Every live pool (in the order they were built) with its tasks, and the tasks of every
/// other executor (user executors, `ManualExecutor`, `block_wait`'s), at one moment, without
/// stopping anything.
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let stuck = pool.spawn(std::future::pending::<()>());
/// let (pools, _others) = coro_executor::trace::census();
/// assert!(pools.iter().any(|p| p.tasks.len() == 1));
/// stuck.cancel();
/// ```
pub fn census() -> (Vec<PoolCensus>, Vec<TaskSnapshot>) {
    let pools: Vec<Arc<Shared>> = {
        let mut pools = POOLS.lock().unwrap();
        pools.retain(|p| p.strong_count() > 0);
        pools.iter().filter_map(Weak::upgrade).collect()
    };
    let found = pools
        .iter()
        .filter(|pool| !pool.is_shutdown())
        .map(|pool| PoolCensus {
            name: pool.thread_name.clone(),
            metrics: pool.metrics(),
            io_sources: io_sources(pool),
            timers: pending_timers(pool),
            long_poll_after: pool
                .stall
                .as_ref()
                .map_or(pool.handoff_after, |stall| stall.threshold),
            tasks: snapshot_list(&pool.tasks),
        })
        .collect();
    (found, snapshot_list(crate::task::registry::others()))
}

impl Shared {
    /// The pool's counters, for [`ThreadPool::metrics`](crate::ThreadPool::metrics) and
    /// [`census`].
    pub(crate) fn metrics(&self) -> PoolMetrics {
        let (blocking_threads, blocking_queue_depth) = self.blocking.stats();
        PoolMetrics {
            workers: self.remotes[..self.workers]
                .iter()
                .map(Remote::snapshot)
                .collect(),
            global_queue_depth: self.inject.len(),
            live_tasks: self.tasks.live(),
            searching_workers: self.idle.num_searching(),
            max_searching_workers: self.idle.max_searching(),
            blocking_threads,
            blocking_queue_depth,
            helpers_started: self.helpers.started(),
            helpers: self.remotes[self.workers..].iter().fold(
                WorkerMetrics::default(),
                |mut sum, r| {
                    sum.add(&r.snapshot());
                    sum
                },
            ),
        }
    }
}

/// The sockets `pool`'s IO driver polls for.
#[cfg(not(any(loom, shuttle)))]
fn io_sources(pool: &Shared) -> usize {
    pool.io_to_poll().map_or(0, |io| io.sources())
}

/// The timers pending on `pool`'s timer driver.
#[cfg(not(any(loom, shuttle)))]
fn pending_timers(pool: &Shared) -> usize {
    pool.timers().map_or(0, |timers| timers.pending())
}

/// In the models a pool has no IO driver.
#[cfg(any(loom, shuttle))]
fn io_sources(_pool: &Shared) -> usize {
    0
}

/// In the models a pool has no timer driver.
#[cfg(any(loom, shuttle))]
fn pending_timers(_pool: &Shared) -> usize {
    0
}
