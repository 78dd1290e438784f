//! One value, many waiters: `SharedPromise`, `SharedFuture` and `SharedTask`
//! (`Task::shared`): fan-out, broken promises, per-waiter executors, run-once computations,
//! panics, cancellation and executor shutdown.

use crate::support::{SetOnDrop, noting_suspension, panic_message, wait_until};
use coro::cancel::{CancellationSource, Cancelled, cancellable};
use coro::executor::ManualExecutor;
use coro::sync::{Baton, BrokenPromise, PromiseAlreadySatisfied, SharedPromise};
use coro::{JoinError, JoinHandle, Task, ThreadPool, block_wait};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// A waker that counts its wakes.
#[derive(Default)]
struct CountWake(AtomicUsize);

impl Wake for CountWake {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn counting_waker() -> (Arc<CountWake>, Waker) {
    let count = Arc::new(CountWake::default());
    (count.clone(), Waker::from(count))
}

fn poll_with<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// Waits for `fut` on this thread, panicking after 10 s.
fn within<F: Future>(what: &str, fut: F) -> F::Output {
    block_wait(coro::time::timeout(Duration::from_secs(10), fut))
        .unwrap_or_else(|_| panic!("timed out waiting for: {what}"))
}

fn pool(threads: usize) -> ThreadPool {
    ThreadPool::new(threads).unwrap()
}

/// The panic message of a spawned task that must have panicked.
fn panicked_with<T: std::fmt::Debug>(result: Result<T, JoinError>) -> String {
    match result {
        Err(JoinError::Panicked(payload)) => panic_message(&*payload),
        other => panic!("expected the task to panic, got {other:?}"),
    }
}

// ---- SharedPromise / SharedFuture ----------------------------------------------------------

#[test]
fn futures_taken_before_and_after_fulfilment_resolve_to_clones_of_the_value() {
    let promise = SharedPromise::new();
    let mut early = promise.get_future();
    let mut early_copy = early.clone();
    let (wakes, waker) = counting_waker();
    assert!(poll_with(&mut early, &waker).is_pending());
    assert!(poll_with(&mut early_copy, &waker).is_pending());
    assert!(!promise.is_fulfilled());

    promise.set_value("value".to_string()).unwrap();
    assert!(promise.is_fulfilled());
    assert_eq!(wakes.0.load(SeqCst), 2, "both waiting futures are woken");
    assert_eq!(
        poll_with(&mut early, &waker),
        Poll::Ready(Ok("value".to_string()))
    );
    assert_eq!(
        poll_with(&mut early_copy, &waker),
        Poll::Ready(Ok("value".to_string()))
    );

    let late = promise.get_future();
    let late_copy = late.clone();
    assert_eq!(block_wait(late), Ok("value".to_string()));
    assert_eq!(block_wait(late_copy), Ok("value".to_string()));
    // An unpolled future taken before fulfilment resolves too.
    let promise = SharedPromise::new();
    let unpolled = promise.get_future();
    promise.set_value(vec![1, 2]).unwrap();
    assert_eq!(block_wait(unpolled), Ok(vec![1, 2]));
}

#[test]
fn a_second_set_value_fails_and_every_future_keeps_the_first_value() {
    let promise = SharedPromise::new();
    let mut early = promise.get_future();
    let (_wakes, waker) = counting_waker();
    assert!(poll_with(&mut early, &waker).is_pending());
    assert_eq!(promise.set_value(1), Ok(()));
    assert_eq!(promise.set_value(2), Err(PromiseAlreadySatisfied));
    assert_eq!(poll_with(&mut early, &waker), Poll::Ready(Ok(1)));
    assert_eq!(block_wait(promise.get_future()), Ok(1));
    assert_eq!(promise.set_value(3), Err(PromiseAlreadySatisfied));
    assert_eq!(block_wait(promise.get_future()), Ok(1));
    assert!(promise.is_fulfilled());

    // Also when no future was ever handed out before the first value.
    let promise = SharedPromise::new();
    assert_eq!(promise.set_value("first"), Ok(()));
    assert_eq!(promise.set_value("second"), Err(PromiseAlreadySatisfied));
    assert_eq!(block_wait(promise.get_future()), Ok("first"));
}

#[test]
fn dropping_the_promise_unfulfilled_breaks_every_future() {
    let promise = SharedPromise::<String>::new();
    let mut waiting: Vec<_> = (0..3).map(|_| promise.get_future()).collect();
    let idle = promise.get_future();
    let idle_copy = idle.clone();
    let (wakes, waker) = counting_waker();
    for future in &mut waiting {
        assert!(poll_with(future, &waker).is_pending());
    }
    drop(promise);
    assert_eq!(wakes.0.load(SeqCst), 3, "every waiting future is woken");
    for future in &mut waiting {
        assert_eq!(poll_with(future, &waker), Poll::Ready(Err(BrokenPromise)));
    }
    assert_eq!(block_wait(idle), Err(BrokenPromise));
    assert_eq!(block_wait(idle_copy), Err(BrokenPromise));
}

#[test]
fn pending_counts_live_futures_taken_before_fulfilment() {
    let promise = SharedPromise::new();
    assert_eq!(promise.pending(), 0);
    let a = promise.get_future();
    let b = promise.get_future();
    assert_eq!(promise.pending(), 2);
    let c = a.clone();
    assert_eq!(promise.pending(), 3, "clones count");
    drop(a);
    assert_eq!(promise.pending(), 2, "drops uncount");
    let mut d = c.clone();
    let (_wakes, waker) = counting_waker();
    assert!(poll_with(&mut d, &waker).is_pending());
    assert_eq!(promise.pending(), 3, "a polled, waiting future counts");
    promise.set_value(5u8).unwrap();
    assert_eq!(promise.pending(), 0, "0 after fulfilment");
    let e = promise.get_future();
    assert_eq!(
        promise.pending(),
        0,
        "futures taken after fulfilment do not count"
    );
    assert_eq!(block_wait(b), Ok(5));
    assert_eq!(block_wait(c), Ok(5));
    assert_eq!(block_wait(e), Ok(5));
    drop(d);
}

#[test]
fn each_waiter_resumes_on_its_own_executor() {
    let pool_a = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("a")
        .build()
        .unwrap();
    let pool_b = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("b")
        .build()
        .unwrap();
    let promise = SharedPromise::new();
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiter = |pool: &ThreadPool| {
        let future = noting_suspension(promise.get_future(), suspended.clone());
        Task::new(async move {
            let value = future.await;
            (value, std::thread::current().name().map(str::to_owned))
        })
        .schedule_on(pool)
        .start()
    };
    let on_a = waiter(&pool_a);
    let on_b = waiter(&pool_b);
    wait_until("both waiters to suspend", || suspended.load(SeqCst) == 2);
    promise.set_value(11).unwrap();
    let (value_a, thread_a) = within("the waiter on pool a", on_a).unwrap();
    let (value_b, thread_b) = within("the waiter on pool b", on_b).unwrap();
    assert_eq!((value_a, value_b), (Ok(11), Ok(11)));
    assert_eq!(thread_a.as_deref(), Some("a-0"));
    assert_eq!(thread_b.as_deref(), Some("b-0"));
}

#[test]
fn fulfilling_runs_no_waiter_inline() {
    let executor = ManualExecutor::new();
    let promise = SharedPromise::new();
    let future = promise.get_future();
    let resumed = Arc::new(AtomicBool::new(false));
    let flag = resumed.clone();
    let handle = executor.handle().spawn(async move {
        let value = future.await;
        flag.store(true, SeqCst);
        value
    });
    assert_eq!(executor.run_until_idle(), 1);
    assert!(!resumed.load(SeqCst), "the waiter is waiting");
    assert_eq!(executor.pending(), 0);

    promise.set_value(7).unwrap();
    assert!(
        !resumed.load(SeqCst),
        "set_value ran the waiter's continuation inline"
    );
    assert_eq!(
        executor.pending(),
        1,
        "the waiter is queued on its executor"
    );
    assert!(executor.run_one());
    assert!(resumed.load(SeqCst));
    assert_eq!(block_wait(handle).unwrap(), Ok(7));
}

#[test]
fn a_hundred_thousand_waiters_are_all_woken() {
    const WAITERS: usize = 100_000;
    let promise = SharedPromise::new();
    let first = promise.get_future();
    let mut futures: Vec<_> = (0..WAITERS)
        .map(|i| {
            if i % 2 == 0 {
                promise.get_future()
            } else {
                first.clone()
            }
        })
        .collect();
    drop(first);
    let (wakes, waker) = counting_waker();
    for future in &mut futures {
        assert!(poll_with(future, &waker).is_pending());
    }
    assert_eq!(promise.pending(), WAITERS);
    assert_eq!(wakes.0.load(SeqCst), 0);
    promise.set_value(99u64).unwrap();
    assert_eq!(wakes.0.load(SeqCst), WAITERS, "every waiter was woken");
    let done = futures
        .iter_mut()
        .map(|future| poll_with(future, &waker))
        .filter(|poll| *poll == Poll::Ready(Ok(99)))
        .count();
    assert_eq!(done, WAITERS);
}

// ---- SharedTask ---------------------------------------------------------------------------

#[test]
fn a_shared_task_runs_once_for_many_awaiters_on_several_threads() {
    let pool = pool(4);
    let runs = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Baton::new());
    let shared = Task::new({
        let runs = runs.clone();
        let gate = gate.clone();
        async move {
            runs.fetch_add(1, SeqCst);
            gate.wait().await;
            "computed".to_string()
        }
    })
    .shared();
    let suspended = Arc::new(AtomicUsize::new(0));
    let awaiters: Vec<JoinHandle<String>> = (0..64)
        .map(|_| pool.spawn(noting_suspension(shared.clone(), suspended.clone())))
        .collect();
    wait_until("all 64 awaiters to suspend", || {
        suspended.load(SeqCst) == 64
    });
    assert_eq!(runs.load(SeqCst), 1);
    let poster = std::thread::spawn({
        let gate = gate.clone();
        move || {
            std::thread::sleep(Duration::from_millis(20));
            gate.post();
        }
    });
    // The test thread awaits a clone too, while the computation runs on the pool.
    assert_eq!(
        within("the test thread's clone", shared.clone()),
        "computed"
    );
    poster.join().unwrap();
    for awaiter in awaiters {
        assert_eq!(within("an awaiter", awaiter).unwrap(), "computed");
    }
    assert_eq!(runs.load(SeqCst), 1, "the computation ran more than once");
}

