//! The monitor: a pool thread that wakes a parked worker for an offer that stays posted (Go's
//! sysmon, reduced to that one duty).
//!
//! Posting an [`Offer`](super::offer::Offer) wakes nobody, so that short stretches of inline
//! work cost no wake-up. Someone must still notice a long one: a worker busy in a long poll
//! cannot. The monitor looks at every worker's offer slot periodically; an offer whose slot
//! has not changed since the previous look has been posted for at least one period, and gets a
//! parked worker woken for it (through the usual policy: only if nobody is searching). The
//! period starts at [`MIN_PERIOD`] and doubles after every look that woke nobody, up to
//! [`MAX_PERIOD`], so a busy pool whose offers are all short-lived costs one wake-up of this
//! thread per `MAX_PERIOD`. After [`IDLE_LOOKS`] looks in a row without any posted offer the
//! monitor sleeps until the next post wakes it (the only time a post pays for a wake-up), so an
//! idle pool costs nothing.

use super::offer::OfferSlot;
use super::park::Parker;
use super::shared::{Remote, Shared};
use crate::loom::sync::atomic::{AtomicBool, Ordering::*, fence};
use std::sync::Arc;
use std::time::Duration;

/// The shortest period between looks: how soon a stuck offer is noticed while offers are
/// being taken.
pub(crate) const MIN_PERIOD: Duration = Duration::from_micros(50);
/// The longest period between looks while offers are being posted: the bound on how late a
/// parked worker is woken for a stuck offer after a quiet stretch (two periods at most).
pub(crate) const MAX_PERIOD: Duration = Duration::from_millis(1);
/// Looks in a row without any posted offer before the monitor sleeps until the next post.
const IDLE_LOOKS: u32 = 16;

pub(crate) struct Monitor {
    /// Set while the monitor sleeps until the next post.
    sleeping: AtomicBool,
    parker: Parker,
}

impl Monitor {
    pub(crate) fn new() -> Monitor {
        Monitor {
            sleeping: AtomicBool::new(false),
            parker: Parker::new(),
        }
    }

    /// Called after an offer was posted: wakes the monitor if it sleeps until a post.
    pub(crate) fn offer_posted(&self) {
        // Between the post's store and this load; pairs with the fence in `sleep_until_posted`,
        // between its store of `sleeping` and its loads of the slots: either the monitor sees
        // the offer, or we see it asleep (store buffering, as in `Idle`). Fences, not SeqCst
        // accesses: the post's store need not be SeqCst itself, and loom models fences.
        fence(SeqCst);
        if self.sleeping.load(Relaxed) {
            self.parker.unpark();
        }
    }

    /// Sleeps until an offer is posted (or [`wake`](Self::wake)), unless one is posted already.
    pub(crate) fn sleep_until_posted(&self, remotes: &[Remote]) {
        self.sleeping.store(true, Relaxed);
        fence(SeqCst);
        if !remotes
            .iter()
            .any(|r| OfferSlot::is_posted(r.offer.state()))
        {
            self.parker.park();
        }
        self.sleeping.store(false, Relaxed);
    }

    /// Wakes the monitor from any sleep until a post (shutdown).
    pub(crate) fn wake(&self) {
        self.parker.unpark();
    }
}

/// What the monitor saw of the slots in one look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Look {
    /// Some offer was posted.
    pub(crate) posted: bool,
    /// Some offer with work left stayed posted since the previous look, and a parked worker
    /// was notified for it (if the policy had one to wake).
    pub(crate) notified: bool,
}

/// One look at every slot: notifies a parked worker (as the pool's policy allows) if an offer
/// with work left has stayed posted since the previous look, whose slot states are in `last`.
pub(crate) fn look(shared: &Shared, last: &mut [usize]) -> Look {
    let mut seen = Look {
        posted: false,
        notified: false,
    };
    for (remote, last) in shared.remotes.iter().zip(last.iter_mut()) {
        let state = remote.offer.state();
        if OfferSlot::is_posted(state) {
            seen.posted = true;
            if state == *last && !seen.notified && remote.offer.get().is_some() {
                seen.notified = true;
                shared.notify_parked();
            }
        }
        *last = state;
    }
    seen
}

/// The monitor thread of pool `shared`: looks periodically while offers are posted, sleeps
/// until a post otherwise, until the pool shuts down.
pub(crate) fn run(shared: Arc<Shared>) {
    let mut last = vec![0; shared.remotes.len()];
    let mut period = MIN_PERIOD;
    let mut idle_looks = 0;
    while !shared.is_shutdown() {
        if idle_looks >= IDLE_LOOKS {
            shared.monitor.sleep_until_posted(&shared.remotes);
            idle_looks = 0;
            period = MIN_PERIOD;
        } else {
            std::thread::sleep(period);
        }
        let seen = look(&shared, &mut last);
        period = if seen.notified {
            MIN_PERIOD
        } else {
            (period * 2).min(MAX_PERIOD)
        };
        idle_looks = if seen.posted { 0 } else { idle_looks + 1 };
    }
}
