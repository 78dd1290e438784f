//! Time (DESIGN §6): cancellation-aware sleeps and timeouts on the executor's timer wheel,
//! usable under every executor.

use crate::cancel::{Cancellable, CancellationSource, CancellationToken, cancellable};
use crate::task::context::{Context as TaskContext, current_context, enter_context};
use coro_executor::time::Sleep;
use pin_project::pin_project;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

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

/// Waits until `deadline`, like [`sleep`].
///
/// ```
/// use std::time::{Duration, Instant};
///
/// let deadline = Instant::now() + Duration::from_millis(3);
/// coro::block_wait(coro::time::sleep_until(deadline)).unwrap();
/// assert!(Instant::now() >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) -> Cancellable<Sleep> {
    cancellable(coro_executor::time::sleep_until(deadline))
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
        let ctx = this.ctx.get_or_insert_with(|| {
            let mut ctx = current_context();
            ctx.token = CancellationToken::merge([ctx.token.clone(), source.token()]);
            ctx
        });
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
