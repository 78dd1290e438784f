//! Models of offers (`offer.rs`) and the monitor (`monitor.rs`), with a test offer that counts its
//! `take`s. A model keeps a handle of its own to each offer, so a reference that a thief adds
//! or drops wrongly shows in the final strong count (which must be 1, that handle) instead of
//! freeing the offer; the slot's pointer is a loom cell, so a read racing the owner's write
//! fails the model. The models marked *exhaustive* explore every interleaving, whatever
//! `LOOM_MAX_PREEMPTIONS` says:
//! - `loom_offer_take_races_revoke` (exhaustive): the owner posts an offer and revokes it while
//!   a thief `get`s it and, if it got it, takes from it. The thief never reads the slot while
//!   the owner writes it, gets only the posted offer, and `take` runs once if it got it; the
//!   revoke returns the posted pointer, and no reference leaks or is dropped twice;
//! - `loom_offer_take_races_revoke_two_thieves`: the same with two thieves, which may also
//!   find the slot locked by each other (`get` then says `None`);
//! - `loom_offer_nested_post_restores_outer` (exhaustive): nested `offer_while`s post A, post B
//!   (which hides A), restore A (which revokes B) and revoke A while a thief `get`s once: it gets
//!   A, B or nothing, each `replace` returns what it replaced, and the counts end exact;
//! - `loom_monitor_sleep_races_worker_wake_up` (exhaustive): the monitor going to sleep while
//!   every worker is parked races a remote spawn that wakes a worker; the monitor is always
//!   woken too, or sees the woken worker and does not sleep (a lost wake-up is a deadlock;
//!   without the monitor's unpark in `notify_parked` it deadlocks);
//! - `loom_monitor_wakes_parked_worker_for_stuck_offer` (exhaustive): worker 1 is asleep and
//!   worker 0 busy with an offer posted, which wakes nobody; the monitor's second look sees it
//!   still posted and notifies worker 1, which finds the offer while searching (the pool's own
//!   `Worker`, run by `worker::model::run_model`) and takes it exactly once; the offer's `take`
//!   shuts the pool down, so a lost wake-up is a loom deadlock.
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::loom_protocol::{Start, counted_task, new_shared, setup_idle};
use super::monitor::{self, Look};
use super::offer::{Offer, OfferPtr, OfferSlot};
use super::shared::Shared;
use super::worker::model::{self, ModelStart};
use crate::loom::sync::Arc;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::thread;
use crate::loom::{model, model_exhaustive};

/// An offer for the models: it always has work, and `take` counts its calls and, given a pool,
/// begins that pool's shutdown (as a task that shuts the pool down lets `protocol_model`'s
/// threads exit). `Offer` works with `std::sync::Arc`, so the models' offers are std `Arc`s;
/// the model keeps one handle of its own to each, so that a reference added or dropped wrongly
/// shows up in the final strong count rather than as a use after free.
struct TestOffer {
    taken: AtomicUsize,
    shuts_down: Option<std::sync::Arc<Shared>>,
}

impl TestOffer {
    fn new(shuts_down: Option<std::sync::Arc<Shared>>) -> std::sync::Arc<TestOffer> {
        std::sync::Arc::new(TestOffer {
            taken: AtomicUsize::new(0),
            shuts_down,
        })
    }

    fn taken(&self) -> usize {
        self.taken.load(Relaxed)
    }
}

impl Offer for TestOffer {
    fn has_work(&self) -> bool {
        true
    }

    fn take(self: std::sync::Arc<Self>) {
        self.taken.fetch_add(1, Relaxed);
        if let Some(shared) = &self.shuts_down {
            shared.begin_shutdown();
        }
    }
}

/// What `offer_while` posts for `offer`: a pointer into the `Arc` it lends.
fn offer_ptr(offer: &std::sync::Arc<TestOffer>) -> OfferPtr {
    let pointer: *const TestOffer = std::sync::Arc::as_ptr(offer);
    let pointer: *const dyn Offer = pointer;
    OfferPtr(pointer)
}

