//! [`Instant`]: a point in time on the clock coro's timers go by.
//!
//! Rule: `now()` reads the same clock as the timer wheel (`coro_executor::time::now`): the
//! monotonic system clock, or inside a simulation its virtual clock. Everything else is
//! `std::time::Instant` arithmetic on the value inside.

use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::time::Duration;

/// A measurement of the clock coro's timers use: `std::time::Instant`, except inside a
/// [`coro::sim`](crate::sim) simulation, where `now()` is the simulated clock (which jumps
/// ahead when every task is idle). Copy, ordered, and used like std's.
///
/// ```
/// use coro::time::Instant;
/// use std::time::Duration;
///
/// let start = Instant::now();
/// coro::block_wait(coro::time::sleep(Duration::from_millis(2))).unwrap();
/// assert!(start.elapsed() >= Duration::from_millis(2));
/// assert!(Instant::now() > start);
/// assert_eq!((start + Duration::from_secs(1)).duration_since(start), Duration::from_secs(1));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Instant(std::time::Instant);

impl Instant {
    /// The current time on coro's clock.
    ///
    /// ```
    /// let a = coro::time::Instant::now();
    /// let b = coro::time::Instant::now();
    /// assert!(b >= a);
    /// ```
    pub fn now() -> Instant {
        Instant(coro_executor::time::now())
    }

    /// Time since `self` on coro's clock (zero if `self` is later).
    ///
    /// ```
    /// let start = coro::time::Instant::now();
    /// assert!(start.elapsed() < std::time::Duration::from_secs(60));
    /// ```
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later (as std's since Rust 1.60).
    ///
    /// ```
    /// use std::time::Duration;
    /// let t = coro::time::Instant::now();
    /// assert_eq!((t + Duration::from_millis(5)).duration_since(t), Duration::from_millis(5));
    /// assert_eq!(t.duration_since(t + Duration::from_millis(5)), Duration::ZERO);
    /// ```
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_duration_since(earlier.0)
    }

    /// `self + duration`, or `None` if that is not representable.
    ///
    /// ```
    /// let t = coro::time::Instant::now();
    /// assert!(t.checked_add(std::time::Duration::from_secs(1)).is_some_and(|later| later > t));
    /// ```
    pub fn checked_add(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_add(duration).map(Instant)
    }

    /// `self - duration`, or `None` if that is not representable.
    ///
    /// ```
    /// let t = coro::time::Instant::now() + std::time::Duration::from_secs(2);
    /// assert!(t.checked_sub(std::time::Duration::from_secs(1)).is_some_and(|earlier| earlier < t));
    /// ```
    pub fn checked_sub(&self, duration: Duration) -> Option<Instant> {
        self.0.checked_sub(duration).map(Instant)
    }

    /// The `std::time::Instant` inside, for APIs that take one (such as
    /// [`sleep_until`](crate::time::sleep_until)).
    ///
    /// ```
    /// let t = coro::time::Instant::now();
    /// let std_instant: std::time::Instant = t.into_std();
    /// assert_eq!(coro::time::Instant::from(std_instant), t);
    /// ```
    pub fn into_std(self) -> std::time::Instant {
        self.0
    }
}

impl From<std::time::Instant> for Instant {
    fn from(instant: std::time::Instant) -> Instant {
        Instant(instant)
    }
}

impl From<Instant> for std::time::Instant {
    fn from(instant: Instant) -> std::time::Instant {
        instant.0
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Panics on overflow, as std's; see [`Instant::checked_add`].
    fn add(self, duration: Duration) -> Instant {
        Instant(self.0 + duration)
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, duration: Duration) {
        self.0 += duration;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Panics on overflow, as std's; see [`Instant::checked_sub`].
    fn sub(self, duration: Duration) -> Instant {
        Instant(self.0 - duration)
    }
}

impl SubAssign<Duration> for Instant {
    fn sub_assign(&mut self, duration: Duration) {
        self.0 -= duration;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// [`duration_since`](Instant::duration_since).
    fn sub(self, earlier: Instant) -> Duration {
        self.duration_since(earlier)
    }
}
