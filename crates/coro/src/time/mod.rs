//! Time: cancellation-aware sleeps and timeouts on the executor's timer wheel,
//! usable under every executor, and [`Instant`], the clock they go by (virtual inside a
//! [`sim`](crate::sim) simulation).

mod instant;
pub use instant::Instant;

use crate::cancel::{
    Cancellable, CancellationSource, CancellationToken, CancelledOutcome, cancellable,
};
use crate::task::context::{TaskContext, current_context, enter_context};
use coro_executor::time::Sleep;
use pin_project::pin_project;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Waits `duration`; returns `Err(Cancelled)` as soon as the current task's cancellation
/// token fires instead (the timer is freed then).
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let start = Instant::now();
/// coro::block_wait(coro::time::sleep(Duration::from_millis(5))).unwrap();
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub fn sleep(duration: Duration) -> Cancellable<Sleep> {
    cancellable(coro_executor::time::sleep(duration))
}

/// Waits until `deadline` (a `std::time::Instant` or a coro [`Instant`]), like [`sleep`].
///
/// ```
/// use coro::time::Instant;
/// use std::time::Duration;
///
/// let deadline = Instant::now() + Duration::from_millis(3);
/// coro::block_wait(coro::time::sleep_until(deadline)).unwrap();
/// assert!(Instant::now() >= deadline);
/// ```
pub fn sleep_until(deadline: impl Into<std::time::Instant>) -> Cancellable<Sleep> {
    cancellable(coro_executor::time::sleep_until(deadline.into()))
}

/// Runs `fut` for at most `duration`.
///
/// `fut` runs with a cancellation token merged from the caller's and the timeout's own. When
/// the deadline passes first, that token is cancelled (so work inside that watches it, such as
/// [`sleep`] or [`cancellable`], stops), `fut` is dropped, and the result is `Err(Elapsed)`.
///
/// ```
/// use std::time::Duration;
/// use coro::time::{Elapsed, sleep, timeout};
///
/// let slow = timeout(Duration::from_millis(10), sleep(Duration::from_secs(60)));
/// assert_eq!(coro::block_wait(slow), Err(Elapsed));
/// let fast = timeout(Duration::from_secs(60), async { 7 });
/// assert_eq!(coro::block_wait(fast), Ok(7));
/// ```
pub fn timeout<F: IntoFuture>(duration: Duration, fut: F) -> Timeout<F::IntoFuture> {
    Timeout {
        op: Some(fut.into_future()),
        timer: coro_executor::time::sleep(duration),
        source: CancellationSource::new(),
        ctx: None,
    }
}

/// The future returned by [`timeout`].
///
/// ```
/// use std::time::Duration;
///
/// let quick: coro::time::Timeout<_> = coro::time::timeout(Duration::from_secs(5), async { 1 });
/// assert_eq!(coro::block_wait(quick), Ok(1));
/// ```
#[pin_project]
#[must_use = "futures do nothing unless awaited"]
pub struct Timeout<F> {
    #[pin]
    op: Option<F>,
    timer: Sleep,
    source: CancellationSource,
    /// The operation's context: the caller's, with the merged token (built on first poll).
    ctx: Option<TaskContext>,
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let source = &*this.source;
        let ctx = this.ctx.get_or_insert_with(|| op_context(source));
        let Some(op) = this.op.as_mut().as_pin_mut() else {
            panic!("a timeout future was polled after it completed");
        };
        let polled = {
            let _ctx = enter_context(ctx);
            op.poll(cx)
        };
        if let Poll::Ready(value) = polled {
            this.op.set(None);
            return Poll::Ready(Ok(value));
        }
        if Pin::new(&mut *this.timer).poll(cx).is_ready() {
            // Cancel first, so that what the operation started sees it, then drop the operation.
            this.source.request_cancellation();
            this.op.set(None);
            return Poll::Ready(Err(Elapsed));
        }
        Poll::Pending
    }
}

impl<F> fmt::Debug for Timeout<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timeout")
            .field("deadline", &self.timer.deadline())
            .finish_non_exhaustive()
    }
}

