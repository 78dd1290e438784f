//! Models of the pool's lock-free parts and of its wake/park protocol, run by two checkers: loom
//! (exhaustive up to a preemption bound, weak memory orderings) and shuttle (random schedules,
//! no preemption bound, sequential consistency).
//!
//! Run them (and only them) with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro-executor --lib --release --target-dir target/loom -- loom_
//! RUSTFLAGS="--cfg shuttle" \
//!     cargo test -p coro-executor --lib --release --target-dir target/shuttle -- loom_
//! ```
//!
//! Under `--cfg loom` every primitive behind `crate::loom` (and concurrent-queue's atomics) is
//! loom's, so these models explore the code that ships, not a copy. Loom runs model threads as
//! coroutines on one OS thread: nothing here touches `worker.rs`'s thread-locals
//! (`schedule_local`, `shard_hint`, `worker::run`).
//!
//! Under `--cfg shuttle` every primitive behind `crate::loom` is shuttle's instead, and every
//! model here runs unchanged (`crate::loom::model` picks the checker; shuttle too runs model
//! threads as coroutines on one OS thread, so the std thread-locals below are still shared by a
//! model's threads and private to its test). Shuttle runs each model for `SHUTTLE_ITERATIONS`
//! schedules under a uniformly random scheduler and as many under PCT (default 5000 each, CI's
//! count; `.ci/long` runs 1,000,000), seeded by `SHUTTLE_SEED` (fixed by default, so a run is
//! reproducible); a failure prints its schedule, which `SHUTTLE_REPLAY=<schedule>` replays (see
//! `crate::loom::model`). What shuttle adds:
//! - sequential consistency: shuttle runs every atomic operation in one total order, so the
//!   `fence(SeqCst)`s of the idle/notify protocol (`Idle::notify_should_wake` against
//!   `Shared::notify_if_work_pending`) and of the task list's unlisting (`TaskList::remove`
//!   against `TaskList::visit`), which loom only approximates (it runs `SeqCst` accesses as
//!   `AcqRel`, and its `fence(SeqCst)` is a join of views), are modelled as sequentially
//!   consistent: the Dekker pairs' logic is checked with the guarantee the code relies on,
//!   with no false alarm and no missed interleaving from the approximation;
//! - no preemption bound: a schedule may switch threads at every atomic operation, lock and
//!   yield, however many times (loom's CI run allows 2 preemptions).
//!
//! What it does not do, which is why loom stays: it does not model orderings weaker than
//! `SeqCst` (a missing Acquire/Release goes unseen), it samples schedules rather than
//! enumerating them (so the *exhaustive* models below are exhaustive under loom only), and it
//! does not check `UnsafeCell` accesses: where a model says that loom fails an access racing
//! another (queue slots, the offer slot's pointer, `loom_tasks_remove_waits_for_visitor`'s
//! task data), under shuttle only the values the model asserts on can catch the race. The deps
//! built without the cfg (concurrent-queue's global queue, async-task's task state) keep std's
//! atomics under shuttle, so each of their operations is one step there.
//!
//! No model here is loom-only: none uses a loom API beyond `crate::loom` (the only one,
//! `loom::model::Builder`, now sits behind `crate::loom::model`/`model_exhaustive`), and every
//! assertion holds as it is under both. (The timer driver's and `Sleep`'s loom models, in
//! `time/`, are not part of this file and stay loom-only.)
//!
//! What each model proves, for every interleaving loom explores (and every schedule shuttle
//! samples):
//!
//! - Local queue (`queue.rs`); items are boxed, carry an id and are counted while alive, so a lost
//!   item (missing id, or a live count above zero at the end) and a duplicated one (an id seen
//!   twice) both fail the model:
//!   - `loom_queue_push_pop_vs_steal`: the owner pushes and pops while one worker steals into its
//!     own queue; every item is obtained exactly once (owner's pop, the stolen item handed back,
//!     or the thief's queue afterwards), and `steal_into` reports the right count.
//!   - `loom_queue_two_stealers`: the same with two thieves racing each other and the owner.
//!   - `loom_queue_overflow_vs_steal`: the ring is full (256 real slots, filled before the threads
//!     start); the owner's push overflows while a thief steals half. Items sent to the overflow
//!     sink match `push_back`'s return value (0, 1 or 129), and no item is lost or duplicated.
//!   - `loom_queue_pop_vs_steal_single_item`: owner and thief race for the last item; exactly one
//!     of them gets it.
//!   - `loom_queue_full_ring_pop_push_vs_steal`: full ring; the owner pops one and pushes one
//!     (wrapping onto slot 0) while a thief copies out the front half: the owner never writes a
//!     slot a thief is still reading (loom checks every slot access), nothing lost or duplicated.
//!   - `loom_queue_full_ring_two_stealers`: full ring, two thieves and an overflowing push: the
//!     same, whichever thief finishes first (a second claim while one is in flight would let the
//!     owner overwrite the first thief's slots).
//! - Parker (`park.rs`):
//!   - `loom_parker_unpark_before_park`: a token saved by an earlier `unpark` (from another
//!     thread) makes `park` return at once;
//!   - `loom_parker_unpark_races_park`: an `unpark` racing `park` always wakes it (otherwise
//!     loom reports a deadlock), and what the unparker wrote before is visible after `park`;
//!   - `loom_parker_two_unparks_one_token`: two unparks leave one token: the second `park` sleeps
//!     until a third `unpark`;
//!   - `loom_parker_two_unparkers`: two threads unparking at once wake the parker exactly as one.
//! - Park/notify protocol (`idle.rs`, `shared.rs`, `worker.rs`): a real `Shared` with two workers,
//!   whose threads replay `Worker::run`/`next_task`/`search`/`park`/`run_task` call for call
//!   (`ModelWorker`), while the model's main thread schedules one task from outside the pool
//!   (`Shared::schedule_remote`: global-queue push, then `notify_parked`). The task shuts the
//!   pool down when it runs, which lets every worker exit; if the task were stranded in the queue
//!   with every worker parked, no thread could make progress and the checker reports a deadlock. So
//!   each model proves "no lost wake-up: the task is always run, exactly once":
//!   - `loom_protocol_searcher_parks`: worker 0 is the searcher and gives up (parks as the last
//!     searcher, so it must rescan); worker 1 is already asleep;
//!   - `loom_protocol_searcher_parks_other_busy`: worker 0 is the searcher and parks while
//!     worker 1 is awake but busy in a long task (not searching, not looking at any queue), so
//!     only the last-searcher rescan stands between the task and a lost wake-up;
//!   - `loom_protocol_non_searcher_parks`: worker 0 cannot search (worker 1 is the searcher) and
//!     parks without rescanning; worker 1 searches and parks too;
//!   - `loom_protocol_both_park`: two workers, neither searching, both run out of work and park;
//!   - `loom_protocol_busy_worker_schedules_locally`: the work is not in the global queue but in
//!     a busy worker's next slot and local queue (`Worker::schedule_local`, replayed by the main
//!     thread, which then runs its next slot and stays busy); the other worker must steal and
//!     run what waits in the local queue.
//!   - `loom_protocol_next_slot_alone_other_{asleep,searching,running}`: a worker inside a poll
//!     that never returns schedules one task, which lands alone in its next slot; the push
//!     announces it (Go's `wakep`), and the other worker, whether asleep, searching or running
//!     out of work, takes it from the next slot once the owner stays in its poll through the
//!     grace period (or finds it in its last-searcher rescan): never stranded, run once.
//!   - `loom_handoff_wakes_a_parked_worker` (exhaustive), `loom_handoff_races_a_searcher`: the
//!     monitor's handoff of a worker stuck with an unannounced task in its next slot moves it to
//!     the global queue and wakes the parked worker, or races a searcher that takes it from the
//!     next slot: run exactly once either way; `loom_handoff_every_worker_busy_asks_for_a_helper`:
//!     with every worker busy the handoff asks for a helper and leaves the task globally queued.
//! - Task list (`tasks.rs`), with wakers that count their wakes and drops:
//!   - `loom_tasks_insert_races_close`: an inserted waker is returned by `close` exactly once,
//!     or `insert` gives the value back unused (and then `make` never ran); after `close`,
//!     `insert` returns `Err(value)`;
//!   - `loom_tasks_remove_races_close`: the waker is either returned by `close` or dropped by
//!     `remove`, exactly once;
//!   - `loom_tasks_insert_remove_close`: both races at once, on one shard (the insert may reuse
//!     the slot being freed);
//!   - `loom_tasks_live_count_after_close`: `live()` is 0 after `close`, never wrapped by a
//!     `remove` racing it.
//!   - `loom_tasks_remove_waits_for_visitor`: an unlisting racing a snapshot-style visit returns
//!     only once the visitor cannot be reading the task any more (the task's data, written by
//!     the unlister after `remove` as a dropped future would be, is a loom cell, so an
//!     unsynchronised read by the visitor fails the model);
//!   - `loom_tasks_returned_slots_reused`: two unlisters on two threads return their slots to
//!     the shard's returned stack while the owner lists a task (and may take the stack whole);
//!     every listed task ends in its own slot, and the count of live tasks is exact.
//! - Offers and the monitor (`offer.rs`, `monitor.rs`), with a test offer that counts its
//!   `take`s. A model keeps a handle of its own to each offer, so a reference that a thief adds
//!   or drops wrongly shows in the final strong count (which must be 1, that handle) instead of
//!   freeing the offer; the slot's pointer is a loom cell, so a read racing the owner's write
//!   fails the model. The models marked *exhaustive* explore every interleaving, whatever
//!   `LOOM_MAX_PREEMPTIONS` says:
//!   - `loom_offer_take_races_revoke` (exhaustive): the owner posts an offer and revokes it while
//!     a thief `get`s it and, if it got it, takes from it. The thief never reads the slot while
//!     the owner writes it, gets only the posted offer, and `take` runs once if it got it; the
//!     revoke returns the posted pointer, and no reference leaks or is dropped twice;
//!   - `loom_offer_take_races_revoke_two_thieves`: the same with two thieves, which may also
//!     find the slot locked by each other (`get` then says `None`);
//!   - `loom_offer_nested_post_restores_outer` (exhaustive): nested `offer_while`s post A, post B
//!     (which hides A), restore A (which revokes B) and revoke A while a thief `get`s once: it gets
//!     A, B or nothing, each `replace` returns what it replaced, and the counts end exact;
//!   - `loom_monitor_sleep_races_worker_wake_up` (exhaustive): the monitor going to sleep while
//!     every worker is parked races a remote spawn that wakes a worker; the monitor is always
//!     woken too, or sees the woken worker and does not sleep (a lost wake-up is a deadlock;
//!     without the monitor's unpark in `notify_parked` it deadlocks);
//!   - `loom_monitor_wakes_parked_worker_for_stuck_offer` (exhaustive): worker 1 is asleep and
//!     worker 0 busy with an offer posted, which wakes nobody; the monitor's second look sees it
//!     still posted and notifies worker 1, which finds the offer while searching (`ModelWorker`
//!     checks offers as `Worker::search` does) and takes it exactly once; the offer's `take`
//!     shuts the pool down, so a lost wake-up is a loom deadlock.
//!
//! A failing model either panics with the broken assertion or reports `deadlock` (a lost
//! wake-up: every thread blocked); loom's deadlock panic aborts the test binary, so run a single
//! model by name to see which (shuttle's fails only that model's test).

