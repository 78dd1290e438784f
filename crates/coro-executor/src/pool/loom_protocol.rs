//! Models of the pool's park/notify protocol (`idle.rs`, `shared.rs`, `worker.rs`) and of the
//! monitor's handoff: a real `Shared` with two workers, whose threads run the pool's own
//! `Worker` (`worker::model::run_model`: its loop, search, park and run, started awake, searching or
//! asleep; its thread-locals are the checker's, one per model thread), while the model's main
//! thread schedules one task from outside the pool
//! (`Shared::schedule_remote`: global-queue push, then `notify_parked`). The task shuts the
//! pool down when it runs, which lets every worker exit; if the task were stranded in the queue
//! with every worker parked, no thread could make progress and the checker reports a deadlock. So
//! each model proves "no lost wake-up: the task is always run, exactly once". The workers' loop
//! includes the searcher's linger (`linger.rs`, at most two extra search passes in the models,
//! and no clock): a searcher that finds nothing while the other worker is awake (the models
//! where it is busy or running) searches again before it parks, so the protocol is checked
//! with the linger as it ships:
//! - `loom_protocol_searcher_parks`: worker 0 is the searcher and gives up (parks as the last
//!   searcher, so it must rescan); worker 1 is already asleep;
//! - `loom_protocol_searcher_parks_other_busy`: worker 0 is the searcher and parks while
//!   worker 1 is awake but busy in a long task (not searching, not looking at any queue), so
//!   only the last-searcher rescan stands between the task and a lost wake-up;
//! - `loom_protocol_non_searcher_parks`: worker 0 cannot search (worker 1 is the searcher) and
//!   parks without rescanning; worker 1 searches and parks too;
//! - `loom_protocol_both_park`: two workers, neither searching, both run out of work and park;
//! - `loom_protocol_busy_worker_schedules_locally`: the work is not in the global queue but in
//!   a busy worker's next slot and local queue (`Worker::schedule_local`, replayed by the main
//!   thread, which then runs its next slot and stays busy); the other worker must steal and
//!   run what waits in the local queue.
//! - `loom_protocol_next_slot_alone_other_{asleep,searching,running}`: a worker inside a poll
//!   that never returns schedules one task, which lands alone in its next slot; the push
//!   announces it (Go's `wakep`), and the other worker, whether asleep, searching or running
//!   out of work, takes it from the next slot once the owner stays in its poll through the
//!   grace period (or finds it in its last-searcher rescan): never stranded, run once.
//! - `loom_protocol_lingerer_absorbs_pushes_then_parks`: the linger's own case, a ping-pong's
//!   owner beside a lingering searcher. Worker 1, busy, pushes a task into its next slot (the
//!   push finds worker 0 searching and wakes nobody) and runs it itself, as a ping-pong's owner
//!   does; then one more task comes from outside. Worker 0 lingers through all this and parks
//!   when its linger gives up: that park, as the last searcher's, must rescan and find the
//!   last task, or it is stranded (a linger that ended by giving up the search without the
//!   rescan fails here).
//! - `loom_handoff_wakes_a_parked_worker` (exhaustive), `loom_handoff_races_a_searcher`: the
//!   monitor's handoff of a worker stuck with an unannounced task in its next slot moves it to
//!   the global queue and wakes the parked worker, or races a searcher that takes it from the
//!   next slot: run exactly once either way; `loom_handoff_every_worker_busy_asks_for_a_helper`:
//!   with every worker busy the handoff asks for a helper and leaves the task globally queued.
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::handoff;
use super::queue::{self, Local};
use super::shared::{Remote, Shared};
use super::worker::model::{self, BusyWorker, ModelStart};
use super::worker::{self, Placement};
use crate::blocking::BlockingPool;
use crate::loom::sync::Arc;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::thread;
use crate::loom::{model, model_exhaustive};
use crate::task::Runnable;
use crate::trace::TaskHeader;
use std::time::Duration;

/// A pool's shared state with `workers` workers, built as `ThreadPool::from_builder` does, and
/// each worker's local queue.
pub(super) fn new_shared(workers: usize) -> (std::sync::Arc<Shared>, Vec<Local<Runnable>>) {
    let (locals, remotes): (Vec<_>, Vec<_>) = (0..workers)
        .map(|_| {
            let (local, steal) = queue::local();
            (local, Remote::new(steal))
        })
        .unzip();
    let blocking = BlockingPool::new("loom-blocking".into(), 1, Duration::from_secs(1));
    let shared = std::sync::Arc::new(Shared::new(remotes.into_boxed_slice(), blocking));
    (shared, locals)
}

