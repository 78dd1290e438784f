//! Offers: work a busy worker makes available to idle ones without spawning anything.
//!
//! A task that is about to run a batch of work inline (a collect starting its children) can
//! *post* an [`Offer`] on its worker for the duration of that stretch. Posting costs a few
//! uncontended atomic operations and wakes nobody; if the stretch is short, the offer is
//! revoked before anyone looks, and the batch ran with no spawn at all. Only when the worker
//! stays busy with an offer posted does the pool's monitor (`monitor.rs`, Go's sysmon in
//! miniature) wake a parked worker, which finds the offer while searching and calls
//! [`Offer::take`]; that is when the work gets spawned, on the idle worker.
//!
//! The slot is written only by its worker and read by thieves under its lock: taking an offer
//! is rare, posting and revoking are not, and an uncontended lock is two atomic operations.

use super::shared::Shared;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::marker::PhantomData;
use std::sync::Arc;

/// Work a running task offers to idle workers of its pool, posted with [`post_offer`].
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
///     let posted = coro_executor::post_offer(job.clone());
///     // ... other work; an idle worker may take the job meanwhile ...
///     drop(posted);
///     job.claim() // run it here unless it was taken
/// });
/// futures::executor::block_on(ran_here).unwrap();
/// ```
pub trait Offer: Send + Sync + 'static {
    /// Whether anything is left to take. Idle workers (and the monitor that wakes them) skip an
    /// offer that says no, so that one left posted while its last piece runs elsewhere does
    /// not keep them busy. It may be stale: `take` must still cope with finding nothing.
    fn has_work(&self) -> bool;

    /// Takes (part of) the offered work, on an idle worker of the pool that found it posted.
    fn take(self: Arc<Self>);
}

/// Posts `offer` on the current worker until the returned guard is dropped, so that idle
/// workers can take from it while this worker stays busy (see [`Offer`]). The previous offer of
/// this worker, if any, is hidden until then (offers nest: an inner stretch of work offers its
/// own).
///
/// Returns `None`, posting nothing, outside a [`ThreadPool`](crate::ThreadPool) worker and on
/// a pool of one worker, where nobody could take it. The guard is not `Send`: an offer is
/// posted for a stretch of one poll, never across an await.
///
/// ```
/// use coro_executor::Offer;
/// use std::sync::Arc;
///
/// struct Nothing;
/// impl Offer for Nothing {
///     fn has_work(&self) -> bool {
///         false
///     }
///     fn take(self: Arc<Self>) {}
/// }
///
/// // Outside a pool there is nobody to offer to.
/// assert!(coro_executor::post_offer(Arc::new(Nothing)).is_none());
/// ```
#[must_use = "the offer is revoked when the guard is dropped"]
pub fn post_offer(offer: Arc<dyn Offer>) -> Option<OfferGuard> {
    super::worker::with_current_worker(|shared, index| {
        if shared.remotes.len() < 2 {
            return None;
        }
        let remote = &shared.remotes[index];
        let previous = remote.offer.replace(Some(offer));
        shared.monitor.offer_posted();
        Some(OfferGuard {
            shared: Arc::as_ptr(shared),
            index,
            previous,
            _not_send: PhantomData,
        })
    })
    .flatten()
}

/// Keeps an offer posted; dropping it revokes the offer and restores the one it hid, if any.
/// Returned by [`post_offer`].
///
/// ```
/// use coro_executor::{Offer, ThreadPool};
/// use std::sync::Arc;
///
/// struct Nothing;
/// impl Offer for Nothing {
///     fn has_work(&self) -> bool {
///         false
///     }
///     fn take(self: Arc<Self>) {}
/// }
///
/// let pool = ThreadPool::new(2).unwrap();
/// let posted = pool.spawn(async {
///     let guard = coro_executor::post_offer(Arc::new(Nothing));
///     let posted = guard.is_some();
///     drop(guard); // revoked
///     posted
/// });
/// assert!(futures::executor::block_on(posted).unwrap());
/// ```
pub struct OfferGuard {
    /// Only compared and, while this thread is still its worker, dereferenced: the worker's own
    /// reference keeps the pool alive (a reference per post would be an atomic update on a
    /// line every worker shares).
    shared: *const Shared,
    index: usize,
    previous: Option<Arc<dyn Offer>>,
    _not_send: PhantomData<*const ()>,
}

impl Drop for OfferGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        let revoked = super::worker::with_current_worker(|shared, index| {
            // The guard cannot leave its thread, and the thread is the worker for as long as a
            // task runs on it; checked anyway, so that a guard kept past that revokes nothing.
            (std::ptr::eq(Arc::as_ptr(shared), self.shared) && index == self.index)
                .then(|| shared.remotes[index].offer.replace(previous))
        });
        // Dropped outside the slot's lock: the last reference to an offer may run its owner's
        // destructors.
        drop(revoked);
    }
}

impl std::fmt::Debug for OfferGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OfferGuard")
            .field("worker", &self.index)
            .finish_non_exhaustive()
    }
}

/// A worker's offer slot.
pub(crate) struct OfferSlot {
    offer: Mutex<Option<Arc<dyn Offer>>>,
    /// `changes << 1 | posted`. Written only by the owning worker; the monitor reads it to tell
    /// an offer that stays posted (the same value twice) from a stream of short-lived ones.
    state: AtomicUsize,
}

impl OfferSlot {
    pub(crate) fn new() -> OfferSlot {
        OfferSlot {
            offer: Mutex::new(None),
            state: AtomicUsize::new(0),
        }
    }

    /// Replaces the posted offer (owner only), returning the old one.
    pub(crate) fn replace(&self, offer: Option<Arc<dyn Offer>>) -> Option<Arc<dyn Offer>> {
        let posted = offer.is_some() as usize;
        let old = std::mem::replace(&mut *self.offer.lock().unwrap(), offer);
        let state = (self.state.load(Relaxed) >> 1).wrapping_add(1) << 1 | posted;
        if posted == 1 {
            // SeqCst: a post pairs with the monitor's deep-sleep check (`Monitor::offer_posted`).
            self.state.store(state, SeqCst);
        } else {
            self.state.store(state, Release);
        }
        old
    }

    /// The slot's state word (see `state`).
    pub(crate) fn state(&self) -> usize {
        self.state.load(SeqCst)
    }

    pub(crate) fn is_posted(state: usize) -> bool {
        state & 1 != 0
    }

    /// A reference to the posted offer, if any and if it has work left, to take from.
    pub(crate) fn get(&self) -> Option<Arc<dyn Offer>> {
        if !Self::is_posted(self.state.load(Acquire)) {
            return None;
        }
        let offer = self.offer.lock().unwrap();
        offer.as_ref().filter(|o| o.has_work()).cloned()
    }
}