use super::handoff;
use super::monitor::{self, Look};
use super::offer::{Offer, OfferPtr, OfferSlot};
use super::queue::{self, CAPACITY, Local};
use super::shared::{Remote, Shared, wait_next_slot_grace};
use super::worker::SEARCH_PASSES;
use super::{park::Parker, tasks::TaskList};
use crate::blocking::BlockingPool;
use crate::executor::Runnable;
use crate::loom::sync::Arc;
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::thread;
use crate::loom::{model, model_exhaustive};
use crate::trace::TaskHeader;
use std::cell::Cell;
use std::ptr::NonNull;
use std::task::{Wake, Waker};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Local queue
// ---------------------------------------------------------------------------------------------

std::thread_local! {
    /// Queue items alive in the current model iteration. Loom and shuttle run all model threads
    /// on the test's OS thread, so this std thread-local is shared by them and private to the test.
    static LIVE_ITEMS: Cell<isize> = const { Cell::new(0) };
}

/// A queue item: a heap box (a slot read twice would be a double free) with an id, counted while
/// alive (a slot overwritten or never read again leaks it).
struct Item(Box<usize>);

impl Item {
    fn new(id: usize) -> Item {
        LIVE_ITEMS.with(|n| n.set(n.get() + 1));
        Item(Box::new(id))
    }

