//! Every user callback coro calls may panic: wakers handed to coro's primitives or
//! wrapping coro's own (their clone, wake and drop), cancellation callbacks, a user `Executor`'s
//! `schedule`, a `SharedTask`'s body, a collect child's destructor, a task-local's destructor, a
//! timed operation's destructor, and a future's poll when it sees its cancellation. None of them
//! aborts the process, hangs (every wait here is bounded) or leaks (values are counted and
//! dropped exactly once); each test's doc says where the panic surfaces; coro's state stays
//! usable and the pool keeps serving.
//!
//! Engine-only cases (a `JoinHandle`'s waker, timers' wakers, a user executor under the bare
//! engine, shutdown) are in `crates/coro-executor/tests/callback_panics.rs`.

use coro::cancel::{CancellationCallback, CancellationSource, Cancelled, cancellable};
use coro::executor::{Executor, Runnable};
use coro::sync::{Baton, Mutex, Semaphore, SharedMutexFair, SharedPromise};
use coro::time::{sleep, timeout, timeout_no_discard};
use coro::{
    AsyncScope, ExecutorHandle, JoinError, JoinHandle, ScopeError, Task, ThreadPool, block_wait,
    collect_all_range, try_collect_all_range,
};
use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

mod support;
use support::{CountDrop, noting_suspension, panic_message, wait_until};

// ---- helpers ---------------------------------------------------------------------------------

const TIMEOUT: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Counts its drop, then panics with its message.
struct PanicOnDrop(Arc<AtomicUsize>, &'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{}", self.1);
    }
}

/// A future that is ready at once (or after `sleep`, if given) with `value`, and owns `guard`,
/// dropped with the future itself (after it finished), not at the end of a poll.
struct Owning<G, T> {
    guard: G,
    value: Option<T>,
    sleep: Option<coro::cancel::Cancellable<coro::executor::time::Sleep>>,
}

impl<G: Unpin, T: Unpin> Future for Owning<G, T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let _ = &self.guard;
        if let Some(sleep) = &mut self.sleep {
            if Pin::new(sleep).poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        Poll::Ready(self.value.take().expect("polled after it finished"))
    }
}

/// How many times the panic hook (installed after coro's own) has seen `text`.
fn reported(text: &str) -> usize {
    faulty::reported_with(text, coro::trace::install_panic_hook)
}

/// Installs the counting hook before a test's first panic.
fn count_reports() {
    reported("");
}

fn message(payload: Box<dyn Any + Send>) -> String {
    panic_message(&*payload)
}

/// The outcome of `handle`, waited for on a helper thread; a hang fails the test.
fn within<T: Send + 'static>(what: &str, handle: JoinHandle<T>) -> Result<T, JoinError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(futures::executor::block_on(handle));
    });
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("hung: {what} did not finish within {TIMEOUT:?}"))
}

/// The message `handle`'s task panicked with.
fn panicked<T: Send + 'static + std::fmt::Debug>(what: &str, handle: JoinHandle<T>) -> String {
    match within(what, handle) {
        Err(JoinError::Panicked(payload)) => message(payload),
        other => panic!("expected {what} to panic, got {other:?}"),
    }
}

/// `f` on this thread, bounded: `f` runs on a helper thread and a hang fails the test.
fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(_) => panic!("hung: {what} did not finish within {TIMEOUT:?}"),
    }
}

/// The pool still runs tasks.
fn still_serves(pool: &ThreadPool) {
    assert_eq!(
        within("a task after the panic", pool.spawn(async { 7 })).unwrap(),
        7
    );
}

fn poll<F: Future + ?Sized>(fut: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(waker))
}

#[path = "../../coro-executor/tests/support/faulty.rs"]
mod faulty;
use faulty::Faulty;

/// Polls `fut` with `faulty`'s waker, which passes its wakes on to the real one: a user future
/// that builds its own waker around coro's.
fn with_faulty_waker<F: Future>(faulty: Arc<Faulty>, fut: F) -> impl Future<Output = F::Output> {
    let mut fut = Box::pin(fut);
    std::future::poll_fn(move |cx| {
        *faulty.forward.lock().unwrap() = Some(cx.waker().clone());
        poll(fut.as_mut(), &faulty.waker())
    })
}

/// A child of a `try_` collect.
type TryChild = Pin<Box<dyn Future<Output = Result<u32, String>> + Send>>;

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

fn counting_waker() -> (Arc<Count>, Waker) {
    let count = Arc::new(Count::default());
    (count.clone(), Waker::from(count))
}

// ---- 1. wakers ---------------------------------------------------------------------------------

