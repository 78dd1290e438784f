//! Models of a task's published stack against a snapshot taken on another thread:
//! - `loom_snapshot_of_a_suspended_task_shows_its_published_stack`: a poll attaches the task's
//!   cell, publishes the stack it suspends in and ends (the state word's `Release`); a snapshot
//!   racing it that reads the task suspended shows that stack, never the root frame alone that
//!   the task showed before it published. (Reading the stack before the state fails this
//!   model: a task caught in its first poll was reported suspended at its root.) A snapshot
//!   that reads it running or scheduled shows some stack of the poll (the state was read first).
//!   The pairing of the poll end's `Release` with the snapshot's `Acquire` is argued where
//!   they stand (`task/current.rs`, `TaskHeader::state`); loom does not try the stale read
//!   that leaving it out would allow here.
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them).

use super::{Frame, TraceCell, attach, publish_suspension, snapshot_of};
use crate::loom::model_exhaustive;
use crate::loom::sync::Arc;
use crate::loom::thread;
use crate::task::current;
use crate::task::{TaskHeader, TaskState};
use std::panic::Location;

/// One task's header, its cell and its root frame, shared by the poller and the snapshot.
struct Task {
    header: TaskHeader,
    cell: TraceCell,
    root: Frame,
    /// The innermost frame the poll suspends in (only its address is used).
    inner: Frame,
}

fn fingerprint() -> u64 {
    7
}

fn frames() -> Vec<Frame> {
    vec![
        Frame::new("inner", Location::caller()),
        Frame::new("root", Location::caller()),
    ]
}

fn names(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(Frame::name).collect()
}

#[test]
fn loom_snapshot_of_a_suspended_task_shows_its_published_stack() {
    model_exhaustive(|| {
        let task = Arc::new(Task {
            header: TaskHeader::new(),
            cell: TraceCell::with_parent(None),
            root: Frame::new("root", Location::caller()),
            inner: Frame::new("inner", Location::caller()),
        });
        let poller = {
            let task = task.clone();
            thread::spawn(move || {
                let mut running = current::enter(&task.header);
                // SAFETY: the cell and the root live in the `Arc`, unmoved, until both threads
                // are joined, after which nothing snapshots the task.
                assert!(unsafe { attach(&task.cell, &task.root) });
                let inner: *const Frame = &task.inner;
                publish_suspension(inner.cast(), false, fingerprint, frames);
                running.suspends();
            })
        };
        // The poll's first access is a load, which loom does not try to order before the
        // snapshot's loads: yielding lets the poll run first, and loom interleaves from there.
        thread::yield_now();
        // SAFETY: the task is not dropped before the poller is joined (the `Arc` above).
        let seen = unsafe { snapshot_of(&task.header) };
        let stack = names(seen.frames());
        if seen.state() == TaskState::Suspended {
            assert_eq!(stack, ["inner", "root"], "suspended, with a stale stack");
        } else {
            // Read before the stack, the state may be older than it: any stack of the poll.
            let stacks: [&[&str]; 3] = [&[], &["root"], &["inner", "root"]];
            assert!(stacks.contains(&stack.as_slice()), "{stack:?}");
        }
        poller.join().unwrap();
        // SAFETY: the `Arc` still holds the task, and the poller is joined.
        let after = unsafe { snapshot_of(&task.header) };
        assert_eq!(after.state(), TaskState::Suspended);
        assert_eq!(names(after.frames()), ["inner", "root"]);
    });
}
