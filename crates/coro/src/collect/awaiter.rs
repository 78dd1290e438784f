//! A collect's awaiter chain: the frames from the collect's own out to its root (and beyond,
//! into an awaiter on another executor), which the children driven by tasks of their own
//! continue their stacks into, so that each reads its own frame, the collect's, .., the root,
//! wherever it runs.
//!
//! The rule: the chain is copied before the first driven child can run, and only while the
//! collect's start poll runs (the frames of the chain are then entered on the collect's thread,
//! and stay as they are until that poll ends). A child polled inline needs no copy (it is
//! linked under the collect's frame on the collect's thread), and most collects drive none, so
//! the copy is made on the first drive, not at the start: by the collect, when a child suspends
//! in its start poll, or by an idle worker that has claimed a child from an offer of the
//! collect, under the lock of the collect's taken list. The copy is then kept for every later
//! driven child, and handed to each driver before it is spawned.
//!
//! The chain lives in the collect's start poll ([`AwaiterChain`]), which lends it to claimers
//! through the collect's shared state ([`LentChain`]) from before it posts its offer until it
//! has read its taken list. A successful claim comes before the collect's last claim, after
//! which that read takes the list's lock (`Collect::take_taken`): so a claimer that copies
//! under the lock does so while the chain is lent, and the loan ends under the lock too.

use crate::trace::Frame;
use crate::trace::frame_chain::{Origin, current_origin};
use coro_loom::UnsafeCell;
use coro_loom::sync::Mutex;
use std::ptr;
use std::sync::{Arc, PoisonError};

/// A collect's chain, where it stood when the start poll began, and its copy once a driven
/// child needed one.
pub(super) struct AwaiterChain {
    /// The chain being polled, inside the collect's own frame.
    origin: Origin,
    /// The copy, made once (see the module doc).
    copy: Mutex<Option<Arc<[Frame]>>>,
}

impl AwaiterChain {
    /// The chain of the collect whose start poll runs now, in its own frame.
    #[inline]
    pub(super) fn here() -> AwaiterChain {
        AwaiterChain {
            origin: current_origin(),
            copy: Mutex::new(None),
        }
    }

    /// The chain's frames, innermost (the collect's) first: copied on the first call, shared
    /// after.
    ///
    /// # Safety
    ///
    /// The start poll that made this chain still runs, and on another thread than its own,
    /// the chain was lent to the caller ([`LentChain::frames`]).
    pub(super) unsafe fn frames(&self) -> Arc<[Frame]> {
        let mut copy = self.copy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(frames) = &*copy {
            return frames.clone();
        }
        // SAFETY: the start poll that took the origin still runs (caller's promise), inside the
        // collect's frame. On another thread: the collect lent the chain (which it took
        // before) before it posted its offer, and a claimer acquired that post: directly, or
        // through a driver spawned after the first copy, which it then finds here instead.
        let frames: Arc<[Frame]> = unsafe { self.origin.frames() }.into();
        *copy = Some(frames.clone());
        frames
    }
}

/// Where a collect lends its start poll's [`AwaiterChain`] to claimers (see the module doc).
pub(super) struct LentChain(UnsafeCell<*const AwaiterChain>);

// SAFETY: the pointer is written by the collect's thread only while no claimer reads it, and
// read by claimers only while the chain it points to is lent (`lend`, `end_loan`, `frames`);
// the chain is `Sync` (its origin is read only as `Origin::frames` allows, its copy is locked).
unsafe impl Send for LentChain {}
// SAFETY: shared, a `LentChain` is written only by the collect's thread while no claimer reads
// it, and read by claimers only while the chain is lent, which the loan's post and acquire
// order (`lend`, `end_loan`, `frames`); the chain it points to is `Sync`.
unsafe impl Sync for LentChain {}

impl LentChain {
    /// Nothing lent.
    pub(super) fn new() -> LentChain {
        LentChain(UnsafeCell::new(ptr::null()))
    }

    /// Lends `chain` to claimers.
    ///
    /// # Safety
    ///
    /// Called by the collect's start poll before it posts its offer (nobody reads this then),
    /// and `chain` stays alive and in place until [`end_loan`](Self::end_loan).
    pub(super) unsafe fn lend(&self, chain: &AwaiterChain) {
        // SAFETY: nobody reads the pointer concurrently (caller's promise).
        self.0.with_mut(|lent| unsafe { *lent = chain });
    }

    /// Ends the loan: claimers may no longer copy the chain.
    ///
    /// # Safety
    ///
    /// Called once no claimer can read the pointer any more: every child is claimed, and
    /// every claimer that succeeded has released the taken list's lock.
    pub(super) unsafe fn end_loan(&self) {
        // SAFETY: nobody reads the pointer concurrently (caller's promise).
        self.0.with_mut(|lent| unsafe { *lent = ptr::null() });
    }

    /// The lent chain's frames (see [`AwaiterChain::frames`]); none outside a collect's start
    /// poll (a collect polled by hand, in a model).
    ///
    /// # Safety
    ///
    /// The caller has claimed a child of the collect and holds its taken list's lock.
    pub(super) unsafe fn frames(&self) -> Arc<[Frame]> {
        // SAFETY: a successful claim under the lock comes before the end of the loan (see the
        // module doc), and after the lend (released by the offer's post).
        let lent = self.0.with(|lent| unsafe { *lent });
        // SAFETY: lent, so alive and in place.
        let Some(chain) = (unsafe { lent.as_ref() }) else {
            return Arc::new([]);
        };
        // SAFETY: lent to this claimer, so it is still the start poll.
        unsafe { chain.frames() }
    }
}
