//! Models of the shutdown order (`Shared::begin_shutdown` and `finish_shutdown`, steps 1 to 3
//! and 5 to 8 of the order written there): a real `Shared` whose tasks are spawned and run by
//! the pool's own code (the task list, the global queue, the schedule function), with no
//! worker thread (the model starts after step 4: every worker has exited). Each task holds a
//! probe that counts its drops and waits on a waker that the model keeps, as a timer or a
//! socket keeps it. Under the models `reaper::drop_closed` hands a task to the model's reaper
//! (`reaper::reap`), which a model thread runs at whatever point the checker picks, as the real
//! reaper thread drops tasks whenever it gets to them. A wake-up's way from the task's state
//! change (async-task's std atomics, which neither checker sees) to the queue is a step of its
//! own: `schedule_from_outside` yields there in the models. Each model proves "when
//! `finish_shutdown` returns, every task was dropped exactly once, and its handle resolves
//! `Cancelled`":
//! - `loom_shutdown_drops_what_the_timer_close_wakes`: the shutdown thread itself wakes the
//!   sleeping task right after step 1, as the timer wheel's close does in step 2 (replayed by
//!   the model: the drivers are not built in the models). When step 1 closed the global
//!   queue, that wake-up went to the reaper, which dropped the task whenever it got to it,
//!   maybe after shutdown returned; this model fails so;
//! - `loom_shutdown_races_a_wake_from_another_thread`: another thread (a driver's, a user's)
//!   wakes the task while the shutdown runs: its runnable may still be on its way to the queue
//!   when step 5 wakes the task (a no-op: it is already scheduled), so step 6 must wait for it;
//! - `loom_shutdown_drops_what_a_drained_destructor_wakes`: the destructor of a task that a
//!   worker's drain drops in step 4 (played by the model's main thread, on the worker's own
//!   queue) wakes another, idle task (h2's connection waking its streams): that one is queued
//!   and step 6 drops it, rather than the reaper whenever it gets to it.
//!
//! All three fail under the order before this one (the global queue closed in step 1, no wait
//! in step 6), under loom and under shuttle.
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::loom_protocol::new_shared;
use super::reaper;
use super::shared::Shared;
use crate::JoinError;
use crate::loom::model;
use crate::loom::sync::{Arc, Mutex};
use crate::loom::thread;
use crate::task::JoinHandle;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};

/// Counts its drops (std atomics: read only by the model's main thread, after the shutdown).
#[derive(Clone, Default)]
struct Drops(std::sync::Arc<AtomicUsize>);

impl Drops {
    fn count(&self) -> usize {
        self.0.load(SeqCst)
    }
}

struct Probe(Drops);

impl Drop for Probe {
    fn drop(&mut self) {
        (self.0).0.fetch_add(1, SeqCst);
    }
}

/// Where a waiting task leaves its waker: a timer entry, a socket's interest.
type WakerSlot = Arc<Mutex<Option<Waker>>>;

/// Wakes the waker in `slot`, if any (as a timer's firing or a driver's close does).
fn wake(slot: &WakerSlot) {
    let waker = slot.lock().unwrap().take();
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// Spawns a task on `shared` that holds `held` and a probe counting into `drops`, then waits on
/// `slot` forever; runs its first poll on this thread (playing the worker that ran it until
/// it waited), so that it is idle, listed, with its waker in `slot`.
fn spawn_waiting<H: Send + 'static>(
    shared: &std::sync::Arc<Shared>,
    drops: &Drops,
    slot: &WakerSlot,
    held: H,
) -> JoinHandle<()> {
    // A fixed shard: a thread that is not a worker picks a random one, which would make the
    // model's steps differ from run to run (the checkers replay them).
    crate::task::set_shard_hint(0);
    let probe = Probe(drops.clone());
    let registered = slot.clone();
    let handle = shared.spawn(async move {
        let _probe = probe;
        let _held = held;
        std::future::poll_fn(|cx| {
            *registered.lock().unwrap() = Some(cx.waker().clone());
            Poll::<()>::Pending
        })
        .await;
    });
    let runnable = shared
        .inject
        .pop()
        .expect("a spawn from outside the pool goes to the global queue");
    runnable.run();
    assert!(slot.lock().unwrap().is_some(), "the task did not wait");
    handle
}

