//! Timer fairness and portability (the timer wheel, `coro_executor::time`).
//!
//! - A task woken by the timer runs even though every worker of its pool is kept busy by tasks
//!   that yield in a loop (1 worker with 1 and 2 yielders, 2 workers with 4 yielders; the
//!   sleeper spawned from outside the pool and from inside it).
//! - `sleep` completes, and never early, under every kind of executor: a `ThreadPool`, a
//!   `ManualExecutor` driven by hand, an `InlineExecutor` (whose continuation the `coro-timer`
//!   thread itself runs when it wakes the task) and `futures::executor::block_on`.
//! - Cancelling a sleeping task frees its timer entry: `pending_timers()` drops back by exactly
//!   the number cancelled (on a pool, on a `ManualExecutor` once it runs, and inline at once).
//!
//! `pending_timers()` counts the process-wide wheel and the tests of a binary run in parallel,
//! so every test here holds `SERIAL` for its whole run and drops all of its timers before it
//! returns. Every wait is bounded, so a lost wake-up fails the test instead of hanging it.
#![cfg(not(loom))]

use coro_executor::time::{pending_timers, sleep};
use coro_executor::{ExecutorHandle, InlineExecutor, JoinHandle, ManualExecutor, ThreadPool};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

/// Bound of every wait: generous, never a performance assertion.
const WAIT: Duration = Duration::from_secs(10);

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of this file (see the module docs).
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakes the thread blocked in [`block_on_timeout`].
struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// `block_on` that panics, naming `what`, if `fut` is not ready within `WAIT`. It uses no timer
/// of the crate under test, so a lost timer wake-up cannot hang it.
fn block_on_timeout<F: Future>(what: &str, fut: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let deadline = Instant::now() + WAIT;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        let now = Instant::now();
        assert!(now < deadline, "hung: {what} (waited {WAIT:?})");
        thread::park_timeout(deadline - now);
    }
}

/// Polls `cond` every millisecond; panics, naming `what`, if it does not hold within `WAIT`.
fn wait_until(what: impl FnOnce() -> String, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "hung: {} (waited {WAIT:?})",
            what()
        );
        thread::sleep(Duration::from_millis(1));
    }
}

/// Shuts `pool` down on a helper thread, failing the test if that hangs.
fn shutdown_bounded(pool: ThreadPool) {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        pool.shutdown();
        let _ = tx.send(());
    });
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|e| panic!("ThreadPool::shutdown did not return: {e}"));
}

/// Counts its own drop.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// A yielding task never starves a timer wake-up
// ---------------------------------------------------------------------------------------------

const NAP: Duration = Duration::from_millis(10);

/// Where the task that sleeps is spawned from.
#[derive(Clone, Copy, Debug)]
enum SpawnedFrom {
    /// The test thread: it reaches the pool through the global queue.
    Outside,
    /// A yielding task: it starts in that worker's next slot.
    Inside,
}

