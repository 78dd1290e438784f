//! [`ManualExecutor`]: a queue that runs tasks only when told to, for tests and custom loops.

use crate::executor::{Executor, ExecutorHandle, Runnable};
use concurrent_queue::ConcurrentQueue;
use std::sync::Arc;

/// An executor that queues tasks until [`run_one`](Self::run_one) or
/// [`run_until_idle`](Self::run_until_idle) runs them, in FIFO order, on the calling thread.
///
/// Deterministic, so tests can observe exactly what was scheduled. Clones share the queue.
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
#[derive(Clone)]
pub struct ManualExecutor {
    inner: Arc<Queue>,
}

struct Queue(ConcurrentQueue<Runnable>);

impl Executor for Queue {
    fn schedule(&self, runnable: Runnable) {
        // The queue is unbounded and never closed.
        self.0
            .push(runnable)
            .expect("manual executor queue is never closed");
    }
}

impl ManualExecutor {
    /// An empty executor.
    ///
    /// ```
    /// assert_eq!(coro_executor::ManualExecutor::new().pending(), 0);
    /// ```
    pub fn new() -> Self {
        ManualExecutor {
            inner: Arc::new(Queue(ConcurrentQueue::unbounded())),
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
        match self.inner.0.pop() {
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
        self.inner.0.len()
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
