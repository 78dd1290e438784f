//! The [`Sleep`] future and its constructors.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::driver::{Driver, Refused, Registration, global};

/// Waits until `duration` has elapsed.
///
/// Equivalent to `sleep_until(Instant::now() + duration)`, taking the current time when `sleep`
/// is called, not when the future is first polled. A duration too large to add to the current
/// instant means "about 30 years", which is in practice never.
///
/// The returned [`Sleep`] works under any executor. Polled on a worker of a thread pool, it is
/// kept by that pool's timers, which its parked workers sleep on; polled anywhere else, by the
/// global `coro-timer` thread.
///
/// # Example
///
/// ```
/// use std::time::{Duration, Instant};
/// use coro_executor::time::sleep;
///
/// let start = Instant::now();
/// futures::executor::block_on(sleep(Duration::from_millis(10)));
/// assert!(start.elapsed() >= Duration::from_millis(10));
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    let now = super::clock::now();
    sleep_until(now.checked_add(duration).unwrap_or_else(|| far_future(now)))
}

/// Waits until `deadline` is reached.
///
/// The future completes only once `Instant::now() >= deadline` (never early), normally within a
/// few milliseconds after it. A deadline that has already passed completes on the first poll
/// without touching the timer wheel.
///
/// # Example
///
/// ```
/// use std::time::{Duration, Instant};
/// use coro_executor::time::sleep_until;
///
/// let deadline = Instant::now() + Duration::from_millis(10);
/// futures::executor::block_on(sleep_until(deadline));
/// assert!(Instant::now() >= deadline);
/// ```
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        driver: DriverRef::Unchosen,
        deadline,
        state: State::Idle,
    }
}

/// About 30 years from `now`: what an unrepresentable deadline is clamped to.
fn far_future(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(86_400 * 365 * 30))
        .expect("the monotonic clock cannot represent 30 years from now")
}

/// A future that completes at a deadline; made by [`sleep`] and [`sleep_until`].
///
/// `Sleep` is lazy: it does nothing until first polled. The first `Pending` poll registers it in
/// a timer wheel (see [`pending_timers`](super::pending_timers)): the wheel of the pool whose
/// worker polls it, or the global one; dropping it before it fires removes it at once. Re-polling with a different waker replaces the stored waker, so
/// a `Sleep` moved between tasks wakes the task that polled it last.
///
/// Once it has completed, further polls keep returning `Ready` (until [`Sleep::reset`] re-arms
/// it). `Sleep` is `Unpin`, so it can be polled through `&mut` and reused in a loop.
///
/// # Example
///
/// ```
/// use std::time::{Duration, Instant};
/// use coro_executor::time::{sleep, Sleep};
///
/// futures::executor::block_on(async {
///     // Tick every 5 ms, three times, reusing one timer.
///     let mut tick: Sleep = sleep(Duration::from_millis(5));
///     for _ in 0..3 {
///         (&mut tick).await;
///         assert!(tick.is_elapsed());
///         let next = tick.deadline() + Duration::from_millis(5);
///         tick.reset(next);
///     }
/// });
/// ```
pub struct Sleep {
    driver: DriverRef,
    /// The caller's deadline, not rounded: also checked directly against `Instant::now()`.
    deadline: Instant,
    state: State,
}

/// The driver a `Sleep` registers with; held, so that it outlives the registration.
enum DriverRef {
    /// Chosen at the first registration: the polling worker's pool's, or the global one.
    Unchosen,
    Static(&'static Driver),
    Pool(std::sync::Arc<Driver>),
}

impl DriverRef {
    /// The driver chosen; only called once a registration chose one.
    fn get(&self) -> &Driver {
        match self {
            DriverRef::Unchosen => unreachable!("a registered Sleep has chosen its driver"),
            DriverRef::Static(driver) => driver,
            DriverRef::Pool(driver) => driver,
        }
    }

    /// The driver to register with, choosing it if that has not happened yet.
    fn choose(&mut self) -> &Driver {
        if let DriverRef::Unchosen = self {
            *self = match crate::pool::current_timer_driver() {
                Some(pool) => DriverRef::Pool(pool),
                None => DriverRef::Static(global()),
            };
        }
        self.get()
    }
}

/// Invariant: a registered wheel entry exists only in `State::Registered` (and only until it
/// fires), so dropping a `Sleep` in any other state has nothing to free.
#[derive(Debug)]
enum State {
    /// Not in the wheel: never polled, or reset after it had fired.
    Idle,
    /// In the wheel, unless the registration reads as fired.
    Registered(Registration),
    /// Completed; polls return `Ready`.
    Done,
}

impl Sleep {
    /// A `Sleep` that registers with `driver` (tests; the others choose at registration).
    #[cfg(test)]
    pub(crate) fn new_in(driver: &'static Driver, deadline: Instant) -> Self {
        Self {
            driver: DriverRef::Static(driver),
            deadline,
            state: State::Idle,
        }
    }