/// On a `workers`-worker pool, `yielders` tasks yield in a loop until a flag is set; another task
/// sleeps `NAP` and then sets the flag. The flag must get set: the timer wake-up (which arrives
/// from the `coro-timer` thread) is served although the workers never run out of work.
fn yielders_do_not_starve_a_timer(workers: usize, yielders: usize, from: SpawnedFrom) {
    let what = format!("{workers} worker(s), {yielders} yielder(s), sleeper spawned {from:?}");
    let pool = Arc::new(ThreadPool::new(workers).unwrap());
    let flag = Arc::new(AtomicBool::new(false));
    let yields = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let (sleeper_tx, sleeper_rx) = mpsc::channel::<JoinHandle<(Duration, u64)>>();
    let sleeper_tx = Arc::new(Mutex::new(Some(sleeper_tx)));
    let sleeper = {
        let (flag, pool) = (flag.clone(), Arc::downgrade(&pool));
        async move {
            let start = Instant::now();
            sleep(NAP).await;
            let slept = start.elapsed();
            // Sampled before the flag lets the yielders stop (after that the worker may park).
            let parks = pool.upgrade().map_or(0, |p| total_parks(&p));
            flag.store(true, SeqCst);
            (slept, parks)
        }
    };
    let sleeper = Arc::new(Mutex::new(Some(sleeper)));

    let handles: Vec<JoinHandle<u64>> = (0..yielders)
        .map(|_| {
            let (flag, yields, started) = (flag.clone(), yields.clone(), started.clone());
            let (sleeper, sleeper_tx) = (sleeper.clone(), sleeper_tx.clone());
            pool.spawn(async move {
                started.fetch_add(1, SeqCst);
                let mut mine = 0;
                while !flag.load(SeqCst) {
                    coro_executor::yield_now().await;
                    mine += 1;
                    let total = yields.fetch_add(1, SeqCst) + 1;
                    // Spawned from inside once the worker is well into its yield loop.
                    if matches!(from, SpawnedFrom::Inside) && total == 1000 {
                        let fut = sleeper.lock().unwrap().take().unwrap();
                        let handle = coro_executor::spawn(fut);
                        let tx = sleeper_tx.lock().unwrap().take().unwrap();
                        tx.send(handle).unwrap();
                    }
                }
                mine
            })
        })
        .collect();
    // The workers are busy before the sleeper exists.
    wait_until(
        || format!("{what}: the yielders did not start"),
        || started.load(SeqCst) == yielders && yields.load(SeqCst) >= 500,
    );
    let parks_before = total_parks(&pool);
    let yields_before = yields.load(SeqCst);
    let sleeper = match from {
        SpawnedFrom::Outside => pool.spawn(sleeper.lock().unwrap().take().unwrap()),
        SpawnedFrom::Inside => sleeper_rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("{what}: the sleeper was never spawned from inside")),
    };

    let deadline = Instant::now() + WAIT;
    while !flag.load(SeqCst) {
        assert!(
            Instant::now() < deadline,
            "starved: {what}: the task woken by the timer never ran within {WAIT:?} \
             (yields meanwhile: {}, metrics: {:?})",
            yields.load(SeqCst) - yields_before,
            pool.metrics()
        );
        thread::sleep(Duration::from_millis(1));
    }
    let (slept, parks_at_wake) =
        block_on_timeout(&format!("{what}: the sleeper's handle"), sleeper).unwrap();
    assert!(
        slept >= NAP,
        "{what}: sleep({NAP:?}) completed after {slept:?}"
    );
    assert!(
        yields.load(SeqCst) > yields_before,
        "{what}: the yielders did not run while the sleeper waited"
    );
    if workers == 1 {
        // One worker and a yield loop: its queue never empties, so it never parks. The timer
        // wake-up was served by a busy worker.
        assert_eq!(
            parks_at_wake, parks_before,
            "{what}: the worker parked while the sleeper waited, so it was not kept busy"
        );
    }
    for (i, handle) in handles.into_iter().enumerate() {
        let mine = block_on_timeout(&format!("{what}: yielder {i}"), handle).unwrap();
        // On one worker every yielder is served in turn; with more workers a yielder may be
        // stuck behind others only briefly, never for the whole nap.
        assert!(mine > 0, "{what}: yielder {i} never yielded");
    }
    let pool = Arc::try_unwrap(pool).expect("only the test holds the pool");
    shutdown_bounded(pool);
}

fn total_parks(pool: &ThreadPool) -> u64 {
    pool.metrics().workers.iter().map(|w| w.parks).sum()
}

#[test]
fn a_yielding_task_never_starves_a_timer_wakeup() {
    let _serial = serial();
    for from in [SpawnedFrom::Outside, SpawnedFrom::Inside] {
        yielders_do_not_starve_a_timer(1, 1, from);
        yielders_do_not_starve_a_timer(1, 2, from);
        yielders_do_not_starve_a_timer(2, 4, from);
    }
}

// ---------------------------------------------------------------------------------------------
// Timers work under every executor kind
// ---------------------------------------------------------------------------------------------

const SHORT: Duration = Duration::from_millis(15);