/// The address an offer pointer points at (comparable across its `dyn` and concrete forms).
fn addr_of_ptr(pointer: Option<OfferPtr>) -> Option<usize> {
    pointer.map(|OfferPtr(pointer)| pointer.cast::<()>().addr())
}

fn addr_of<T: ?Sized>(offer: &std::sync::Arc<T>) -> usize {
    std::sync::Arc::as_ptr(offer).cast::<()>().addr()
}

/// `OfferSlot::replace` by the slot's owner: the model's main thread, the only one that calls it.
fn replace(slot: &OfferSlot, offer: Option<OfferPtr>) -> Option<OfferPtr> {
    // SAFETY: only the model's main thread (the slot's worker) replaces, and every model keeps
    // the `Arc` it lends alive until it has replaced the pointer in turn.
    unsafe { slot.replace(offer) }
}

/// A thief, as a searching worker is (`Worker::search`, then `take_offer`): takes a reference to
/// the slot's offer if one is posted, and takes from it; returns the address of what it got.
fn steal_offer(slot: &OfferSlot) -> Option<usize> {
    let offer = slot.get()?;
    let addr = addr_of(&offer);
    offer.take();
    Some(addr)
}

/// The owner posts an offer and revokes it while `thieves` threads each try once to take it.
fn offer_race_model(thieves: usize) {
    let slot = Arc::new(OfferSlot::new());
    let offer = TestOffer::new(None);
    let posted = addr_of(&offer);
    let thieves: Vec<_> = (0..thieves)
        .map(|_| {
            let slot = slot.clone();
            thread::spawn(move || steal_offer(&slot))
        })
        .collect();

    // The poster's reference, lent to the slot while posted (`offer_while` borrows it).
    let lent = offer.clone();
    assert!(replace(&slot, Some(offer_ptr(&lent))).is_none());
    let revoked = replace(&slot, None);
    assert_eq!(
        addr_of_ptr(revoked),
        Some(posted),
        "the revoke did not return the posted offer"
    );
    drop(lent);

    let mut took = 0;
    for thief in thieves {
        if let Some(got) = thief.join().unwrap() {
            assert_eq!(got, posted, "a thief got an offer that was never posted");
            took += 1;
        }
    }
    assert_eq!(
        offer.taken(),
        took,
        "take did not run once per thief that got the offer"
    );
    assert_eq!(
        std::sync::Arc::strong_count(&offer),
        1,
        "a reference to the offer leaked or was dropped twice"
    );
}

#[test]
fn loom_offer_take_races_revoke() {
    model_exhaustive(|| offer_race_model(1));
}

#[test]
fn loom_offer_take_races_revoke_two_thieves() {
    model(|| offer_race_model(2));
}

#[test]
fn loom_offer_nested_post_restores_outer() {
    // What nested `offer_while` calls do to the slot: the outer one posts A, the inner one posts
    // B (hiding A), the inner `Revoke` restores A, the outer one revokes it.
    model_exhaustive(|| {
        let slot = Arc::new(OfferSlot::new());
        let (outer, inner) = (TestOffer::new(None), TestOffer::new(None));
        let (a, b) = (addr_of(&outer), addr_of(&inner));
        let thief = {
            let slot = slot.clone();
            thread::spawn(move || steal_offer(&slot))
        };

        let lent_outer = outer.clone();
        assert!(replace(&slot, Some(offer_ptr(&lent_outer))).is_none());
        let lent_inner = inner.clone();
        let hidden = replace(&slot, Some(offer_ptr(&lent_inner)));
        assert_eq!(addr_of_ptr(hidden), Some(a), "posting B did not hide A");
        let revoked = replace(&slot, hidden);
        assert_eq!(
            addr_of_ptr(revoked),
            Some(b),
            "restoring A did not revoke B"
        );
        drop(lent_inner);
        let revoked = replace(&slot, None);
        assert_eq!(
            addr_of_ptr(revoked),
            Some(a),
            "the last revoke did not return A"
        );
        drop(lent_outer);

        let got = thief.join().unwrap();
        assert!(
            got.is_none() || got == Some(a) || got == Some(b),
            "the thief got an offer that was never posted"
        );
        assert_eq!(outer.taken(), usize::from(got == Some(a)));
        assert_eq!(inner.taken(), usize::from(got == Some(b)));
        for offer in [&outer, &inner] {
            assert_eq!(
                std::sync::Arc::strong_count(offer),
                1,
                "a reference to an offer leaked or was dropped twice"
            );
        }
    });
}

