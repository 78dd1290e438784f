//! [`Latch`]: a count that opens a gate once it reaches zero (folly's `Latch`, C++'s
//! `std::latch`), on a [`Baton`] posted by the last count-down.

use super::Baton;
use super::baton::Wait;
use coro_loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::fmt;

/// A single-use countdown: [`wait`](Latch::wait) completes once [`count_down`](Latch::count_down)
/// has been called as many times as the count given to [`new`](Latch::new). Waiters resume on
/// their own executors; every wait is cancel-safe.
///
/// ```
/// use std::sync::Arc;
///
/// # coro::block_wait(async {
/// let ready = Arc::new(coro::sync::Latch::new(3));
/// for _ in 0..3 {
///     let ready = ready.clone();
///     coro::spawn(async move {
///         // ... set up ...
///         ready.count_down();
///     });
/// }
/// ready.wait().await; // all three are set up
/// assert!(ready.try_wait());
/// # });
/// ```
pub struct Latch {
    remaining: AtomicUsize,
    open: Baton,
}

impl Latch {
    /// A latch that opens after `count` count-downs (at once if `count` is 0).
    ///
    /// ```
    /// assert!(coro::sync::Latch::new(0).try_wait());
    /// ```
    pub fn new(count: usize) -> Latch {
        let latch = Latch {
            remaining: AtomicUsize::new(count),
            open: Baton::new(),
        };
        if count == 0 {
            latch.open.post();
        }
        latch
    }

    /// Counts down by one, opening the latch when the count reaches zero.
    ///
    /// # Panics
    ///
    /// If the count is already zero: more count-downs than the latch was made for is a bug in
    /// the caller's accounting.
    ///
    /// ```
    /// let latch = coro::sync::Latch::new(2);
    /// latch.count_down();
    /// assert!(!latch.try_wait());
    /// latch.count_down();
    /// assert!(latch.try_wait());
    /// ```
    pub fn count_down(&self) {
        let mut remaining = self.remaining.load(Acquire);
        loop {
            assert!(
                remaining != 0,
                "coro::sync::Latch::count_down called more times than the latch's count: \
                 make the count match the number of count-downs"
            );
            match self
                .remaining
                .compare_exchange_weak(remaining, remaining - 1, AcqRel, Acquire)
            {
                Ok(1) => return self.open.post(),
                Ok(_) => return,
                Err(actual) => remaining = actual,
            }
        }
    }

    /// Counts down by one and waits for the latch to open.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let latch = coro::sync::Latch::new(1);
    /// latch.arrive_and_wait().await;
    /// assert!(latch.try_wait());
    /// # });
    /// ```
    pub fn arrive_and_wait(&self) -> Wait<'_> {
        self.count_down();
        self.wait()
    }

    /// Waits for the latch to open.
    ///
    /// ```
    /// use futures::FutureExt;
    ///
    /// let latch = coro::sync::Latch::new(1);
    /// let mut wait = latch.wait();
    /// assert_eq!((&mut wait).now_or_never(), None); // still closed
    /// latch.count_down();
    /// assert_eq!(wait.now_or_never(), Some(()));
    /// ```
    pub fn wait(&self) -> Wait<'_> {
        self.open.wait()
    }

    /// Whether the latch is open.
    ///
    /// ```
    /// assert!(!coro::sync::Latch::new(1).try_wait());
    /// ```
    pub fn try_wait(&self) -> bool {
        self.open.is_ready()
    }

    /// The count-downs still needed to open the latch.
    ///
    /// ```
    /// let latch = coro::sync::Latch::new(5);
    /// latch.count_down();
    /// assert_eq!(latch.remaining(), 4);
    /// ```
    pub fn remaining(&self) -> usize {
        self.remaining.load(Acquire)
    }
}

impl fmt::Debug for Latch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latch")
            .field("remaining", &self.remaining())
            .finish()
    }
}
