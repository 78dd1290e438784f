//! [`detach_on_cancel`]: stop waiting for an operation that cannot be cancelled, and let it
//! finish on its own.

use super::{Cancelled, WaitForCancellation};
use crate::task::{Task, current_cancellation_token, spawn};
use coro_executor::{JoinError, JoinHandle};
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Awaits `fut`, but returns `Err(Cancelled)` as soon as the current task's cancellation token
/// fires, leaving `fut` to finish detached on the executor (folly's `detachOnCancel`).
///
/// This is for operations that do not respond to cancellation (a call into a blocking library
/// through a channel, a future from elsewhere): the caller stops waiting at once, the operation
/// runs to its end, and nothing is leaked: when it finishes, its future and its output are
/// dropped on the executor.
///
/// - When first polled, the current task's token is checked: if it is already cancelled, the
///   result is `Err(Cancelled)` at once and `fut` is dropped without ever being polled (nobody
///   would be left to see its result; folly starts the operation regardless and lets it see the
///   cancelled token). Otherwise `fut` is spawned with [`spawn`](crate::spawn) on the current
///   executor (the default pool outside any), as a task named after its type.
/// - The spawned operation inherits the caller's token and task-locals, as in folly: one that
///   does watch the token may stop early on its own; `detach_on_cancel` just does not wait for it.
/// - If the operation finishes first, the result is `Ok(output)` (a finished result wins over a
///   cancellation seen in the same poll). If it panics, the panic resumes in the awaiter, as if
///   `fut` had been awaited directly. If its executor shuts down and drops it unfinished, the
///   result is `Err(Cancelled)`.
/// - Dropping this future before it completes *detaches* the operation as well (it is not
///   cancelled: it runs to completion and its output is dropped); dropping it before its first
///   poll drops `fut` unstarted.
///
/// `fut` must be `Send + 'static`, and so must its output, since it may outlive the caller:
/// anything it uses must be owned (moved in or shared through an `Arc`), never borrowed.
///
/// The operation finishes on the executor it was spawned on, so that executor must keep running:
/// a pool, or a [`ManualExecutor`](coro_executor::ManualExecutor) that is driven on. Under a
/// bare [`block_wait`](crate::block_wait) the executor is the waiting thread's own loop, which
/// ends when `block_wait` returns: an operation still detached then is dropped unfinished (once,
/// without leaking) rather than completed.
///
/// ```
/// use std::time::Duration;
/// use coro::cancel::{CancellationSource, Cancelled, detach_on_cancel};
///
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let source = CancellationSource::new();
/// let canceller = source.clone();
/// std::thread::spawn(move || {
///     std::thread::sleep(Duration::from_millis(10));
///     canceller.request_cancellation();
/// });
/// let caller = coro::Task::new(detach_on_cancel(async move {
///     // Does not watch the token: the executor's own timer ignores cancellation.
///     coro::executor::time::sleep(Duration::from_millis(50)).await;
///     tx.send("finished").unwrap();
/// }))
/// .with_cancellation(source.token())
/// .schedule_on(&pool);
/// assert_eq!(coro::block_wait(caller), Err(Cancelled)); // after about 10 ms
/// assert_eq!(rx.recv().unwrap(), "finished"); // the operation ran on, on the pool
///
/// assert_eq!(coro::block_wait(detach_on_cancel(async { 6 * 7 })), Ok(42));
/// ```
#[track_caller]
pub fn detach_on_cancel<F>(fut: F) -> DetachOnCancel<F::Output>
where
    F: IntoFuture,
    F::IntoFuture: Send + 'static,
    F::Output: Send + 'static,
{
    DetachOnCancel {
        state: State::Unstarted(Task::new(fut.into_future())),
    }
}

/// The future returned by [`detach_on_cancel`].
///
/// ```
/// let quick: coro::cancel::DetachOnCancel<i32> = coro::cancel::detach_on_cancel(async { 1 });
/// assert_eq!(coro::block_wait(quick), Ok(1));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct DetachOnCancel<T> {
    state: State<T>,
}

enum State<T> {
    /// Not polled yet: the operation, wrapped in a task that has not started.
    Unstarted(Task<T>),
    /// Spawned; `wait` is `None` when the caller's token can never be cancelled.
    Running {
        handle: JoinHandle<T>,
        wait: Option<WaitForCancellation>,
    },
    Done,
}

impl<T: Send + 'static> Future for DetachOnCancel<T> {
    type Output = Result<T, Cancelled>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let state = &mut self.state;
        if let State::Unstarted(_) = state {
            let token = current_cancellation_token();
            let State::Unstarted(task) = std::mem::replace(state, State::Done) else {
                unreachable!()
            };
            if token.is_cancellation_requested() {
                drop(task);
                return Poll::Ready(Err(Cancelled));
            }
            let wait = token.can_be_cancelled().then(|| token.cancelled());
            *state = State::Running {
                handle: spawn(task),
                wait,
            };
        }
        let State::Running { handle, wait } = state else {
            panic!("a detach_on_cancel future was polled after it completed");
        };
        if let Poll::Ready(outcome) = Pin::new(handle).poll(cx) {
            *state = State::Done;
            return Poll::Ready(match outcome {
                Ok(value) => Ok(value),
                Err(JoinError::Panicked(payload)) => std::panic::resume_unwind(payload),
                Err(JoinError::Cancelled) => Err(Cancelled),
            });
        }
        if let Some(wait) = wait
            && Pin::new(wait).poll(cx).is_ready()
        {
            // Dropping the handle detaches the operation: it runs on, and its output is dropped
            // when it finishes.
            *state = State::Done;
            return Poll::Ready(Err(Cancelled));
        }
        Poll::Pending
    }
}

impl<T> fmt::Debug for DetachOnCancel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Unstarted(_) => "unstarted",
            State::Running { .. } => "running",
            State::Done => "done",
        };
        f.debug_struct("DetachOnCancel")
            .field("state", &state)
            .finish()
    }
}