/// `Mutex::lock`, `Semaphore::acquire`, `SharedMutexFair::write` and `Upgrade` polled (while
/// they must wait) with a waker whose `clone` panics: the panic surfaces at the poller, and the
/// primitive is left as if that waiter had never come (free permits can be taken, readers are
/// not held up by a writer that never queued, the lock can be taken once released).
#[test]
fn locks_polled_with_a_waker_whose_clone_panics_stay_usable() {
    let faulty = Faulty::panicking_on("lock clone", |f| &f.clone_panics);
    let waker = faulty.waker();

    let mutex = Mutex::new(0);
    let held = mutex.try_lock().unwrap();
    let mut lock = Box::pin(mutex.lock());
    let payload = catch_unwind(AssertUnwindSafe(|| poll(lock.as_mut(), &waker))).unwrap_err();
    assert_eq!(message(payload), "lock clone: clone");
    drop(lock);
    drop(held);
    assert!(mutex.try_lock().is_some(), "the mutex stayed locked");

    let semaphore = Semaphore::new(1);
    let mut acquire = Box::pin(semaphore.acquire(2));
    let payload = catch_unwind(AssertUnwindSafe(|| poll(acquire.as_mut(), &waker))).unwrap_err();
    assert_eq!(message(payload), "lock clone: clone");
    drop(acquire);
    assert!(
        semaphore.try_acquire(1).is_some(),
        "a free permit could not be taken: the semaphore still counts a waiter that never queued"
    );
    assert_eq!(semaphore.available_permits(), 1);

    let shared = SharedMutexFair::new(0);
    let reader = shared.try_read().unwrap();
    let mut write = Box::pin(shared.write());
    let payload = catch_unwind(AssertUnwindSafe(|| poll(write.as_mut(), &waker))).unwrap_err();
    assert_eq!(message(payload), "lock clone: clone");
    drop(write);
    assert!(
        shared.try_read().is_some(),
        "a reader waits behind a writer that never queued"
    );
    drop(reader);
    assert!(shared.try_write().is_some(), "the lock stayed held");

    let upgradable = shared.try_upgradable_read().unwrap();
    let reader = shared.try_read().unwrap();
    let mut upgrade = Box::pin(upgradable.upgrade());
    let payload = catch_unwind(AssertUnwindSafe(|| poll(upgrade.as_mut(), &waker))).unwrap_err();
    assert_eq!(message(payload), "lock clone: clone");
    drop(upgrade);
    assert!(
        shared.try_read().is_some(),
        "a reader waits behind an upgrade that never queued"
    );
    drop(reader);
    assert!(shared.try_write().is_some(), "the lock stayed held");
    drop(waker);
    assert_eq!(faulty.live(), 0);
}

/// Two semaphore waiters granted by one release; the first one's waker panics in `wake`: the
/// second is woken all the same, and the panic surfaces at the releaser (`add_permits`), after
/// every waiter was woken. The first waiter keeps its grant.
#[test]
fn a_waiter_whose_wake_panics_does_not_keep_the_next_waiter_asleep() {
    let pool = ThreadPool::new(2).unwrap();
    let semaphore = Arc::new(Semaphore::new(0));
    let faulty = Faulty::panicking_on("semaphore wake", |f| &f.wake_panics);
    let mut first = Box::pin(semaphore.acquire(1));
    assert!(poll(first.as_mut(), &faulty.waker()).is_pending());
    let suspended = Arc::new(AtomicUsize::new(0));
    let second = pool.spawn(noting_suspension(
        {
            let semaphore = semaphore.clone();
            async move { semaphore.acquire(1).await.forget() }
        },
        suspended.clone(),
    ));
    wait_until("the second waiter to queue", || suspended.load(SeqCst) == 1);
    let payload =
        catch_unwind(AssertUnwindSafe(|| semaphore.add_permits(2))).expect_err("no panic");
    assert_eq!(message(payload), "semaphore wake: wake");
    within("the second waiter", second).unwrap();
    let Poll::Ready(permit) = poll(first.as_mut(), Waker::noop()) else {
        panic!("the first waiter lost its grant");
    };
    drop(permit);
    drop(first);
    assert_eq!(semaphore.available_permits(), 1);
    assert_eq!(faulty.live(), 0);
    still_serves(&pool);
}

