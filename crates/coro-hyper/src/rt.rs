//! [`CoroExecutor`] and [`CoroTimer`]: hyper's runtime hooks on coro.

use coro::executor::time::Sleep;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// hyper's [`Executor`](hyper::rt::Executor) on coro: runs each future hyper hands it (an
/// HTTP/2 stream's handler, a client connection's background work) as a task, with
/// [`coro::spawn`].
///
/// The task goes to the current executor: the pool whose worker calls `execute` (for a server,
/// the pool its connections run on), or the default pool outside any. It inherits the caller's
/// cancellation token and task-locals, as every `coro::spawn` does, and is detached: it runs to
/// its end whether or not anyone waits for it.
///
/// ```
/// use hyper::rt::Executor;
///
/// let (tx, rx) = coro::channel::oneshot();
/// coro_hyper::CoroExecutor.execute(async move {
///     tx.send(42).unwrap();
/// });
/// assert_eq!(coro::block_wait(rx).unwrap(), 42);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CoroExecutor;

impl CoroExecutor {
    /// The executor (a unit struct: `CoroExecutor` itself is the value too).
    ///
    /// ```
    /// use hyper::rt::Executor;
    ///
    /// let (tx, rx) = coro::channel::oneshot();
    /// coro_hyper::CoroExecutor::new().execute(async move { tx.send("ran").unwrap() });
    /// assert_eq!(coro::block_wait(rx).unwrap(), "ran");
    /// ```
    pub fn new() -> Self {
        CoroExecutor
    }
}

impl<F> hyper::rt::Executor<F> for CoroExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        coro::spawn(fut).detach();
    }
}

/// hyper's [`Timer`](hyper::rt::Timer) on coro's timer wheel, the one under
/// [`coro::time::sleep`].
///
/// hyper uses it for its timeouts: the HTTP/1 header read timeout, HTTP/2 keep-alive pings.
/// Its sleeps are plain deadlines ([`coro::executor::time::Sleep`]), not the
/// cancellation-aware ones of `coro::time`: a timeout of hyper's fires at its deadline, not
/// early when the task polling the connection is cancelled. [`reset`](hyper::rt::Timer::reset)
/// moves the deadline of a sleep it made in place (O(1)) instead of allocating a new one.
///
/// ```
/// use hyper::rt::Timer;
/// use std::time::{Duration, Instant};
///
/// let timer = coro_hyper::CoroTimer;
/// let mut sleep = timer.sleep(Duration::from_secs(3600));
/// let soon = Instant::now() + Duration::from_millis(5);
/// timer.reset(&mut sleep, soon);
/// coro::block_wait(sleep);
/// assert!(Instant::now() >= soon);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct CoroTimer;

impl CoroTimer {
    /// The timer (a unit struct: `CoroTimer` itself is the value too).
    ///
    /// ```
    /// use hyper::rt::Timer;
    /// use std::time::{Duration, Instant};
    ///
    /// let start = Instant::now();
    /// coro::block_wait(coro_hyper::CoroTimer::new().sleep(Duration::from_millis(5)));
    /// assert!(start.elapsed() >= Duration::from_millis(5));
    /// ```
    pub fn new() -> Self {
        CoroTimer
    }
}

impl hyper::rt::Timer for CoroTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoroSleep(coro::executor::time::sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoroSleep(coro::executor::time::sleep_until(deadline)))
    }

    /// The clock coro's timers go by: inside a `coro::sim` simulation its virtual clock, so that
    /// hyper's own deadlines (header read timeouts, keep-alive) run in virtual time there.
    fn now(&self) -> Instant {
        coro::time::Instant::now().into_std()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<CoroSleep>() {
            Some(mut ours) => ours.0.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

/// A sleep of [`CoroTimer`]'s: hyper's `Sleep` is a foreign trait, coro's `Sleep` a foreign type.
struct CoroSleep(Sleep);

impl Future for CoroSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for CoroSleep {}