#[test]
fn awaiting_a_finished_shared_task_gives_the_value_without_running_again() {
    let pool = pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let shared = Task::new({
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, SeqCst);
            vec![4, 2]
        }
    })
    .shared();
    assert_eq!(within("the first await", shared.clone()), [4, 2]);
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(within("a later await", shared.clone()), [4, 2]);
    let on_pool = pool.spawn(shared.clone());
    assert_eq!(within("an await on the pool", on_pool).unwrap(), [4, 2]);
    assert_eq!(within("the original", shared), [4, 2]);
    assert_eq!(runs.load(SeqCst), 1, "the computation ran again");
}

#[test]
fn a_panicking_shared_task_panics_every_awaiter_with_the_original_message() {
    let pool = pool(4);
    let gate = Arc::new(Baton::new());
    let shared = Task::new({
        let gate = gate.clone();
        async move {
            gate.wait().await;
            if gate.is_ready() {
                panic!("the computation exploded: code 17");
            }
            0u32
        }
    })
    .shared();
    let suspended = Arc::new(AtomicUsize::new(0));
    let awaiters: Vec<_> = (0..8)
        .map(|_| pool.spawn(noting_suspension(shared.clone(), suspended.clone())))
        .collect();
    wait_until("all awaiters to suspend", || suspended.load(SeqCst) == 8);
    gate.post();
    for awaiter in awaiters {
        let message = panicked_with(within("an awaiter", awaiter));
        assert!(
            message.contains("the computation exploded: code 17"),
            "awaiter panicked with {message:?}"
        );
    }
    // Awaiting after the panic panics with it too.
    let late = pool.spawn(shared.clone());
    let message = panicked_with(within("a late awaiter", late));
    assert!(
        message.contains("the computation exploded: code 17"),
        "{message:?}"
    );
    let payload = std::panic::catch_unwind(AssertUnwindSafe(|| within("the test thread", shared)))
        .unwrap_err();
    assert!(
        panic_message(&*payload).contains("the computation exploded: code 17"),
        "{:?}",
        panic_message(&*payload)
    );
}

