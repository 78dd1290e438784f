//! [`JoinHandle`] and [`JoinError`]: the result side of a spawned task.

use super::current::is_task_waker;
use super::header::TaskHeader;
use super::panic::Outcome;
use super::panic::{PanicPayload, drop_catching, panic_message};
use crate::loom::sync::Mutex;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

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
    Panicked(PanicPayload),
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
/// The waker it is polled with may panic: in `clone` (or in `drop`, when a later poll replaces
/// it) the poll panics, with the handle intact; in `wake` or `drop` on the thread that completes
/// the task, the panic is caught there and reported by the panic hook.
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
    /// The awaiter's waker, relayed to async-task (see [`Awaiter`]); made by the first poll
    /// with a waker other than the polling task's own.
    awaiter: Option<Arc<Awaiter>>,
    /// The task's id, and the awaiting task's registration of this wait while it waits, for
    /// snapshots (`trace/wait.rs`).
    id: u64,
    wait: Option<crate::trace::WaitRegistration>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: super::runnable::RawTask<T>) -> Self {
        JoinHandle {
            id: task.metadata().id(),
            task: Some(task.fallible()),
            awaiter: None,
            wait: None,
        }
    }

    /// Cancels the task: its future is dropped (its destructors run) on its executor as soon as
    /// it is not being polled, and never polled again. Returns without waiting for that.
    ///
    /// ```
    /// use coro_executor::ThreadPool;
    ///
    /// let pool = ThreadPool::new(1).unwrap();
    /// let (tx, rx) = futures::channel::oneshot::channel::<()>();
    /// let handle = pool.spawn(async move {
    ///     let _tx = tx;
    ///     std::future::pending::<()>().await
    /// });
    /// handle.cancel();
    /// // The future was dropped, and the sender it held with it.
    /// assert!(futures::executor::block_on(rx).is_err());
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
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// pool.spawn(async move { tx.send("fire and forget").unwrap() }).detach();
    /// assert_eq!(rx.recv().unwrap(), "fire and forget"); // it ran without its handle
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
        let this = &mut *self;
        let task = this
            .task
            .as_mut()
            .expect("JoinHandle polled after it completed");
        if is_task_waker(cx.waker()) {
            // The polling task's own waker runs no user code (see `TASK_WAKER`): no relay.
            let polled = Pin::new(task).poll(cx);
            return this.take_outcome(polled);
        }
        let awaiter = this.awaiter.get_or_insert_with(Default::default);
        // Before the task sees the relay: a completion from now on wakes this waker.
        awaiter.set(cx.waker());
        let relay = Waker::from(awaiter.clone());
        let polled = Pin::new(task).poll(&mut Context::from_waker(&relay));
        this.take_outcome(polled)
    }
}

impl<T> JoinHandle<T> {
    /// The handle's result once async-task's poll is ready.
    fn take_outcome(&mut self, polled: Poll<Option<Outcome<T>>>) -> Poll<Result<T, JoinError>> {
        match polled {
            Poll::Pending => {
                if self.wait.is_none() {
                    let awaited = crate::trace::WaitOn::Task(self.id);
                    self.wait = Some(crate::trace::wait_on(awaited));
                }
                Poll::Pending
            }
            Poll::Ready(outcome) => {
                self.wait = None;
                // Detaching a finished task is free; clearing the slot makes a second poll a
                // clear error rather than a hang.
                self.task = None;
                // The awaiter's waker is not needed any more.
                self.awaiter = None;
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

/// Where a [`JoinHandle`] keeps its awaiter's waker, and the waker async-task is given
/// instead of the awaiter's own (unless the awaiter's is a coro task's own, see `TASK_WAKER`).
///
/// async-task clones, wakes and drops the waker a task handle is polled with under its
/// abort-on-panic guard, and a waker is user code: a waker whose `clone`, `wake` or `drop`
/// panicked aborted the process. The relay waker (an `Arc` of this) cannot panic. The awaiter's
/// own waker is cloned and replaced in [`JoinHandle::poll`], where a panic reaches the poller
/// with nothing registered half-way; it is woken and dropped here, on the thread that completes
/// the task, catching a panic (the panic hook has reported it; nobody else could be told).
#[derive(Default)]
struct Awaiter {
    waker: Mutex<Option<Waker>>,
}

impl Awaiter {
    /// Makes `waker` the one to wake, unless it already is. Clones the new one and drops the
    /// old one outside the lock: both are user code, and the relay may be taking the waker
    /// concurrently (then the new one is stored afterwards: async-task, polled next, sees the
    /// completion and the handle is ready).
    fn set(&self, waker: &Waker) {
        if self.lock().as_ref().is_some_and(|w| w.will_wake(waker)) {
            return;
        }
        let new = waker.clone();
        let old = self.lock().replace(new);
        drop(old);
    }

    fn take(&self) -> Option<Waker> {
        self.lock().take()
    }

    fn lock(&self) -> crate::loom::sync::MutexGuard<'_, Option<Waker>> {
        // Only this file's one-line sections touch the slot, and none can panic with it held.
        self.waker.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Wake for Awaiter {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Taken out of the lock first: waking may poll the handle at once (an inline executor).
        if let Some(waker) = self.take() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(move || waker.wake())) {
                drop_catching(payload);
            }
        }
    }
}

impl Drop for Awaiter {
    fn drop(&mut self) {
        // The last reference may be async-task's, dropped under its guard.
        if let Some(waker) = self.take() {
            drop_catching(waker);
        }
    }
}
