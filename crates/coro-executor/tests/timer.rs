//! Integration tests of `coro_executor::time` against the real global driver.
//!
//! All tests in this binary share the global wheel and its `coro-timer` thread, and several of
//! them count `pending_timers()` or measure latency, so every test holds `SERIAL` for its whole
//! run: another test's timers can neither change the counts nor keep the driver busy (or awake)
//! while a test measures it. Every test drops all of its timers before returning.
#![cfg(not(loom))]

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant};

use coro_executor::time::{Sleep, pending_timers, sleep, sleep_until};
use futures::StreamExt;
use futures::executor::block_on;
use futures::stream::FuturesUnordered;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn poll_once(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// Runs `f` on its own thread and fails the test if it does not finish within `limit` (a
/// deadlock would otherwise hang the test run).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not finish within {limit:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the worker thread panicked"),
    }
}

/// A waker that counts wake-ups and unparks the thread that created it.
struct Counter {
    wakes: AtomicUsize,
    thread: thread::Thread,
}

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

fn counter() -> (Arc<Counter>, Waker) {
    let counter = Arc::new(Counter {
        wakes: AtomicUsize::new(0),
        thread: thread::current(),
    });
    (counter.clone(), Waker::from(counter))
}

/// Parks until `counter` has been woken at least once, or `limit` passes. Returns the wait.
fn wait_for_wake(counter: &Counter, limit: Duration) -> Duration {
    let start = Instant::now();
    while counter.wakes.load(Ordering::SeqCst) == 0 && start.elapsed() < limit {
        thread::park_timeout(Duration::from_millis(10));
    }
    start.elapsed()
}

/// A cheap deterministic spread of `i` over `0..modulus`.
fn spread(i: u64, modulus: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) % modulus
}

#[test]
fn one_million_timers_all_fire_none_early() {
    const N: usize = 1_000_000;
    const THREADS: usize = 4;
    /// Deadlines start this long after registration, leaving time to hand the timers to the
    /// executors first, so that (on a normal machine) they fire while being awaited.
    const HEADROOM: Duration = Duration::from_secs(1);
    const SPREAD_US: u64 = 500_000;
    let _serial = serial();
    let baseline = pending_timers();
    let start = Instant::now();
    let all_registered = Barrier::new(THREADS + 1);
    let base_ready = Barrier::new(THREADS + 1);
    let base = Mutex::new(None::<Instant>);
    let completed = AtomicUsize::new(0);
    let early = AtomicUsize::new(0);
    let max_late_us = AtomicUsize::new(0);
    let waited = AtomicUsize::new(0);

    let registered_at = thread::scope(|scope| {
        for t in 0..THREADS {
            let (all_registered, base_ready, base) = (&all_registered, &base_ready, &base);
            let (completed, early) = (&completed, &early);
            let (max_late_us, waited) = (&max_late_us, &waited);
            scope.spawn(move || {
                // Phase 1: register this thread's share with a far deadline, so that all N are
                // pending in the wheel at the same time.
                let far = Instant::now() + Duration::from_secs(3600);
                let mut sleeps: Vec<Sleep> =
                    (t..N).step_by(THREADS).map(|_| sleep_until(far)).collect();
                for s in &mut sleeps {
                    assert!(poll_once(s, Waker::noop()).is_pending());
                }
                all_registered.wait();
                base_ready.wait();
                // Phase 2: move every timer to base + 0..500 ms (O(1) each) and drive them all
                // on this thread's executor. The first poll swaps the noop waker for the task's.
                let base = base.lock().unwrap().unwrap();
                // Per-thread tallies (shared atomics would make the executors fight over cache
                // lines, which is not what this test measures).
                let local_completed = Cell::new(0);
                let local_early = Cell::new(0);
                let local_waited = Cell::new(0);
                let local_max_late = Cell::new(Duration::ZERO);
                let tasks: FuturesUnordered<_> = sleeps
                    .into_iter()
                    .zip((t..N).step_by(THREADS))
                    .map(|(mut timer, i)| {
                        let deadline = base + Duration::from_micros(spread(i as u64, SPREAD_US));
                        timer.reset(deadline);
                        let (local_completed, local_early) = (&local_completed, &local_early);
                        let (local_waited, local_max_late) = (&local_waited, &local_max_late);
                        async move {
                            let first_poll = Instant::now();
                            timer.await;
                            let now = Instant::now();
                            if now < deadline {
                                local_early.set(local_early.get() + 1);
                            }
                            // Lateness is only meaningful for timers that were already being
                            // awaited when their deadline came.
                            if first_poll < deadline {
                                local_max_late.set(local_max_late.get().max(now - deadline));
                                local_waited.set(local_waited.get() + 1);
                            }
                            local_completed.set(local_completed.get() + 1);
                        }
                    })
                    .collect();
                block_on(tasks.collect::<Vec<()>>());
                completed.fetch_add(local_completed.get(), Ordering::Relaxed);
                early.fetch_add(local_early.get(), Ordering::Relaxed);
                waited.fetch_add(local_waited.get(), Ordering::Relaxed);
                max_late_us.fetch_max(local_max_late.get().as_micros() as usize, Ordering::Relaxed);
            });
        }
        all_registered.wait();
        let registered = pending_timers() - baseline;
        *base.lock().unwrap() = Some(Instant::now() + HEADROOM);
        base_ready.wait();
        registered
    });

    let total = start.elapsed();
    eprintln!(
        "1M timers: {total:?} in all, done {:?} after the first deadline; {} awaited before their deadline, \
         max lateness of those {} ms",
        base.lock().unwrap().unwrap().elapsed(),
        waited.load(Ordering::Relaxed),
        max_late_us.load(Ordering::Relaxed) / 1000
    );
    assert_eq!(registered_at, N, "not all timers were pending at once");
    assert_eq!(
        completed.load(Ordering::Relaxed),
        N,
        "not all timers completed"
    );
    assert_eq!(
        early.load(Ordering::Relaxed),
        0,
        "timers completed before their deadline"
    );
    assert_eq!(pending_timers(), baseline, "fired timers were not freed");
}