#[test]
fn loom_monitor_sleep_races_worker_wake_up() {
    // Every worker is parked, so the monitor goes to sleep (`monitor::run` after a quiet
    // stretch) while a task is scheduled from outside the pool, which wakes a worker: the
    // monitor must be woken too, or it stays parked forever and the join below is a loom
    // deadlock. (The woken worker's thread is not modelled: its parker keeps the token.)
    model_exhaustive(|| {
        let (shared, _locals) = new_shared(2);
        setup_idle(&shared, [Start::Asleep, Start::Asleep]);
        let monitor = {
            let shared = shared.clone();
            thread::spawn(move || monitor::sleep_while_all_parked(&shared))
        };

        let ran = Arc::new(AtomicUsize::new(0));
        shared.schedule_remote(counted_task(&shared, &ran, 1));

        // Slept (and was woken), or saw the woken worker and did not sleep.
        let _slept = monitor.join().unwrap();
        drop(shared.inject.pop());
        assert_eq!(ran.load(Relaxed), 0, "nobody ran the task here");
    });
}

#[test]
fn loom_monitor_wakes_parked_worker_for_stuck_offer() {
    // Worker 0 (the model's main thread) is busy in a task that has posted an offer; worker 1 is
    // asleep. Posting wakes nobody: only the monitor, seeing the offer still posted at its second
    // look, notifies a parked worker, which must find the offer while searching and take it. The
    // offer's `take` shuts the pool down, which lets worker 1 exit: a lost wake-up is a loom
    // deadlock.
    model_exhaustive(|| {
        let (shared, mut locals) = new_shared(2);
        setup_idle(&shared, [Start::Busy, Start::Asleep]);
        let local = locals.pop().expect("two workers");
        let worker = {
            let shared = shared.clone();
            thread::spawn(move || {
                model::run_model(shared, 1, local, ModelStart::Asleep);
            })
        };

        // `offer_while` on worker 0.
        let offer = TestOffer::new(Some(shared.clone()));
        let lent = offer.clone();
        let slot = &shared.remotes[0].offer;
        assert!(replace(slot, Some(offer_ptr(&lent))).is_none());

        // `monitor::run`'s loop for two looks, without its sleeps.
        let monitor = {
            let shared = shared.clone();
            thread::spawn(move || {
                let mut last = vec![0; shared.remotes.len()];
                let mut looks = Vec::new();
                for _ in 0..2 {
                    if shared.is_shutdown() {
                        break;
                    }
                    looks.push(monitor::look(&shared, &mut last));
                }
                looks
            })
        };

        worker.join().unwrap();
        let looks = monitor.join().unwrap();
        let first = Look {
            posted: true,
            notified: false,
        };
        let second = Look {
            posted: true,
            notified: true,
        };
        assert_eq!(
            looks,
            [first, second],
            "the monitor did not notify for the stuck offer"
        );
        assert_eq!(addr_of_ptr(replace(slot, None)), Some(addr_of(&offer)));
        drop(lent);
        assert_eq!(offer.taken(), 1, "the offer was not taken exactly once");
        assert!(shared.is_shutdown());
        assert_eq!(std::sync::Arc::strong_count(&offer), 1);
    });
}
