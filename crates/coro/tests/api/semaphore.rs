//! FIFO counting and exclusive locking, and a manual-reset event: `Semaphore`,
//! `Mutex` and `Baton`. Queue order is checked deterministically by polling futures by hand with
//! wakers that record who was woken; multi-threaded stresses check the invariants under load.

use crate::support::{noting_suspension, wait_until};
use coro::cancel::{CancellationSource, Cancelled, cancellable};
use coro::executor::ManualExecutor;
use coro::sync::{Baton, Mutex, Semaphore};
use coro::{JoinHandle, ThreadPool, block_wait, yield_now};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// Records which waiters were woken, in order.
#[derive(Clone, Default)]
struct WakeLog(Arc<StdMutex<Vec<usize>>>);

struct IdWaker {
    id: usize,
    log: WakeLog,
}

impl Wake for IdWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.log.0.lock().unwrap().push(self.id);
    }
}

impl WakeLog {
    /// A waker that logs `id` when woken.
    fn waker(&self, id: usize) -> Waker {
        Waker::from(Arc::new(IdWaker {
            id,
            log: self.clone(),
        }))
    }

    /// The ids woken since the last call.
    fn take(&self) -> Vec<usize> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A future polled by hand, with its own logging waker.
struct Probe<F: Future> {
    fut: Pin<Box<F>>,
    waker: Waker,
}

impl<F: Future> Probe<F> {
    fn new(fut: F, log: &WakeLog, id: usize) -> Self {
        Probe {
            fut: Box::pin(fut),
            waker: log.waker(id),
        }
    }

    fn poll(&mut self) -> Poll<F::Output> {
        self.fut
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }

    /// Polls, expecting the future to wait.
    fn pending(&mut self) {
        assert!(self.poll().is_pending(), "expected the future to wait");
    }

    /// Polls, expecting the future to be done.
    fn ready(&mut self) -> F::Output {
        match self.poll() {
            Poll::Ready(output) => output,
            Poll::Pending => panic!("expected the future to be ready"),
        }
    }
}

/// Waits for a spawned task's result, panicking after `secs` seconds.
fn join<T: Send + 'static>(what: &str, handle: JoinHandle<T>, secs: u64) -> T {
    block_wait(coro::time::timeout(Duration::from_secs(secs), handle))
        .unwrap_or_else(|_| panic!("timed out waiting for: {what}"))
        .unwrap_or_else(|e| panic!("{what} failed: {e}"))
}

// ---- Semaphore ----------------------------------------------------------------------------