/// Runs `fut` with a deadline after which it is asked to stop, but never dropped unfinished
/// (folly's `timeoutNoDiscard`).
///
/// `fut` runs with a cancellation token merged from the caller's and the timeout's own, as with
/// [`timeout`]. If `fut` completes before the deadline, the result is `Ok(output)`. Otherwise the
/// timeout's token is cancelled at the deadline and `fut` is *still awaited*:
///
/// - if its output says it ended cancelled ([`CancelledOutcome::is_cancelled`]: for example the
///   `Err(Cancelled)` of [`sleep`] or [`cancellable`]), the result is `Err(Elapsed)`;
/// - any other output (the op ignored the request, or wrapped up with a partial result) is
///   returned as `Ok(output)`: its own result is not discarded.
///
/// So `Err(Elapsed)` means exactly "the deadline passed and the op stopped because of it". An op
/// that ends cancelled because the *caller's* token fired before the deadline gives
/// `Ok(Err(Cancelled))`, as with [`timeout`]; once the deadline has passed, a cancelled output
/// is `Err(Elapsed)` whichever token fired. A ready output wins: an op that completes in the
/// same poll in which the deadline is seen passing gives `Ok(output)`.
///
/// The call therefore lasts as long as `fut` takes to finish or to notice the cancellation, which
/// may be well past the deadline. The timer is freed when it fires or when this future completes;
/// `fut` is dropped as soon as it completes. Dropping the returned future before then drops `fut`
/// unfinished, like any future.
///
/// # Why a bound on the output
///
/// In folly an op "ends cancelled" when it throws `OperationCancelled`; a Rust future has no such
/// side channel, only its output, and coro's cancellation-aware operations say it with
/// `Err(Cancelled)`. The [`CancelledOutcome`] bound tells those outputs from the rest; it is
/// implemented for `Result<T, E>` whenever `E` implements it (so `Result<T, Cancelled>`, the
/// output of [`sleep`] and [`cancellable`]), and can be implemented for an error type of your
/// own. The output type is the same as [`timeout`]'s, so either can replace the other.
///
/// ```
/// use std::time::Duration;
/// use coro::cancel::Cancelled;
/// use coro::time::{Elapsed, sleep, timeout_no_discard};
///
/// // Stops when asked: the deadline is why it ended.
/// let stopped = timeout_no_discard(Duration::from_millis(10), sleep(Duration::from_secs(60)));
/// assert_eq!(coro::block_wait(stopped), Err(Elapsed));
///
/// // Wraps up with a partial result when asked: that result is kept.
/// let partial = timeout_no_discard(Duration::from_millis(10), async {
///     let interrupted = sleep(Duration::from_secs(60)).await.is_err();
///     Ok::<_, Cancelled>(if interrupted { "partial" } else { "complete" })
/// });
/// assert_eq!(coro::block_wait(partial), Ok(Ok("partial")));
///
/// // Finishes in time.
/// let fast = timeout_no_discard(Duration::from_secs(60), async { Ok::<_, Cancelled>(7) });
/// assert_eq!(coro::block_wait(fast), Ok(Ok(7)));
/// ```
pub fn timeout_no_discard<F>(duration: Duration, fut: F) -> TimeoutNoDiscard<F::IntoFuture>
where
    F: IntoFuture,
    F::Output: CancelledOutcome,
{
    TimeoutNoDiscard {
        op: Some(fut.into_future()),
        timer: Some(coro_executor::time::sleep(duration)),
        source: CancellationSource::new(),
        ctx: None,
    }
}

/// The future returned by [`timeout_no_discard`].
///
/// ```
/// use std::time::Duration;
/// use coro::cancel::Cancelled;
///
/// let quick: coro::time::TimeoutNoDiscard<_> =
///     coro::time::timeout_no_discard(Duration::from_secs(5), async { Ok::<_, Cancelled>(1) });
/// assert_eq!(coro::block_wait(quick), Ok(Ok(1)));
/// ```
#[pin_project]
#[must_use = "futures do nothing unless awaited"]
pub struct TimeoutNoDiscard<F> {
    #[pin]
    op: Option<F>,
    /// `None` once the deadline has passed (and the timeout's token was cancelled).
    timer: Option<Sleep>,
    source: CancellationSource,
    /// The operation's context: the caller's, with the merged token (built on first poll).
    ctx: Option<TaskContext>,
}

impl<F> Future for TimeoutNoDiscard<F>
where
    F: Future,
    F::Output: CancelledOutcome,
{
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let source = &*this.source;
        let ctx = this.ctx.get_or_insert_with(|| op_context(source));
        loop {
            let Some(op) = this.op.as_mut().as_pin_mut() else {
                panic!("a timeout_no_discard future was polled after it completed");
            };
            let polled = {
                let _ctx = enter_context(ctx);
                op.poll(cx)
            };
            if let Poll::Ready(output) = polled {
                this.op.set(None);
                *this.timer = None;
                let elapsed = this.source.is_cancellation_requested() && output.is_cancelled();
                return Poll::Ready(if elapsed { Err(Elapsed) } else { Ok(output) });
            }
            let expired = match this.timer {
                Some(timer) => Pin::new(timer).poll(cx).is_ready(),
                None => false,
            };
            if !expired {
                return Poll::Pending;
            }
            *this.timer = None;
            this.source.request_cancellation();
            // Poll the operation again at once: it may finish as soon as it sees the
            // cancellation (its own wake-up would only bring it back here later).
        }
    }
}

impl<F> fmt::Debug for TimeoutNoDiscard<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimeoutNoDiscard")
            .field("deadline", &self.timer.as_ref().map(Sleep::deadline))
            .field("expired", &self.source.is_cancellation_requested())
            .finish_non_exhaustive()
    }
}

/// The context a timed operation runs in: the caller's, with the caller's token merged with the
/// timeout's own `source`.
fn op_context(source: &CancellationSource) -> TaskContext {
    let mut ctx = current_context();
    ctx.token = CancellationToken::merge([ctx.token.clone(), source.token()]);
    ctx
}

/// The error of a [`timeout`] whose deadline passed first.
///
/// ```
/// assert_eq!(coro::time::Elapsed.to_string(), "deadline has elapsed");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}