#[test]
fn timers_work_under_every_executor_kind() {
    let _serial = serial();
    let base = pending_timers();

    // ThreadPool.
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("fair-pool")
        .build()
        .unwrap();
    let handle = pool.spawn(async {
        let start = Instant::now();
        sleep(SHORT).await;
        (start.elapsed(), thread::current().name().map(str::to_owned))
    });
    let (slept, name) = block_on_timeout("a sleep on a ThreadPool", handle).unwrap();
    assert!(
        slept >= SHORT,
        "ThreadPool: sleep({SHORT:?}) completed after {slept:?}"
    );
    assert!(
        name.as_deref().is_some_and(|n| n.starts_with("fair-pool-")),
        "ThreadPool: the continuation ran on {name:?}"
    );
    shutdown_bounded(pool);

    // ManualExecutor: runs only when told, here, on the test thread.
    let manual = ManualExecutor::new();
    let handle = manual.handle().spawn(async {
        let start = Instant::now();
        sleep(SHORT).await;
        // A second timer, registered from the continuation.
        sleep(Duration::from_millis(2)).await;
        (start.elapsed(), thread::current().id())
    });
    let deadline = Instant::now() + WAIT;
    let (mut rounds, mut runs) = (0u32, 0usize);
    while !handle.is_finished() {
        assert!(
            Instant::now() < deadline,
            "hung: ManualExecutor: the sleeping task never became runnable again \
             ({rounds} rounds, {runs} runs, {} pending)",
            manual.pending()
        );
        runs += manual.run_until_idle();
        rounds += 1;
        thread::sleep(Duration::from_millis(1));
    }
    let (slept, ran_on) = block_on_timeout("ManualExecutor: a finished handle", handle).unwrap();
    assert!(
        slept >= SHORT + Duration::from_millis(2),
        "ManualExecutor: the sleeps completed after {slept:?}"
    );
    assert_eq!(
        ran_on,
        thread::current().id(),
        "ManualExecutor ran elsewhere"
    );
    assert!(
        rounds > 1,
        "ManualExecutor: the task did not wait for its timer"
    );
    // One poll to start, one per timer wake-up (plus slack): the task is not busy-polled.
    assert!(
        (3..=8).contains(&runs),
        "ManualExecutor: {runs} runs for two sleeps"
    );

    // InlineExecutor: the timer thread's wake runs the continuation inline, on that thread.
    let inline = ExecutorHandle::new(InlineExecutor);
    let handle = inline.spawn(async {
        let start = Instant::now();
        let first_poll = thread::current().id();
        sleep(SHORT).await;
        let woken_on = thread::current().name().map(str::to_owned);
        // Registering a timer from inside the driver's own wake must not deadlock it, and the
        // continuation after it must run too.
        sleep(Duration::from_millis(3)).await;
        sleep(Duration::ZERO).await;
        (start.elapsed(), first_poll, woken_on)
    });
    assert!(
        !handle.is_finished(),
        "InlineExecutor: the task finished before its timer fired"
    );
    let (slept, first_poll, woken_on) =
        block_on_timeout("InlineExecutor: the continuation after a timer", handle).unwrap();
    assert!(
        slept >= SHORT + Duration::from_millis(3),
        "InlineExecutor: the sleeps completed after {slept:?}"
    );
    assert_eq!(
        first_poll,
        thread::current().id(),
        "InlineExecutor: the first poll ran at spawn, on the spawning thread"
    );
    assert_eq!(
        woken_on.as_deref(),
        Some("coro-timer"),
        "InlineExecutor: the continuation after a timer runs on the thread that woke it"
    );

    // futures::executor::block_on, on its own thread (bounded by the channel).
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let slept = futures::executor::block_on(async {
            let start = Instant::now();
            sleep(SHORT).await;
            start.elapsed()
        });
        let _ = tx.send(slept);
    });
    let slept = rx
        .recv_timeout(WAIT)
        .unwrap_or_else(|e| panic!("hung: a sleep under futures::executor::block_on: {e}"));
    assert!(
        slept >= SHORT,
        "block_on: sleep({SHORT:?}) completed after {slept:?}"
    );

    wait_until(
        || format!("timers left behind: {} > {base}", pending_timers()),
        || pending_timers() == base,
    );
}

