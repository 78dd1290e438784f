//! Models of the local run queue (`queue.rs`): what each proves, for every interleaving loom
//! explores (and every schedule shuttle samples). Items are boxed, carry an id and are counted while alive, so a lost
//! item (missing id, or a live count above zero at the end) and a duplicated one (an id seen
//! twice) both fail the model:
//! - `loom_queue_push_pop_vs_steal`: the owner pushes and pops while one worker steals into its
//!   own queue; every item is obtained exactly once (owner's pop, the stolen item handed back,
//!   or the thief's queue afterwards), and `steal_into` reports the right count.
//! - `loom_queue_two_stealers`: the same with two thieves racing each other and the owner.
//! - `loom_queue_overflow_vs_steal`: the ring is full (256 real slots, filled before the threads
//!   start); the owner's push overflows while a thief steals half. Items sent to the overflow
//!   sink match `push_back`'s return value (0, 1 or 129), and no item is lost or duplicated.
//! - `loom_queue_pop_vs_steal_single_item`: owner and thief race for the last item; exactly one
//!   of them gets it.
//! - `loom_queue_full_ring_pop_push_vs_steal`: full ring; the owner pops one and pushes one
//!   (wrapping onto slot 0) while a thief copies out the front half: the owner never writes a
//!   slot a thief is still reading (loom checks every slot access), nothing lost or duplicated.
//! - `loom_queue_full_ring_two_stealers`: full ring, two thieves and an overflowing push: the
//!   same, whichever thief finishes first (a second claim while one is in flight would let the
//!   owner overwrite the first thief's slots).
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::queue::{self, CAPACITY, Local};
use crate::loom::model;
use crate::loom::thread;
use std::cell::Cell;

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