    fn id(&self) -> usize {
        *self.0
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        LIVE_ITEMS.with(|n| n.set(n.get() - 1));
    }
}

fn live_items() -> isize {
    LIVE_ITEMS.with(Cell::get)
}

/// Start of a model iteration: a previous iteration that failed may have left items behind.
fn reset_live_items() {
    LIVE_ITEMS.with(|n| n.set(0));
}

/// Pops everything left in `local`, single-threaded after the model threads are joined.
fn drain(local: &mut Local<Item>) -> Vec<Item> {
    std::iter::from_fn(|| local.pop()).collect()
}

/// Fails the model without dropping `items`: after a duplication two of them share one box, and
/// freeing it twice would abort the test binary instead of reporting the failure.
fn fail(items: Vec<Item>, message: std::fmt::Arguments<'_>) -> ! {
    std::mem::forget(items);
    panic!("{message}");
}

/// Every id in `0..n` obtained exactly once, and no other item alive.
fn assert_each_once(got: Vec<Item>, n: usize) {
    let mut ids: Vec<usize> = got.iter().map(Item::id).collect();
    ids.sort_unstable();
    if ids != (0..n).collect::<Vec<_>>() {
        fail(
            got,
            format_args!("an item was lost or duplicated: got ids {ids:?}"),
        );
    }
    assert_eq!(live_items(), n as isize, "an item leaked");
    drop(got);
    assert_eq!(live_items(), 0);
}

fn no_overflow(_: Item) {
    panic!("the ring cannot be full here");
}

/// What a thief ends with: the item `steal_into` handed back plus the rest of the batch from its
/// own queue; checks the count `steal_into` reported.
fn stolen_items(result: Option<(Item, usize)>, dst: &mut Local<Item>) -> Vec<Item> {
    let rest = drain(dst);
    match result {
        Some((item, count)) => {
            let mut all = rest;
            all.push(item);
            if all.len() != count {
                let got = all.len();
                fail(
                    all,
                    format_args!("steal_into reported {count} items, gave {got}"),
                );
            }
            all
        }
        None => {
            if !rest.is_empty() {
                fail(rest, format_args!("a failed steal left items behind"));
            }
            rest
        }
    }
}

#[test]
fn loom_queue_push_pop_vs_steal() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = queue::local::<Item>();
        owner.push_back(Item::new(0), &mut no_overflow);

        let thief = thread::spawn(move || {
            let (mut dst, _dst_steal) = queue::local::<Item>();
            let result = victim.steal_into(&mut dst);
            stolen_items(result, &mut dst)
        });

        owner.push_back(Item::new(1), &mut no_overflow);
        owner.push_back(Item::new(2), &mut no_overflow);
        let mut got: Vec<Item> = owner.pop().into_iter().collect();

        got.extend(thief.join().unwrap());
        got.extend(drain(&mut owner));
        assert_each_once(got, 3);
    });
}

#[test]
fn loom_queue_pop_vs_steal_single_item() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = queue::local::<Item>();
        owner.push_back(Item::new(0), &mut no_overflow);

        let thief = thread::spawn(move || {
            let (mut dst, _dst_steal) = queue::local::<Item>();
            let result = victim.steal_into(&mut dst);
            stolen_items(result, &mut dst)
        });

        let popped = owner.pop();
        let stolen = thief.join().unwrap();
        assert_eq!(popped.is_some() as usize + stolen.len(), 1);
        let mut got = stolen;
        got.extend(popped);
        got.extend(drain(&mut owner));
        assert_each_once(got, 1);
    });
}

#[test]
fn loom_queue_two_stealers() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = queue::local::<Item>();
        for id in 0..3 {
            owner.push_back(Item::new(id), &mut no_overflow);
        }

        let thieves: Vec<_> = (0..2)
            .map(|_| {
                let victim = victim.clone();
                thread::spawn(move || {
                    let (mut dst, _dst_steal) = queue::local::<Item>();
                    let result = victim.steal_into(&mut dst);
                    stolen_items(result, &mut dst)
                })
            })
            .collect();
        drop(victim);

        let mut got: Vec<Item> = owner.pop().into_iter().collect();
        owner.push_back(Item::new(3), &mut no_overflow);

        for thief in thieves {
            got.extend(thief.join().unwrap());
        }
        got.extend(drain(&mut owner));
        assert_each_once(got, 4);
    });
}

#[test]
fn loom_queue_overflow_vs_steal() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = queue::local::<Item>();
        // Single-threaded setup is cheap for loom: fill every real slot before racing.
        for id in 0..CAPACITY {
            owner.push_back(Item::new(id), &mut no_overflow);
        }

        let thief = thread::spawn(move || {
            let (mut dst, _dst_steal) = queue::local::<Item>();
            let result = victim.steal_into(&mut dst);
            stolen_items(result, &mut dst)
        });

        let mut sink = Vec::new();
        let moved = owner.push_back(Item::new(CAPACITY), &mut |item| sink.push(item));
        assert_eq!(moved, sink.len(), "push_back miscounted what it overflowed");
        // Nothing overflows if the thief freed room first; one item goes while it is copying;
        // half the ring plus the new item otherwise.
        assert!(
            [0, 1, CAPACITY / 2 + 1].contains(&moved),
            "unexpected overflow size {moved}"
        );

        let stolen = thief.join().unwrap();
        if moved == 0 {
            assert!(
                !stolen.is_empty(),
                "a full ring took a push without a steal"
            );
        }
        let mut got = sink;
        got.extend(stolen);
        got.extend(drain(&mut owner));
        assert_each_once(got, CAPACITY + 1);
    });
}

