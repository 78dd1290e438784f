//! [`cancellable`] and [`safe_point`]: making any wait respond to the current task's token.

use super::{CancellationToken, Cancelled, WaitForCancellation};
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
        token: None,
        wait: None,
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
    token: Option<CancellationToken>,
    wait: Option<WaitForCancellation>,
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
        let token = this.token.get_or_insert_with(current_cancellation_token);
        if !token.can_be_cancelled() {
            return Poll::Pending;
        }
        let wait = this.wait.get_or_insert_with(|| token.cancelled());
        if token.is_cancellation_requested() || Pin::new(wait).poll(cx).is_ready() {
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
