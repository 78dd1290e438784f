//! [`JoinHandle`] and [`JoinError`]: the result side of a spawned task.

use crate::trace::TaskHeader;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A panic payload, as `std::panic::catch_unwind` returns it.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;

/// Why a task did not produce its value.
///
/// ```
/// use coro_executor::{JoinError, ThreadPool};
///
/// let pool = ThreadPool::new(1).unwrap();
/// let handle = pool.spawn(async { panic!("boom") });
/// match futures::executor::block_on(handle) {
///     Err(JoinError::Panicked(payload)) => {
///         assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
///     }
///     other => panic!("unexpected {other:?}"),
/// }
/// ```
pub enum JoinError {
    /// The task panicked; the payload is what `panic!` was given. Resume it with
    /// `std::panic::resume_unwind` to propagate the panic.
    Panicked(Panic),
    /// The task was dropped before it finished: [`JoinHandle::cancel`], or its executor shut down.
    Cancelled,
}

impl JoinError {
    /// Whether the task panicked.
    ///
    /// ```
    /// assert!(!coro_executor::JoinError::Cancelled.is_panic());
    /// ```
    pub fn is_panic(&self) -> bool {
        matches!(self, JoinError::Panicked(_))
    }

    /// Whether the task was cancelled.
    ///
    /// ```
    /// assert!(coro_executor::JoinError::Cancelled.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        matches!(self, JoinError::Cancelled)
    }

    /// The panic payload, if the task panicked; `Err(self)` otherwise.
    ///
    /// ```
    /// let err = coro_executor::JoinError::Cancelled;
    /// assert!(err.try_into_panic().is_err());
    /// ```
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self {
            JoinError::Panicked(payload) => Ok(payload),
            other => Err(other),
        }
    }
}

/// The message of a panic payload, when it is a string (as `panic!` makes it).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(payload) => match panic_message(payload.as_ref()) {
                Some(msg) => f.debug_tuple("Panicked").field(&msg).finish(),
                None => f.write_str("Panicked(..)"),
            },
            JoinError::Cancelled => f.write_str("Cancelled"),
        }
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JoinError::Panicked(payload) => match panic_message(payload.as_ref()) {
                Some(msg) => write!(f, "task panicked: {msg}"),
                None => f.write_str("task panicked"),
            },
            JoinError::Cancelled => f.write_str("task was cancelled before it finished"),
        }
    }
}

impl std::error::Error for JoinError {}

/// Owned permission to await a spawned task's result.
///
/// Awaiting it gives `Ok(value)`, or a [`JoinError`] if the task panicked or was dropped unfinished.
/// Dropping the handle *detaches* the task: it keeps running and its result is discarded.
///
/// ```
/// use coro_executor::ThreadPool;
///
/// let pool = ThreadPool::new(2).unwrap();
/// let handle = pool.spawn(async { 6 * 7 });
/// assert_eq!(futures::executor::block_on(handle).unwrap(), 42);
/// ```
#[must_use = "dropping a JoinHandle detaches the task; call .detach() to say so"]
pub struct JoinHandle<T> {
    task: Option<async_task::FallibleTask<Outcome<T>, TaskHeader>>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: crate::task::RawTask<T>) -> Self {
        JoinHandle {
            task: Some(task.fallible()),
        }
    }

    /// Cancels the task: its future is dropped (its destructors run) on its executor as soon as
    /// it is not being polled, and never polled again. Returns without waiting for that.
    ///
    /// ```
    /// use coro_executor::ThreadPool;
    ///
    /// let pool = ThreadPool::new(1).unwrap();
    /// let handle = pool.spawn(std::future::pending::<()>());
    /// handle.cancel();
    /// ```
    pub fn cancel(mut self) {
        // Dropping an async-task handle without detaching it cancels the task.
        drop(self.task.take());
    }

    /// Lets the task run to completion on its own, discarding its result (the same as dropping
    /// the handle, but says so).
    ///
    /// ```
    /// use coro_executor::ThreadPool;
    ///
    /// let pool = ThreadPool::new(1).unwrap();
    /// pool.spawn(async { println!("fire and forget") }).detach();
    /// ```
    pub fn detach(mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }

    /// Whether the task has finished: completed, panicked or been cancelled.
    ///
    /// ```
    /// use coro_executor::{ManualExecutor, ExecutorHandle};
    ///
    /// let ex = ManualExecutor::new();
    /// let handle = ex.handle().spawn(async {});
    /// assert!(!handle.is_finished());
    /// ex.run_until_idle();
    /// assert!(handle.is_finished());
    /// ```
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.detach();
        }
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = self
            .task
            .as_mut()
            .expect("JoinHandle polled after it completed");
        match Pin::new(task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(outcome) => {
                // Detaching a finished task is free; clearing the slot makes a second poll a
                // clear error rather than a hang.
                self.task = None;
                Poll::Ready(match outcome.map(Outcome::into_inner) {
                    Some(Ok(value)) => Ok(value),
                    Some(Err(payload)) => Err(JoinError::Panicked(payload)),
                    None => Err(JoinError::Cancelled),
                })
            }
        }
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// A task's outcome as async-task stores it: its value, or the payload of its panic. Its Drop
/// catches a panic in the value's (or the payload's) destructor: async-task drops an outcome
/// nobody took (a detached task's) under an abort-on-panic guard, and a user's destructor must
/// not abort the process. (The panic hook has reported the panic when it happened.)
pub(crate) struct Outcome<T>(ManuallyDrop<Result<T, Panic>>);

impl<T> Outcome<T> {
    pub(crate) fn new(outcome: Result<T, Panic>) -> Self {
        Outcome(ManuallyDrop::new(outcome))
    }

    pub(crate) fn into_inner(self) -> Result<T, Panic> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once; `this` is never dropped, so the value is not dropped again.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Drop for Outcome<T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; the field is not used afterwards.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.0)
        }));
    }
}

/// Drops `value`, catching a panic in its destructor; returns the panic's payload if any.
pub(crate) fn drop_catching<T>(value: T) -> Option<Panic> {
    catch_unwind(AssertUnwindSafe(move || drop(value))).err()
}

/// Runs a future, turning a panic in `poll` into `Err(payload)` so that it reaches the
/// [`JoinHandle`] instead of unwinding through the worker.
pub(crate) struct CatchUnwind<F> {
    future: F,
}

impl<F> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind { future }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self`, and
        // `CatchUnwind` has no Drop impl and no Unpin impl that would let it move.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        // A panicking future is never polled again (async-task drops it after Ready), so the
        // state it unwound through cannot be observed broken: AssertUnwindSafe is sound here.
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}