#[test]
fn dropping_every_clone_before_completion_drops_the_computation() {
    let pool = pool(2);
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let shared = Task::new({
        let guard = SetOnDrop(dropped.clone());
        let started = started.clone();
        async move {
            let _guard = guard;
            started.store(true, SeqCst);
            std::future::pending::<()>().await;
        }
    })
    .shared();
    let awaiter = pool.spawn(shared.clone());
    let spare = shared.clone();
    wait_until("the computation to start", || started.load(SeqCst));
    drop(shared);
    awaiter.cancel();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        !dropped.load(SeqCst),
        "the computation was dropped while a clone was still alive"
    );
    drop(spare);
    wait_until("the computation to be dropped", || dropped.load(SeqCst));
}

#[test]
fn a_shared_task_is_lazy() {
    let pool = pool(1);
    let ran = Arc::new(AtomicBool::new(false));
    let shared = Task::new({
        let ran = ran.clone();
        async move {
            ran.store(true, SeqCst);
            5
        }
    })
    .shared();
    let copy = shared.clone();
    drop(copy);
    std::thread::sleep(Duration::from_millis(20));
    assert!(!ran.load(SeqCst), "the computation ran before any await");
    assert_eq!(within("the first await", pool.spawn(shared)).unwrap(), 5);
    assert!(ran.load(SeqCst));
}