/// A ring with every real slot filled, built before the model's threads start (single-threaded
/// setup is cheap for loom), so that the owner's next pushes wrap around onto the slots a thief
/// claims first.
fn full_ring() -> (Local<Item>, queue::Steal<Item>) {
    let (mut owner, victim) = queue::local::<Item>();
    for id in 0..CAPACITY {
        owner.push_back(Item::new(id), &mut no_overflow);
    }
    (owner, victim)
}

/// A thief: steals once into a queue of its own and returns all it got.
fn spawn_thief(victim: queue::Steal<Item>) -> thread::JoinHandle<Vec<Item>> {
    thread::spawn(move || {
        let (mut dst, _dst_steal) = queue::local::<Item>();
        let result = victim.steal_into(&mut dst);
        stolen_items(result, &mut dst)
    })
}

#[test]
fn loom_queue_full_ring_pop_push_vs_steal() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = full_ring();
        let thief = spawn_thief(victim);

        // The pop frees a slot, but while the thief copies out the front half the owner must
        // still not reuse it: the push wraps onto slot 0, the thief's first one.
        let mut got: Vec<Item> = owner.pop().into_iter().collect();
        let mut sink = Vec::new();
        let moved = owner.push_back(Item::new(CAPACITY), &mut |item| sink.push(item));
        assert_eq!(moved, sink.len(), "push_back miscounted what it overflowed");
        assert!(moved <= 1, "a ring with room overflowed {moved} items");

        got.extend(sink);
        got.extend(thief.join().unwrap());
        got.extend(drain(&mut owner));
        assert_each_once(got, CAPACITY + 1);
    });
}

#[test]
fn loom_queue_full_ring_two_stealers() {
    model(|| {
        reset_live_items();
        let (mut owner, victim) = full_ring();
        let thieves = [spawn_thief(victim.clone()), spawn_thief(victim)];

        // While either thief copies, the slots it claimed are not reusable, whichever thief
        // finishes first.
        let mut sink = Vec::new();
        let moved = owner.push_back(Item::new(CAPACITY), &mut |item| sink.push(item));
        assert_eq!(moved, sink.len(), "push_back miscounted what it overflowed");

        let mut got = sink;
        for thief in thieves {
            got.extend(thief.join().unwrap());
        }
        got.extend(drain(&mut owner));
        assert_each_once(got, CAPACITY + 1);
    });
}

// ---------------------------------------------------------------------------------------------
// Parker
// ---------------------------------------------------------------------------------------------

#[test]
fn loom_parker_unpark_before_park() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let unparker = {
            let parker = parker.clone();
            thread::spawn(move || parker.unpark())
        };
        unparker.join().unwrap();
        // The token is saved: this returns at once (a lost token is a loom deadlock).
        parker.park();
    });
}

#[test]
fn loom_parker_unpark_races_park() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let flag = Arc::new(AtomicBool::new(false));
        let unparker = {
            let (parker, flag) = (parker.clone(), flag.clone());
            thread::spawn(move || {
                flag.store(true, Relaxed);
                parker.unpark();
            })
        };
        parker.park();
        // `park` does not return spuriously, and the unpark orders the unparker's writes first.
        assert!(flag.load(Relaxed), "park returned before unpark");
        unparker.join().unwrap();
    });
}

#[test]
fn loom_parker_two_unparks_one_token() {
    model(|| {
        let parker = Arc::new(Parker::new());
        parker.unpark();
        parker.unpark();
        parker.park();
        let flag = Arc::new(AtomicBool::new(false));
        let unparker = {
            let (parker, flag) = (parker.clone(), flag.clone());
            thread::spawn(move || {
                flag.store(true, Relaxed);
                parker.unpark();
            })
        };
        // Only one token was saved: this park has to wait for the third unpark.
        parker.park();
        assert!(flag.load(Relaxed), "two unparks left two tokens");
        unparker.join().unwrap();
    });
}

#[test]
fn loom_parker_two_unparkers() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let unparkers: Vec<_> = (0..2)
            .map(|_| {
                let parker = parker.clone();
                thread::spawn(move || parker.unpark())
            })
            .collect();
        parker.park();
        for unparker in unparkers {
            unparker.join().unwrap();
        }
        // However the two overlapped, the parker is consistent afterwards: the second unpark
        // either merged with the first or left one token, never a panic or a stuck state.
        parker.unpark();
        parker.park();
    });
}

// ---------------------------------------------------------------------------------------------
// Park/notify protocol
// ---------------------------------------------------------------------------------------------

/// `worker::Worker` for the models: the same calls on `Shared`/`Idle`/`Parker`/queues/offer slots
/// in the same order. Left out, as irrelevant to wake-ups or impossible under loom: the
/// thread-locals (`CURRENT`, `SHARD_HINT`), the metrics counters, the every-61st-tick
/// global-queue check (a worker's tick starts at 1 and the models end long before 61), the
/// next-slot streak cap (the models never fill a next slot), the random victim order (loom needs
/// determinism; with two workers there is one victim anyway), `take_offer`'s `catch_unwind` (a
/// model's offer does not panic, and a failed assertion in one must fail the model) and `drain`
/// (the models leave nothing to drain).
struct ModelWorker {
    shared: Arc<Shared>,
    index: usize,
    /// `Core::local`.
    local: Local<Runnable>,
    /// `Core::is_searching`.
    is_searching: bool,
}

impl ModelWorker {
    /// `Worker::run`. With `asleep`, the worker starts inside `Worker::park`'s wait loop, its
    /// `idle.park` already done by the model's setup.
    fn run(mut self, asleep: bool) {
        if asleep {
            self.wait_for_unpark();
        }
        while !self.shared.is_shutdown() {
            if let Some(task) = self.next_task() {
                self.run_task(task);
                continue;
            }
            match self.search() {
                Some(Found::Task(task)) => self.run_task(task),
                Some(Found::Offer(offer)) => self.take_offer(offer),
                None => self.park(),
            }
        }
    }

