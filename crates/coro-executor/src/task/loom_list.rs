//! Models of the task list (`list.rs`), with wakers that count their wakes and drops:
//! - `loom_tasks_insert_races_close`: a task built before it is listed (as every spawn does)
//!   is either listed, its header naming its slot, and its waker returned by `close` exactly
//!   once; or refused, its header naming no slot (dropping it unlists nothing) and its waker
//!   given back to the spawner, never woken; after `close`, `insert` refuses;
//! - `loom_tasks_remove_races_close`: the waker is either returned by `close` or dropped by
//!   the unlisting (through the task's header, as a dropped future does), exactly once; `remove` hands back a `ClosedEntry` exactly when `close` took the
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
use super::list::{TaskKey, TaskList};
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

/// Lists a new task (a fresh header, and a waker that counts into `log`) in shard 0, which
/// must be open.
fn list(tasks: &TaskList, log: &std::sync::Arc<WakerLog>) -> (TaskKey, NonNull<TaskHeader>) {
    let header = header();
    let key = tasks
        .insert(0, header, Some(Probe::waker(log)))
        .unwrap_or_else(|_| unreachable!("the list is open"));
    (key, header)
}

/// Lists a task without a waker (as other executors' tasks are) in shard 0, which must be
/// open.
fn list_bare(tasks: &TaskList, header: NonNull<TaskHeader>) -> TaskKey {
    tasks
        .insert(0, header, None)
        .unwrap_or_else(|_| unreachable!("the list is open"))
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
        let built = header();
        let inserter = {
            let (tasks, log) = (tasks.clone(), log.clone());
            // The task is built (its header and waker made) before it is listed.
            let header = SendHeader(built);
            thread::spawn(move || {
                let header = header;
                tasks.insert(0, header.0, Some(Probe::waker(&log)))
            })
        };
        let closed = tasks.close();
        let closed_len = closed.len();
        let inserted = inserter.join().unwrap();
        wake_all(closed);
        // SAFETY: (test) the header is leaked, so alive; only this thread reads it now.
        let entry = unsafe { built.as_ref() }.entry();

        match inserted {
            Ok(key) => {
                assert_eq!(entry as usize, key.slot_addr(), "header names another slot");
                assert_eq!(closed_len, 1, "close missed an inserted waker");
                assert_eq!(log.counts(), (1, 1, 1), "waker not handled exactly once");
            }
            Err(waker) => {
                assert!(entry.is_null(), "a refused task's header names a slot");
                assert_eq!(closed_len, 0);
                assert_eq!(log.counts(), (1, 0, 0), "the refused waker was used");
                drop(waker.expect("the waker comes back"));
                assert_eq!(log.counts(), (1, 0, 1));
                // Dropping the refused task's future unlists nothing.
                // SAFETY: (test) as above.
                assert!(TaskList::unlist(unsafe { built.as_ref() }).is_none());
                assert_eq!(tasks.dropping(), 0);
            }
        }
        // Closed for good: the waker comes back unused and nothing is listed.
        let later = header();
        let after = tasks.insert(0, later, Some(Probe::waker(&log)));
        assert!(matches!(after, Err(Some(_))), "listed after close");
        drop(after);
        // SAFETY: (test) leaked, so alive.
        assert!(unsafe { later.as_ref() }.entry().is_null());
    });
}

#[test]
fn loom_tasks_remove_races_close() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let log = std::sync::Arc::new(WakerLog::default());
        let (_, header) = list(&tasks, &log);
        let header = SendHeader(header);
        let remover = thread::spawn(move || {
            let header = header;
            // SAFETY: (test) leaked, so alive.
            TaskList::unlist(unsafe { header.0.as_ref() })
        });
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
        let (key, _) = list(&tasks, &log);
        let remover = { thread::spawn(move || TaskList::remove(key)) };
        let inserter = {
            let (tasks, log) = (tasks.clone(), log.clone());
            thread::spawn(move || {
                let inserted = tasks.insert(0, header(), Some(Probe::waker(&log)));
                // A refused task drops its waker, unused.
                inserted.map_err(drop)
            })
        };
        let closed = tasks.close();
        let closed_len = closed.len();
        wake_all(closed);
        remover.join().unwrap();
        let inserted = inserter.join().unwrap().is_ok();

        let (created, woken, dropped) = log.counts();
        // The second task's waker is made with the task, listed or not.
        assert_eq!(created, 2);
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
        let (key, _) = list(&tasks, &log);
        let remover = { thread::spawn(move || TaskList::remove(key)) };
        wake_all(tasks.close());
        remover.join().unwrap();
        assert_eq!(tasks.live(), 0, "live tasks after close and remove");
    });
}

/// A leaked header, sent to another thread of a model (headers are `Sync`; the pointer is
/// not `Send` by itself).
struct SendHeader(NonNull<TaskHeader>);

// SAFETY: (test) it points at a leaked `TaskHeader`, which is `Sync`.
unsafe impl Send for SendHeader {}

/// A cell that a model's threads share: whether their accesses race is what the model checks
/// (loom checks every access; shuttle, whose `Arc` is std's and needs `Sync`, only the values
/// read).
struct SharedCell<T>(crate::loom::UnsafeCell<T>);

// SAFETY: the models access the cell only as the protocol under test allows, and loom
// reports any access that is not ordered after a conflicting one.
unsafe impl<T: Send> Sync for SharedCell<T> {}

#[test]
fn loom_tasks_remove_waits_for_visitor() {
    model(|| {
        let tasks = Arc::new(TaskList::new(1));
        let header = header();
        let key = list_bare(&tasks, header);
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
        let insert = |tasks: &TaskList| list_bare(tasks, header());
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
