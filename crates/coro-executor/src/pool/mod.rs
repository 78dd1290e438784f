//! The work-stealing [`ThreadPool`].
//!
//! - `queue`: each worker's bounded ring (owner push/pop, others steal half);
//! - `shared`: what all workers share: the remotes (stealing ends, next slots, parkers, counters),
//!   the global queue, the idle bookkeeping and the task list;
//! - `worker`: the worker loop and scheduling from inside a worker;
//! - `idle`: who searches and who sleeps, and so whom to wake;
//! - `park`: how a worker sleeps;
//! - `offer`: work a busy worker makes available to idle ones without spawning it;
//! - `monitor`: the thread that wakes a parked worker for an offer that stays posted, and
//!   watches for polls that hold up their worker;
//! - `handoff`: what it does then: hand the queued work to others, or to a helper thread;
//! - `stall`: naming the polls that run past a threshold, through a user hook;
//! - `tasks`: the live-task list that shutdown drains;
//! - `metrics`, `builder`: the public snapshot and configuration types.

mod builder;
mod handoff;
mod idle;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_offer;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_park;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_protocol;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_queue;
mod metrics;
mod monitor;
mod offer;
pub(crate) mod park;
pub(crate) mod queue;
mod reaper;
mod shared;
mod stall;
mod worker;

pub use builder::{BuildError, ThreadPoolBuilder};

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
pub use offer::{Offer, offer_while};
pub use stall::StallReport;

use crate::blocking::BlockingPool;
use crate::task::JoinHandle;
use builder::BuildErrorKind;
use shared::Remote;
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
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl ThreadPool {
    /// A pool of `worker_threads` workers with default settings otherwise.
    ///
    /// ```
    /// let err = coro_executor::ThreadPool::new(0).unwrap_err();
    /// assert!(err.to_string().contains("at least 1 worker"));
    /// ```
    pub fn new(worker_threads: usize) -> Result<ThreadPool, BuildError> {
        Self::builder().worker_threads(worker_threads).build()
    }

    /// A builder for the other settings (thread names, the blocking pool).
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::builder().worker_threads(1).build().unwrap();
    /// assert_eq!(pool.worker_threads(), 1);
    /// ```
    pub fn builder() -> ThreadPoolBuilder {
        ThreadPoolBuilder::new()
    }

    pub(crate) fn from_builder(config: ThreadPoolBuilder) -> Result<ThreadPool, BuildError> {
        let workers = match config.worker_threads {
            Some(0) => {
                return Err(BuildError {
                    kind: BuildErrorKind::NoWorkers,
                });
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if workers > 65_534 {
            return Err(BuildError {
                kind: BuildErrorKind::TooManyWorkers(workers),
            });
        }
        let stall = config.stall_config()?;
        if config.max_blocking_threads == 0 {
            return Err(BuildError {
                kind: BuildErrorKind::NoBlockingThreads,
            });
        }
        // One queue per worker, then one per spare slot for handoff helpers (as many as workers).
        let (mut locals, remotes): (Vec<_>, Vec<_>) = (0..2 * workers)
            .map(|_| {
                let (local, steal) = queue::local();
                (local, Remote::new(steal))
            })
            .unzip();
        let spare_locals = locals.split_off(workers);
        let helpers = handoff::Helpers::new(workers, spare_locals, config.thread_name.clone());
        let blocking = BlockingPool::new(
            format!("{}-blocking", config.thread_name),
            config.max_blocking_threads,
            config.blocking_keep_alive,
        );
        let shared = Arc::new(Shared::with_spares(
            remotes.into_boxed_slice(),
            workers,
            helpers,
            blocking,
            shared::Options {
                handoff_after: config.handoff_after,
                stall,
                thread_name: config.thread_name.clone(),
            },
        ));
        crate::task::registry::register(&shared.tasks);
        let mut pool = ThreadPool {
            shared: shared.clone(),
            threads: Vec::with_capacity(workers),
        };
        for (index, local) in locals.into_iter().enumerate() {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{index}", config.thread_name))
                .spawn(move || worker::run(shared, index, local));
            match spawned {
                Ok(thread) => pool.threads.push(thread),
                // Dropping `pool` shuts down the workers already started.
                Err(e) => {
                    return Err(BuildError {
                        kind: BuildErrorKind::Spawn(e),
                    });
                }
            }
        }
        {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-monitor", config.thread_name))
                .spawn(move || monitor::run(shared));
            match spawned {
                Ok(thread) => pool.threads.push(thread),
                Err(e) => {
                    return Err(BuildError {
                        kind: BuildErrorKind::Spawn(e),
                    });
                }
            }
        }
        Ok(pool)
    }

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
        self.shared.blocking.spawn(f)
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
        let shared = &self.shared;
        let (blocking_threads, blocking_queue_depth) = shared.blocking.stats();
        PoolMetrics {
            workers: shared.remotes[..shared.workers]
                .iter()
                .map(Remote::snapshot)
                .collect(),
            global_queue_depth: shared.inject.len(),
            live_tasks: shared.tasks.live(),
            searching_workers: shared.idle.num_searching(),
            max_searching_workers: shared.idle.max_searching(),
            blocking_threads,
            blocking_queue_depth,
            helpers_started: shared.helpers.started(),
            helpers: shared.remotes[shared.workers..].iter().fold(
                WorkerMetrics::default(),
                |mut sum, r| {
                    sum.add(&r.snapshot());
                    sum
                },
            ),
        }
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
    fn drop(&mut self) {
        self.shared.begin_shutdown();
        let me = std::thread::current().id();
        for thread in self.threads.drain(..) {
            // Shut down from inside one of its own tasks: that worker cannot be joined from
            // here; it exits (and drains its queue) as soon as the current poll returns.
            if thread.thread().id() != me {
                // A worker only panics on a bug in the pool itself; shutdown goes on regardless.
                let _ = thread.join();
            }
        }
        // The monitor is joined: no helper starts any more.
        self.shared.helpers.join_all();
        self.shared.finish_shutdown();
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