    /// `Worker::next_task`: the next slot, the local queue, the global queue.
    fn next_task(&mut self) -> Option<Runnable> {
        let remote = &self.shared.remotes[self.index];
        if remote.has_next() {
            if let Some(task) = remote.take_next() {
                return Some(task);
            }
        }
        if let Some(task) = self.local.pop() {
            return Some(task);
        }
        self.shared.inject.pop().ok()
    }

    /// `Worker::run_task`: the last searcher to find work wakes another worker; the poll
    /// counter moves before the poll.
    fn run_task(&mut self, task: Runnable) {
        if self.is_searching {
            self.is_searching = false;
            if self.shared.idle.stop_searching() {
                self.shared.notify_parked();
            }
        }
        self.shared.remotes[self.index].counters.polls.add(1);
        task.run();
    }

    /// `Worker::take_offer`: take from an offer found while searching, staying a searcher.
    fn take_offer(&mut self, offer: std::sync::Arc<dyn Offer>) {
        offer.take();
    }

    /// `Worker::search`: become a searcher (if at most half search), then steal from each victim
    /// or take a reference to its posted offer, and try the global queue, `SEARCH_PASSES`
    /// times; last, take a victim's next slot if its owner stayed in the same poll through the
    /// grace period.
    fn search(&mut self) -> Option<Found> {
        if !self.is_searching {
            if !self.shared.idle.try_start_searching() {
                return None;
            }
            self.is_searching = true;
        }
        let remotes = &self.shared.remotes;
        let n = remotes.len();
        let mut held_next = None;
        for _ in 0..SEARCH_PASSES {
            for i in 1..n {
                let victim = (self.index + i) % n;
                if let Some((task, _)) = remotes[victim].steal.steal_into(&mut self.local) {
                    return Some(Found::Task(task));
                }
                if held_next.is_none() && remotes[victim].has_next() {
                    held_next = Some((victim, remotes[victim].owner_polls()));
                }
                if let Some(offer) = remotes[victim].offer.get() {
                    return Some(Found::Offer(offer));
                }
            }
            if let Ok(task) = self.shared.inject.pop() {
                return Some(Found::Task(task));
            }
        }
        let (victim, polls) = held_next?;
        wait_next_slot_grace();
        if remotes[victim].owner_polls() != polls {
            return None;
        }
        remotes[victim].take_next().map(Found::Task)
    }

    /// `Worker::park`: record the park (rescanning every queue if this was the last searcher or
    /// the last worker awake), then sleep.
    fn park(&mut self) {
        let was_searching = std::mem::replace(&mut self.is_searching, false);
        if self.shared.idle.park(self.index, was_searching, false) {
            self.shared.notify_if_work_pending();
        }
        self.wait_for_unpark();
    }

    /// The loop at the end of `Worker::park`: sleep until shut down or really chosen (then as a
    /// searcher, as whoever woke us counted us).
    fn wait_for_unpark(&mut self) {
        loop {
            self.shared.remotes[self.index].parker.park();
            if self.shared.is_shutdown() {
                return;
            }
            if self.shared.idle.unpark_confirmed(self.index) {
                self.is_searching = true;
                return;
            }
        }
    }
}

/// `worker::Found`: what a search found.
enum Found {
    Task(Runnable),
    Offer(std::sync::Arc<dyn Offer>),
}

/// A pool's shared state with `workers` workers, built as `ThreadPool::from_builder` does, and
/// each worker's local queue.
fn new_shared(workers: usize) -> (Arc<Shared>, Vec<Local<Runnable>>) {
    let (locals, remotes): (Vec<_>, Vec<_>) = (0..workers)
        .map(|_| {
            let (local, steal) = queue::local();
            (local, Remote::new(steal))
        })
        .unzip();
    let blocking = BlockingPool::new("loom-blocking".into(), 1, Duration::from_secs(1));
    let shared = Arc::new(Shared::new(remotes.into_boxed_slice(), blocking));
    (shared, locals)
}

/// How a model worker starts.
#[derive(Clone, Copy)]
enum Start {
    /// At the top of `Worker::run`'s loop, searching or not.
    Running { searching: bool },
    /// Asleep: inside `Worker::park`'s wait loop (setup did its `idle.park`).
    Asleep,
    /// Awake, not searching, and inside a task that outlasts the model: counted as unparked by
    /// `Idle`, but no thread of the model ever looks for work for it.
    Busy,
}

/// Starts the two workers as given, schedules one task from outside the pool as
/// `Shared::schedule_remote` does, and checks that it runs exactly once. The task begins the
/// pool's shutdown when it runs, which is what lets the workers' threads end: a lost wake-up
/// leaves every thread blocked, which loom and shuttle report as a deadlock.
fn protocol_model(starts: [Start; 2]) {
    let (shared, locals) = new_shared(2);
    setup_idle(&shared, starts);
    let workers: Vec<_> = locals
        .into_iter()
        .zip(starts)
        .enumerate()
        .filter_map(|(index, (local, start))| {
            let (searching, asleep) = match start {
                Start::Running { searching } => (searching, false),
                Start::Asleep => (false, true),
                Start::Busy => return None,
            };
            let worker = ModelWorker {
                shared: shared.clone(),
                index,
                local,
                is_searching: searching,
            };
            Some(thread::spawn(move || worker.run(asleep)))
        })
        .collect();

    let ran = Arc::new(AtomicUsize::new(0));
    shared.schedule_remote(counted_task(&shared, &ran, 1));

    for worker in workers {
        worker.join().unwrap();
    }
    assert_eq!(ran.load(Relaxed), 1, "the task did not run exactly once");
    assert!(shared.inject.is_empty());
}