/// `SharedPromise::set_value` and `Baton::post` wake every waiter even when the first one's
/// waker panics; the panic surfaces at the caller of `set_value` / `post`, after all were woken.
#[test]
fn a_promise_or_baton_waiter_whose_wake_panics_does_not_keep_the_others_asleep() {
    let pool = ThreadPool::new(2).unwrap();
    let promise = Arc::new(SharedPromise::<u32>::new());
    let faulty = Faulty::panicking_on("promise wake", |f| &f.wake_panics);
    let mut early = promise.get_future();
    assert!(poll(Pin::new(&mut early), &faulty.waker()).is_pending());
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| pool.spawn(noting_suspension(promise.get_future(), suspended.clone())))
        .collect();
    wait_until("the waiters to wait", || suspended.load(SeqCst) == 3);
    let payload = catch_unwind(AssertUnwindSafe(|| promise.set_value(9))).expect_err("no panic");
    assert_eq!(message(payload), "promise wake: wake");
    assert!(promise.is_fulfilled());
    for waiter in waiters {
        assert_eq!(within("a promise waiter", waiter).unwrap(), Ok(9));
    }
    assert_eq!(
        poll(Pin::new(&mut early), Waker::noop()),
        Poll::Ready(Ok(9))
    );

    let baton = Arc::new(Baton::new());
    let faulty = Faulty::panicking_on("baton wake", |f| &f.wake_panics);
    let mut early = Box::pin(baton.wait());
    assert!(poll(early.as_mut(), &faulty.waker()).is_pending());
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let baton = baton.clone();
            pool.spawn(noting_suspension(
                async move { baton.wait().await },
                suspended.clone(),
            ))
        })
        .collect();
    wait_until("the waiters to wait", || suspended.load(SeqCst) == 3);
    let payload = catch_unwind(AssertUnwindSafe(|| baton.post())).expect_err("no panic");
    assert_eq!(message(payload), "baton wake: wake");
    for waiter in waiters {
        within("a baton waiter", waiter).unwrap();
    }
    assert!(poll(early.as_mut(), Waker::noop()).is_ready());
    drop(early);
    assert_eq!(faulty.live(), 0);
    still_serves(&pool);
}

/// `AsyncScope::close` turns away every `spawn_wait` waiting for a slot, waking each, even when
/// the first one's waker panics: the others are woken (and learn the scope is closed), and the
/// panic surfaces at the caller of `close`, after all were woken. The scope still joins.
#[test]
fn a_scope_waiter_whose_wake_panics_does_not_keep_the_others_asleep() {
    let pool = ThreadPool::new(2).unwrap();
    let scope = Arc::new(AsyncScope::bounded(1));
    let gate = Arc::new(Baton::new());
    let child = scope
        .spawn({
            let gate = gate.clone();
            async move { gate.wait().await }
        })
        .unwrap();
    let faulty = Faulty::panicking_on("scope wake", |f| &f.wake_panics);
    let mut first = Box::pin(scope.spawn_wait(async {}));
    assert!(poll(first.as_mut(), &faulty.waker()).is_pending());
    let suspended = Arc::new(AtomicUsize::new(0));
    let second = pool.spawn(noting_suspension(
        {
            let scope = scope.clone();
            async move { scope.spawn_wait(async {}).await.err() }
        },
        suspended.clone(),
    ));
    wait_until("the second waiter to wait", || suspended.load(SeqCst) == 1);
    let payload = catch_unwind(AssertUnwindSafe(|| scope.close())).expect_err("no panic");
    assert_eq!(message(payload), "scope wake: wake");
    assert_eq!(
        within("the second waiter", second).unwrap(),
        Some(ScopeError::Closed)
    );
    assert!(matches!(
        poll(first.as_mut(), Waker::noop()),
        Poll::Ready(Err(ScopeError::Closed))
    ));
    drop(first);
    assert_eq!(faulty.live(), 0);
    gate.post();
    within("the child", child).unwrap();
    bounded("the scope's join", move || block_wait(scope.join()));
    still_serves(&pool);
}

/// `SharedFuture`, `Baton::wait`, `coro::time::sleep` and `CancellationToken::cancelled`, each
/// polled (again, with a new waker) with a waker whose `clone` panics: the panic surfaces at the
/// poller, and each still completes for the waker it had before (the token's callbacks and
/// `request_cancellation` work: its lock is not left poisoned).
#[test]
fn waits_repolled_with_a_waker_whose_clone_panics_keep_working() {
    let faulty = Faulty::panicking_on("wait clone", |f| &f.clone_panics);
    let bad = faulty.waker();
    let (count, good) = counting_waker();
    let repoll = |fut: Pin<&mut dyn Future<Output = ()>>| {
        let payload = catch_unwind(AssertUnwindSafe(|| poll(fut, &bad))).unwrap_err();
        assert_eq!(message(payload), "wait clone: clone");
    };

    let promise = SharedPromise::new();
    let mut shared = promise.get_future();
    assert!(poll(Pin::new(&mut shared), &good).is_pending());
    let mut as_unit = std::pin::pin!(async {
        let _ = (&mut shared).await;
    });
    // A fresh poll of the async block polls `shared` with the faulty waker.
    repoll(as_unit.as_mut());
    promise.set_value(1).unwrap();
    assert_eq!(count.0.load(SeqCst), 1, "the earlier waker was not woken");

    let baton = Baton::new();
    let mut wait = std::pin::pin!(baton.wait());
    assert!(poll(wait.as_mut(), &good).is_pending());
    repoll(wait.as_mut());
    baton.post();
    assert_eq!(count.0.load(SeqCst), 2, "the earlier waker was not woken");
    assert!(poll(wait.as_mut(), &good).is_ready());

    let source = CancellationSource::new();
    let token = source.token();
    let mut cancelled = std::pin::pin!(token.cancelled());
    assert!(poll(cancelled.as_mut(), &good).is_pending());
    repoll(cancelled.as_mut());
    let ran = Arc::new(AtomicBool::new(false));
    let _callback = CancellationCallback::new(&token, {
        let ran = ran.clone();
        move || ran.store(true, SeqCst)
    });
    assert!(source.request_cancellation());
    assert!(
        ran.load(SeqCst),
        "a callback registered afterwards did not run"
    );
    assert_eq!(count.0.load(SeqCst), 3, "the earlier waker was not woken");
    assert!(poll(cancelled.as_mut(), &good).is_ready());

    // Long enough not to fire before the second poll.
    let mut timer = std::pin::pin!(sleep(ms(200)));
    assert!(poll(timer.as_mut(), &good).is_pending());
    let payload = catch_unwind(AssertUnwindSafe(|| poll(timer.as_mut(), &bad))).unwrap_err();
    assert_eq!(message(payload), "wait clone: clone");
    wait_until("the timer to fire", || count.0.load(SeqCst) == 4);
    drop(bad);
    assert_eq!(faulty.live(), 0);
}