// ---------------------------------------------------------------------------------------------
// A cancelled sleeping task frees its timer
// ---------------------------------------------------------------------------------------------

const LONG: Duration = Duration::from_secs(10);

/// A task that sleeps `LONG` and must be cancelled before it wakes.
fn long_sleeper(drops: &Arc<AtomicUsize>) -> impl Future<Output = ()> + Send + 'static {
    let guard = DropCount(drops.clone());
    async move {
        let _guard = guard;
        sleep(LONG).await;
        panic!("a task cancelled while sleeping woke up");
    }
}

#[test]
fn a_cancelled_sleeping_task_frees_its_timer() {
    let _serial = serial();
    let base = pending_timers();
    let pool = ThreadPool::new(2).unwrap();
    const N: usize = 64;
    const FIRST: usize = 40;
    let drops = Arc::new(AtomicUsize::new(0));
    let mut handles: Vec<_> = (0..N).map(|_| pool.spawn(long_sleeper(&drops))).collect();
    wait_until(
        || {
            format!(
                "{N} sleeping tasks never registered: {} pending timers, base {base}",
                pending_timers()
            )
        },
        || pending_timers() == base + N,
    );
    // Let them settle (they are idle now, parked on the timer).
    thread::sleep(Duration::from_millis(5));
    assert_eq!(pending_timers(), base + N);

    for handle in handles.drain(..FIRST) {
        handle.cancel();
    }
    wait_until(
        || {
            format!(
                "cancelling {FIRST} sleeping tasks left {} pending timers (expected {})",
                pending_timers(),
                base + N - FIRST
            )
        },
        || pending_timers() == base + N - FIRST,
    );
    assert_eq!(
        drops.load(SeqCst),
        FIRST,
        "each cancelled task dropped once"
    );

    for handle in handles {
        handle.cancel();
    }
    wait_until(
        || {
            format!(
                "cancelling all {N} sleeping tasks left {} pending timers (expected {base})",
                pending_timers()
            )
        },
        || pending_timers() == base,
    );
    wait_until(
        || format!("{} of {N} cancelled tasks dropped", drops.load(SeqCst)),
        || drops.load(SeqCst) == N,
    );
    wait_until(
        || format!("live tasks after cancelling: {:?}", pool.metrics()),
        || pool.metrics().live_tasks == 0,
    );
    shutdown_bounded(pool);
    assert_eq!(drops.load(SeqCst), N, "a task was dropped twice");
    assert_eq!(pending_timers(), base);
}

#[test]
fn a_cancelled_sleeping_task_frees_its_timer_under_manual_and_inline_executors() {
    let _serial = serial();
    let base = pending_timers();
    const N: usize = 16;

    // ManualExecutor: the cancelled task is dropped when the executor next runs it.
    let manual = ManualExecutor::new();
    let drops = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..N)
        .map(|_| manual.handle().spawn(long_sleeper(&drops)))
        .collect();
    assert_eq!(manual.run_until_idle(), N);
    assert_eq!(pending_timers(), base + N, "every sleep registered");
    for handle in handles {
        handle.cancel();
    }
    assert_eq!(
        pending_timers(),
        base + N,
        "a cancelled task's future is dropped on its executor, not by cancel()"
    );
    assert_eq!(
        manual.run_until_idle(),
        N,
        "each cancelled task runs once more, to drop"
    );
    assert_eq!(
        pending_timers(),
        base,
        "the dropped sleeps freed their timers"
    );
    assert_eq!(drops.load(SeqCst), N);

    // InlineExecutor: the cancel schedules the task, which is dropped at once, right here.
    let inline = ExecutorHandle::new(InlineExecutor);
    let drops = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..N).map(|_| inline.spawn(long_sleeper(&drops))).collect();
    assert_eq!(pending_timers(), base + N, "every inline sleep registered");
    for (i, handle) in handles.into_iter().enumerate() {
        handle.cancel();
        assert_eq!(pending_timers(), base + N - i - 1, "inline cancel {i}");
        assert_eq!(drops.load(SeqCst), i + 1, "inline cancel {i}");
    }
}