/// A task that counts its runs in `ran` and shuts the pool down when `ran` reaches `total`.
/// async-task's own atomics are std ones, which is fine: only one model thread touches a task
/// at a time, handed over through the (loom-modelled) queues.
fn counted_task(shared: &Arc<Shared>, ran: &Arc<AtomicUsize>, total: usize) -> Runnable {
    let (shared, ran) = (shared.clone(), ran.clone());
    let (runnable, handle) = async_task::Builder::new()
        .metadata(TaskHeader::new())
        .spawn(
            move |_| async move {
                if ran.fetch_add(1, Relaxed) + 1 == total {
                    shared.begin_shutdown();
                }
            },
            |_| {},
        );
    handle.detach();
    runnable
}

/// `Worker::schedule_local` (a task woken, not yielded, by the running task) with
/// `Worker::push_back`, for worker `index`, busy and not searching, whose local queue is `local`:
/// every push wakes a parked worker if nobody searches (Go's `wakep` after `runqput`).
fn schedule_local_busy(
    shared: &Shared,
    index: usize,
    local: &mut Local<Runnable>,
    runnable: Runnable,
) {
    if let Some(displaced) = shared.remotes[index].put_next(runnable) {
        local.push_back(displaced, &mut |task| {
            if let Err(closed) = shared.inject.push(task) {
                drop(closed.into_inner());
            }
        });
    }
    shared.notify_parked();
}

/// Makes the setup's idle bookkeeping match `starts`, as the workers' own earlier calls would
/// have: asleep workers have parked (not searching), and searching ones have started searching.
fn setup_idle(shared: &Shared, starts: [Start; 2]) {
    for (index, start) in starts.into_iter().enumerate() {
        match start {
            Start::Asleep => {
                shared.idle.park(index, false, false);
            }
            Start::Running { searching: true } => {
                assert!(shared.idle.try_start_searching());
            }
            Start::Running { searching: false } | Start::Busy => {}
        }
    }
}

/// Runs `protocol_model` with `starts` under the build's checker.
fn protocol(starts: [Start; 2]) {
    model(move || protocol_model(starts));
}

#[test]
fn loom_protocol_searcher_parks() {
    // Worker 0 is the searcher and finds nothing (or the task); worker 1 is asleep.
    protocol([Start::Running { searching: true }, Start::Asleep]);
}

#[test]
fn loom_protocol_searcher_parks_other_busy() {
    // Worker 0 is the searcher; worker 1 is awake but stuck in a long task, so worker 0 is not
    // the last worker awake: only the last-searcher rescan (or the searcher's own search) can
    // find a task whose notifier counted on the searcher.
    protocol([Start::Running { searching: true }, Start::Busy]);
}

#[test]
fn loom_protocol_non_searcher_parks() {
    // Worker 1 is the searcher, so worker 0 cannot search: it parks without rescanning.
    protocol([
        Start::Running { searching: false },
        Start::Running { searching: true },
    ]);
}

#[test]
fn loom_protocol_both_park() {
    // Neither searches yet; both run out of work and park (one may search first).
    protocol([
        Start::Running { searching: false },
        Start::Running { searching: false },
    ]);
}

#[test]
fn loom_protocol_busy_worker_schedules_locally() {
    // Worker 1 (the model's main thread) is busy in a long task that wakes two tasks: the first
    // goes to its next slot, the second displaces it into the local queue; each push notifies
    // (Go's `wakep` after `runqput`). Then worker 1 serves its next
    // slot (`Worker::next_task`) and that task runs long too: whatever waits in worker 1's local
    // queue can only be run by worker 0 (awake, not searching at first), which must get it.
    model(|| {
        let (shared, mut locals) = new_shared(2);
        let mut busy_local = locals.pop().expect("two workers");
        let worker = ModelWorker {
            shared: shared.clone(),
            index: 0,
            local: locals.pop().expect("two workers"),
            is_searching: false,
        };
        let worker = thread::spawn(move || worker.run(false));

        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let task = counted_task(&shared, &ran, 2);
            schedule_local_busy(&shared, 1, &mut busy_local, task);
        }
        // Worker 1's task returns: `Worker::next_task` takes the next slot first, `run_task`
        // runs it (worker 1 is not searching). Worker 0 may have stolen it already.
        if let Some(task) = shared.remotes[1].take_next() {
            task.run();
        }
        worker.join().unwrap();
        assert_eq!(
            ran.load(Relaxed),
            2,
            "the tasks did not run exactly once each"
        );
        assert!(busy_local.is_empty() && !shared.remotes[1].has_next());
    });
}

/// A two-worker pool whose worker 1 is busy (in a poll that outlasts the model) and whose
/// worker 0 starts as `start` says: the shared state, worker 0 (to run on a model thread), whether
/// it starts asleep, and worker 1's local queue.
fn beside_a_busy_worker(start: Start) -> (Arc<Shared>, ModelWorker, bool, Local<Runnable>) {
    let (shared, mut locals) = new_shared(2);
    let busy_local = locals.pop().expect("two workers");
    setup_idle(&shared, [start, Start::Busy]);
    let (searching, asleep) = match start {
        Start::Running { searching } => (searching, false),
        Start::Asleep => (false, true),
        Start::Busy => unreachable!("worker 0 must be able to run the task"),
    };
    let worker = ModelWorker {
        shared: shared.clone(),
        index: 0,
        local: locals.pop().expect("two workers"),
        is_searching: searching,
    };
    (shared, worker, asleep, busy_local)
}

/// Worker 1 (the model's main thread) is inside a poll that never returns, and schedules one
/// task, which lands alone in its next slot; worker 0 starts as `start` says. Worker 1 never
/// runs its next slot, so only worker 0 can run the task: the push must wake it (or a searcher
/// must find the task), and worker 0 must take it from the next slot once worker 1 stays in
/// its poll through the grace period. A stranded task leaves worker 0 parked for ever: a loom
/// deadlock.
fn next_slot_alone_model(start: Start) {
    let (shared, worker, asleep, mut busy_local) = beside_a_busy_worker(start);
    let worker = thread::spawn(move || worker.run(asleep));

    let ran = Arc::new(AtomicUsize::new(0));
    schedule_local_busy(&shared, 1, &mut busy_local, counted_task(&shared, &ran, 1));
    // ... and worker 1's poll goes on for ever: it never looks at its queues again.
    worker.join().unwrap();
    assert_eq!(ran.load(Relaxed), 1, "the task did not run exactly once");
}