/// A user future polls `Mutex::lock` with its own waker, which wraps coro's and panics after
/// passing the wake-up on: when the holder releases the lock, the waiter is handed the lock and
/// resumes, and the panic surfaces at the releaser (the guard's drop). The mutex still works.
#[test]
fn a_user_waker_wrapping_coros_that_panics_on_wake_still_gets_the_lock() {
    let pool = ThreadPool::new(2).unwrap();
    let mutex = Arc::new(Mutex::new(0u32));
    let held = mutex.try_lock().unwrap();
    let faulty = Faulty::panicking_on("wrapped wake", |f| &f.wake_panics);
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiter = pool.spawn({
        let (mutex, faulty) = (mutex.clone(), faulty.clone());
        noting_suspension(
            async move {
                *with_faulty_waker(faulty, mutex.lock()).await += 1;
            },
            suspended.clone(),
        )
    });
    wait_until("the waiter to queue", || suspended.load(SeqCst) == 1);
    let payload = catch_unwind(AssertUnwindSafe(|| drop(held))).expect_err("no panic");
    assert_eq!(message(payload), "wrapped wake: wake");
    within("the waiter", waiter).unwrap();
    assert_eq!(*mutex.try_lock().unwrap(), 1);
    assert_eq!(
        bounded("a later lock", move || *block_wait(mutex.lock())),
        1
    );
    wait_until("every faulty waker to be dropped", || {
        Arc::strong_count(&faulty) == 1
    });
    still_serves(&pool);
}

// ---- 2. cancellation callbacks ---------------------------------------------------------------

/// A panicking `CancellationCallback` run by `request_cancellation`: every other callback and
/// waiter on the token still runs once, then the panic surfaces at the requester. Every
/// closure (the panicking one's too) is dropped exactly once, and the token stays cancelled.
#[test]
fn a_panicking_callback_lets_the_others_run_then_surfaces_at_the_requester() {
    let pool = ThreadPool::new(2).unwrap();
    let source = CancellationSource::new();
    let token = source.token();
    let ran = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let callback = |panics: bool| {
        let (ran, guard) = (ran.clone(), CountDrop(drops.clone()));
        CancellationCallback::new(&token, move || {
            let _guard = guard;
            ran.fetch_add(1, SeqCst);
            if panics {
                panic!("callback exploded");
            }
        })
    };
    let callbacks = [callback(false), callback(true), callback(false)];
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiter = Task::new(noting_suspension(
        cancellable(std::future::pending::<()>()),
        suspended.clone(),
    ))
    .with_cancellation(token.clone())
    .schedule_on(&pool)
    .start();
    wait_until("the waiter to wait", || suspended.load(SeqCst) == 1);
    let payload =
        catch_unwind(AssertUnwindSafe(|| source.request_cancellation())).expect_err("no panic");
    assert_eq!(message(payload), "callback exploded");
    assert_eq!(ran.load(SeqCst), 3, "a callback did not run");
    assert_eq!(
        drops.load(SeqCst),
        3,
        "a callback's closure was not dropped once"
    );
    assert_eq!(within("the waiter", waiter).unwrap(), Err(Cancelled));
    assert!(token.is_cancellation_requested());
    assert!(!source.request_cancellation());
    drop(callbacks);
    assert_eq!(drops.load(SeqCst), 3);
    still_serves(&pool);
}

