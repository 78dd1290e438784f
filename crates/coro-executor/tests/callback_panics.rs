//! Every user callback the engine calls may panic: the waker a `JoinHandle` or a
//! timer is polled with (its clone, wake and drop), a user `Executor`'s `schedule`, and the
//! destructor of a task still queued when its pool shuts down. None of them aborts the process,
//! hangs or leaks (every value is counted and dropped exactly once, every waker reference is
//! released); each test's doc says where the panic surfaces; the pool keeps serving.
//!
//! Destructors of futures and outputs in general are `engine/destructor_panics.rs`'s.

use coro_executor::time::{Sleep, sleep};
use coro_executor::{Executor, ExecutorHandle, JoinError, JoinHandle, Runnable, ThreadPool};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

mod support;
use support::{TIMEOUT, wait, wait_until};

// ---- helpers ---------------------------------------------------------------------------------

/// Counts its drops.
struct CountDrop(Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Counts its drop, then panics with `message`.
struct PanicOnDrop(Arc<AtomicUsize>, &'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{}", self.1);
    }
}

fn message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// How many times the panic hook has seen `text`.
fn reported(text: &str) -> usize {
    faulty::reported_with(text, || {})
}

/// Installs the counting hook before a test's first panic.
fn count_reports() {
    reported("");
}

/// The pool still runs tasks.
fn still_serves(pool: &ThreadPool) {
    assert_eq!(
        wait("a task after the panic", pool.spawn(async { 7 })).unwrap(),
        7
    );
}

fn poll<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

#[path = "support/faulty.rs"]
mod faulty;
use faulty::Faulty;

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

// ---- a JoinHandle's waker ----------------------------------------------------------------------

/// A `JoinHandle` polled with a waker whose `clone` panics: the panic surfaces at the poller
/// (the `poll` call unwinds), nothing is registered, and the handle still works when polled
/// again. (async-task clones the awaiter's waker under its abort-on-panic guard: this aborted.)
#[test]
fn a_join_handle_polled_with_a_waker_whose_clone_panics_panics_at_the_poller() {
    let pool = ThreadPool::new(2).unwrap();
    let (tx, rx) = oneshot::channel::<u32>();
    let mut handle = pool.spawn(async move { rx.await.unwrap() });
    let faulty = Faulty::new("join handle");
    faulty.clone_panics.store(true, SeqCst);
    let waker = faulty.waker();
    let payload = catch_unwind(AssertUnwindSafe(|| poll(&mut handle, &waker))).unwrap_err();
    assert_eq!(message(&*payload), "join handle: clone");
    tx.send(5).unwrap();
    assert_eq!(wait("the handle, polled again", handle).unwrap(), 5);
    drop(waker);
    assert_eq!(faulty.live(), 0, "a waker reference leaked");
    still_serves(&pool);
}

/// A `JoinHandle`'s waker whose `wake` panics when the task completes: the panic happens on the
/// worker that completed the task, which catches it (the panic hook reports it) and keeps
/// serving; the handle, polled again, gives the value. (async-task wakes the awaiter under its
/// abort-on-panic guard: this aborted.)
#[test]
fn a_join_handles_waker_whose_wake_panics_is_reported_and_the_worker_survives() {
    count_reports();
    let pool = ThreadPool::new(1).unwrap();
    let (tx, rx) = oneshot::channel::<u32>();
    let mut handle = pool.spawn(async move { rx.await.unwrap() });
    let faulty = Faulty::new("join wake");
    faulty.wake_panics.store(true, SeqCst);
    let waker = faulty.waker();
    assert!(poll(&mut handle, &waker).is_pending());
    tx.send(6).unwrap();
    wait_until("the waker to be woken", || faulty.wakes.load(SeqCst) == 1);
    wait_until("the panic hook to report the wake's panic", || {
        reported("join wake: wake") == 1
    });
    assert!(matches!(poll(&mut handle, &waker), Poll::Ready(Ok(6))));
    drop(handle);
    drop(waker);
    // The hook reports the panic before the worker's unwinding releases the waker's reference:
    // wait for the release, bounded (a leak fails).
    wait_until("every waker reference to be released", || {
        faulty.live() == 0
    });
    still_serves(&pool);
}