#[test]
fn dropped_timer_is_freed() {
    const N: usize = 10_000;
    let _serial = serial();
    let baseline = pending_timers();
    let mut sleeps: Vec<Sleep> = (0..N).map(|_| sleep(Duration::from_secs(3600))).collect();
    assert_eq!(
        pending_timers(),
        baseline,
        "a Sleep registered before its first poll"
    );
    for s in &mut sleeps {
        assert!(poll_once(s, Waker::noop()).is_pending());
    }
    assert_eq!(pending_timers(), baseline + N);
    sleeps.truncate(N / 2);
    assert_eq!(pending_timers(), baseline + N / 2);
    drop(sleeps);
    assert_eq!(pending_timers(), baseline);
}

#[test]
fn fired_and_reset_timers_are_freed() {
    let _serial = serial();
    let baseline = pending_timers();
    let mut timer = sleep(Duration::from_millis(5));
    block_on(&mut timer);
    assert_eq!(
        pending_timers(),
        baseline,
        "a fired timer stayed in the wheel"
    );
    // Resets move the entry, never duplicate it.
    let mut timer = sleep(Duration::from_secs(3600));
    assert!(poll_once(&mut timer, Waker::noop()).is_pending());
    for i in 1..=10 {
        timer.reset(Instant::now() + Duration::from_secs(100 * i));
        assert_eq!(pending_timers(), baseline + 1);
    }
    drop(timer);
    assert_eq!(pending_timers(), baseline);
}

#[test]
fn reset_earlier_completes_at_the_new_deadline() {
    let _serial = serial();
    let mut timer = sleep(Duration::from_secs(3600));
    let (woken, waker) = counter();
    assert!(poll_once(&mut timer, &waker).is_pending());
    let deadline = Instant::now() + Duration::from_millis(20);
    timer.reset(deadline);
    // The waker registered before the reset is woken at the new deadline without a re-poll.
    let waited = wait_for_wake(&woken, Duration::from_secs(2));
    assert!(Instant::now() >= deadline, "woken before the new deadline");
    assert!(
        waited < Duration::from_millis(500),
        "woken after {waited:?}"
    );
    assert!(timer.is_elapsed());
    assert!(poll_once(&mut timer, &waker).is_ready());
}