/// A panicking callback registered on a token that is already cancelled runs inside `new`, and
/// its panic surfaces there; its closure is dropped once, and later registrations still run.
#[test]
fn a_panicking_callback_on_a_cancelled_token_surfaces_in_new() {
    let source = CancellationSource::new();
    source.request_cancellation();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let payload = catch_unwind(AssertUnwindSafe(|| {
        CancellationCallback::new(&source.token(), move || {
            let _guard = guard;
            panic!("late callback exploded");
        })
    }))
    .expect_err("no panic");
    assert_eq!(message(payload), "late callback exploded");
    assert_eq!(drops.load(SeqCst), 1);
    let ran = Arc::new(AtomicBool::new(false));
    let _later = CancellationCallback::new(&source.token(), {
        let ran = ran.clone();
        move || ran.store(true, SeqCst)
    });
    assert!(ran.load(SeqCst));
    assert!(block_wait(cancellable(source.token().cancelled())).is_ok());
}

/// An operation under `timeout` registers a callback on its token that panics: at the deadline
/// the timeout's cancellation runs it, and the panic surfaces at the timeout's awaiter (its
/// task's `JoinHandle`). The operation is dropped once; the timer wheel keeps working.
#[test]
fn a_callback_panicking_at_a_timeouts_deadline_surfaces_at_its_awaiter() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let awaiter = pool.spawn(timeout(ms(10), async move {
        let _guard = guard;
        let _callback = CancellationCallback::new(&coro::current_cancellation_token(), || {
            panic!("deadline callback exploded")
        });
        sleep(Duration::from_secs(60)).await
    }));
    assert_eq!(
        panicked("the timeout's awaiter", awaiter),
        "deadline callback exploded"
    );
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(
        within(
            "a later timeout",
            pool.spawn(timeout(ms(5), sleep(ms(500))))
        )
        .unwrap(),
        Err(coro::time::Elapsed)
    );
    still_serves(&pool);
}

/// A child of a `try_collect_all_range` registers a callback on its token that panics; a sibling
/// fails, and the collect's cancellation of its children runs the callback: the panic goes to
/// the panic hook, the collect still waits for every child and returns the first failure, and
/// every child is dropped once. Both when the failing sibling fails at once (inside the
/// collect's own poll) and later (in a task of its own).
#[test]
fn a_callback_panicking_when_a_collect_cancels_its_children_leaves_the_first_failure() {
    count_reports();
    let pool = ThreadPool::new(2).unwrap();
    for (fail_after, text) in [
        (None, "collect callback exploded, inline"),
        (Some(ms(20)), "collect callback exploded, driven"),
    ] {
        let drops = Arc::new(AtomicUsize::new(0));
        let children: Vec<TryChild> = vec![
            Box::pin({
                let guard = CountDrop(drops.clone());
                async move {
                    let _guard = guard;
                    let _callback =
                        CancellationCallback::new(&coro::current_cancellation_token(), move || {
                            panic!("{text}")
                        });
                    sleep(Duration::from_secs(60))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(0)
                }
            }),
            Box::pin({
                let guard = CountDrop(drops.clone());
                async move {
                    let _guard = guard;
                    if let Some(after) = fail_after {
                        sleep(after).await.map_err(|e| e.to_string())?;
                    }
                    Err("the first failure".to_owned())
                }
            }),
        ];
        let collect = pool.spawn(try_collect_all_range(children));
        assert_eq!(
            within("the collect", collect).unwrap(),
            Err("the first failure".to_owned())
        );
        assert_eq!(drops.load(SeqCst), 2, "a child was not dropped once");
        assert_eq!(reported(text), 1);
    }
    still_serves(&pool);
}

// ---- 3. a user Executor whose schedule panics --------------------------------------------------

/// A user executor running its tasks on a thread of its own; its `schedule` panics once
/// `refuse` is set.
struct Flaky {
    queue: std::sync::Mutex<VecDeque<Runnable>>,
    ready: std::sync::Condvar,
    refuse: AtomicBool,
    message: &'static str,
}

impl Flaky {
    fn start(message: &'static str, refuse: bool) -> Arc<Flaky> {
        let flaky = Arc::new(Flaky {
            queue: std::sync::Mutex::new(VecDeque::new()),
            ready: std::sync::Condvar::new(),
            refuse: AtomicBool::new(refuse),
            message,
        });
        let weak = Arc::downgrade(&flaky);
        std::thread::spawn(move || {
            while let Some(flaky) = weak.upgrade() {
                let next = {
                    let mut queue = flaky.queue.lock().unwrap();
                    if queue.is_empty() {
                        queue = flaky.ready.wait_timeout(queue, ms(5)).unwrap().0;
                    }
                    queue.pop_front()
                };
                drop(flaky);
                if let Some(runnable) = next {
                    runnable.run();
                }
            }
        });
        flaky
    }
}