/// A `JoinHandle`'s waker whose `drop` panics, dropped by the completing worker (after its
/// wake-up), by a later poll that replaces it (the panic surfaces in that poll), and with a
/// detached handle: no abort, every reference released, the worker keeps serving; the
/// completing worker's panic goes to the panic hook.
#[test]
fn a_join_handles_waker_whose_drop_panics_does_not_abort() {
    count_reports();
    let pool = ThreadPool::new(1).unwrap();

    // Dropped by the worker that completes the task, after waking it.
    let (tx, rx) = oneshot::channel::<u32>();
    let mut handle = pool.spawn(async move { rx.await.unwrap() });
    let faulty = Faulty::new("join drop, completed");
    faulty.drop_panics.store(true, SeqCst);
    let waker = faulty.waker();
    assert!(poll(&mut handle, &waker).is_pending());
    tx.send(1).unwrap();
    wait_until("the waker to be woken", || faulty.wakes.load(SeqCst) == 1);
    wait_until("the worker to drop its clone", || faulty.live() == 1);
    wait_until("the panic hook to report the drop's panic", || {
        reported("join drop, completed: drop") == 1
    });
    assert!(matches!(
        poll(&mut handle, Waker::noop()),
        Poll::Ready(Ok(1))
    ));
    assert!(catch_unwind(AssertUnwindSafe(|| drop(waker))).is_err());
    assert_eq!(faulty.live(), 0);

    // Replaced by a later poll with another waker: that poll drops it.
    let (tx, rx) = oneshot::channel::<u32>();
    let mut handle = pool.spawn(async move { rx.await.unwrap() });
    let faulty = Faulty::new("join drop, replaced");
    faulty.drop_panics.store(true, SeqCst);
    let waker = faulty.waker();
    assert!(poll(&mut handle, &waker).is_pending());
    let count = Arc::new(Count::default());
    let good = Waker::from(count.clone());
    // The poll clones `good` in, and drops the faulty clone it replaces there: the panic
    // surfaces in this poll (the task is still pending, so nothing else holds that clone).
    let payload = catch_unwind(AssertUnwindSafe(|| poll(&mut handle, &good)))
        .expect_err("the replaced waker's panicking drop did not surface in the poll");
    assert_eq!(message(&*payload), "join drop, replaced: drop");
    assert_eq!(faulty.live(), 1, "the replaced clone was not dropped");
    tx.send(2).unwrap();
    wait_until("the new waker to be woken", || count.0.load(SeqCst) == 1);
    assert!(matches!(poll(&mut handle, &good), Poll::Ready(Ok(2))));
    assert!(catch_unwind(AssertUnwindSafe(|| drop(waker))).is_err());
    assert_eq!(faulty.live(), 0);

    // Held for a handle that is then dropped (detached) and its task finished later.
    let (tx, rx) = oneshot::channel::<u32>();
    let mut handle = pool.spawn(async move { rx.await.unwrap() });
    let faulty = Faulty::new("join drop, detached");
    faulty.drop_panics.store(true, SeqCst);
    let waker = faulty.waker();
    assert!(poll(&mut handle, &waker).is_pending());
    // Dropping the handle does not drop the faulty clone (so does not panic): the relay the
    // first poll registered with the task still holds it, until the task completes.
    drop(handle);
    assert_eq!(
        faulty.live(),
        2,
        "the detached handle dropped the registered clone"
    );
    tx.send(3).unwrap();
    assert!(catch_unwind(AssertUnwindSafe(|| drop(waker))).is_err());
    wait_until("every reference to the waker to be dropped", || {
        faulty.live() == 0
    });
    still_serves(&pool);
}

// ---- a user Executor's schedule ---------------------------------------------------------------

/// A user executor: a queue run by hand, whose `schedule` panics once `refuse` is set. Counts
/// its own drop (it is dropped only once every task holding it is freed).
struct Flaky {
    queue: Mutex<VecDeque<Runnable>>,
    refuse: AtomicBool,
    message: &'static str,
    drops: Arc<AtomicUsize>,
}