#[test]
fn reset_later_does_not_complete_at_the_old_deadline() {
    let _serial = serial();
    let start = Instant::now();
    let mut timer = sleep_until(start + Duration::from_millis(10));
    assert!(poll_once(&mut timer, Waker::noop()).is_pending());
    let deadline = start + Duration::from_millis(120);
    timer.reset(deadline);
    assert_eq!(timer.deadline(), deadline);
    thread::sleep(Duration::from_millis(40));
    assert!(!timer.is_elapsed(), "still fired at the old deadline");
    block_on(&mut timer);
    assert!(Instant::now() >= deadline);
}

#[test]
fn reset_after_completion_rearms() {
    let _serial = serial();
    let mut timer = sleep(Duration::from_millis(5));
    block_on(&mut timer);
    let deadline = Instant::now() + Duration::from_millis(30);
    timer.reset(deadline);
    assert!(!timer.is_elapsed());
    assert!(poll_once(&mut timer, Waker::noop()).is_pending());
    block_on(&mut timer);
    assert!(Instant::now() >= deadline);
}

#[test]
fn polled_from_two_wakers_wakes_the_latest() {
    let _serial = serial();
    let mut timer = sleep(Duration::from_millis(30));
    let (first, first_waker) = counter();
    let (second, second_waker) = counter();
    assert!(poll_once(&mut timer, &first_waker).is_pending());
    assert!(poll_once(&mut timer, &second_waker).is_pending());
    wait_for_wake(&second, Duration::from_secs(2));
    assert_eq!(
        second.wakes.load(Ordering::SeqCst),
        1,
        "latest waker not woken"
    );
    assert_eq!(
        first.wakes.load(Ordering::SeqCst),
        0,
        "replaced waker was woken"
    );
    assert!(poll_once(&mut timer, &second_waker).is_ready());
}

/// A waker that counts how often it is cloned. Its data pointer is a `&'static AtomicUsize`.
fn clone_counting_waker(clones: &'static AtomicUsize) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn raw(data: *const ()) -> RawWaker {
        RawWaker::new(data, &VTABLE)
    }
    fn clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` always comes from `clones` below, a `&'static AtomicUsize`.
        let clones = unsafe { &*data.cast::<AtomicUsize>() };
        clones.fetch_add(1, Ordering::SeqCst);
        raw(data)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    let data = std::ptr::from_ref(clones).cast::<()>();
    // SAFETY: the vtable's functions uphold the `RawWaker` contract: `clone` returns a waker
    // with the same (still valid, 'static) data and vtable; wake and drop have nothing to do or
    // free; all of them are thread-safe (an atomic counter).
    unsafe { Waker::from_raw(raw(data)) }
}

#[test]
fn repoll_with_the_same_waker_does_not_clone_it() {
    static CLONES: AtomicUsize = AtomicUsize::new(0);
    let _serial = serial();
    let waker = clone_counting_waker(&CLONES);
    let mut timer = sleep(Duration::from_secs(3600));
    assert!(poll_once(&mut timer, &waker).is_pending());
    assert_eq!(
        CLONES.load(Ordering::SeqCst),
        1,
        "registration stores one clone"
    );
    for _ in 0..10 {
        assert!(poll_once(&mut timer, &waker).is_pending());
    }
    assert_eq!(
        CLONES.load(Ordering::SeqCst),
        1,
        "re-polls with the same waker cloned it"
    );
    // A different waker replaces it, and the replaced one is released.
    let (count, other) = counter();
    assert!(poll_once(&mut timer, &other).is_pending());
    assert_eq!(
        Arc::strong_count(&count),
        3,
        "ours, `other` and the stored clone"
    );
    assert!(poll_once(&mut timer, Waker::noop()).is_pending());
    assert_eq!(Arc::strong_count(&count), 2, "replaced waker not released");
    drop(timer);
}

#[test]
fn earlier_registration_wakes_a_driver_sleeping_on_a_later_deadline() {
    let _serial = serial();
    // The driver parks on this (its next wake-up is minutes away: the start of the wheel slot
    // holding an hour-long deadline).
    let mut late = sleep(Duration::from_secs(3600));
    assert!(poll_once(&mut late, Waker::noop()).is_pending());
    thread::sleep(Duration::from_millis(30));
    let start = Instant::now();
    let mut early = sleep(Duration::from_millis(5));
    let (woken, waker) = counter();
    assert!(poll_once(&mut early, &waker).is_pending());
    // Bounded wait: without the wake-up the driver would sleep on for minutes.
    wait_for_wake(&woken, Duration::from_secs(1));
    let took = start.elapsed();
    assert!(
        woken.wakes.load(Ordering::SeqCst) == 1,
        "5 ms sleep not woken within {took:?}"
    );
    assert!(took >= Duration::from_millis(5));
    assert!(
        took < Duration::from_millis(100),
        "5 ms sleep took {took:?}"
    );
    assert!(poll_once(&mut early, &waker).is_ready());
    drop(late);
}

