//! [`SimOnly`]: carries a value that need not be `Send` (the future a simulation runs, and its
//! output) through the pool's `Send` bounds, on the promise that it never leaves the
//! simulation's thread.
//!
//! Rule: a simulation's pool polls, completes and drops its tasks on the one thread that runs
//! it (`coro_executor::sim`); the wrapper checks that promise where it could be broken: a poll
//! on another thread panics, a drop on another thread leaks the value rather than drop it there.

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::ThreadId;

/// A value pinned to the thread that made it (see the module docs).
pub(super) struct SimOnly<T> {
    value: ManuallyDrop<T>,
    thread: ThreadId,
}

// SAFETY: a `SimOnly` is only ever touched on the thread that made it: `poll` and `into_inner`
// check the thread (and panic elsewhere), and `drop` elsewhere leaks the value instead of
// touching it. Moving the wrapper between threads moves bytes only, which any type allows.
unsafe impl<T> Send for SimOnly<T> {}

impl<T> SimOnly<T> {
    pub(super) fn new(value: T) -> SimOnly<T> {
        SimOnly {
            value: ManuallyDrop::new(value),
            thread: std::thread::current().id(),
        }
    }

    fn check_thread(&self) {
        assert!(
            std::thread::current().id() == self.thread,
            "a simulation's future was used on a thread other than the simulation's; \
             simulated tasks run on the simulation's thread only"
        );
    }

    pub(super) fn into_inner(self) -> T {
        self.check_thread();
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (ManuallyDrop), so the value is taken exactly once.
        unsafe { ManuallyDrop::take(&mut this.value) }
    }
}

impl<F: Future> Future for SimOnly<F> {
    type Output = SimOnly<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.check_thread();
        // SAFETY: `value` is pinned structurally: nothing moves it out of a pinned wrapper
        // (`into_inner` takes the wrapper by value and is used only on outputs, never pinned),
        // and `Drop` drops it in place.
        let future = unsafe { self.map_unchecked_mut(|this| &mut *this.value) };
        future.poll(cx).map(SimOnly::new)
    }
}

impl<T> Drop for SimOnly<T> {
    fn drop(&mut self) {
        if std::thread::current().id() == self.thread {
            // SAFETY: dropped once, here; the value is not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.value) };
        }
        // Elsewhere: leaked, never touched from a thread it may not be sent to.
    }
}