impl Flaky {
    fn new(message: &'static str, refuse: bool) -> (Arc<Flaky>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        let flaky = Arc::new(Flaky {
            queue: Mutex::new(VecDeque::new()),
            refuse: AtomicBool::new(refuse),
            message,
            drops: drops.clone(),
        });
        (flaky, drops)
    }

    fn run_all(&self) -> usize {
        let mut ran = 0;
        while let Some(runnable) = self.queue.lock().unwrap().pop_front() {
            runnable.run();
            ran += 1;
        }
        ran
    }
}

impl Executor for Flaky {
    fn schedule(&self, runnable: Runnable) {
        if self.refuse.load(SeqCst) {
            panic!("{}", self.message);
        }
        self.queue.lock().unwrap().push_back(runnable);
    }
}

impl Drop for Flaky {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// `schedule` panics when a task is spawned: the panic surfaces at the spawner (the `spawn`
/// call unwinds); the future is dropped once, and the task is freed (the executor, which the
/// task's schedule function holds, is dropped with the last handle).
#[test]
fn a_user_executor_whose_schedule_panics_at_spawn_panics_at_the_spawner() {
    let (flaky, executor_drops) = Flaky::new("refused at spawn", true);
    let handle = ExecutorHandle::from_arc(flaky);
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let payload = catch_unwind(AssertUnwindSafe(|| {
        handle.spawn(async move {
            let _guard = guard;
            1
        })
    }))
    .unwrap_err();
    assert_eq!(message(&*payload), "refused at spawn");
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the future was not dropped exactly once"
    );
    drop(handle);
    assert_eq!(
        executor_drops.load(SeqCst),
        1,
        "the task leaked (it holds the executor)"
    );
}

/// `schedule` panics when a task that already ran is woken again, from a thread outside any
/// executor: the waker's caller (here `Sender::send`) does not see the panic, the panic hook
/// reports it, the task is dropped (the runnable went with the panic) and its handle resolves
/// `Cancelled`; the future is dropped once and the task freed. (The panic used to unwind out of
/// async-task's `wake`, which then never released the waker's reference: the task leaked.)
#[test]
fn a_user_executor_whose_schedule_panics_on_a_wake_drops_the_task_without_leaking() {
    count_reports();
    let (flaky, executor_drops) = Flaky::new("refused on wake", false);
    let handle = ExecutorHandle::from_arc(flaky.clone());
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let (tx, rx) = oneshot::channel::<u32>();
    let join = handle.spawn(async move {
        let _guard = guard;
        rx.await.unwrap()
    });
    assert_eq!(flaky.run_all(), 1);
    flaky.refuse.store(true, SeqCst);
    let sent = catch_unwind(AssertUnwindSafe(|| tx.send(4)));
    assert!(sent.is_ok(), "the panic reached the waker's caller");
    assert_eq!(reported("refused on wake"), 1);
    assert_eq!(
        drops.load(SeqCst),
        1,
        "the future was not dropped exactly once"
    );
    assert!(matches!(block_on(join), Err(JoinError::Cancelled)));
    drop((handle, flaky));
    assert_eq!(executor_drops.load(SeqCst), 1, "the task leaked");
}

/// A task on a user executor awaits a pool task's `JoinHandle`; when the pool task completes,
/// the worker wakes the awaiter, whose executor's `schedule` panics: the worker catches it (the
/// panic hook reports it) and keeps serving; the awaiting task is dropped (`Cancelled`) and
/// freed. (The worker woke the awaiter under async-task's abort-on-panic guard: this aborted.)
#[test]
fn a_user_executor_whose_schedule_panics_when_a_pool_task_wakes_it_does_not_abort() {
    count_reports();
    let pool = ThreadPool::new(1).unwrap();
    let (flaky, executor_drops) = Flaky::new("refused after a join", false);
    let handle = ExecutorHandle::from_arc(flaky.clone());
    let (tx, rx) = oneshot::channel::<u32>();
    let inner: JoinHandle<u32> = pool.spawn(async move { rx.await.unwrap() });
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let outer = handle.spawn(async move {
        let _guard = guard;
        inner.await.unwrap()
    });
    assert_eq!(flaky.run_all(), 1);
    flaky.refuse.store(true, SeqCst);
    tx.send(8).unwrap();
    wait_until("the refused task to be dropped", || drops.load(SeqCst) == 1);
    assert_eq!(reported("refused after a join"), 1);
    assert!(matches!(block_on(outer), Err(JoinError::Cancelled)));
    still_serves(&pool);
    drop((handle, flaky));
    assert_eq!(executor_drops.load(SeqCst), 1, "the task leaked");
}