    /// The instant at which this `Sleep` completes.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use coro_executor::time::sleep_until;
    ///
    /// let deadline = Instant::now() + Duration::from_secs(1);
    /// assert_eq!(sleep_until(deadline).deadline(), deadline);
    /// ```
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the deadline has been reached: `true` once the timer has fired, or whenever a poll
    /// would now return `Ready`. Takes no lock.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use coro_executor::time::sleep;
    ///
    /// let mut timer = sleep(Duration::from_millis(5));
    /// assert!(!timer.is_elapsed());
    /// futures::executor::block_on(&mut timer);
    /// assert!(timer.is_elapsed());
    /// ```
    pub fn is_elapsed(&self) -> bool {
        match &self.state {
            State::Done => true,
            State::Registered(reg) if reg.has_fired() && !self.driver.get().is_closed() => true,
            _ => super::clock::now() >= self.deadline,
        }
    }

    /// Re-arms the timer to complete at `deadline`, whether or not it has completed already.
    /// O(1).
    ///
    /// A registered, unfired `Sleep` is moved in the wheel and keeps its waker, so a task that
    /// was waiting on it is woken at the new deadline without polling again (at once if the new
    /// deadline has already passed). Otherwise the new deadline takes effect on the next poll.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use coro_executor::time::sleep;
    ///
    /// let mut timer = sleep(Duration::from_secs(3600));
    /// let sooner = Instant::now() + Duration::from_millis(5);
    /// timer.reset(sooner);
    /// futures::executor::block_on(&mut timer);
    /// assert!(Instant::now() >= sooner);
    /// ```
    pub fn reset(&mut self, deadline: Instant) {
        // Registered again, with the new deadline, by the next poll that waits.
        self.end_traced();
        self.deadline = deadline;
        if let State::Registered(reg) = &self.state {
            let driver = self.driver.get();
            if driver.reset(reg, driver.tick_for(deadline)) {
                return;
            }
        }
        self.state = State::Idle;
    }

    /// Completes the `Sleep`, removing any wheel entry.
    fn complete(&mut self) -> Poll<()> {
        if let State::Registered(reg) = std::mem::replace(&mut self.state, State::Done) {
            self.driver.get().deregister(&reg);
        }
        Poll::Ready(())
    }

    /// The registration fired: done, unless its driver fired it early because its pool shut
    /// down, in which case the global driver takes the timer over.
    fn fired(&mut self, waker: &Waker) -> Poll<()> {
        if self.driver.get().is_closed() && super::clock::now() < self.deadline {
            self.driver = DriverRef::Static(global());
            return self.register(waker);
        }
        self.state = State::Done;
        Poll::Ready(())
    }

    /// Files the timer with its driver for `waker`: `Pending` once filed, `Ready` if the driver
    /// has passed the deadline already.
    fn register(&mut self, waker: &Waker) -> Poll<()> {
        let driver = self.driver.choose();
        let tick = driver.tick_for(self.deadline);
        match driver.register(tick, waker.clone()) {
            Ok(reg) => {
                self.state = State::Registered(reg);
                Poll::Pending
            }
            Err(Refused::Expired(waker)) => {
                drop(waker);
                self.state = State::Done;
                Poll::Ready(())
            }
            Err(Refused::Closed(waker)) => {
                // The pool whose timers this was to join has shut down: the global driver
                // (which never closes) keeps it instead.
                self.driver = DriverRef::Static(global());
                self.register(&waker)
            }
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        // The task's wait is registered once, at its first `Pending`, and undone when it ends:
        // here when ready, else by `end_traced` (reset, drop). A registration replaced while
        // waiting (its pool shut down) hands the mark on.
        let was_traced = matches!(&this.state, State::Registered(reg) if reg.traced);
        let polled = this.poll_deadline(cx);
        match (&mut this.state, polled) {
            (_, Poll::Ready(())) if was_traced => {
                crate::trace::end_wait(crate::trace::WaitOn::Timer(this.deadline));
            }
            (State::Registered(reg), Poll::Pending) if !reg.traced => {
                reg.traced = true;
                if !was_traced {
                    crate::trace::begin_wait(crate::trace::WaitOn::Timer(this.deadline));
                }
            }
            _ => {}
        }
        polled
    }
}

impl Sleep {
    /// Undoes the registration of this wait, if any.
    fn end_traced(&mut self) {
        if let State::Registered(reg) = &mut self.state
            && std::mem::take(&mut reg.traced)
        {
            crate::trace::end_wait(crate::trace::WaitOn::Timer(self.deadline));
        }
    }

    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let this = self;
        match &this.state {
            State::Done => Poll::Ready(()),
            State::Registered(reg) => {
                if reg.has_fired() {
                    // Fast path, no lock: the entry is already freed (see driver.rs).
                    return this.fired(cx.waker());
                }
                if super::clock::now() >= this.deadline {
                    // Due, but the driver has not got to it yet: no need to wait for it.
                    return this.complete();
                }
                match this.driver.get().poll_registered(reg, cx.waker()) {
                    Poll::Ready(()) => this.fired(cx.waker()),
                    Poll::Pending => Poll::Pending,
                }
            }
            State::Idle => {
                if super::clock::now() >= this.deadline {
                    this.state = State::Done;
                    return Poll::Ready(());
                }
                this.register(cx.waker())
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.end_traced();
        if let State::Registered(reg) = &self.state {
            self.driver.get().deregister(reg);
        }
    }
}

impl fmt::Debug for Sleep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Idle => "idle",
            State::Registered(reg) if reg.has_fired() => "fired",
            State::Registered(_) => "registered",
            State::Done => "done",
        };
        f.debug_struct("Sleep")
            .field("deadline", &self.deadline)
            .field("state", &state)
            .finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn counter() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
        Pin::new(sleep).poll(&mut Context::from_waker(waker))
    }

