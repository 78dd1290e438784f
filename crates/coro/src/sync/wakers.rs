//! [`WakerSlab`]: the wakers of futures waiting for one event ([`SharedPromise`] fulfilment,
//! [`Baton`] post), by slot, taken all at once when the event happens.
//!
//! The slab lives under its owner's short mutex. A waiter registers (or refreshes) its waker
//! there after looking at the event's flag again under that mutex; the event sets its flag first
//! and then takes the whole slab in one step, so every waiter either saw the flag or had its
//! waker taken. The taken wakers are woken after the mutex is released: waking may run foreign
//! code (an executor that was shut down drops the task inside `wake`, and with it the waiting
//! future, which takes this mutex to leave the slab), so nothing here wakes under a lock.
//! That is why these two primitives do not use event-listener, which wakes under its own lock.
//!
//! [`SharedPromise`]: super::SharedPromise
//! [`Baton`]: super::Baton

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::task::Waker;

/// Wakes every waker of `wakers`, even if some panic (a waker is user code: a user's own
/// `Waker`, or a user `Executor`'s `schedule` behind a task's); once all are woken, the first
/// panic is resumed in the caller, who woke them (the others are dropped: the panic hook has
/// reported them). Stopping at the first panic would leave the waiters after it asleep for good,
/// though they were granted what they waited for. A caller that is already unwinding drops the
/// panic too, rather than abort the process with a second one. Call it with no lock held.
pub(crate) fn wake_each(wakers: impl IntoIterator<Item = Waker>) {
    let mut first_panic = None;
    for waker in wakers {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || waker.wake())) {
            first_panic.get_or_insert(payload);
        }
    }
    if let Some(payload) = first_panic {
        if !std::thread::panicking() {
            resume_unwind(payload);
        }
    }
}

/// Drops a waker cloned for a wait that then did not need it (the resource was taken at once
/// instead), catching a panic in its destructor, which is user code: unwinding out of an
/// acquisition that succeeded would lose what it acquired. (The panic hook has reported it.)
pub(crate) fn drop_unused(waker: Option<Waker>) {
    if let Some(waker) = waker {
        let _ = catch_unwind(AssertUnwindSafe(move || drop(waker)));
    }
}

/// Wakers by slot, with a free list.
#[derive(Default)]
pub(crate) struct WakerSlab {
    wakers: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl WakerSlab {
    /// Stores `waker` in the waiter's `slot`, taking a slot on first registration.
    pub(crate) fn register(&mut self, slot: &mut Option<usize>, waker: &Waker) {
        match *slot {
            Some(index) => match &mut self.wakers[index] {
                Some(old) if old.will_wake(waker) => {}
                other => *other = Some(waker.clone()),
            },
            None => {
                let index = match self.free.pop() {
                    Some(index) => {
                        self.wakers[index] = Some(waker.clone());
                        index
                    }
                    None => {
                        self.wakers.push(Some(waker.clone()));
                        self.wakers.len() - 1
                    }
                };
                *slot = Some(index);
            }
        }
    }

    /// Frees a waiter's slot (the waiter gives up before the event).
    pub(crate) fn remove(&mut self, index: usize) {
        self.wakers[index] = None;
        self.free.push(index);
    }

    /// Takes every waker, leaving the slab empty (slots handed out before are void).
    pub(crate) fn take(&mut self) -> WakerSlab {
        std::mem::take(self)
    }

    /// Wakes every waker taken, as [`wake_each`] does. Call it with no lock held.
    pub(crate) fn wake_all(self) {
        wake_each(self.wakers.into_iter().flatten());
    }
}
