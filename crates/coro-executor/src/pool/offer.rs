//! Offers: work a busy worker makes available to idle ones without spawning anything.
//!
//! A task that is about to run a batch of work inline (a collect starting its children) can
//! *post* an [`Offer`] on its worker for the duration of that stretch ([`offer_while`](crate::offer_while), defined in `worker.rs`). Posting costs a few
//! uncontended atomic operations and wakes nobody; if the stretch is short, the offer is
//! revoked before anyone looks, and the batch ran with no spawn at all. Only when the worker
//! stays busy with an offer posted does the pool's monitor (`monitor.rs`, Go's sysmon in
//! miniature) wake a parked worker, which finds the offer while searching and calls
//! [`Offer::take`]; that is when the work gets spawned, on the idle worker.
//!
//! The slot is written only by its worker and read by thieves under its lock: taking an offer
//! is rare, posting and revoking are not, and an uncontended lock is two atomic operations. The
//! slot holds a pointer to the poster's `Arc`, not a reference of its own: the poster keeps it
//! alive for the whole stretch (it lends it to `offer_while`), and a thief takes its own
//! reference under the lock, so posting costs no reference-count traffic.

use crate::loom::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;

/// Work a running task offers to idle workers of its pool while it is busy, posted with
/// [`offer_while`](crate::offer_while).
///
/// An idle worker that finds the offer posted calls [`take`](Self::take) on its own thread,
/// outside any task; `take` spawns what it takes (the spawn lands on that worker, which runs it
/// next). Several idle workers may take the same offer, one after another or at once, and one
/// may call `take` just after the offer was revoked: `take` decides, under its own
/// synchronisation, whether anything is left to take.
///
/// ```
/// use coro_executor::{Offer, ThreadPool};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// /// One unit of work, runnable here or by whichever idle worker takes it first.
/// struct OneJob(AtomicBool);
///
/// impl OneJob {
///     fn claim(&self) -> bool {
///         !self.0.swap(true, Ordering::AcqRel)
///     }
/// }
///
/// impl Offer for OneJob {
///     fn has_work(&self) -> bool {
///         !self.0.load(Ordering::Acquire)
///     }
///
///     fn take(self: Arc<Self>) {
///         if self.claim() {
///             coro_executor::spawn(async { /* the job */ });
///         }
///     }
/// }
///
/// let pool = ThreadPool::new(2).unwrap();
/// let ran_here = pool.spawn(async {
///     let job = Arc::new(OneJob(AtomicBool::new(false)));
///     coro_executor::offer_while(&job, || {
///         // ... other work; an idle worker may take the job meanwhile. Here the work lasts
///         // until one has (at most 5 s): the offer stays posted, so an idle worker is woken.
///         let start = std::time::Instant::now();
///         while job.has_work() && start.elapsed() < std::time::Duration::from_secs(5) {}
///     });
///     job.claim() // run it here unless it was taken
/// });
/// assert!(!futures::executor::block_on(ran_here).unwrap(), "the idle worker took it");
/// ```
pub trait Offer: Send + Sync + 'static {
    /// Whether anything is left to take. Idle workers (and the monitor that wakes them) skip an
    /// offer that says no, so that one left posted while its last piece runs elsewhere does
    /// not keep them busy. It may be stale: `take` must still cope with finding nothing.
    fn has_work(&self) -> bool;

    /// Takes (part of) the offered work, on an idle worker of the pool that found it posted.
    fn take(self: Arc<Self>);
}

/// A posted offer: a pointer into an `Arc<dyn Offer>` its poster keeps alive while posted.
#[derive(Clone, Copy)]
pub(crate) struct OfferPtr(pub(crate) *const dyn Offer);

// SAFETY: the pointee is `Send + Sync` (`Offer`'s bounds), and the pointer is only dereferenced
// (turned into a new reference) under the slot's lock while its poster keeps it alive.
unsafe impl Send for OfferPtr {}

/// `OfferSlot::state`: an offer is posted.
const POSTED: usize = 1;
/// `OfferSlot::state`: a thief is taking a reference to the posted offer.
const LOCKED: usize = 2;
/// `OfferSlot::state`: one change of the posted offer (the bits above the flags count them).
const CHANGE: usize = 4;