#[test]
fn loom_protocol_next_slot_alone_other_asleep() {
    model(|| next_slot_alone_model(Start::Asleep));
}

#[test]
fn loom_protocol_next_slot_alone_other_searching() {
    model(|| next_slot_alone_model(Start::Running { searching: true }));
}

#[test]
fn loom_protocol_next_slot_alone_other_running() {
    model(|| next_slot_alone_model(Start::Running { searching: false }));
}

/// The monitor's handoff (`handoff::hand_off`) for worker 1, stuck in a poll with a task in its
/// next slot that nobody was woken for, while worker 0 starts as `start` says: the task runs
/// exactly once, whether the handoff moves it to the global queue (and wakes worker 0) or
/// worker 0, searching, takes it from the next slot first; and a helper is asked for only if
/// nobody could be woken and nobody searches.
fn handoff_model(start: Start) {
    let (shared, worker, asleep, _) = beside_a_busy_worker(start);
    let ran = Arc::new(AtomicUsize::new(0));
    // Put there unannounced, as if its announcement had gone to a searcher that missed it.
    assert!(
        shared.remotes[1]
            .put_next(counted_task(&shared, &ran, 1))
            .is_none()
    );
    let worker = thread::spawn(move || worker.run(asleep));

    let wants_helper = handoff::hand_off(&shared, 1);
    worker.join().unwrap();
    assert_eq!(ran.load(Relaxed), 1, "the task did not run exactly once");
    if asleep {
        assert!(!wants_helper, "a parked worker was there to wake");
    }
}

#[test]
fn loom_handoff_wakes_a_parked_worker() {
    model_exhaustive(|| handoff_model(Start::Asleep));
}

#[test]
fn loom_handoff_races_a_searcher() {
    model(|| handoff_model(Start::Running { searching: true }));
}

#[test]
fn loom_handoff_every_worker_busy_asks_for_a_helper() {
    // Both workers stuck in polls: nobody to wake, nobody searching; the handoff moves the
    // next-slot task to the global queue and asks for a helper.
    model(|| {
        let (shared, _locals) = new_shared(2);
        setup_idle(&shared, [Start::Busy, Start::Busy]);
        let ran = Arc::new(AtomicUsize::new(0));
        assert!(
            shared.remotes[1]
                .put_next(counted_task(&shared, &ran, 1))
                .is_none()
        );
        assert!(
            handoff::hand_off(&shared, 1),
            "every worker is busy: a helper is needed"
        );
        assert!(!shared.remotes[1].has_next());
        let task = shared
            .inject
            .pop()
            .expect("the handoff queues the task globally");
        task.run();
        assert_eq!(ran.load(Relaxed), 1);
    });
}

// ---------------------------------------------------------------------------------------------
// Offers and the monitor
// ---------------------------------------------------------------------------------------------

/// An offer for the models: it always has work, and `take` counts its calls and, given a pool,
/// begins that pool's shutdown (as a task that shuts the pool down lets `protocol_model`'s
/// threads exit). `Offer` works with `std::sync::Arc`, so the models' offers are std `Arc`s;
/// the model keeps one handle of its own to each, so that a reference added or dropped wrongly
/// shows up in the final strong count rather than as a use after free.
struct TestOffer {
    taken: AtomicUsize,
    shuts_down: Option<Arc<Shared>>,
}

impl TestOffer {
    fn new(shuts_down: Option<Arc<Shared>>) -> std::sync::Arc<TestOffer> {
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
        let worker = ModelWorker {
            shared: shared.clone(),
            index: 1,
            local: locals.pop().expect("two workers"),
            is_searching: false,
        };
        let worker = thread::spawn(move || worker.run(true));

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

// ---------------------------------------------------------------------------------------------
// Task list
// ---------------------------------------------------------------------------------------------

/// What happened to the wakers of one model iteration (std atomics: only read after the joins).
#[derive(Default)]
struct WakerLog {
    created: std::sync::atomic::AtomicUsize,
    woken: std::sync::atomic::AtomicUsize,
    dropped: std::sync::atomic::AtomicUsize,
}

impl WakerLog {
    fn get(counter: &std::sync::atomic::AtomicUsize) -> usize {
        counter.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn bump(counter: &std::sync::atomic::AtomicUsize) {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// (created, woken, dropped)
    fn counts(&self) -> (usize, usize, usize) {
        (
            Self::get(&self.created),
            Self::get(&self.woken),
            Self::get(&self.dropped),
        )
    }
}

/// A task header for a list entry. Leaked: entries only need an address that stays valid, and
/// snapshots (which would read it) are not part of these models.
fn header() -> NonNull<TaskHeader> {
    NonNull::from(Box::leak(Box::new(TaskHeader::new())))
}

/// A task's waker as the task list sees it: counts its wakes and its drop.
struct Probe(std::sync::Arc<WakerLog>);

impl Probe {
    fn waker(log: &std::sync::Arc<WakerLog>) -> Waker {
        WakerLog::bump(&log.created);
        Waker::from(std::sync::Arc::new(Probe(log.clone())))
    }
}

impl Wake for Probe {
    fn wake(self: std::sync::Arc<Self>) {
        WakerLog::bump(&self.0.woken);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        WakerLog::bump(&self.0.dropped);
    }
}

/// Shutdown's part after `close`: wake every returned waker (which consumes it).
fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

#[test]
fn loom_tasks_insert_races_close() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let log = std::sync::Arc::new(WakerLog::default());
        let inserter = {
            let (tasks, log) = (tasks.clone(), log.clone());
            thread::spawn(move || {
                tasks.insert(0, Box::new(7usize), |key, value| {
                    (Some(Probe::waker(&log)), header(), (key, value))
                })
            })
        };
        let closed = tasks.close();
        let closed_len = closed.len();
        let inserted = inserter.join().unwrap();
        wake_all(closed);

        match inserted {
            Ok((_key, value)) => {
                assert_eq!(*value, 7);
                assert_eq!(closed_len, 1, "close missed an inserted waker");
                assert_eq!(log.counts(), (1, 1, 1), "waker not handled exactly once");
            }
            Err(value) => {
                assert_eq!(*value, 7, "insert gave back another value");
                assert_eq!(closed_len, 0);
                assert_eq!(log.counts(), (0, 0, 0), "make ran on a closed list");
            }
        }
        // Closed for good: the value comes back and `make` is not called.
        let after = tasks.insert(
            0,
            9usize,
            |_, _| -> (Option<Waker>, NonNull<TaskHeader>, ()) {
                unreachable!("make called after close")
            },
        );
        assert!(matches!(after, Err(9)));
    });
}

#[test]
fn loom_tasks_remove_races_close() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let log = std::sync::Arc::new(WakerLog::default());
        let key = tasks
            .insert(0, (), |key, ()| (Some(Probe::waker(&log)), header(), key))
            .unwrap_or_else(|()| unreachable!());
        let remover = { thread::spawn(move || TaskList::remove(key)) };
        let closed = tasks.close();
        let closed_len = closed.len();
        wake_all(closed);
        remover.join().unwrap();

