//! A collect's awaiter chain: the frames from the collect's own out to its root (and beyond,
//! into an awaiter on another executor), which the children driven by tasks of their own
//! continue their stacks into, so that each reads its own frame, the collect's, .., the root,
//! wherever it runs.
//!
//! The rule: the chain is copied before the first driven child can run, and only while the
//! collect's start poll runs (the frames of the chain are then entered on the collect's
//! thread, and stay as they are until that poll ends). A child polled inline needs no copy (it
//! is linked under the collect's frame on the collect's thread), and most collects drive none,
//! so the copy is made on the first drive, not at the start: the collect, when a child
//! suspends in its start poll, or an idle worker, when it has claimed a child from the
//! collect's offer, under the lock of the collect's taken list. A successful claim comes before
//! the collect's last claim, after which the collect takes that lock before its start poll
//! ends (`Collect::take_taken`): so the start poll still runs while the claimer copies. The copy
//! is then kept for every later driven child, and handed to each driver before it is spawned.

use crate::trace::Frame;
use crate::trace::frame::{Origin, current_origin};
use coro_loom::sync::Mutex;
use std::sync::{Arc, PoisonError};

/// Where a collect's chain is, and its copy once a driven child needed one.
pub(super) struct AwaiterChain {
    /// The chain being polled when the collect started: inside the collect's own frame.
    origin: Origin,
    /// The copy, made once (see the module doc).
    copy: Mutex<Option<Arc<[Frame]>>>,
    /// Stands for the chain's frames in loom models: a copy reads it, the end of the collect's
    /// start poll writes it (the frames may change from then on), and loom reports the two
    /// unordered as a data race.
    #[cfg(loom)]
    frames_in_place: coro_loom::UnsafeCell<()>,
}

// SAFETY: only loom builds need this (elsewhere every field is `Sync`): the witness cell is
// shared exactly as the chain's frames are, and it is there for loom to check those accesses.
#[cfg(loom)]
unsafe impl Sync for AwaiterChain {}

impl AwaiterChain {
    /// The chain of the collect starting now, in its own frame (at the start of its first
    /// poll, which is its start poll).
    #[inline]
    pub(super) fn here() -> AwaiterChain {
        AwaiterChain {
            origin: current_origin(),
            copy: Mutex::new(None),
            #[cfg(loom)]
            frames_in_place: coro_loom::UnsafeCell::new(()),
        }
    }

    /// The chain's frames, innermost (the collect's) first: copied on the first call, shared
    /// after.
    ///
    /// # Safety
    ///
    /// The collect's start poll still runs: the caller is that poll, or has claimed a child
    /// from the collect's offer and holds the collect's taken list's lock (see the module doc).
    pub(super) unsafe fn frames(&self) -> Arc<[Frame]> {
        let mut copy = self.copy.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(frames) = &*copy {
            return frames.clone();
        }
        #[cfg(loom)]
        self.frames_in_place.with(|_| ());
        // SAFETY: the start poll that took the origin still runs (caller's promise), inside the
        // collect's frame. On another thread: the first copy is made before any driver is
        // spawned, so a claimer that gets here took from the collect's own offer, whose post
        // released the collect thread's entry of those frames (and this origin), and whose
        // taking acquired it.
        let frames: Arc<[Frame]> = unsafe { self.origin.frames() }.into();
        *copy = Some(frames.clone());
        frames
    }

    /// In loom models: the collect's start poll ends, and its chain's frames may change.
    #[cfg(loom)]
    pub(super) fn end_start_poll(&self) {
        self.frames_in_place.with_mut(|_| ());
    }
}
