//! The work-stealing [`ThreadPool`].
//!
//! Bottom to top (each file imports only those above it in this list, and `task/`):
//! - `queue`: each worker's bounded ring (owner push/pop, others steal half);
//! - `park`: how a worker sleeps; `linger`: how long a searcher that found nothing searches on,
//!   and the absorbed pushes it follows; `idle`: who searches and who sleeps, and so whom to
//!   wake;
//! - `offer`: a worker's slot for work it makes available to idle ones without spawning it;
//! - `census`: the registry of live pools and [`census`], their counters and tasks for
//!   consoles;
//! - `helper_threads`: the spare worker slots and their helper threads; `metrics`: the
//!   counters and their public snapshot; `stall`: the stall report settings and the public `StallReport`;
//!   `reaper`: dropping tasks woken after shutdown;
//! - `shared`: what all workers share: the remotes (stealing ends, next slots, parkers, offer
//!   slots, counters), the global queue, the idle bookkeeping, the task list, the monitor's
//!   parker;
//! - `drivers`: the IO driver, timers and simulation draws as a worker uses them (none in the
//!   loom and shuttle models);
//! - `worker`: the worker loop, scheduling from inside a worker, and `offer_while`;
//! - `schedule`: spawning onto the pool, and the schedule function of its tasks;
//! - `watch`, `handoff`, `monitor`: the monitor thread (Go's sysmon), which wakes a parked
//!   worker for an offer that stays posted, hands off the work queued behind a poll that holds
//!   up its worker, and reports stalls;
//! - `sim`: a simulation's pool: the same shared state and workers, stepped tick by tick on
//!   one thread (`crate::sim`);
//! - this file: [`ThreadPool`]; `builder`: its configuration and constructors.

mod builder;
mod census;
mod drivers;
mod handoff;
mod helper_threads;
mod idle;
mod linger;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_offer;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_park;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_protocol;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_queue;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_shutdown;
mod metrics;
mod monitor;
mod offer;
pub(crate) mod park;
pub(crate) mod queue;
mod reaper;
mod schedule;
mod shared;
#[cfg(not(any(loom, shuttle)))]
pub(crate) mod sim;
mod stall;
mod watch;
mod worker;

pub use builder::{BuildError, ThreadPoolBuilder};
pub use census::{PoolCensus, census};

/// The timer driver of the pool whose worker this thread is (created on first use), if any:
/// where a `Sleep` polled here registers.
#[cfg(not(any(loom, shuttle)))]
pub(crate) fn current_timer_driver() -> Option<Arc<crate::time::Driver>> {
    worker::with_current_shared(|shared| shared.map(|shared| shared.timer_driver().clone()))
}

/// Without a pool's own timers (the models), every `Sleep` uses the global driver.
#[cfg(any(loom, shuttle))]
pub(crate) fn current_timer_driver() -> Option<Arc<crate::time::Driver>> {
    None
}

pub use metrics::{PoolMetrics, WorkerMetrics};
pub use offer::Offer;
pub use stall::StallReport;
pub use worker::offer_while;

use crate::task::JoinHandle;

pub(crate) use shared::Shared;
use std::future::Future;
use std::sync::Arc;

pub(crate) use worker::{Placement, current_shared, with_current_shared};

/// A multi-threaded, work-stealing executor in the style of Go's scheduler.
///
/// Each worker thread owns a queue of 256 tasks and a next slot; idle workers steal half of
/// another's queue; spawns from outside go through a global queue. A panicking task is caught
/// and reported through its [`JoinHandle`]; the worker keeps serving. Dropping the pool (or
/// [`shutdown`](Self::shutdown)) stops the workers, drops every unfinished task exactly once (its
/// handle resolves [`JoinError::Cancelled`](crate::JoinError::Cancelled)) and joins the threads.
///
/// ```
/// use coro_executor::ThreadPool;
///
/// let pool = ThreadPool::new(2).unwrap();
/// let handles: Vec<_> = (0..10u64).map(|i| pool.spawn(async move { i * i })).collect();
/// let total: u64 = handles.into_iter().map(|h| futures::executor::block_on(h).unwrap()).sum();
/// assert_eq!(total, 285);
/// pool.shutdown();
/// ```
pub struct ThreadPool {
    pub(crate) shared: Arc<Shared>,
    pub(super) threads: Vec<std::thread::JoinHandle<()>>,
}

impl ThreadPool {
    /// Spawns `fut` on this pool. From one of this pool's workers the task goes to that worker's
    /// next slot; from anywhere else, to the global queue.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(2).unwrap();
    /// let handle = pool.spawn(async { "done" });
    /// assert_eq!(futures::executor::block_on(handle).unwrap(), "done");
    /// ```
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.shared.spawn(fut)
    }

    /// Runs blocking code `f` on the pool's blocking threads, so that it does not hold up a
    /// worker. The blocking pool grows on demand up to its bound, and idle threads exit after
    /// the keep-alive.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let handle = pool.spawn_blocking(|| std::fs::metadata(".").is_ok());
    /// assert!(futures::executor::block_on(handle).unwrap());
    /// ```
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.spawn_blocking(f)
    }

    /// Number of worker threads.
    ///
    /// ```
    /// assert_eq!(coro_executor::ThreadPool::new(3).unwrap().worker_threads(), 3);
    /// ```
    pub fn worker_threads(&self) -> usize {
        self.shared.workers
    }

    /// A snapshot of the pool's counters and queue depths.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(2).unwrap();
    /// let m = pool.metrics();
    /// assert_eq!(m.workers.len(), 2);
    /// assert_eq!(m.live_tasks, 0);
    /// ```
    pub fn metrics(&self) -> PoolMetrics {
        self.shared.metrics()
    }

    /// Stops the pool: workers finish the poll they are in and exit, every unfinished task is
    /// dropped exactly once (its handle resolves `Err(JoinError::Cancelled)`), and all threads
    /// are joined; a blocking task already running is waited for. Dropping the pool does the
    /// same.
    ///
    /// ```
    /// use coro_executor::{JoinError, ThreadPool};
    ///
    /// let pool = ThreadPool::new(1).unwrap();
    /// let stuck = pool.spawn(std::future::pending::<()>());
    /// pool.shutdown();
    /// assert!(matches!(futures::executor::block_on(stuck), Err(JoinError::Cancelled)));
    /// ```
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for ThreadPool {
    /// The shutdown order, step by step, is at `Shared::begin_shutdown`.
    fn drop(&mut self) {
        // Steps 1 to 3.
        self.shared.begin_shutdown();
        // Step 4.
        let me = std::thread::current().id();
        let mut all_joined = true;
        for thread in self.threads.drain(..) {
            // Shut down from inside one of its own tasks: that worker cannot be joined from
            // here; it exits (and drains its queue) as soon as the current poll returns.
            if thread.thread().id() == me {
                all_joined = false;
            } else {
                // A worker only panics on a bug in the pool itself; shutdown goes on regardless.
                let _ = thread.join();
            }
        }
        // The monitor is joined: no helper starts any more.
        all_joined &= self.shared.helpers.join_all();
        // Steps 5 to 8.
        self.shared.finish_shutdown(all_joined);
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("worker_threads", &self.worker_threads())
            .field("live_tasks", &self.shared.tasks.live())
            .finish()
    }
}
