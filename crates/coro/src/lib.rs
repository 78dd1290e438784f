//! `coro` brings folly::coro's programming model to Rust: lazy tasks with executor affinity,
//! async stack traces, cooperative cancellation, `collect_all` barriers, shared promises and a
//! fair async shared mutex, on a Go-style multi-threaded work-stealing executor.
//!
//! # A tour
//!
//! Everything runs on [`executor`], the engine: a [`ThreadPool`] of workers with per-worker run
//! queues, work stealing, a blocking pool and a timer wheel.
//!
//! A [`Task`] is a lazy unit of work: creating one runs nothing; awaiting it runs it inline in
//! the awaiter, as a child frame that inherits the awaiter's executor, cancellation token and
//! task-locals. [`Task::schedule_on`] binds a task to an executor instead, and code in a task
//! always runs on its own executor. [`block_wait`] waits for async work from synchronous code.
//!
//! ```
//! use coro::Task;
//!
//! fn fetch(id: u32) -> Task<String> {
//!     Task::new(async move { format!("user {id}") }).named("fetch")
//! }
//!
//! let pool = coro::ThreadPool::new(2).unwrap();
//! let page = Task::new(async {
//!     let a = coro::spawn(fetch(1)); // runs in parallel on the pool
//!     let b = fetch(2).await; // runs inline, here
//!     format!("{}, {b}", a.await.unwrap())
//! })
//! .schedule_on(&pool);
//! assert_eq!(coro::block_wait(page), "user 1, user 2");
//! ```
//!
//! [`trace::current_stack`] shows the chain of tasks awaiting one another; [`cancel`] has
//! cooperative cancellation and [`time`] cancellation-aware sleeps and timeouts; [`task_local!`] declares values that child tasks inherit.
//!
//! [`sync`] shares work and data between tasks: a [`SharedPromise`](sync::SharedPromise) or a
//! [`Task::shared`] computation fans one result out to many waiters, and
//! [`SharedMutexFair`](sync::SharedMutexFair) is a fair reader-writer lock for the state they
//! guard.
//!
//! ```
//! use coro::sync::SharedMutexFair;
//! use std::sync::Arc;
//!
//! let cache = Arc::new(SharedMutexFair::new(std::collections::HashMap::new()));
//! let profile = coro::Task::new(async { "ada".to_string() }).shared();
//! let value = coro::block_wait({
//!     let cache = cache.clone();
//!     async move {
//!         let entry = cache.upgradable_read().await;
//!         if let Some(hit) = entry.get(&1) {
//!             return String::clone(hit);
//!         }
//!         let loaded = profile.await; // one computation, however many ask
//!         entry.upgrade().await.insert(1, loaded.clone());
//!         loaded
//!     }
//! });
//! assert_eq!(value, "ada");
//! assert_eq!(cache.try_read().unwrap().len(), 1);
//! ```

#![warn(missing_docs)]

pub mod cancel;
mod collect;
mod local;
mod task;
pub mod time;
pub mod trace;

#[doc(hidden)]
pub mod __private {
    pub use crate::private::block_wait_timeout;
}
mod private;
mod scope;
pub mod sync;

/// The engine: thread pools, executors, join handles, the blocking pool and timers.
///
/// This is the `coro-executor` crate, re-exported whole.
///
/// ```
/// let pool = coro::executor::ThreadPool::new(2).unwrap();
/// assert_eq!(pool.worker_threads(), 2);
/// ```
pub use coro_executor as executor;

pub use coro_macros::{main, task, test};

pub use collect::{
    __CollectAllTuple, __TryCollectAllTuple, collect_all_range, collect_all_settled_range,
    collect_all_unordered, collect_all_windowed, collect_any, collect_any_no_discard,
    try_collect_all_range, try_collect_any,
};
pub use coro_executor::{ExecutorHandle, JoinError, JoinHandle, ThreadPool, default_pool};
pub use local::{AccessError, LocalKey, Scope};
pub use scope::{AsyncScope, ScopeError, ScopeStatus};
pub use task::{
    Task, TaskWithExecutor, block_wait, current_cancellation_token, current_executor, spawn,
    spawn_blocking, yield_now,
};
