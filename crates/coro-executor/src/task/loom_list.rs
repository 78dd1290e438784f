//! Models of the task list (`list.rs`), with wakers that count their wakes and drops:
//! - `loom_tasks_insert_races_close`: an inserted waker is returned by `close` exactly once,
//!   or `insert` gives the value back unused (and then `make` never ran); after `close`,
//!   `insert` returns `Err(value)`;
//! - `loom_tasks_remove_races_close`: the waker is either returned by `close` or dropped by
//!   `remove`, exactly once; `remove` hands back a `ClosedEntry` exactly when `close` took the
//!   entry, and `dropping()` counts that task until the `ClosedEntry` is dropped (never a task
//!   that `remove` got first);
//! - `loom_tasks_insert_remove_close`: both races at once, on one shard (the insert may reuse
//!   the slot being freed);
//! - `loom_tasks_live_count_after_close`: `live()` is 0 after `close`, never wrapped by a
//!   `remove` racing it.
//! - `loom_tasks_remove_waits_for_visitor`: an unlisting racing a snapshot-style visit returns
//!   only once the visitor cannot be reading the task any more (the task's data, written by
//!   the unlister after `remove` as a dropped future would be, is a loom cell, so an
//!   unsynchronised read by the visitor fails the model);
//! - `loom_tasks_returned_slots_reused`: two unlisters on two threads return their slots to
//!   the shard's returned stack while the owner lists a task (and may take the stack whole);
//!   every listed task ends in its own slot, and the count of live tasks is exact.
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::header::TaskHeader;
use super::list::TaskList;
use crate::loom::model;
use crate::loom::sync::Arc;
use crate::loom::thread;
use std::ptr::NonNull;
use std::task::{Wake, Waker};

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
        let closed_entry = remover.join().unwrap();

        // Either close took the waker (and shutdown woke it) or remove dropped it; never both,
        // never neither.
        assert!(closed_len <= 1);
        assert_eq!(
            log.counts(),
            (1, closed_len, 1),
            "waker not handled exactly once"
        );
        // Shutdown waits for the task close took until its future is dropped, and only then.
        assert_eq!(
            closed_entry.is_some(),
            closed_len == 1,
            "remove did not say whether close took its entry"
        );
        assert_eq!(tasks.dropping(), closed_len, "close miscounted its tasks");
        drop(closed_entry);
        assert_eq!(tasks.dropping(), 0, "a dropped task is still counted");
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
            |_, _, listed| {
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
