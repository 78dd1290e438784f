//! [`ReceiveSlot`]: where a sender leaves a value for one waiting receive, so that the receive
//! takes it without the channel's lock (Go's `sudog.elem`).
//!
//! A waiting receive queues a pointer to its slot in the channel's receive queue. A sender,
//! under the channel's lock, dismisses that waiter (its queue entry is freed and its waker
//! taken) and *then* fills the slot and marks it granted, with a `Release` store as its very last touch:
//! once the mark is visible the receive may complete and free the slot. The receive checks
//! the mark with `Acquire` (no lock) when it is polled again; when it gives up, it takes the
//! channel's lock first, under which the mark cannot change, so it knows whether it is still
//! queued (and leaves the queue) or was granted (and gives the value back).

use coro_loom::UnsafeCell;
use coro_loom::sync::atomic::{AtomicBool, Ordering::*};
use std::marker::PhantomPinned;

/// One waiting receive's slot. Lives in the pinned receive future (or, for a receiver used as a
/// stream, in a box the receiver keeps), at a fixed address for as long as it is queued.
pub(crate) struct ReceiveSlot<T> {
    granted: AtomicBool,
    /// The value handed over, or `None` for "the channel closed" (written only before
    /// `granted` is set, read only after it is seen set).
    value: UnsafeCell<Option<T>>,
    _pinned: PhantomPinned,
}

// SAFETY: shared access to the value cell follows the protocol above: the sender writes it
// under the channel's lock before the Release store of `granted`, and afterwards only the
// owner (one receive future, or one receiver's stream through `&mut`) reads it, after an
// Acquire load that saw `granted`. No two threads ever access it at once, and what crosses
// threads is a `T`, hence `T: Send`.
unsafe impl<T: Send> Sync for ReceiveSlot<T> {}

/// A queued receive's slot, as the receive queue holds it.
pub(crate) struct ReceiveSlotPtr<T>(*const ReceiveSlot<T>);

impl<T> Clone for ReceiveSlotPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ReceiveSlotPtr<T> {}

// SAFETY: the pointer is only dereferenced by a sender under the channel's lock, while the
// receive that owns the slot is queued (it cannot leave the queue without that lock), to move
// a `T` into it: sending the pointer to another thread is sending a `T`, hence `T: Send`.
unsafe impl<T: Send> Send for ReceiveSlotPtr<T> {}
// SAFETY: a shared `ReceiveSlotPtr` is only copied; it is dereferenced only by a sender under the
// channel's lock, to move a `T` in (hence `T: Send`), never to hand out a `&T`.
unsafe impl<T: Send> Sync for ReceiveSlotPtr<T> {}

impl<T> ReceiveSlot<T> {
    pub(crate) fn new() -> ReceiveSlot<T> {
        ReceiveSlot {
            granted: AtomicBool::new(false),
            value: UnsafeCell::new(None),
            _pinned: PhantomPinned,
        }
    }

    /// The pointer a receive queues. The caller keeps the slot at this address until it has
    /// left the queue (or taken its grant).
    pub(crate) fn as_ptr(&self) -> ReceiveSlotPtr<T> {
        ReceiveSlotPtr(self)
    }

    /// Made ready for another wait (by its owner, while not queued).
    pub(crate) fn reset(&self) {
        debug_assert!(self.value.with(|value| {
            // SAFETY: not queued, so no sender can write; the owner alone reads.
            unsafe { (*value).is_none() }
        }));
        self.granted.store(false, Relaxed);
    }

    /// The grant, if a sender (or the close) made one: `Some(Some(value))`, or `Some(None)` when
    /// the channel closed. Lock-free, by the owner.
    pub(crate) fn take(&self) -> Option<Option<T>> {
        if !self.granted.load(Acquire) {
            return None;
        }
        // SAFETY: `granted` is set (Acquire pairs with the sender's Release store, which came
        // after its write of the value); no sender touches the slot after setting it, and
        // only the owner reads, so this access is exclusive.
        Some(self.value.with_mut(|value| unsafe { (*value).take() }))
    }
}

impl<T> ReceiveSlotPtr<T> {
    /// Grants the queued receive `value` (`None`: the channel closed).
    ///
    /// # Safety
    ///
    /// Call it under the channel's lock, with the receive still queued, right after dismissing
    /// it from the queue: the slot is then alive (its owner cannot leave the queue without
    /// the lock) and not granted yet. The slot must not be touched afterwards.
    pub(crate) unsafe fn grant(self, value: Option<T>) {
        // SAFETY: alive and exclusively ours until `granted` is set, per the contract.
        let slot = unsafe { &*self.0 };
        // SAFETY: the owner reads the value only after seeing `granted`, which is not set yet.
        slot.value.with_mut(|cell| unsafe { *cell = value });
        slot.granted.store(true, Release);
    }
}
