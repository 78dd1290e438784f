//! [`yield_now`]: let other tasks run.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Returns `Pending` once after waking itself, so the task goes to the back of its executor's
/// queue and others run first (folly's `co_reschedule_on_current_executor`).
///
/// On a [`ThreadPool`](crate::ThreadPool) a yielded task never takes the next slot: it waits behind
/// everything already queued on its worker.
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let join = pool.spawn(async {
///     coro_executor::yield_now().await;
///     "resumed"
/// });
/// assert_eq!(futures::executor::block_on(join).unwrap(), "resumed");
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// The future returned by [`yield_now`].
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let done = pool.spawn(async {
///     let yielding: coro_executor::YieldNow = coro_executor::yield_now();
///     yielding.await;
///     "resumed"
/// });
/// assert_eq!(futures::executor::block_on(done).unwrap(), "resumed");
/// ```
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
