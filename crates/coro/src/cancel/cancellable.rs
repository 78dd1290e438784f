//! [`cancellable`] and [`safe_point`]: making any wait respond to the current task's token.

use super::{Cancelled, WaitForCancellation};
use crate::task::current_cancellation_token;
use pin_project::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs `fut` until it completes or the current task's cancellation token fires.
///
/// `fut` is polled first, so a result that is ready wins over cancellation. Once the token
/// (the task's token when this future is first polled) is cancelled, `fut` is dropped and the
/// result is `Err(Cancelled)`. Every wait in coro is cancel-safe under drop, so this one adapter
/// makes any of them cancellable.
///
/// ```
/// use coro::cancel::{CancellationSource, Cancelled, cancellable};
///
/// let source = CancellationSource::new();
/// source.request_cancellation();
/// let task = coro::Task::new(async {
///     cancellable(std::future::pending::<()>()).await
/// })
/// .with_cancellation(source.token());
/// assert_eq!(coro::block_wait(task), Err(Cancelled));
/// ```
pub fn cancellable<F: Future>(fut: F) -> Cancellable<F> {
    Cancellable {
        fut: Some(fut),
        watch: Watch::Unread,
    }
}

/// The future returned by [`cancellable`].
///
/// ```
/// let ready: coro::cancel::Cancellable<_> = coro::cancel::cancellable(async { 3 });
/// assert_eq!(coro::block_wait(ready), Ok(3));
/// ```
#[pin_project]
#[must_use = "futures do nothing unless awaited"]
pub struct Cancellable<F> {
    #[pin]
    fut: Option<F>,
    watch: Watch,
}

/// What a [`Cancellable`] knows of its task's token. One field rather than the token and its
/// wait side by side: the wait holds the token already (a timer or timeout is 16 bytes
/// smaller for it).
enum Watch {
    /// Not polled pending yet: the token is read at the first pending poll.
    Unread,
    /// The task's token can never be cancelled: nothing to watch.
    Never,
    /// Registered with the token, to be woken by its cancellation.
    Waiting(WaitForCancellation),
}

impl<F: Future> Future for Cancellable<F> {
    type Output = Result<F::Output, Cancelled>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(fut) = this.fut.as_mut().as_pin_mut() else {
            panic!("a cancellable future was polled after it completed");
        };
        if let Poll::Ready(value) = fut.poll(cx) {
            this.fut.set(None);
            return Poll::Ready(Ok(value));
        }
        if let Watch::Unread = this.watch {
            let token = current_cancellation_token();
            *this.watch = if token.can_be_cancelled() {
                Watch::Waiting(token.cancelled())
            } else {
                Watch::Never
            };
        }
        let Watch::Waiting(wait) = this.watch else {
            return Poll::Pending;
        };
        // The wait reports a cancellation requested already without registering.
        if Pin::new(wait).poll(cx).is_ready() {
            // Dropped now, not when this future is: cancellation releases what it held.
            this.fut.set(None);
            return Poll::Ready(Err(Cancelled));
        }
        Poll::Pending
    }
}

impl<F> fmt::Debug for Cancellable<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancellable")
            .field("done", &self.fut.is_none())
            .finish()
    }
}

/// `Err(Cancelled)` if the current task's cancellation token has fired: a place for long
/// synchronous work to stop early.
///
/// ```
/// use coro::cancel::{CancellationSource, safe_point};
///
/// let source = CancellationSource::new();
/// let task = coro::Task::new(async { safe_point() }).with_cancellation(source.token());
/// source.request_cancellation();
/// assert!(coro::block_wait(task).is_err());
/// assert!(safe_point().is_ok()); // outside tasks nothing is cancelled
/// ```
pub fn safe_point() -> Result<(), Cancelled> {
    if current_cancellation_token().is_cancellation_requested() {
        Err(Cancelled)
    } else {
        Ok(())
    }
}