/// Checks what shutdown promises of a task, right after `finish_shutdown` returned: dropped
/// exactly once, and its handle resolved `Cancelled`.
fn assert_dropped_once(what: &str, drops: &Drops, handle: JoinHandle<()>) {
    assert_eq!(
        drops.count(),
        1,
        "{what}: not dropped exactly once by the time shutdown returned"
    );
    let mut handle = std::pin::pin!(handle);
    let polled = handle
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    assert!(
        matches!(polled, Poll::Ready(Err(JoinError::Cancelled))),
        "{what}: its handle did not resolve Cancelled: {polled:?}"
    );
}

/// Runs the model's reaper on a thread of its own, at whatever point the checker picks.
fn spawn_reaper() -> thread::JoinHandle<()> {
    thread::spawn(|| {
        reaper::reap();
    })
}

/// Ends a model: joins its threads and runs what is left for the reaper (nothing, when
/// shutdown kept its promise), so that no task outlives the model iteration.
fn finish_model(threads: Vec<thread::JoinHandle<()>>) {
    for thread in threads {
        thread.join().unwrap();
    }
    reaper::reap();
}

/// Runs what is left for the reaper when a model fails, inside the model: a task left there
/// would be dropped with the test thread, outside any model, which the checkers cannot allow
/// (loom aborts the whole test binary, hiding the failed assertion).
struct ReapOnFailure;

impl Drop for ReapOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            reaper::reap();
        }
    }
}

/// A one-worker pool's shared state holding one task that waits on `timer`.
struct Sleeper {
    shared: std::sync::Arc<Shared>,
    drops: Drops,
    timer: WakerSlot,
    handle: JoinHandle<()>,
}

fn one_sleeper() -> Sleeper {
    let (shared, _locals) = new_shared(1);
    let (drops, timer) = (Drops::default(), WakerSlot::default());
    let handle = spawn_waiting(&shared, &drops, &timer, ());
    Sleeper {
        shared,
        drops,
        timer,
        handle,
    }
}

#[test]
fn loom_shutdown_drops_what_the_timer_close_wakes() {
    model(|| {
        let _reap = ReapOnFailure;
        let task = one_sleeper();
        let reaper = spawn_reaper();

        // Step 1, then the timer wheel's close of step 2 wakes the sleeper, on this thread.
        assert!(task.shared.begin_shutdown());
        wake(&task.timer);
        task.shared.finish_shutdown(true);

        assert_dropped_once("the sleeping task", &task.drops, task.handle);
        finish_model(vec![reaper]);
        assert_eq!(task.drops.count(), 1);
    });
}

#[test]
fn loom_shutdown_races_a_wake_from_another_thread() {
    model(|| {
        let _reap = ReapOnFailure;
        let task = one_sleeper();
        let waker = {
            let timer = task.timer.clone();
            thread::spawn(move || wake(&timer))
        };

        assert!(task.shared.begin_shutdown());
        task.shared.finish_shutdown(true);

        assert_dropped_once("the task woken by another thread", &task.drops, task.handle);
        finish_model(vec![waker]);
        assert_eq!(task.drops.count(), 1);
    });
}

/// Wakes the waker in its slot when dropped (h2's connection waking its streams).
struct WakeOnDrop(WakerSlot);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        wake(&self.0);
    }
}

#[test]
fn loom_shutdown_drops_what_a_drained_destructor_wakes() {
    model(|| {
        let _reap = ReapOnFailure;
        let (shared, mut locals) = new_shared(1);
        let (stream_drops, stream_slot) = (Drops::default(), WakerSlot::default());
        let stream = spawn_waiting(&shared, &stream_drops, &stream_slot, ());
        let (connection_drops, connection_slot) = (Drops::default(), WakerSlot::default());
        let connection = spawn_waiting(
            &shared,
            &connection_drops,
            &connection_slot,
            WakeOnDrop(stream_slot.clone()),
        );
        // The connection is woken and lands in the worker's queue (as a wake-up on the worker
        // puts it there), where the worker's drain finds it.
        wake(&connection_slot);
        let runnable = shared.inject.pop().expect("the woken connection is queued");
        let local = &mut locals[0];
        local.push_back(runnable, &mut |_| unreachable!("one task fits the queue"));
        let reaper = spawn_reaper();

        assert!(shared.begin_shutdown());
        // Step 4: the worker exits, dropping what its queue holds.
        while let Some(queued) = local.pop() {
            drop(queued);
        }
        assert_eq!(connection_drops.count(), 1);
        shared.finish_shutdown(true);

        assert_dropped_once("the connection", &connection_drops, connection);
        assert_dropped_once("the stream its destructor woke", &stream_drops, stream);
        finish_model(vec![reaper]);
        assert_eq!((connection_drops.count(), stream_drops.count()), (1, 1));
    });
}