impl Executor for Flaky {
    fn schedule(&self, runnable: Runnable) {
        if self.refuse.load(SeqCst) {
            panic!("{}", self.message);
        }
        self.queue.lock().unwrap().push_back(runnable);
        self.ready.notify_one();
    }
}

/// `schedule_on` an executor whose `schedule` refuses every task: `start()`, an awaiting pool
/// task and `block_wait` each see the panic (at the `start` call, through the awaiter's
/// `JoinHandle`, and out of `block_wait`), and each task's future is dropped once.
#[test]
fn a_task_on_an_executor_whose_schedule_panics_surfaces_at_the_spawner() {
    let pool = ThreadPool::new(2).unwrap();
    let refusing = ExecutorHandle::from_arc(Flaky::start("refused to schedule", true));
    let drops = Arc::new(AtomicUsize::new(0));
    let task = |drops: &Arc<AtomicUsize>| {
        let guard = CountDrop(drops.clone());
        Task::new(async move {
            let _guard = guard;
            1
        })
    };

    let started = task(&drops).schedule_on(refusing.clone());
    let payload = catch_unwind(AssertUnwindSafe(|| started.start())).expect_err("no panic");
    assert_eq!(message(payload), "refused to schedule");
    assert_eq!(drops.load(SeqCst), 1);

    let awaited = task(&drops).schedule_on(refusing.clone());
    assert_eq!(
        panicked("the awaiter", pool.spawn(awaited)),
        "refused to schedule"
    );
    assert_eq!(drops.load(SeqCst), 2);

    let blocked = task(&drops).schedule_on(refusing);
    let payload = catch_unwind(AssertUnwindSafe(|| block_wait(blocked))).expect_err("no panic");
    assert_eq!(message(payload), "refused to schedule");
    assert_eq!(drops.load(SeqCst), 3);
    still_serves(&pool);
}

/// A task on a user executor sleeps; its executor's `schedule` starts panicking before the timer
/// fires, so the timer's wake-up cannot requeue it: the task is dropped once (not lost
/// silently: the panic hook reports the panic, and its awaiter panics saying that the task was
/// dropped before it finished); the timer wheel and the awaiter's pool keep working.
#[test]
fn a_task_whose_executor_refuses_its_wake_up_is_dropped_and_its_awaiter_told() {
    count_reports();
    let pool = ThreadPool::new(2).unwrap();
    let flaky = Flaky::start("refused a wake-up", false);
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let task = Task::new({
        let flaky = flaky.clone();
        async move {
            let _guard = guard;
            // From now on its executor refuses it.
            flaky.refuse.store(true, SeqCst);
            sleep(ms(10)).await.unwrap();
        }
    })
    .schedule_on(ExecutorHandle::from_arc(flaky.clone()));
    let awaiter = pool.spawn(task);
    let text = panicked("the awaiter", awaiter);
    assert!(text.contains("dropped before it finished"), "{text:?}");
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(reported("refused a wake-up"), 1);
    bounded("a later sleep", || block_wait(sleep(ms(5)))).unwrap();
    still_serves(&pool);
}

// ---- 4. SharedTask -----------------------------------------------------------------------------

/// A `SharedTask` whose body panics, awaited from two pools and by hand: every awaiter panics
/// with the original message, a late awaiter too; the body's captures are dropped
/// once, and both pools keep serving.
#[test]
fn a_panicking_shared_task_panics_every_awaiter_and_drops_its_body_once() {
    let pool = ThreadPool::new(2).unwrap();
    let other = ThreadPool::new(1).unwrap();
    let gate = Arc::new(Baton::new());
    let drops = Arc::new(AtomicUsize::new(0));
    let shared = Task::new({
        let (gate, guard) = (gate.clone(), CountDrop(drops.clone()));
        async move {
            let _guard = guard;
            gate.wait().await;
            if gate.is_ready() {
                panic!("shared body exploded");
            }
            0u32
        }
    })
    .shared();
    let suspended = Arc::new(AtomicUsize::new(0));
    let mut awaiters: Vec<_> = (0..3)
        .map(|_| pool.spawn(noting_suspension(shared.clone(), suspended.clone())))
        .collect();
    awaiters.push(other.spawn(noting_suspension(shared.clone(), suspended.clone())));
    let mut by_hand = shared.clone();
    wait_until("the awaiters to wait", || suspended.load(SeqCst) == 4);
    let (count, good) = counting_waker();
    assert!(poll(Pin::new(&mut by_hand), &good).is_pending());
    gate.post();
    for awaiter in awaiters {
        assert_eq!(panicked("an awaiter", awaiter), "shared body exploded");
    }
    wait_until("the hand-polled clone to be woken", || {
        count.0.load(SeqCst) == 1
    });
    let payload = catch_unwind(AssertUnwindSafe(|| poll(Pin::new(&mut by_hand), &good)))
        .expect_err("no panic");
    assert_eq!(message(payload), "shared body exploded");
    assert_eq!(
        panicked("a late awaiter", other.spawn(shared.clone())),
        "shared body exploded"
    );
    assert_eq!(drops.load(SeqCst), 1, "the body was not dropped once");
    drop((shared, by_hand));
    assert_eq!(drops.load(SeqCst), 1);
    still_serves(&pool);
    still_serves(&other);
}

