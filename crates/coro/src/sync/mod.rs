//! Synchronisation for tasks: fan-out and fair locking.
//!
//! - [`SharedPromise`] / [`SharedFuture`]: one value, any number of waiters;
//! - [`SharedTask`] ([`Task::shared`](crate::Task::shared)): one computation, any number of
//!   awaiters;
//! - [`SharedMutexFair`]: folly's fair reader-writer lock with upgradable reads;
//! - [`Mutex`]: a strictly FIFO mutex; [`Semaphore`]: a FIFO counting semaphore;
//! - [`Baton`]: a manual-reset event for many waiters; [`Latch`]: a countdown that opens once;
//!   [`Barrier`]: `n` tasks meet, generation after generation.
//!
//! Every waiter resumes through its own waker, so it continues on its own executor, and a
//! releasing task never runs a waiter inline. Every wait is cancel-safe under drop: a dropped
//! waiting future leaves its queue, and passes on whatever it had just been granted, so
//! [`cancellable`](crate::cancel::cancellable) turns any of them into a cancellable wait.
//!
//! ```
//! use coro::cancel::{CancellationSource, cancellable};
//! use coro::sync::SharedMutexFair;
//!
//! let source = CancellationSource::new();
//! let token = source.token();
//! let value = coro::block_wait(coro::Task::new(async move {
//!     let lock = SharedMutexFair::new(0);
//!     let reader = lock.read().await;
//!     source.request_cancellation();
//!     // The writer would wait behind the reader; cancellation ends the wait instead.
//!     assert!(cancellable(lock.write()).await.is_err());
//!     drop(reader);
//!     *lock.write().await += 1; // the abandoned wait left nothing behind
//!     lock.into_inner()
//! }).with_cancellation(token));
//! assert_eq!(value, 1);
//! ```
//!
//! Layout: `waiters` (the FIFO waiter list and the waiting future the locks share), `wakers`
//! (the waker slab a promise and a baton drain at once),
//! `shared_mutex`, `mutex`, `semaphore`, `baton`, `latch`, `barrier`, `promise`, `shared_task`.

mod barrier;
mod baton;
mod holders;
mod latch;
mod mutex;
mod promise;
mod semaphore;
mod shared_mutex;
mod shared_task;
pub(crate) mod waiters;
mod wakers;

#[cfg(all(test, loom))]
mod loom_sync;

pub use barrier::{Barrier, BarrierWait, BarrierWaitResult};
pub use baton::{Baton, Wait};
pub use latch::Latch;
pub use mutex::{Lock, Mutex, MutexGuard};
pub use promise::{SharedFuture, SharedPromise};
pub use semaphore::{Acquire, Semaphore, SemaphorePermit};
pub use shared_mutex::{
    Read, ReadGuard, SharedMutexFair, UpgradableRead, UpgradableReadGuard, Upgrade, Write,
    WriteGuard,
};
pub use shared_task::SharedTask;

pub(crate) use holders::holders_of;
pub(crate) use wakers::wake_each;

use std::fmt;

/// [`SharedPromise::set_value`] on a promise already fulfilled.
///
/// ```
/// let err = coro::sync::PromiseAlreadySatisfied;
/// assert_eq!(err.to_string(), "the promise already has a value");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PromiseAlreadySatisfied;

impl fmt::Display for PromiseAlreadySatisfied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the promise already has a value")
    }
}

impl std::error::Error for PromiseAlreadySatisfied {}

/// What a [`SharedFuture`] resolves to when its promise was dropped without a value.
///
/// ```
/// let err = coro::sync::BrokenPromise;
/// assert_eq!(err.to_string(), "the promise was dropped without a value");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BrokenPromise;

impl fmt::Display for BrokenPromise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the promise was dropped without a value")
    }
}

impl std::error::Error for BrokenPromise {}