#[test]
fn sleep_zero_is_ready_at_once() {
    let _serial = serial();
    let baseline = pending_timers();
    let mut timer = sleep(Duration::ZERO);
    assert!(timer.is_elapsed());
    assert!(poll_once(&mut timer, Waker::noop()).is_ready());
    let mut past = sleep_until(Instant::now() - Duration::from_millis(1));
    assert!(poll_once(&mut past, Waker::noop()).is_ready());
    assert_eq!(
        pending_timers(),
        baseline,
        "an elapsed sleep registered a timer"
    );
    // And it stays ready.
    assert!(poll_once(&mut timer, Waker::noop()).is_ready());
}

#[test]
fn timers_fire_in_deadline_order() {
    let _serial = serial();
    let start = Instant::now() + Duration::from_millis(20);
    let order = Mutex::new(Vec::new());
    // Deadlines 3 ms apart, created in a scrambled order.
    let mut indices: Vec<u64> = (0..30).collect();
    indices.sort_by_key(|&i| spread(i, 1 << 40));
    assert_ne!(indices, (0..30).collect::<Vec<_>>());
    let mut tasks: FuturesUnordered<_> = indices
        .into_iter()
        .map(|i| {
            let order = &order;
            async move {
                sleep_until(start + Duration::from_millis(3 * i)).await;
                order.lock().unwrap().push(i);
            }
        })
        .collect();
    block_on(async { while tasks.next().await.is_some() {} });
    drop(tasks);
    let order = order.into_inner().unwrap();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..30).collect::<Vec<_>>());
    assert_eq!(order, sorted, "timers completed out of deadline order");
}

#[test]
fn sleep_is_not_early_and_not_very_late() {
    let _serial = serial();
    for ms in [1, 7, 50] {
        let duration = Duration::from_millis(ms);
        let start = Instant::now();
        block_on(sleep(duration));
        let took = start.elapsed();
        assert!(took >= duration);
        assert!(
            took < duration + Duration::from_millis(50),
            "{duration:?} sleep took {took:?}"
        );
    }
}

#[test]
fn works_on_a_single_threaded_local_executor() {
    let _serial = serial();
    let mut pool = futures::executor::LocalPool::new();
    let done = std::rc::Rc::new(std::cell::Cell::new(0));
    for ms in [5, 10, 15] {
        let done = done.clone();
        futures::task::LocalSpawnExt::spawn_local(&pool.spawner(), async move {
            sleep(Duration::from_millis(ms)).await;
            done.set(done.get() + 1);
        })
        .unwrap();
    }
    pool.run();
    assert_eq!(done.get(), 3);
}

#[test]
fn a_waker_may_use_timers_while_being_woken() {
    /// Woken on the driver thread: creates, registers and drops timers from inside `wake`.
    struct Reentrant(mpsc::Sender<usize>);
    impl Wake for Reentrant {
        fn wake(self: Arc<Self>) {
            let mut inner = sleep(Duration::from_secs(3600));
            let _ = poll_once(&mut inner, Waker::noop());
            let count = pending_timers();
            drop(inner);
            let _ = self.0.send(count);
        }
    }
    let _serial = serial();
    let baseline = pending_timers();
    let count = within(Duration::from_secs(5), move || {
        let (tx, rx) = mpsc::channel();
        let mut timer = sleep(Duration::from_millis(5));
        assert!(poll_once(&mut timer, &Waker::from(Arc::new(Reentrant(tx)))).is_pending());
        rx.recv().unwrap()
    });
    // Inside `wake` the fired timer was already freed and only the inner one was registered.
    assert_eq!(count, baseline + 1);
    assert_eq!(pending_timers(), baseline);
}