// ---- timers ----------------------------------------------------------------------------------

/// A timer whose waker panics when it fires: the timer thread catches it (the panic hook
/// reports it) and goes on firing, the other timer due at the same time included.
#[test]
fn a_timer_whose_waker_panics_on_wake_does_not_stop_the_wheel() {
    count_reports();
    let faulty = Faulty::new("timer wake");
    faulty.wake_panics.store(true, SeqCst);
    let waker = faulty.waker();
    let count = Arc::new(Count::default());
    let good = Waker::from(count.clone());
    let deadline = std::time::Instant::now() + Duration::from_millis(100);
    let mut bad_sleep = coro_executor::time::sleep_until(deadline);
    let mut good_sleep = coro_executor::time::sleep_until(deadline);
    assert!(poll(&mut bad_sleep, &waker).is_pending());
    assert!(poll(&mut good_sleep, &good).is_pending());
    wait_until("the panicking timer to fire", || {
        faulty.wakes.load(SeqCst) == 1
    });
    wait_until("the other timer to fire", || count.0.load(SeqCst) == 1);
    wait_until("the panic hook to report it", || {
        reported("timer wake: wake") == 1
    });
    assert!(poll(&mut bad_sleep, &waker).is_ready());
    assert!(poll(&mut good_sleep, &good).is_ready());
    drop(waker);
    assert_eq!(faulty.live(), 0);
    // The wheel still fires.
    run_bounded("a later sleep", || {
        block_on(sleep(Duration::from_millis(5)))
    });
}

/// A timer's waker whose drop panics: replaced by a later poll (the panic surfaces in that
/// poll, and the new waker is the one woken), and dropped with its unfired `Sleep` on another
/// thread (the panic surfaces in that drop, and the entry is freed all the same).
#[test]
fn a_timer_waker_whose_drop_panics_surfaces_where_it_is_dropped() {
    let faulty = Faulty::new("timer drop");
    faulty.drop_panics.store(true, SeqCst);
    let waker = faulty.waker();
    // Long enough not to fire before the second poll.
    let mut timer = sleep(Duration::from_millis(200));
    assert!(poll(&mut timer, &waker).is_pending());
    let count = Arc::new(Count::default());
    let good = Waker::from(count.clone());
    let payload = catch_unwind(AssertUnwindSafe(|| poll(&mut timer, &good))).unwrap_err();
    assert_eq!(message(&*payload), "timer drop: drop");
    assert_eq!(faulty.live(), 1);
    wait_until("the new waker to be woken", || count.0.load(SeqCst) == 1);
    assert!(poll(&mut timer, &good).is_ready());

    // Unfired, dropped on another thread.
    let mut timer = sleep(Duration::from_secs(3600));
    assert!(poll(&mut timer, &waker).is_pending());
    assert_eq!(faulty.live(), 2);
    let dropper = std::thread::spawn(move || drop(timer));
    let payload = dropper.join().unwrap_err();
    assert_eq!(message(&*payload), "timer drop: drop");
    assert_eq!(faulty.live(), 1, "the timer kept its waker");
    assert!(catch_unwind(AssertUnwindSafe(|| drop(waker))).is_err());
    assert_eq!(faulty.live(), 0);
    run_bounded("a later sleep", || {
        block_on(sleep(Duration::from_millis(5)))
    });
}

/// What owns a timer and a value whose destructor panics.
struct TimedGuard {
    _guard: PanicOnDrop,
    _timer: Sleep,
}