// ---- 5. a collect child's destructor -------------------------------------------------------------

/// A child whose future owns a value whose destructor panics, dropped after the child finished:
/// - after a sibling failed first (`try_collect_all_range`, the child was cancelled): the
///   collect returns that first failure, the destructor's panic goes to the panic hook;
/// - as the first failure itself (`collect_all_range`): it cancels the siblings, the collect
///   waits for them, and the panic surfaces at the collect's awaiter.
///
/// Either way every child is dropped exactly once. Both with children that finish inside the
/// collect's own poll and with children driven by tasks of their own.
#[test]
fn a_collect_childs_destructor_panic_is_dropped_once_and_surfaces_as_its_failure() {
    count_reports();
    let pool = ThreadPool::new(2).unwrap();
    for (driven, text) in [
        (false, "child drop after a failure, inline"),
        (true, "child drop after a failure, driven"),
    ] {
        let drops = Arc::new(AtomicUsize::new(0));
        let after = |d: u64| driven.then(|| sleep(ms(d)));
        let children: Vec<TryChild> = vec![
            // Fails first.
            Box::pin(Owning {
                guard: CountDrop(drops.clone()),
                value: Some(Err("the first failure".to_owned())),
                sleep: after(5),
            }),
            // Cancelled by that failure; its destructor panics.
            Box::pin({
                let guard = PanicOnDrop(drops.clone(), text);
                async move {
                    let _owned = &guard;
                    // The error holds no allocation: rustc leaks a return value whose
                    // function's locals panic as they drop (rust-lang/rust#47949), and the
                    // sanitizer run would report that leak as this test's.
                    sleep(Duration::from_secs(60))
                        .await
                        .map_err(|_| String::new())?;
                    Ok(1)
                }
            }),
            Box::pin(Owning {
                guard: CountDrop(drops.clone()),
                value: Some(Ok(2)),
                sleep: after(10),
            }),
        ];
        let collect = pool.spawn(try_collect_all_range(children));
        assert_eq!(
            within("the collect", collect).unwrap(),
            Err("the first failure".to_owned())
        );
        assert_eq!(drops.load(SeqCst), 3, "a child was not dropped once");
        assert_eq!(reported(text), 1);
    }
    for (driven, text) in [
        (false, "child drop first, inline"),
        (true, "child drop first, driven"),
    ] {
        let drops = Arc::new(AtomicUsize::new(0));
        let cancelled = Arc::new(AtomicBool::new(false));
        type Child = Pin<Box<dyn Future<Output = u32> + Send>>;
        let children: Vec<Child> = vec![
            // Waits until cancelled.
            Box::pin({
                let (guard, cancelled) = (CountDrop(drops.clone()), cancelled.clone());
                async move {
                    let _guard = guard;
                    if sleep(Duration::from_secs(60)).await.is_err() {
                        cancelled.store(true, SeqCst);
                    }
                    0
                }
            }),
            // Finishes, then its destructor panics: the first failure.
            Box::pin(Owning {
                guard: PanicOnDrop(drops.clone(), text),
                value: Some(1),
                sleep: driven.then(|| sleep(ms(10))),
            }),
        ];
        let collect = pool.spawn(collect_all_range(children));
        assert_eq!(panicked("the collect", collect), text);
        assert!(
            cancelled.load(SeqCst),
            "the sibling was not cancelled and awaited"
        );
        assert_eq!(drops.load(SeqCst), 2, "a child was not dropped once");
    }
    still_serves(&pool);
}

// ---- 6. task-locals ----------------------------------------------------------------------------

coro::task_local! {
    static GUARDED: PanicOnDrop;
}

