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

    /// Blocks until [`unpark`](Self::unpark) is called, or returns at once if it was called since
    /// the last `park`. May not return spuriously.
    pub(crate) fn park(&self) {
        // Fast path: a token is waiting.
        if self
            .state
            .compare_exchange(NOTIFIED, EMPTY, Acquire, Acquire)
            .is_ok()
        {
            return;
        }
        let mut guard = self.lock.lock().unwrap();
        match self.state.compare_exchange(EMPTY, PARKED, Acquire, Acquire) {
            Ok(_) => {}
            Err(NOTIFIED) => {
                // Notified between the fast path and taking the lock.
                self.state.store(EMPTY, Release);
                return;
            }
            Err(actual) => panic!("inconsistent parker state {actual}: parked twice"),
        }
        loop {
            guard = self.condvar.wait(guard).unwrap();
            // Only a real notification moves PARKED to NOTIFIED; condvar wake-ups without it are
            // spurious and go back to sleep.
            if self
                .state
                .compare_exchange(NOTIFIED, EMPTY, Acquire, Acquire)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Wakes the parked thread, or makes its next `park` return at once.
    pub(crate) fn unpark(&self) {
        match self.state.swap(NOTIFIED, Release) {
            EMPTY | NOTIFIED => {}
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
