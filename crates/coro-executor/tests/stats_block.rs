//! Per-task statistics live in a block outside the task, made only when a task suspends while
//! statistics are on: a task spawned before they came on has none (zero counters, no time in
//! its state) until its first poll after, which counts and, as it suspends, gives it one; a
//! task spawned while they are on is marked at its spawn, so its time queued before a first
//! poll is known (what `Starving` needs). What a task waits on lives in its header, so a wait
//! registered while nobody looked is seen by the first look.
//!
//! Statistics are process-wide, so this is its own test binary with one `#[test]`, which turns
//! them on midway.

use coro_executor::trace::{TaskSnapshot, WaitOn, request_stats, snapshot_tasks, stats_enabled};
use coro_executor::{ManualExecutor, ThreadPool, trace::current_task_id, trace::wait_on};
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

fn task(id: u64) -> TaskSnapshot {
    snapshot_tasks()
        .into_iter()
        .find(|t| t.id() == id)
        .expect("the task is listed")
}

/// Spawns `future` on `manual` without running it, and returns its handle and its task's id.
fn spawn_unpolled(manual: &ManualExecutor) -> (coro_executor::JoinHandle<()>, u64) {
    let before: Vec<u64> = snapshot_tasks().iter().map(TaskSnapshot::id).collect();
    let handle = manual.handle().spawn(async {});
    let new: Vec<u64> = snapshot_tasks()
        .iter()
        .map(TaskSnapshot::id)
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(new.len(), 1, "one task was spawned");
    (handle, new[0])
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "hung: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn statistics_count_from_the_first_poll_after_they_came_on_and_waits_are_always_seen() {
    assert!(
        !stats_enabled(),
        "nothing in this binary asked for statistics yet"
    );
    let pool = ThreadPool::new(1).unwrap();
    let manual = ManualExecutor::new();

    // Spawned while statistics are off: waits on "channel 7" across polls.
    let (tx, mut rx) = mpsc::unbounded::<()>();
    let (id_tx, id_rx) = oneshot::channel();
    let received = Arc::new(AtomicUsize::new(0));
    let seen = received.clone();
    let receiver = pool.spawn(async move {
        id_tx.send(current_task_id().unwrap()).unwrap();
        let _waiting = wait_on(WaitOn::Channel(7));
        while rx.next().await.is_some() {
            seen.fetch_add(1, SeqCst);
        }
    });
    let receiver_id = futures::executor::block_on(id_rx).unwrap();
    tx.unbounded_send(()).unwrap();
    wait_until("the first message", || received.load(SeqCst) == 1);
    let (early, early_id) = spawn_unpolled(&manual);

    let before = task(receiver_id);
    assert_eq!(before.waiting_on(), Some(WaitOn::Channel(7)));
    assert_eq!(
        before.polls(),
        0,
        "nothing counted while statistics were off"
    );
    assert_eq!(task(early_id).in_state_for(), None);

    request_stats();
    let (late, late_id) = spawn_unpolled(&manual);
    std::thread::sleep(Duration::from_millis(20));
    // Spawned while on: queued since its spawn, and known to be.
    let queued = task(late_id)
        .in_state_for()
        .expect("a task spawned while statistics are on knows how long it has been queued");
    assert!(queued >= Duration::from_millis(10), "{queued:?}");
    // Spawned before and never polled since: no block, so nothing known.
    assert_eq!(task(early_id).in_state_for(), None);
    assert_eq!(task(early_id).polls(), 0);

    // The receiver's next polls install its block and are counted, one per message.
    for n in 2..=4 {
        tx.unbounded_send(()).unwrap();
        wait_until("a message", || received.load(SeqCst) == n);
    }
    wait_until("the receiver's third counted poll", || {
        task(receiver_id).polls() == 3
    });
    let after = task(receiver_id);
    assert_eq!(after.waiting_on(), Some(WaitOn::Channel(7)));
    // The wake before its first counted poll found no block yet.
    assert_eq!(after.wakes(), 2);

    assert_eq!(manual.run_until_idle(), 2);
    drop(tx);
    futures::executor::block_on(receiver).unwrap();
    futures::executor::block_on(early).unwrap();
    futures::executor::block_on(late).unwrap();
}