/// An armed timer dropped on a thread outside any executor, alone or inside a value whose
/// destructor panics there (the panic surfaces in that thread's drop): either way its entry is
/// freed and its waker released unwoken, and the wheel keeps firing other timers.
#[test]
fn an_armed_timer_dropped_on_a_foreign_thread_is_freed_even_when_its_owner_panics() {
    let faulty = Faulty::new("foreign timer");
    let waker = faulty.waker();
    // Far deadlines: a released waker shows the entry was freed, not fired.
    let mut alone = sleep(Duration::from_secs(3600));
    assert!(poll(&mut alone, &waker).is_pending());
    let mut owned = sleep(Duration::from_secs(3600));
    assert!(poll(&mut owned, &waker).is_pending());
    assert_eq!(faulty.live(), 3);
    std::thread::spawn(move || drop(alone)).join().unwrap();
    assert_eq!(faulty.live(), 2, "the timer kept its waker");
    let drops = Arc::new(AtomicUsize::new(0));
    let timed = TimedGuard {
        _guard: PanicOnDrop(drops.clone(), "the timer's owner"),
        _timer: owned,
    };
    let payload = std::thread::spawn(move || drop(timed)).join().unwrap_err();
    assert_eq!(message(&*payload), "the timer's owner");
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(faulty.live(), 1, "the owner's timer kept its waker");
    assert_eq!(faulty.wakes.load(SeqCst), 0, "a dropped timer fired");
    drop(waker);
    assert_eq!(faulty.live(), 0);
    let count = Arc::new(Count::default());
    let mut later = sleep(Duration::from_millis(5));
    assert!(poll(&mut later, &Waker::from(count.clone())).is_pending());
    wait_until("a later timer to fire", || count.0.load(SeqCst) == 1);
}

/// Runs `f` on a helper thread, failing the test if it does not return within `TIMEOUT`.
fn run_bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("hung: {what} did not finish within {TIMEOUT:?}"))
}

// ---- shutdown --------------------------------------------------------------------------------

/// Tasks still queued (never polled) when their pool shuts down, whose futures' destructors
/// panic: shutdown completes, drops each once (the panic hook reports each panic), and their
/// handles resolve `Cancelled`. A task whose poll panics while the shutdown waits for it is
/// reported through its handle.
#[test]
fn shutdown_with_queued_tasks_whose_destructors_panic_completes() {
    count_reports();
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .handoff_after(Duration::from_secs(3600))
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let blocker = pool.spawn({
        let (started, release) = (started.clone(), release.clone());
        async move {
            started.store(true, SeqCst);
            // Blocks its worker (the pool's only one) until the shutdown has begun.
            while !release.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            panic!("polled during the shutdown");
        }
    });
    wait_until("the blocker to start", || started.load(SeqCst));
    let drops = Arc::new(AtomicUsize::new(0));
    let polled = Arc::new(AtomicUsize::new(0));
    let queued: Vec<JoinHandle<()>> = (0..3)
        .map(|_| {
            let guard = PanicOnDrop(drops.clone(), "queued at shutdown");
            let polled = polled.clone();
            pool.spawn(async move {
                let _guard = guard;
                polled.fetch_add(1, SeqCst);
            })
        })
        .collect();
    let handle = pool.handle();
    let (done, shut) = mpsc::channel();
    std::thread::spawn(move || {
        pool.shutdown();
        let _ = done.send(());
    });
    // Once the shutdown has begun, a spawn is refused at once (before, it queues, harmlessly).
    wait_until("the shutdown to begin", || {
        handle.spawn(async {}).is_finished()
    });
    release.store(true, SeqCst);
    shut.recv_timeout(TIMEOUT)
        .expect("the shutdown did not finish");
    assert_eq!(
        polled.load(SeqCst),
        0,
        "a queued task ran during the shutdown"
    );
    assert_eq!(drops.load(SeqCst), 3, "each queued future dropped once");
    assert_eq!(reported("queued at shutdown"), 3);
    for handle in queued {
        assert!(matches!(
            wait("a queued task", handle),
            Err(JoinError::Cancelled)
        ));
    }
    let payload = wait("the blocker", blocker)
        .unwrap_err()
        .try_into_panic()
        .unwrap();
    assert_eq!(message(&*payload), "polled during the shutdown");
}