    /// A fired entry's key is reused by another timer; the old `Sleep` must still read as fired
    /// and its drop must not cancel the new owner's entry.
    #[test]
    fn stale_registration_after_key_reuse_is_fired_not_cancelled() {
        let driver = Driver::new_manual();
        let far = Instant::now() + Duration::from_secs(3600);
        let tick = driver.tick_for(far);
        let (count_a, waker_a) = counter();
        let mut a = Sleep::new_in(driver, far);
        assert!(poll(&mut a, &waker_a).is_pending());
        let mut buf = Vec::new();
        assert_eq!(driver.fire_due(tick, &mut buf), 1);
        assert_eq!(count_a.0.load(Ordering::SeqCst), 1);
        assert_eq!(driver.pending(), 0);

        let later = far + Duration::from_secs(1);
        let (count_b, waker_b) = counter();
        let mut b = Sleep::new_in(driver, later);
        assert!(poll(&mut b, &waker_b).is_pending());
        // Same key as `a` (the freed node is reused), new generation.
        let (State::Registered(ra), State::Registered(rb)) = (&a.state, &b.state) else {
            panic!("both should be registered");
        };
        assert_eq!(ra.key(), rb.key());
        assert!(a.is_elapsed());
        assert!(!b.is_elapsed());
        assert!(poll(&mut a, &waker_a).is_ready());
        drop(a);
        assert_eq!(
            driver.pending(),
            1,
            "dropping the stale Sleep cancelled another timer"
        );
        assert_eq!(driver.fire_due(driver.tick_for(later), &mut buf), 1);
        assert_eq!(count_b.0.load(Ordering::SeqCst), 1);
        assert!(poll(&mut b, &waker_b).is_ready());
    }

    #[test]
    fn reset_of_a_registered_sleep_keeps_its_waker() {
        let driver = Driver::new_manual();
        let far = Instant::now() + Duration::from_secs(3600);
        let (count, waker) = counter();
        let mut s = Sleep::new_in(driver, far);
        assert!(poll(&mut s, &waker).is_pending());
        let sooner = far - Duration::from_secs(1800);
        s.reset(sooner);
        let mut buf = Vec::new();
        assert_eq!(driver.fire_due(driver.tick_for(sooner) - 1, &mut buf), 0);
        assert_eq!(driver.fire_due(driver.tick_for(sooner), &mut buf), 1);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the registered waker was not woken"
        );
        assert!(s.is_elapsed());
    }

    #[test]
    fn reset_into_the_driver_past_wakes_at_once() {
        let driver = Driver::new_manual();
        let far = Instant::now() + Duration::from_secs(3600);
        let (count, waker) = counter();
        let mut s = Sleep::new_in(driver, far);
        assert!(poll(&mut s, &waker).is_pending());
        // Advance the wheel to 10 s (nothing due), then reset to 5 s: already passed for the
        // driver, so the entry fires inside `reset`.
        let mut buf = Vec::new();
        let ten = driver.tick_for(driver.origin_for_tests() + Duration::from_secs(10));
        assert_eq!(driver.fire_due(ten, &mut buf), 0);
        s.reset(driver.origin_for_tests() + Duration::from_secs(5));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(driver.pending(), 0);
        assert!(poll(&mut s, &waker).is_ready());
    }

    #[test]
    fn sleep_is_small() {
        // The driver (global, or a pool's `Arc`) + Instant + the registration; no per-Sleep
        // allocation.
        assert!(
            size_of::<Sleep>() <= 64,
            "Sleep is {} bytes",
            size_of::<Sleep>()
        );
    }
}

// Loom models of `Sleep` against its driver: `loom_sleep.rs`, a child module so that it can
// reach the private registration API.
#[cfg(all(test, loom))]
#[path = "loom_sleep.rs"]
mod loom_sleep;