#[test]
fn an_awaiter_cancelled_or_dropped_does_not_stop_the_computation_for_the_others() {
    let pool = pool(2);
    let runs = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Baton::new());
    let shared = Task::new({
        let runs = runs.clone();
        let gate = gate.clone();
        async move {
            runs.fetch_add(1, SeqCst);
            // Cancellable: had the computation inherited the first awaiter's token, cancelling
            // that awaiter would end it here.
            cancellable(gate.wait())
                .await
                .expect("the computation was cancelled along with one awaiter");
            "done"
        }
    })
    .shared();
    let suspended = Arc::new(AtomicUsize::new(0));
    // The first awaiter starts the computation, then is cancelled through its token.
    let source = CancellationSource::new();
    let cancelled = Task::new(noting_suspension(
        cancellable(shared.clone()),
        suspended.clone(),
    ))
    .with_cancellation(source.token())
    .schedule_on(&pool)
    .start();
    wait_until("the first awaiter to suspend", || {
        suspended.load(SeqCst) == 1
    });
    assert_eq!(
        runs.load(SeqCst),
        1,
        "the first awaiter started the computation"
    );
    let dropped = pool.spawn(noting_suspension(shared.clone(), suspended.clone()));
    let survivor = pool.spawn(noting_suspension(shared.clone(), suspended.clone()));
    wait_until("the other awaiters to suspend", || {
        suspended.load(SeqCst) == 3
    });

    source.request_cancellation();
    assert_eq!(
        within("the cancelled awaiter", cancelled).unwrap(),
        Err(Cancelled)
    );
    dropped.cancel();
    std::thread::sleep(Duration::from_millis(10));
    gate.post();
    assert_eq!(within("the surviving awaiter", survivor).unwrap(), "done");
    assert_eq!(within("a late await", shared), "done");
    assert_eq!(runs.load(SeqCst), 1);
}

