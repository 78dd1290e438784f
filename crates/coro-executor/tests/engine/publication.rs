//! The stack publication protocol of `coro_executor::trace`, driven by hand: what a layer above
//! (coro's tasks) relies on to keep task dumps current at the cost of one comparison per poll.

use coro_executor::ManualExecutor;
use coro_executor::trace::{
    Frame, TraceCell, attach, note_relinked, publish_suspension, snapshot_tasks, without_publishing,
};
use std::panic::Location;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::Poll;

/// What the stack "is" right now, for `fingerprint` and `frames` below, and how often each
/// was called. Tests in this file share them, so they hold `SERIAL` throughout.
static STACK: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
static FINGERPRINTS: AtomicUsize = AtomicUsize::new(0);
static COPIES: AtomicUsize = AtomicUsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    // A failed test must not fail the others too.
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn fingerprint() -> u64 {
    FINGERPRINTS.fetch_add(1, SeqCst);
    let stack = STACK.lock().unwrap();
    stack
        .iter()
        .fold(1, |hash, name| hash * 31 + name.as_ptr() as u64)
}

fn frames() -> Vec<Frame> {
    COPIES.fetch_add(1, SeqCst);
    let stack = STACK.lock().unwrap();
    stack
        .iter()
        .map(|name| Frame::new(*name, Location::caller()))
        .collect()
}

fn set_stack(names: &[&'static str]) {
    *STACK.lock().unwrap() = names.to_vec();
}

/// Two frame identities (only their addresses matter).
static INNER: u8 = 0;
static OUTER: u8 = 0;

fn at(frame: &'static u8) -> *const () {
    std::ptr::from_ref(frame).cast()
}

/// Spawns a task named `name` with an attached cell that runs `poll(n)` at its `n`th poll
/// (from 0) and suspends; returns the executor it runs on. Each `run_one` polls it once.
fn task_with_cell(
    name: &'static str,
    mut poll: impl FnMut(usize) + Send + 'static,
) -> ManualExecutor {
    let ex = ManualExecutor::new();
    let traced = Box::new((TraceCell::new(), Frame::new(name, Location::caller())));
    let mut polls = 0;
    ex.handle()
        .spawn(std::future::poll_fn(move |cx| {
            let (cell, root) = &*traced;
            if !cell.is_attached() {
                // SAFETY: the box is owned by this future until it is dropped, and never moves.
                assert!(unsafe { attach(cell, root) });
            }
            poll(polls);
            polls += 1;
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        }))
        .detach();
    ex
}

fn published(name: &str) -> Vec<String> {
    let task = snapshot_tasks().into_iter().find(|t| t.name() == name);
    let task = task.unwrap_or_else(|| panic!("task {name} is not listed"));
    task.frames().iter().map(|f| f.name().to_owned()).collect()
}

#[test]
fn only_the_first_suspension_of_a_poll_publishes() {
    let _serial = serial();
    let ex = task_with_cell("first_only", |_| {
        set_stack(&["inner", "outer"]);
        publish_suspension(at(&INNER), false, fingerprint, frames);
        set_stack(&["outer"]);
        publish_suspension(at(&OUTER), false, fingerprint, frames);
    });
    ex.run_one();
    assert_eq!(published("first_only"), ["inner", "outer"]);
}

#[test]
fn an_unchanged_suspension_point_is_not_compared_again() {
    let _serial = serial();
    let ex = task_with_cell("unchanged", |_| {
        set_stack(&["inner", "outer"]);
        publish_suspension(at(&INNER), false, fingerprint, frames);
    });
    ex.run_one();
    let compared = FINGERPRINTS.load(SeqCst);
    ex.run_one();
    ex.run_one();
    assert_eq!(
        FINGERPRINTS.load(SeqCst),
        compared,
        "the stack under the same innermost frame was compared again"
    );
    assert_eq!(published("unchanged"), ["inner", "outer"]);
}

#[test]
fn a_relink_before_the_suspension_makes_it_compare_the_stack() {
    let _serial = serial();
    let ex = task_with_cell("relinked_before", |poll| {
        // The same innermost frame each time, but under another awaiter from the second poll.
        if poll == 0 {
            set_stack(&["inner", "outer"]);
        } else {
            set_stack(&["inner", "other"]);
            note_relinked();
        }
        publish_suspension(at(&INNER), false, fingerprint, frames);
    });
    ex.run_one();
    ex.run_one();
    assert_eq!(published("relinked_before"), ["inner", "other"]);
}

#[test]
fn a_relink_after_the_suspension_makes_the_next_poll_compare_the_stack() {
    let _serial = serial();
    let ex = task_with_cell("relinked_after", |poll| {
        set_stack(if poll == 0 {
            &["inner", "outer"]
        } else {
            &["inner", "other"]
        });
        publish_suspension(at(&INNER), false, fingerprint, frames);
        if poll == 0 {
            // Handed over to another awaiter after this poll's publication.
            note_relinked();
        }
    });
    ex.run_one();
    ex.run_one();
    assert_eq!(published("relinked_after"), ["inner", "other"]);
}

#[test]
fn a_suspension_without_publishing_neither_publishes_nor_uses_up_the_poll() {
    let _serial = serial();
    let ex = task_with_cell("without", |_| {
        set_stack(&["child", "outer"]);
        without_publishing(|| publish_suspension(at(&INNER), false, fingerprint, frames));
        set_stack(&["outer"]);
        publish_suspension(at(&OUTER), false, fingerprint, frames);
    });
    let copies = COPIES.load(SeqCst);
    ex.run_one();
    assert_eq!(published("without"), ["outer"]);
    assert_eq!(
        COPIES.load(SeqCst),
        copies + 1,
        "the child's stack was published"
    );
}

#[test]
fn outside_a_task_nothing_is_published() {
    let _serial = serial();
    let compared = FINGERPRINTS.load(SeqCst);
    publish_suspension(at(&INNER), false, fingerprint, frames);
    note_relinked();
    assert_eq!(without_publishing(|| 7), 7);
    assert_eq!(FINGERPRINTS.load(SeqCst), compared);
}

#[test]
fn a_root_frame_alone_is_published_without_a_copy() {
    let _serial = serial();
    let copies = COPIES.load(SeqCst);
    let fingerprints = FINGERPRINTS.load(SeqCst);
    let ex = task_with_cell("alone", |poll| match poll {
        // Suspended in its root frame alone: nothing is copied, nothing fingerprinted.
        0 => publish_suspension(at(&OUTER), true, fingerprint, frames),
        // Deeper: the stack is copied.
        1 => {
            set_stack(&["inner", "alone"]);
            publish_suspension(at(&INNER), false, fingerprint, frames);
        }
        // Alone again, after a copy: the copy is replaced by the root frame's.
        _ => {
            set_stack(&["alone"]);
            publish_suspension(at(&OUTER), true, fingerprint, frames);
        }
    });
    ex.run_one();
    assert_eq!(published("alone"), ["alone"]);
    assert_eq!(COPIES.load(SeqCst), copies, "a root frame alone was copied");
    assert_eq!(FINGERPRINTS.load(SeqCst), fingerprints);
    ex.run_one();
    assert_eq!(published("alone"), ["inner", "alone"]);
    ex.run_one();
    assert_eq!(published("alone"), ["alone"]);
}