        // Either close took the waker (and shutdown woke it) or remove dropped it; never both,
        // never neither.
        assert!(closed_len <= 1);
        assert_eq!(
            log.counts(),
            (1, closed_len, 1),
            "waker not handled exactly once"
        );
    });
}

#[test]
fn loom_tasks_insert_remove_close() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let log = std::sync::Arc::new(WakerLog::default());
        // Same shard for both, so the insert may reuse the slot the remove frees.
        let key = tasks
            .insert(0, (), |key, ()| (Some(Probe::waker(&log)), header(), key))
            .unwrap_or_else(|()| unreachable!());
        let remover = { thread::spawn(move || TaskList::remove(key)) };
        let inserter = {
            let (tasks, log) = (tasks.clone(), log.clone());
            thread::spawn(move || {
                tasks.insert(0, (), |key, ()| (Some(Probe::waker(&log)), header(), key))
            })
        };
        let closed = tasks.close();
        let closed_len = closed.len();
        wake_all(closed);
        remover.join().unwrap();
        let inserted = inserter.join().unwrap().is_ok();

        let (created, woken, dropped) = log.counts();
        assert_eq!(created, 1 + inserted as usize);
        assert_eq!(dropped, created, "a waker leaked or was dropped twice");
        assert_eq!(woken, closed_len);
        // The inserted waker, if any, can only have gone to close (nobody removes it).
        assert!(closed_len >= inserted as usize);
    });
}

/// `remove` racing `close`: `remove` counts down under the shard lock, and `close` resets the
/// count only after taking every shard lock, so the count ends at 0 and never wraps (it once
/// did: the decrement used to happen after the lock was released).
#[test]
fn loom_tasks_live_count_after_close() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let log = std::sync::Arc::new(WakerLog::default());
        let key = tasks
            .insert(0, (), |key, ()| (Some(Probe::waker(&log)), header(), key))
            .unwrap_or_else(|()| unreachable!());
        let remover = { thread::spawn(move || TaskList::remove(key)) };
        wake_all(tasks.close());
        remover.join().unwrap();
        assert_eq!(tasks.live(), 0, "live tasks after close and remove");
    });
}

/// A cell that a model's threads share: whether their accesses race is what the model checks
/// (loom checks every access; shuttle, whose `Arc` is std's and needs `Sync`, only the values
/// read).
struct SharedCell<T>(crate::loom::UnsafeCell<T>);

// SAFETY (test): the models access the cell only as the protocol under test allows; loom
// reports any access that is not ordered after a conflicting one.
unsafe impl<T: Send> Sync for SharedCell<T> {}

#[test]
fn loom_tasks_remove_waits_for_visitor() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let header = header();
        let key = tasks
            .insert(0, (), |key, ()| (None, header, key))
            .unwrap_or_else(|()| unreachable!());
        // Stands for the task's future, which is dropped once `remove` returns.
        let data = Arc::new(SharedCell(crate::loom::UnsafeCell::new(1u32)));
        let remover = {
            let data = data.clone();
            thread::spawn(move || {
                TaskList::remove(key);
                // SAFETY: (test) the list promises no visitor reads the task from here on.
                data.0.with_mut(|d| unsafe { *d = 0 });
            })
        };
        let mut seen = 0;
        tasks.visit(
            |_| {},
            |_, listed| {
                assert_eq!(listed, header);
                // SAFETY: (test) the task is listed, so it cannot have been dropped yet.
                assert_eq!(data.0.with(|d| unsafe { *d }), 1, "read a dropped task");
                seen += 1;
            },
        );
        remover.join().unwrap();
        assert!(seen <= 1);
        assert_eq!(tasks.live(), 0);
    });
}

#[test]
fn loom_tasks_returned_slots_reused() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let insert = |tasks: &TaskList| {
            tasks
                .insert(0, (), |key, ()| (None, header(), key))
                .unwrap_or_else(|()| unreachable!())
        };
        let first = insert(&tasks);
        let second = insert(&tasks);
        let removers: Vec<_> = [first, second]
            .into_iter()
            .map(|key| thread::spawn(move || TaskList::remove(key)))
            .collect();
        let third = insert(&tasks);
        for remover in removers {
            remover.join().unwrap();
        }
        // Both returned slots are free now; two more listings may reuse them.
        let fourth = insert(&tasks);
        let fifth = insert(&tasks);
        let slots = [third, fourth, fifth].map(|key| key.slot_addr());
        assert!(
            slots[0] != slots[1] && slots[0] != slots[2] && slots[1] != slots[2],
            "two listed tasks share a slot: {slots:?}"
        );
        assert_eq!(tasks.live(), 3);
        for key in [third, fourth, fifth] {
            TaskList::remove(key);
        }
        assert_eq!(tasks.live(), 0);
    });
}
