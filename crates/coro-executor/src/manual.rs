//! [`ManualExecutor`]: a queue that runs tasks only when told to, for tests and custom loops.

use crate::executor::{Executor, ExecutorHandle};
use crate::task::Runnable;
use concurrent_queue::ConcurrentQueue;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};

/// An executor that queues tasks until [`run_one`](Self::run_one) or
/// [`run_until_idle`](Self::run_until_idle) runs them, in FIFO order, on the calling thread.
///
/// Deterministic, so tests can observe exactly what was scheduled. Clones share the queue. When
/// the last `ManualExecutor` value is dropped nothing can run its tasks any more: those queued
/// are dropped then (their handles resolve `Err(JoinError::Cancelled)`), and so is any task
/// woken later.
///
/// ```
/// use coro_executor::ManualExecutor;
///
/// let ex = ManualExecutor::new();
/// let join = ex.handle().spawn(async { 7 });
/// assert_eq!(ex.pending(), 1);
/// assert_eq!(ex.run_until_idle(), 1);
/// assert_eq!(futures::executor::block_on(join).unwrap(), 7);
/// ```
pub struct ManualExecutor {
    inner: Arc<Queue>,
}

struct Queue {
    runnables: ConcurrentQueue<Runnable>,
    /// Live `ManualExecutor` values (handles do not count: they cannot run anything).
    owners: AtomicUsize,
}

impl Executor for Queue {
    fn schedule(&self, runnable: Runnable) {
        // Closed once the last owner is gone: dropping the runnable drops the task.
        if let Err(closed) = self.runnables.push(runnable) {
            drop(closed.into_inner());
        }
    }
}

impl ManualExecutor {
    /// An empty executor.
    ///
    /// ```
    /// assert_eq!(coro_executor::ManualExecutor::new().pending(), 0);
    /// ```
    pub fn new() -> Self {
        let queue = Queue {
            runnables: ConcurrentQueue::unbounded(),
            owners: AtomicUsize::new(1),
        };
        ManualExecutor {
            inner: Arc::new(queue),
        }
    }

    /// A handle that schedules onto this executor; all handles of one `ManualExecutor` (and its
    /// clones) are equal.
    ///
    /// ```
    /// let ex = coro_executor::ManualExecutor::new();
    /// assert_eq!(ex.handle(), ex.clone().handle());
    /// ```
    pub fn handle(&self) -> ExecutorHandle {
        ExecutorHandle::from_arc(self.inner.clone())
    }

    /// Runs the oldest queued task, if any. Returns whether one ran.
    ///
    /// ```
    /// let ex = coro_executor::ManualExecutor::new();
    /// assert!(!ex.run_one());
    /// ex.handle().spawn(async {}).detach();
    /// assert!(ex.run_one());
    /// ```
    pub fn run_one(&self) -> bool {
        match self.inner.runnables.pop() {
            Ok(runnable) => {
                runnable.run();
                true
            }
            Err(_) => false,
        }
    }

    /// Runs tasks until the queue is empty, including tasks they schedule. Returns how many ran.
    ///
    /// ```
    /// let ex = coro_executor::ManualExecutor::new();
    /// let handle = ex.handle();
    /// let inner = handle.clone();
    /// handle.spawn(async move { inner.spawn(async {}).detach() }).detach();
    /// assert_eq!(ex.run_until_idle(), 2);
    /// ```
    pub fn run_until_idle(&self) -> usize {
        let mut ran = 0;
        while self.run_one() {
            ran += 1;
        }
        ran
    }

    /// Tasks queued and not yet run.
    ///
    /// ```
    /// let ex = coro_executor::ManualExecutor::new();
    /// ex.handle().spawn(async {}).detach();
    /// assert_eq!(ex.pending(), 1);
    /// ```
    pub fn pending(&self) -> usize {
        self.inner.runnables.len()
    }
}

impl Clone for ManualExecutor {
    fn clone(&self) -> Self {
        self.inner.owners.fetch_add(1, Relaxed);
        ManualExecutor {
            inner: self.inner.clone(),
        }
    }
}

impl Drop for ManualExecutor {
    fn drop(&mut self) {
        if self.inner.owners.fetch_sub(1, AcqRel) == 1 {
            // Queued runnables hold their task, whose schedule function holds this queue: a
            // cycle nothing else would break. Close the queue and drop them.
            self.inner.runnables.close();
            while let Ok(runnable) = self.inner.runnables.pop() {
                drop(runnable);
            }
        }
    }
}

impl Default for ManualExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ManualExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualExecutor")
            .field("pending", &self.pending())
            .finish()
    }
}