#[test]
fn semaphore_waiters_are_granted_in_arrival_order() {
    let semaphore = Semaphore::new(1);
    let log = WakeLog::default();
    let held = semaphore.try_acquire(1).unwrap();
    let mut waiters: Vec<_> = (0..3)
        .map(|id| Probe::new(semaphore.acquire(1), &log, id))
        .collect();
    for waiter in &mut waiters {
        waiter.pending();
    }
    drop(held);
    assert_eq!(log.take(), [0]);
    let first = waiters[0].ready();
    waiters[1].pending();
    waiters[2].pending();
    assert_eq!(log.take(), [] as [usize; 0]);
    drop(first);
    assert_eq!(log.take(), [1]);
    let second = waiters[1].ready();
    waiters[2].pending();
    drop(second);
    assert_eq!(log.take(), [2]);
    drop(waiters[2].ready());
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn a_large_request_at_the_head_is_not_overtaken_by_a_smaller_one() {
    let semaphore = Semaphore::new(3);
    let log = WakeLog::default();
    let held = semaphore.try_acquire(2).unwrap();
    assert_eq!(semaphore.available_permits(), 1);
    let mut big = Probe::new(semaphore.acquire(3), &log, 3);
    big.pending();
    let mut small = Probe::new(semaphore.acquire(1), &log, 1);
    small.pending();
    assert!(
        semaphore.try_acquire(1).is_none(),
        "try_acquire overtook a queued waiter"
    );
    drop(held);
    assert_eq!(log.take(), [3], "only the big head waiter is granted");
    let big_permit = big.ready();
    assert_eq!(big_permit.num_permits(), 3);
    small.pending();
    drop(big_permit);
    assert_eq!(log.take(), [1]);
    assert_eq!(small.ready().num_permits(), 1);
    assert_eq!(semaphore.available_permits(), 3);
}

#[test]
fn try_acquire_fails_while_anyone_is_queued_even_with_free_permits() {
    let semaphore = Semaphore::new(2);
    let log = WakeLog::default();
    let held = semaphore.try_acquire(1).unwrap();
    let mut queued = Probe::new(semaphore.acquire(2), &log, 0);
    queued.pending();
    assert_eq!(semaphore.available_permits(), 1, "one permit is free");
    assert!(semaphore.try_acquire(1).is_none());
    drop(held);
    assert_eq!(log.take(), [0]);
    let permit = queued.ready();
    drop(permit);
    assert!(
        semaphore.try_acquire(1).is_some(),
        "try_acquire works again once nobody is queued"
    );
}

#[test]
fn dropping_the_queued_head_lets_those_behind_it_proceed_at_once() {
    let semaphore = Semaphore::new(2);
    let log = WakeLog::default();
    let held = semaphore.try_acquire(1).unwrap();
    let mut big = Probe::new(semaphore.acquire(2), &log, 0);
    big.pending();
    let mut first = Probe::new(semaphore.acquire(1), &log, 1);
    first.pending();
    let mut second = Probe::new(semaphore.acquire(1), &log, 2);
    second.pending();
    drop(big);
    assert_eq!(
        log.take(),
        [1],
        "the waiter behind the dropped head is granted"
    );
    let permit = first.ready();
    second.pending();
    drop(held);
    assert_eq!(log.take(), [2]);
    drop(second.ready());
    drop(permit);
    assert_eq!(semaphore.available_permits(), 2);
}

#[test]
fn a_waiter_dropped_after_its_grant_passes_the_permits_on() {
    let semaphore = Semaphore::new(1);
    let log = WakeLog::default();
    let held = semaphore.try_acquire(1).unwrap();
    let mut granted = Probe::new(semaphore.acquire(1), &log, 0);
    granted.pending();
    let mut next = Probe::new(semaphore.acquire(1), &log, 1);
    next.pending();
    drop(held);
    assert_eq!(log.take(), [0]);
    drop(granted); // granted, never polled again
    assert_eq!(log.take(), [1], "the grant passed to the next waiter");
    let permit = next.ready();
    assert_eq!(semaphore.available_permits(), 0);
    drop(permit);
    assert_eq!(semaphore.available_permits(), 1);

    // With nobody behind it, the permits go back to the semaphore.
    let held = semaphore.try_acquire(1).unwrap();
    let mut granted = Probe::new(semaphore.acquire(1), &log, 2);
    granted.pending();
    drop(held);
    assert_eq!(log.take(), [2]);
    drop(granted);
    assert_eq!(semaphore.available_permits(), 1);
    assert!(semaphore.try_acquire(1).is_some());
}

#[test]
fn add_permits_grants_several_queued_waiters_in_order() {
    let semaphore = Semaphore::new(0);
    let log = WakeLog::default();
    let mut waiters: Vec<_> = [1, 2, 1, 3]
        .into_iter()
        .enumerate()
        .map(|(id, n)| Probe::new(semaphore.acquire(n), &log, id))
        .collect();
    for waiter in &mut waiters {
        waiter.pending();
    }
    semaphore.add_permits(4);
    assert_eq!(
        log.take(),
        [0, 1, 2],
        "granted in order until the next does not fit"
    );
    let permits: Vec<_> = waiters[..3].iter_mut().map(Probe::ready).collect();
    assert_eq!(
        permits.iter().map(|p| p.num_permits()).collect::<Vec<_>>(),
        [1, 2, 1]
    );
    waiters[3].pending();
    semaphore.add_permits(3);
    assert_eq!(log.take(), [3]);
    assert_eq!(waiters[3].ready().num_permits(), 3);
    drop(permits);
    assert_eq!(semaphore.available_permits(), 7);
}

#[test]
fn forget_keeps_the_permits_out_of_the_semaphore() {
    let semaphore = Semaphore::new(3);
    semaphore.try_acquire(2).unwrap().forget();
    assert_eq!(semaphore.available_permits(), 1);
    block_wait(semaphore.acquire(1)).forget();
    assert_eq!(semaphore.available_permits(), 0);
    assert!(semaphore.try_acquire(1).is_none());
    semaphore.add_permits(1);
    assert_eq!(semaphore.available_permits(), 1);
}

#[test]
fn available_permits_tracks_acquire_release_and_add() {
    let semaphore = Semaphore::new(5);
    assert_eq!(semaphore.available_permits(), 5);
    let a = semaphore.try_acquire(2).unwrap();
    assert_eq!(semaphore.available_permits(), 3);
    let b = block_wait(semaphore.acquire(3));
    assert_eq!(semaphore.available_permits(), 0);
    drop(a);
    assert_eq!(semaphore.available_permits(), 2);
    semaphore.add_permits(4);
    assert_eq!(semaphore.available_permits(), 6);
    drop(b);
    assert_eq!(semaphore.available_permits(), 9);
    assert!(
        semaphore.try_acquire(0).is_some(),
        "zero permits are always free"
    );
}

#[test]
#[should_panic(expected = "MAX_PERMITS")]
fn acquiring_more_than_max_permits_panics_naming_the_limit() {
    let semaphore = Semaphore::new(1);
    let _never = semaphore.acquire(Semaphore::MAX_PERMITS + 1);
}

#[test]
fn semaphore_stress_never_exceeds_its_permits() {
    const PERMITS: usize = 3;
    let pool = ThreadPool::new(4).unwrap();
    let semaphore = Arc::new(Semaphore::new(PERMITS));
    let in_use = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..32)
        .map(|task| {
            let (semaphore, in_use, peak) = (semaphore.clone(), in_use.clone(), peak.clone());
            pool.spawn(async move {
                for i in 0..2_000 {
                    let n = 1 + (task + i) % 2;
                    let permit = semaphore.acquire(n).await;
                    let now = in_use.fetch_add(n, SeqCst) + n;
                    assert!(now <= PERMITS, "{now} permits in use out of {PERMITS}");
                    peak.fetch_max(now, SeqCst);
                    if i % 8 == 0 {
                        yield_now().await;
                    }
                    in_use.fetch_sub(n, SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        join(&format!("stress task {i}"), task, 120);
    }
    assert_eq!(in_use.load(SeqCst), 0);
    assert!(peak.load(SeqCst) <= PERMITS);
    assert_eq!(semaphore.available_permits(), PERMITS);
}

// ---- Mutex --------------------------------------------------------------------------------

#[test]
fn mutex_waiters_are_granted_in_arrival_order() {
    let mutex = Mutex::new(Vec::new());
    let log = WakeLog::default();
    let held = mutex.try_lock().unwrap();
    let mut waiters: Vec<_> = (0..4)
        .map(|id| Probe::new(mutex.lock(), &log, id))
        .collect();
    for waiter in &mut waiters {
        waiter.pending();
    }
    drop(held);
    for id in 0..4 {
        assert_eq!(log.take(), [id], "the lock went to waiter {id} next");
        let mut guard = waiters[id].ready();
        guard.push(id);
        for later in &mut waiters[id + 1..] {
            later.pending();
        }
        drop(guard);
    }
    drop(waiters);
    assert_eq!(mutex.into_inner(), [0, 1, 2, 3]);
}

#[test]
fn unlocking_with_waiters_queued_hands_the_lock_to_the_head_waiter() {
    let mutex = Mutex::new(0);
    let log = WakeLog::default();
    let held = mutex.try_lock().unwrap();
    let mut waiter = Probe::new(mutex.lock(), &log, 0);
    waiter.pending();
    drop(held);
    assert_eq!(log.take(), [0]);
    assert!(
        mutex.try_lock().is_none(),
        "the lock was left free instead of handed to the waiter"
    );
    let mut guard = waiter.ready();
    *guard += 1;
    assert!(mutex.try_lock().is_none());
    drop(guard);
    assert_eq!(*mutex.try_lock().expect("free once the waiter unlocked"), 1);
}

#[test]
fn a_lock_dropped_after_the_hand_off_passes_it_on() {
    let mutex = Mutex::new(0);
    let log = WakeLog::default();
    let held = mutex.try_lock().unwrap();
    let mut granted = Probe::new(mutex.lock(), &log, 0);
    granted.pending();
    let mut next = Probe::new(mutex.lock(), &log, 1);
    next.pending();
    drop(held);
    assert_eq!(log.take(), [0]);
    drop(granted);
    assert_eq!(log.take(), [1], "the lock passed to the next waiter");
    assert!(
        mutex.try_lock().is_none(),
        "the lock belongs to the next waiter"
    );
    let guard = next.ready();
    drop(guard);
    assert!(mutex.try_lock().is_some());

    // With nobody behind, the lock becomes free.
    let held = mutex.try_lock().unwrap();
    let mut granted = Probe::new(mutex.lock(), &log, 2);
    granted.pending();
    drop(held);
    drop(granted);
    assert!(mutex.try_lock().is_some());
}

#[test]
fn a_cancelled_lock_returns_err_and_the_mutex_still_works() {
    let pool = ThreadPool::new(2).unwrap();
    let mutex = Arc::new(Mutex::new(0));

    // Cancelled before it waits.
    let held = mutex.try_lock().unwrap();
    let source = CancellationSource::new();
    source.request_cancellation();
    let task = coro::Task::new({
        let mutex = mutex.clone();
        async move { cancellable(mutex.lock()).await.map(|_guard| ()) }
    })
    .with_cancellation(source.token());
    assert_eq!(block_wait(task), Err(Cancelled));
    drop(held);
    assert!(
        mutex.try_lock().is_some(),
        "the cancelled waiter kept the lock"
    );

    // Cancelled while queued.
    let held = mutex.try_lock().unwrap();
    let source = CancellationSource::new();
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiter = coro::Task::new(noting_suspension(
        {
            let mutex = mutex.clone();
            async move { cancellable(mutex.lock()).await.map(|_guard| ()) }
        },
        suspended.clone(),
    ))
    .with_cancellation(source.token())
    .schedule_on(&pool)
    .start();
    wait_until("the waiter to queue", || suspended.load(SeqCst) == 1);
    source.request_cancellation();
    assert_eq!(join("the cancelled waiter", waiter, 10), Err(Cancelled));
    drop(held);
    assert!(
        mutex.try_lock().is_some(),
        "the cancelled waiter kept the lock"
    );
    let mutex2 = mutex.clone();
    let locked = pool.spawn(async move {
        *mutex2.lock().await += 1;
    });
    join("a later lock", locked, 10);
    assert_eq!(*mutex.try_lock().unwrap(), 1);
}

#[test]
fn mutex_stress_counts_every_increment() {
    const TASKS: usize = 8;
    const INCREMENTS: usize = 10_000;
    let pool = ThreadPool::new(4).unwrap();
    let mutex = Arc::new(Mutex::new(0usize));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let mutex = mutex.clone();
            pool.spawn(async move {
                for i in 0..INCREMENTS {
                    let mut guard = mutex.lock().await;
                    // A read, a possible suspension, then a write: lost updates show if two
                    // holders ever overlap.
                    let seen = *guard;
                    if i % 64 == 0 {
                        yield_now().await;
                    }
                    *guard = seen + 1;
                }
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        join(&format!("stress task {i}"), task, 120);
    }
    assert_eq!(*mutex.try_lock().unwrap(), TASKS * INCREMENTS);
}

// ---- Baton --------------------------------------------------------------------------------

#[test]
fn post_wakes_every_waiter() {
    let pool = ThreadPool::new(2).unwrap();
    let baton = Arc::new(Baton::new());
    let suspended = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..6)
        .map(|i| {
            let baton = baton.clone();
            pool.spawn(noting_suspension(
                async move {
                    baton.wait().await;
                    i
                },
                suspended.clone(),
            ))
        })
        .collect();
    wait_until("every waiter to suspend", || suspended.load(SeqCst) == 6);
    assert!(!baton.is_ready());
    baton.post();
    assert!(baton.is_ready());
    for (i, waiter) in waiters.into_iter().enumerate() {
        assert_eq!(join("a waiter", waiter, 10), i);
    }

    // And by hand: every registered waiter's waker fires.
    let baton = Baton::new();
    let log = WakeLog::default();
    let mut waits: Vec<_> = (0..3)
        .map(|id| Probe::new(baton.wait(), &log, id))
        .collect();
    for wait in &mut waits {
        wait.pending();
    }
    baton.post();
    let mut woken = log.take();
    woken.sort_unstable();
    assert_eq!(woken, [0, 1, 2]);
    for wait in &mut waits {
        wait.ready();
    }
}

#[test]
fn a_wait_after_post_completes_at_once() {
    let baton = Baton::new();
    baton.post();
    let log = WakeLog::default();
    Probe::new(baton.wait(), &log, 0).ready();
    Probe::new(baton.wait(), &log, 1).ready();
    assert!(baton.is_ready());
}

#[test]
fn reset_makes_later_waits_wait() {
    let baton = Baton::new();
    let log = WakeLog::default();
    baton.post();
    baton.reset();
    assert!(!baton.is_ready());
    let mut wait = Probe::new(baton.wait(), &log, 0);
    wait.pending();
    wait.pending();
    assert_eq!(log.take(), [] as [usize; 0]);
    baton.post();
    assert_eq!(log.take(), [0]);
    wait.ready();
}

#[test]
fn a_waiter_waiting_when_post_ran_completes_even_if_reset_follows() {
    let baton = Baton::new();
    let log = WakeLog::default();
    let mut waiting = Probe::new(baton.wait(), &log, 0);
    waiting.pending();
    baton.post();
    baton.reset();
    assert_eq!(log.take(), [0]);
    waiting.ready();
    // A wait that starts after the reset waits for the next post.
    let mut later = Probe::new(baton.wait(), &log, 1);
    later.pending();
    assert_eq!(log.take(), [] as [usize; 0]);
}

#[test]
fn dropping_a_waiting_wait_is_fine() {
    let baton = Baton::new();
    let log = WakeLog::default();
    let mut dropped = Probe::new(baton.wait(), &log, 0);
    dropped.pending();
    let mut kept = Probe::new(baton.wait(), &log, 1);
    kept.pending();
    drop(dropped);
    baton.post();
    assert_eq!(log.take(), [1], "only the live waiter is woken");
    kept.ready();
    // The baton keeps working.
    baton.reset();
    let mut again = Probe::new(baton.wait(), &log, 2);
    again.pending();
    drop(again);
    baton.post();
    Probe::new(baton.wait(), &log, 3).ready();
}

#[test]
fn post_does_not_deadlock_when_a_waiters_executor_is_gone() {
    let baton = Arc::new(Baton::new());
    let executor = ManualExecutor::new();
    let handle = executor.handle().spawn({
        let baton = baton.clone();
        async move { baton.wait().await }
    });
    assert_eq!(executor.run_until_idle(), 1, "the waiter registered");
    // Nothing can run the waiter now: waking it drops it (and its `Wait`) inside the wake call.
    drop(executor);
    let (done, posted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        baton.post();
        let _ = done.send(());
    });
    posted
        .recv_timeout(Duration::from_secs(10))
        .expect("Baton::post deadlocked waking a waiter whose executor is gone");
    let outcome = block_wait(coro::time::timeout(Duration::from_secs(10), handle))
        .expect("timed out waiting for the orphaned waiter's handle");
    assert!(outcome.is_err(), "the orphaned waiter cannot have run");
}

#[test]
fn unlocking_does_not_deadlock_when_the_next_waiters_executor_is_gone() {
    let mutex = Arc::new(Mutex::new(0));
    let held = mutex.try_lock().unwrap();
    let executor = ManualExecutor::new();
    let handle = executor.handle().spawn({
        let mutex = mutex.clone();
        async move {
            *mutex.lock().await += 1;
        }
    });
    assert_eq!(executor.run_until_idle(), 1, "the waiter queued");
    drop(executor);
    // The hand-off wakes the orphaned waiter, which is dropped in the wake and passes the lock on.
    drop(held);
    let outcome = block_wait(coro::time::timeout(Duration::from_secs(10), handle))
        .expect("timed out waiting for the orphaned waiter's handle");
    assert!(outcome.is_err(), "the orphaned waiter cannot have run");
    assert!(
        mutex.try_lock().is_some(),
        "the lock was lost with the dropped waiter"
    );
}