/// A task-local value whose destructor panics:
/// - dropped at the end of its `scope` (the task's own): the panic surfaces in the task that
///   awaited the scope (its `JoinHandle`);
/// - held by a task cancelled while inside the scope: dropped with the task, the panic goes to
///   the panic hook and the handle resolves `Cancelled`;
/// - inherited by a spawned child that outlives the scope: dropped when the child finishes, the
///   panic surfaces through the child's `JoinHandle`.
///
/// Each value is dropped exactly once; the pool keeps serving.
#[test]
// The parent task returns its child's handle, to await it after the parent finished.
#[allow(clippy::async_yields_async)]
fn a_task_locals_destructor_panic_surfaces_where_its_last_holder_ends() {
    count_reports();
    let pool = ThreadPool::new(2).unwrap();

    let drops = Arc::new(AtomicUsize::new(0));
    let value = PanicOnDrop(drops.clone(), "task-local dropped at the scope's end");
    let task = pool.spawn(async move {
        let seen = GUARDED.scope(value, async { GUARDED.with(|v| v.1) }).await;
        assert_eq!(seen, "task-local dropped at the scope's end");
    });
    assert_eq!(
        panicked("the task", task),
        "task-local dropped at the scope's end"
    );
    assert_eq!(drops.load(SeqCst), 1);

    let drops = Arc::new(AtomicUsize::new(0));
    let value = PanicOnDrop(drops.clone(), "task-local dropped with its task");
    let suspended = Arc::new(AtomicUsize::new(0));
    let task = pool.spawn(noting_suspension(
        GUARDED.scope(value, std::future::pending::<()>()),
        suspended.clone(),
    ));
    wait_until("the task to wait", || suspended.load(SeqCst) == 1);
    task.cancel();
    wait_until("the value to be dropped", || drops.load(SeqCst) == 1);
    wait_until("the panic hook to report it", || {
        reported("task-local dropped with its task") == 1
    });

    let drops = Arc::new(AtomicUsize::new(0));
    let value = PanicOnDrop(drops.clone(), "task-local dropped by a child");
    let gate = Arc::new(Baton::new());
    let parent = pool.spawn({
        let gate = gate.clone();
        GUARDED.scope(value, async move {
            coro::spawn(async move {
                gate.wait().await;
                GUARDED.with(|v| v.1.len())
            })
        })
    });
    let child = within("the parent", parent).unwrap();
    assert_eq!(
        drops.load(SeqCst),
        0,
        "dropped while the child still holds it"
    );
    gate.post();
    assert_eq!(
        panicked("the child", child),
        "task-local dropped by a child"
    );
    assert_eq!(drops.load(SeqCst), 1);
    still_serves(&pool);
}

// ---- 7. timed operations -----------------------------------------------------------------------

/// An operation under `timeout` whose destructor panics, dropped at the deadline: the panic
/// surfaces at the timeout's awaiter; the operation is dropped once, and other timers keep
/// firing.
#[test]
fn a_timed_operation_whose_destructor_panics_at_the_deadline_surfaces_at_the_awaiter() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let op = Owning {
        guard: PanicOnDrop(drops.clone(), "timed op dropped at the deadline"),
        value: Some(()),
        sleep: Some(sleep(Duration::from_secs(60))),
    };
    let awaiter = pool.spawn(timeout(ms(10), op));
    assert_eq!(
        panicked("the timeout's awaiter", awaiter),
        "timed op dropped at the deadline"
    );
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(
        within(
            "a later timeout",
            pool.spawn(timeout(ms(5), sleep(ms(500))))
        )
        .unwrap(),
        Err(coro::time::Elapsed)
    );
    still_serves(&pool);
}

// ---- 8. a poll panicking at cancellation -----------------------------------------------------------

/// Futures whose poll panics when they see their cancellation: a task cancelled through its
/// token (the panic surfaces through its `JoinHandle`), and an operation under
/// `timeout_no_discard` (awaited after the deadline cancels it: the panic surfaces at the
/// awaiter). Each is dropped once; the pool keeps serving.
#[test]
fn a_poll_panicking_when_it_sees_its_cancellation_surfaces_at_its_awaiter() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let source = CancellationSource::new();
    let suspended = Arc::new(AtomicUsize::new(0));
    let task = Task::new(noting_suspension(
        {
            let guard = CountDrop(drops.clone());
            async move {
                let _guard = guard;
                coro::current_cancellation_token().cancelled().await;
                if std::hint::black_box(true) {
                    panic!("saw its cancellation");
                }
            }
        },
        suspended.clone(),
    ))
    .with_cancellation(source.token())
    .schedule_on(&pool)
    .start();
    wait_until("the task to wait", || suspended.load(SeqCst) == 1);
    source.request_cancellation();
    assert_eq!(panicked("the task", task), "saw its cancellation");
    assert_eq!(drops.load(SeqCst), 1);

    let guard = CountDrop(drops.clone());
    let awaiter = pool.spawn(timeout_no_discard(ms(10), async move {
        let _guard = guard;
        coro::current_cancellation_token().cancelled().await;
        if std::hint::black_box(true) {
            panic!("saw the deadline");
        }
        Err::<(), Cancelled>(Cancelled)
    }));
    assert_eq!(panicked("the awaiter", awaiter), "saw the deadline");
    assert_eq!(drops.load(SeqCst), 2);
    still_serves(&pool);
}
