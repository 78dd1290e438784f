//! The engine behind [coro](https://docs.rs/coro): a work-stealing thread pool in the style of
//! Go's scheduler, a blocking pool and a timer wheel. It knows nothing of coro's `Task`
//! semantics and is usable on its own, like `async-executor`.
//!
//! # A tour
//!
//! - [`ThreadPool`] runs tasks on N workers. Each worker has a queue of 256 tasks and a *next
//!   slot* for the task its running task just woke; idle workers steal half of another's queue;
//!   a global queue takes spawns from outside and overflow. [`ThreadPool::metrics`] shows what
//!   the scheduler did.
//! - [`ExecutorHandle`] is the cloneable handle everything spawns through; the [`Executor`] trait
//!   lets any type host tasks, and [`InlineExecutor`] and [`ManualExecutor`] are two small ones.
//! - [`JoinHandle`] awaits a task's result (or [`JoinError`]); dropping it detaches the task.
//! - [`offer_while`] lets a busy worker make work (an [`Offer`]) available to idle workers
//!   without spawning it; the pool's monitor thread wakes an idle worker only if the offer
//!   stays posted, so short stretches of inline work cost no wake-up.
//! - A poll that holds up its worker past [`ThreadPoolBuilder::handoff_after`] (10 ms by
//!   default) gets the tasks queued behind it handed to the other workers by the monitor, or to
//!   a helper thread when every worker is busy (Go's sysmon `retake`): no `block_in_place`.
//! - [`ThreadPool::spawn_blocking`] moves blocking code off the workers.
//! - [`trace`] lists every live task (id, state, async stack) for task dumps.
//! - [`time`] has deadline futures on a hierarchical timer wheel, usable from any executor.
//! - [`sim`] runs a pool's logical workers on one thread as a seeded, replayable simulation,
//!   with a virtual clock for its timers.
//!
//! ```
//! use coro_executor::ThreadPool;
//!
//! let pool = ThreadPool::new(2).unwrap();
//! let handle = pool.spawn(async {
//!     coro_executor::time::sleep(std::time::Duration::from_millis(5)).await;
//!     let from_blocking = coro_executor::spawn_blocking(|| 40).await.unwrap();
//!     from_blocking + 2
//! });
//! assert_eq!(futures::executor::block_on(handle).unwrap(), 42);
//! ```
//!
//! # Guarantees
//!
//! - A task only ever runs on a thread of the executor it was spawned on.
//! - A panic inside a task is caught and reported through its [`JoinHandle`]; workers survive.
//! - Shutting a pool down (or dropping it) drops every unfinished task exactly once, resolves its
//!   handle with [`JoinError::Cancelled`] and joins every thread.

#![deny(missing_docs)]
// The `coro_untraced` build (for measuring what tracing costs) leaves trace bookkeeping unused.
#![cfg_attr(coro_untraced, allow(dead_code))]

mod blocking;
mod executor;
mod inline;
// Under the model checkers only the readiness word and its models (the OS poller cannot run).
#[cfg(any(all(unix, not(any(loom, shuttle))), all(test, any(loom, shuttle))))]
pub mod io;
mod loom;
mod manual;
mod pool;
pub mod sim;
mod task;
pub mod time;
pub mod trace;
mod yield_now;

pub use executor::{Executor, ExecutorHandle};
pub use inline::InlineExecutor;
pub use manual::ManualExecutor;
pub use pool::{
    BuildError, Offer, PoolMetrics, StallReport, ThreadPool, ThreadPoolBuilder, WorkerMetrics,
    offer_while,
};
#[doc(hidden)]
pub use task::TaskRoot;
pub use task::{JoinError, JoinHandle, PanicPayload, Runnable, panic_message};
pub use yield_now::{YieldNow, yield_now};

use std::future::Future;
use std::sync::OnceLock;

/// The pool used by [`spawn`] and [`spawn_blocking`] outside any pool: created on first use with
/// one worker per core, named `coro-default-{index}`, and never shut down.
///
/// ```
/// let pool = coro_executor::default_pool();
/// assert!(pool.worker_threads() >= 1);
/// ```
pub fn default_pool() -> &'static ThreadPool {
    static DEFAULT: OnceLock<ThreadPool> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        ThreadPool::builder()
            .thread_name("coro-default")
            .build()
            .unwrap_or_else(|e| panic!("coro could not start its default thread pool: {e}"))
    })
}

/// Spawns `fut` on the pool whose worker this is, or on the [`default_pool`] elsewhere.
///
/// ```
/// let handle = coro_executor::spawn(async { 1 + 2 });
/// assert_eq!(futures::executor::block_on(handle).unwrap(), 3);
/// ```
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    ExecutorHandle::with_current_pool(|pool| match pool {
        Some(pool) => pool.spawn(fut),
        None => default_pool().spawn(fut),
    })
}

/// Runs blocking `f` on the blocking threads of the pool whose worker this is, or of the
/// [`default_pool`] elsewhere.
///
/// ```
/// let handle = coro_executor::spawn_blocking(|| std::thread::current().name().map(str::to_owned));
/// let name = futures::executor::block_on(handle).unwrap().unwrap();
/// assert!(name.starts_with("coro-default-blocking"));
/// ```
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    match pool::current_shared() {
        Some(shared) => shared.spawn_blocking(f),
        None => default_pool().spawn_blocking(f),
    }
}