#[test]
fn dropping_a_replaced_waker_may_drop_a_sleep() {
    /// A waker owning a registered timer: when the wheel drops the last clone of it, the timer
    /// is dropped too, which takes the driver's lock.
    struct Owner(#[allow(dead_code)] Sleep);
    impl Wake for Owner {
        fn wake(self: Arc<Self>) {}
    }
    let _serial = serial();
    let baseline = pending_timers();
    within(Duration::from_secs(5), move || {
        let mut owned = sleep(Duration::from_secs(3600));
        assert!(poll_once(&mut owned, Waker::noop()).is_pending());
        let owner = Waker::from(Arc::new(Owner(owned)));
        let mut timer = sleep(Duration::from_secs(3600));
        assert!(poll_once(&mut timer, &owner).is_pending());
        drop(owner); // the wheel now holds the only reference
        assert_eq!(pending_timers(), baseline + 2);
        assert!(poll_once(&mut timer, Waker::noop()).is_pending());
        assert_eq!(
            pending_timers(),
            baseline + 1,
            "the owned timer was not dropped"
        );
        drop(timer);
    });
    assert_eq!(pending_timers(), baseline);
}

#[test]
fn dropping_a_fired_waker_may_drop_a_sleep() {
    /// Reports only after its timer has been dropped (deregistered).
    struct Owner(Option<Sleep>, mpsc::Sender<()>);
    impl Wake for Owner {
        fn wake(self: Arc<Self>) {}
    }
    impl Drop for Owner {
        fn drop(&mut self) {
            drop(self.0.take());
            let _ = self.1.send(());
        }
    }
    let _serial = serial();
    let baseline = pending_timers();
    within(Duration::from_secs(5), move || {
        let (tx, rx) = mpsc::channel();
        let mut owned = sleep(Duration::from_secs(3600));
        assert!(poll_once(&mut owned, Waker::noop()).is_pending());
        let mut timer = sleep(Duration::from_millis(5));
        assert!(poll_once(&mut timer, &Waker::from(Arc::new(Owner(Some(owned), tx)))).is_pending());
        // The driver wakes and drops the last reference to `Owner` on its own thread.
        rx.recv().unwrap();
        drop(timer);
    });
    assert_eq!(pending_timers(), baseline);
}

#[test]
fn sleep_is_send_sync_unpin_debug() {
    fn assert_traits<T: Future<Output = ()> + Send + Sync + Unpin + std::fmt::Debug>() {}
    assert_traits::<Sleep>();
    let _serial = serial();
    let timer = sleep(Duration::from_secs(1));
    let text = format!("{timer:?}");
    assert!(text.starts_with("Sleep") && text.contains("idle"), "{text}");
}

#[test]
fn timers_on_many_threads_complete() {
    let _serial = serial();
    let start = Instant::now();
    thread::scope(|scope| {
        for t in 0..8u64 {
            scope.spawn(move || {
                for i in 0..20 {
                    let deadline = Instant::now() + Duration::from_millis(spread(t * 100 + i, 10));
                    block_on(sleep_until(deadline));
                    assert!(Instant::now() >= deadline);
                }
            });
        }
    });
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// Polls `sleep` once on a worker of `pool` (registering it there) and hands it back.
fn registered_on(pool: &coro_executor::ThreadPool, mut sleep: Sleep) -> Sleep {
    // The sleep itself is the output (not awaited there: it is handed back registered).
    #[allow(clippy::async_yields_async)]
    let handle = pool.spawn(async move {
        std::future::poll_fn(|cx: &mut Context<'_>| {
            assert!(Pin::new(&mut sleep).poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        sleep
    });
    within(Duration::from_secs(20), move || block_on(handle)).unwrap()
}

#[test]
fn a_sleep_outliving_its_pool_still_waits_for_its_deadline() {
    let _serial = serial();
    let pool = coro_executor::ThreadPool::new(2).unwrap();
    let start = Instant::now();
    let timer = registered_on(&pool, sleep(Duration::from_millis(300)));
    assert!(pending_timers() >= 1, "the pool's timer is not counted");
    pool.shutdown();
    // Its pool's wheel is gone: the global driver takes the timer over, neither early nor never.
    let took = within(Duration::from_secs(20), move || {
        block_on(timer);
        start.elapsed()
    });
    assert!(
        took >= Duration::from_millis(300),
        "the orphaned 300 ms sleep ended after {took:?}"
    );
}