#[test]
fn awaiters_panic_saying_so_when_the_computations_executor_shuts_down() {
    let doomed = pool(1);
    let other = pool(1);
    let started = Arc::new(AtomicBool::new(false));
    let shared = Task::new({
        let started = started.clone();
        async move {
            started.store(true, SeqCst);
            std::future::pending::<u32>().await
        }
    })
    .shared();
    let starter = doomed.spawn(shared.clone());
    wait_until("the computation to start on the doomed pool", || {
        started.load(SeqCst)
    });
    let suspended = Arc::new(AtomicUsize::new(0));
    let awaiter = other.spawn(noting_suspension(shared.clone(), suspended.clone()));
    wait_until("the other awaiter to suspend", || {
        suspended.load(SeqCst) == 1
    });

    // Shut down on a helper thread, bounded: a deadlock in shutdown fails the test instead of
    // hanging it (the stuck thread is leaked).
    let (done, shut) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        doomed.shutdown();
        let _ = done.send(());
    });
    shut.recv_timeout(Duration::from_secs(10)).expect(
        "the doomed pool's shutdown did not finish within 10 s (deadlocked dropping the \
         computation and its awaiters)",
    );
    assert!(matches!(
        within("the starter", starter),
        Err(JoinError::Cancelled)
    ));
    let message = panicked_with(within("the other awaiter", awaiter));
    assert!(
        message.contains("shut down"),
        "the awaiter panicked with {message:?}"
    );
    // A later await learns it too, instead of hanging.
    let payload =
        std::panic::catch_unwind(AssertUnwindSafe(|| within("a later await", shared))).unwrap_err();
    assert!(
        panic_message(&*payload).contains("shut down"),
        "{:?}",
        panic_message(&*payload)
    );
}

#[test]
fn shutting_down_the_computations_executor_with_awaiters_on_it_does_not_deadlock() {
    let doomed = pool(1);
    let other = pool(1);
    let started = Arc::new(AtomicBool::new(false));
    let shared = Task::new({
        let started = started.clone();
        async move {
            started.store(true, SeqCst);
            std::future::pending::<u32>().await
        }
    })
    .shared();
    let starter = doomed.spawn(shared.clone());
    wait_until("the computation to start on the doomed pool", || {
        started.load(SeqCst)
    });
    // More awaiters on the doomed pool, listed after the computation: shutdown drops them after
    // it, so dropping the computation (breaking its promise) wakes them while they still wait.
    let suspended = Arc::new(AtomicUsize::new(0));
    let doomed_awaiters: Vec<_> = (0..8)
        .map(|_| doomed.spawn(noting_suspension(shared.clone(), suspended.clone())))
        .collect();
    let awaiter = other.spawn(noting_suspension(shared.clone(), suspended.clone()));
    wait_until("every awaiter to suspend", || suspended.load(SeqCst) == 9);

    let (done, shut) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        doomed.shutdown();
        let _ = done.send(());
    });
    shut.recv_timeout(Duration::from_secs(10)).expect(
        "the doomed pool's shutdown did not finish within 10 s (deadlocked dropping the \
         computation and its awaiters)",
    );
    assert!(within("the starter", starter).is_err());
    for doomed_awaiter in doomed_awaiters {
        // Dropped by the shutdown, or woken by the broken promise first: never a value.
        assert!(within("an awaiter on the doomed pool", doomed_awaiter).is_err());
    }
    let message = panicked_with(within("the awaiter on the other pool", awaiter));
    assert!(
        message.contains("shut down"),
        "the awaiter panicked with {message:?}"
    );
}

#[test]
fn fulfilling_or_breaking_does_not_deadlock_when_a_waiters_executor_is_gone() {
    for fulfil in [true, false] {
        let executor = ManualExecutor::new();
        let promise = SharedPromise::new();
        let future = promise.get_future();
        let handle = executor.handle().spawn(future);
        assert_eq!(executor.run_until_idle(), 1, "the waiter registered");
        // Nothing can run the waiter now: waking it drops it, inside the wake call.
        drop(executor);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            if fulfil {
                promise.set_value(1u8).unwrap();
            } else {
                drop(promise);
            }
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| {
                panic!(
                    "{} deadlocked waking a waiter whose executor is gone",
                    if fulfil {
                        "set_value"
                    } else {
                        "dropping the promise"
                    }
                )
            });
        assert!(matches!(
            within("the orphaned waiter", handle),
            Err(JoinError::Cancelled)
        ));
    }
}