/// How a model worker starts.
#[derive(Clone, Copy)]
pub(super) enum Start {
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
pub(super) fn protocol_model(starts: [Start; 2]) {
    let (shared, locals) = new_shared(2);
    setup_idle(&shared, starts);
    let workers: Vec<_> = locals
        .into_iter()
        .zip(starts)
        .enumerate()
        .filter_map(|(index, (local, start))| {
            let start = start.model_start()?;
            let shared = shared.clone();
            Some(thread::spawn(move || {
                model::run_model(shared, index, local, start);
            }))
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
pub(super) fn counted_task(
    shared: &std::sync::Arc<Shared>,
    ran: &Arc<AtomicUsize>,
    total: usize,
) -> Runnable {
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

impl Start {
    /// How `worker::model::run_model` starts a worker that starts so (`None`: a busy worker, which no
    /// model thread runs).
    fn model_start(self) -> Option<ModelStart> {
        match self {
            Start::Running { searching } => Some(ModelStart::Running { searching }),
            Start::Asleep => Some(ModelStart::Asleep),
            Start::Busy => None,
        }
    }
}

/// Schedules `task` from inside `busy`'s poll, as a waker called there does.
fn schedule_from_busy(shared: &std::sync::Arc<Shared>, task: Runnable) {
    let scheduled = worker::schedule_local(std::sync::Arc::as_ptr(shared), task, Placement::Next);
    assert!(scheduled.is_ok(), "the model thread is worker 1");
}

/// Makes the setup's idle bookkeeping match `starts`, as the workers' own earlier calls would
/// have: asleep workers have parked (not searching), and searching ones have started searching.
pub(super) fn setup_idle(shared: &Shared, starts: [Start; 2]) {
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
        let busy = BusyWorker::enter(shared.clone(), 1, locals.pop().expect("two workers"));
        let local = locals.pop().expect("two workers");
        let worker = {
            let shared = shared.clone();
            let start = ModelStart::Running { searching: false };
            thread::spawn(move || {
                model::run_model(shared, 0, local, start);
            })
        };

        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            schedule_from_busy(&shared, counted_task(&shared, &ran, 2));
        }
        // Worker 1's task returns: it runs its next slot (worker 0 may have stolen it already),
        // and that poll outlasts the model.
        busy.run_next_slot();
        worker.join().unwrap();
        assert_eq!(
            ran.load(Relaxed),
            2,
            "the tasks did not run exactly once each"
        );
        assert!(busy.local_is_empty() && !shared.remotes[1].has_next());
    });
}

/// A two-worker pool whose worker 1 is busy (in a poll that outlasts the model, on the calling
/// thread) and whose worker 0 starts on a model thread as `start` says (it returns when the
/// pool shuts down): the shared state, worker 1 and worker 0's thread, started by the returned
/// closure once the caller has set things up.
fn beside_a_busy_worker(
    start: Start,
) -> (
    std::sync::Arc<Shared>,
    BusyWorker,
    impl FnOnce() -> thread::JoinHandle<()>,
) {
    let (shared, mut locals) = new_shared(2);
    setup_idle(&shared, [start, Start::Busy]);
    let busy = BusyWorker::enter(shared.clone(), 1, locals.pop().expect("two workers"));
    let local = locals.pop().expect("two workers");
    let start = start
        .model_start()
        .expect("worker 0 must be able to run the task");
    let spawn = {
        let shared = shared.clone();
        move || {
            thread::spawn(move || {
                model::run_model(shared, 0, local, start);
            })
        }
    };
    (shared, busy, spawn)
}

/// Worker 1 (the model's main thread) is inside a poll that never returns, and schedules one
/// task, which lands alone in its next slot; worker 0 starts as `start` says. Worker 1 never
/// runs its next slot, so only worker 0 can run the task: the push must wake it (or a searcher
/// must find the task), and worker 0 must take it from the next slot once worker 1 stays in
/// its poll through the grace period. A stranded task leaves worker 0 parked for ever: a loom
/// deadlock.
fn next_slot_alone_model(start: Start) {
    let (shared, _busy, spawn) = beside_a_busy_worker(start);
    let worker = spawn();

    let ran = Arc::new(AtomicUsize::new(0));
    schedule_from_busy(&shared, counted_task(&shared, &ran, 1));
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

#[test]
fn loom_protocol_lingerer_absorbs_pushes_then_parks() {
    model(|| {
        let (shared, busy, spawn) = beside_a_busy_worker(Start::Running { searching: true });
        let worker = spawn();
        let ran = Arc::new(AtomicUsize::new(0));
        // The ping-pong's push into the owner's next slot, which the lingerer absorbs, and the
        // owner's own run of it (unless worker 0 took it first, after the grace period).
        schedule_from_busy(&shared, counted_task(&shared, &ran, 2));
        busy.run_next_slot();
        // Then work that only worker 0 can run.
        shared.schedule_remote(counted_task(&shared, &ran, 2));
        worker.join().unwrap();
        assert_eq!(
            ran.load(Relaxed),
            2,
            "the tasks did not run exactly once each"
        );
    });
}

/// The monitor's handoff (`handoff::hand_off`) for worker 1, stuck in a poll with a task in its
/// next slot that nobody was woken for, while worker 0 starts as `start` says: the task runs
/// exactly once, whether the handoff moves it to the global queue (and wakes worker 0) or
/// worker 0, searching, takes it from the next slot first; and a helper is asked for only if
/// nobody could be woken and nobody searches.
fn handoff_model(start: Start) {
    let asleep = matches!(start, Start::Asleep);
    let (shared, _busy, spawn) = beside_a_busy_worker(start);
    let ran = Arc::new(AtomicUsize::new(0));
    // Put there unannounced, as if its announcement had gone to a searcher that missed it.
    assert!(
        shared.remotes[1]
            .put_next(counted_task(&shared, &ran, 1))
            .is_none()
    );
    let worker = spawn();

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
