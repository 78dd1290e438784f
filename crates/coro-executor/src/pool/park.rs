//! A per-worker parker: sleep until unparked, with a saved token so that an unpark that arrives
//! before the park is not lost.
//!
//! The state word makes the fast paths lock-free (an unpark of a running worker is one swap); the
//! mutex and condvar are touched only by a worker that really sleeps and by whoever wakes it.

use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::sync::{Condvar, Mutex};

const EMPTY: usize = 0;
const PARKED: usize = 1;
const NOTIFIED: usize = 2;
/// Waiting in the OS poll (`park_polling`): an unpark interrupts the poll instead of
/// signalling the condvar.
const POLLING: usize = 3;

pub(crate) struct Parker {
    state: AtomicUsize,
    lock: Mutex<()>,
    condvar: Condvar,
}

impl Parker {
    pub(crate) fn new() -> Parker {
        Parker {
            state: AtomicUsize::new(EMPTY),
            lock: Mutex::new(()),
            condvar: Condvar::new(),
        }
    }

    /// Whether a token waits (a simulation's driver looks before stepping a sleeping worker).
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn is_notified(&self) -> bool {
        self.state.load(Acquire) == NOTIFIED
    }

    /// Takes a waiting token, if there is one.
    pub(crate) fn take_token(&self) -> bool {
        self.state
            .compare_exchange(NOTIFIED, EMPTY, Acquire, Acquire)
            .is_ok()
    }

    /// The way into a sleep on the condvar: `None` if a token was waiting (taken), else the
    /// lock, with the state moved to `PARKED` under it.
    fn begin_sleep(&self) -> Option<crate::loom::sync::MutexGuard<'_, ()>> {
        // Fast path: a token is waiting.
        if self.take_token() {
            return None;
        }
        let guard = self.lock.lock().unwrap();
        match self.state.compare_exchange(EMPTY, PARKED, Acquire, Acquire) {
            Ok(_) => Some(guard),
            Err(NOTIFIED) => {
                // Notified between the fast path and taking the lock. A swap, not a store: a
                // second unpark may have landed on the token since the failed exchange read it,
                // and only a read-modify-write synchronises with that one too (a plain store
                // erased it unread, so what it published, such as shutdown, could stay unseen:
                // found by loom at 3 preemptions).
                self.state.swap(EMPTY, Acquire);
                None
            }
            Err(actual) => panic!("inconsistent parker state {actual}: parked twice"),
        }
    }

    /// Blocks until [`unpark`](Self::unpark) is called, or returns at once if it was called since
    /// the last `park`. May not return spuriously.
    pub(crate) fn park(&self) {
        let Some(mut guard) = self.begin_sleep() else {
            return;
        };
        loop {
            guard = self.condvar.wait(guard).unwrap();
            // Only a real notification moves PARKED to NOTIFIED; condvar wake-ups without it are
            // spurious and go back to sleep.
            if self.take_token() {
                return;
            }
        }
    }

    /// As [`park`](Self::park), but returns after `timeout` at the latest (a token that
    /// arrives later is kept for the next park).
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn park_timeout(&self, timeout: std::time::Duration) {
        let Some(mut guard) = self.begin_sleep() else {
            return;
        };
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            guard = self.condvar.wait_timeout(guard, left).unwrap().0;
            if self.take_token() {
                return;
            }
        }
        // Timed out: back to EMPTY, unless an unpark landed meanwhile (then it is consumed,
        // which is what a park that returns is for).
        self.state.swap(EMPTY, Acquire);
        drop(guard);
    }

    /// Parks by running `poll`, a wait in the OS that the `interrupt` given to
    /// [`unpark_with`](Self::unpark_with) ends, instead of sleeping on the condvar. Returns at
    /// once if a token is waiting. Unlike [`park`](Self::park) it may return without an unpark
    /// (the poll returned on IO readiness or by itself); a token that arrives during the poll
    /// is consumed on the way out.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn park_polling(&self, poll: impl FnOnce()) {
        match self
            .state
            .compare_exchange(EMPTY, POLLING, Acquire, Acquire)
        {
            Ok(_) => {}
            Err(NOTIFIED) => {
                // A swap, as in `park`: it reads every unpark merged into the token.
                self.state.swap(EMPTY, Acquire);
                return;
            }
            Err(actual) => panic!("inconsistent parker state {actual}: parked twice"),
        }
        // An unpark from here on sees POLLING and interrupts the poll (or, if the poll has not
        // started waiting yet, makes it return at once: the OS poller keeps the notification).
        poll();
        self.state.swap(EMPTY, Acquire);
    }

    /// Wakes the parked thread, or makes its next `park` return at once.
    pub(crate) fn unpark(&self) {
        self.unpark_with(|| {});
    }

    /// As [`unpark`](Self::unpark), calling `interrupt` if the thread waits in the OS poll
    /// ([`park_polling`](Self::park_polling)).
    pub(crate) fn unpark_with(&self, interrupt: impl FnOnce()) {
        match self.state.swap(NOTIFIED, Release) {
            EMPTY | NOTIFIED => {}
            POLLING => interrupt(),
            PARKED => {
                // Taking the lock orders this notification after the parker's check-then-wait:
                // it either has not checked yet (and will see NOTIFIED) or it is waiting.
                drop(self.lock.lock().unwrap());
                self.condvar.notify_one();
            }
            actual => panic!("inconsistent parker state {actual}"),
        }
    }
}