/// A worker's offer slot.
///
/// The owner posts and revokes without a lock: one read-modify-write each, since posting and
/// revoking happen around every stretch of inline work. A thief sets `LOCKED` (only while
/// `POSTED` is set, with a compare-and-swap) for the few instructions it takes to add a
/// reference to the posted offer; the owner clears `POSTED` only while `LOCKED` is clear (also
/// a compare-and-swap, waiting out the thief), so `LOCKED` implies `POSTED`, and once the owner
/// has cleared `POSTED` nobody else reads `offer` until it posts again.
pub(crate) struct OfferSlot {
    offer: UnsafeCell<Option<OfferPtr>>,
    /// `changes * CHANGE | LOCKED? | POSTED?`. The monitor compares it (without `LOCKED`)
    /// between looks, to tell an offer that stays posted from a stream of short-lived ones.
    state: AtomicUsize,
}

// SAFETY: `offer` is written only by the owner while `POSTED` is clear and read by others only
// while they hold `LOCKED` (which implies `POSTED`), as the type's doc argues; `OfferPtr` is
// `Send`.
unsafe impl Sync for OfferSlot {}

impl OfferSlot {
    pub(crate) fn new() -> OfferSlot {
        OfferSlot {
            offer: UnsafeCell::new(None),
            state: AtomicUsize::new(0),
        }
    }

    /// Replaces the posted offer (owner only), returning the old one.
    ///
    /// # Safety
    ///
    /// Only the slot's worker may call this, and a new offer's `Arc` must stay alive until it
    /// is replaced in turn.
    pub(crate) unsafe fn replace(&self, offer: Option<OfferPtr>) -> Option<OfferPtr> {
        let mut state = self.state.load(Relaxed);
        if state & POSTED != 0 {
            // Take the slot out of service, once no thief is inside.
            let mut spins = 0u32;
            loop {
                if state & LOCKED == 0 {
                    match self.state.compare_exchange_weak(
                        state,
                        (state + CHANGE) & !POSTED,
                        Acquire,
                        Relaxed,
                    ) {
                        Ok(_) => break,
                        Err(actual) => state = actual,
                    }
                } else {
                    // A thief holds it for a few instructions, unless it was preempted.
                    spins += 1;
                    if spins < 64 {
                        crate::loom::spin_loop();
                    } else {
                        crate::loom::thread::yield_now();
                    }
                    state = self.state.load(Relaxed);
                }
            }
            state = (state + CHANGE) & !POSTED;
        }
        // SAFETY: `POSTED` is clear, so no thief is reading `offer` or can start to (see the
        // type's doc), and only this worker writes it.
        let old = self
            .offer
            .with_mut(|cell| unsafe { std::mem::replace(&mut *cell, offer) });
        if offer.is_some() {
            // Release: publishes the pointer to thieves. A plain store: with `POSTED` clear, no
            // thief can set `LOCKED` meanwhile.
            self.state.store((state + CHANGE) | POSTED, Release);
        }
        old
    }

    /// The slot's state word (see `state`), without the thieves' `LOCKED` bit.
    pub(crate) fn state(&self) -> usize {
        self.state.load(Relaxed) & !LOCKED
    }

    pub(crate) fn is_posted(state: usize) -> bool {
        state & POSTED != 0
    }

    /// A reference to the posted offer, if any and if it has work left, to take from. `None`
    /// also while another thief is taking one: it will find the work if there is any.
    pub(crate) fn get(&self) -> Option<Arc<dyn Offer>> {
        let state = self.state.load(Relaxed);
        if state & (POSTED | LOCKED) != POSTED {
            return None;
        }
        self.state
            .compare_exchange(state, state | LOCKED, Acquire, Relaxed)
            .ok()?;
        let pointer = self.offer.with(|cell| {
            // SAFETY: we hold `LOCKED`, so the owner does not write `offer` (see the type's doc).
            unsafe { *cell }
        });
        let offer = pointer.map(|OfferPtr(pointer)| {
            // SAFETY: a posted pointer came from `Arc::as_ptr` of an `Arc` its poster keeps
            // alive until it takes the pointer out of the slot, which waits for `LOCKED` to
            // clear; so the count is above zero, and the reference we add is ours to own.
            unsafe {
                Arc::increment_strong_count(pointer);
                Arc::from_raw(pointer)
            }
        });
        self.state.fetch_and(!LOCKED, Release);
        // Asked after unlocking: `has_work` is the offer's own code.
        offer.filter(|o| o.has_work())
    }
}
