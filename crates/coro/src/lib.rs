//! `coro` brings folly::coro's programming model to Rust: lazy tasks with executor affinity,
//! async stack traces, cooperative cancellation, `collect_all` barriers, shared promises and a
//! fair async shared mutex, on a Go-style multi-threaded work-stealing executor.
//!
//! # A tour
//!
//! Everything runs on [`executor`], the engine: a [`ThreadPool`] of workers with per-worker run
//! queues, work stealing, a blocking pool and a timer wheel. [`spawn`] starts a task on the
//! current pool (or a default pool created on first use) and [`spawn_blocking`] moves blocking
//! code off the workers.
//!
//! ```
//! let handle = coro::spawn(async {
//!     let answer = coro::spawn_blocking(|| 6 * 7).await.unwrap();
//!     answer
//! });
//! assert_eq!(futures::executor::block_on(handle).unwrap(), 42);
//! ```

#![warn(missing_docs)]

/// The engine: thread pools, executors, join handles, the blocking pool and timers.
///
/// This is the `coro-executor` crate, re-exported whole.
///
/// ```
/// let pool = coro::executor::ThreadPool::new(2).unwrap();
/// assert_eq!(pool.worker_threads(), 2);
/// ```
pub use coro_executor as executor;

pub use coro_executor::{
    ExecutorHandle, JoinError, JoinHandle, ThreadPool, default_pool, spawn, spawn_blocking,
};
