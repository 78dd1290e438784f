//! `coro::sync::SharedMutexFair`: folly's SharedMutexFair policy, checked
//! deterministically by polling the lock futures by hand (the `try_` state table, FIFO queueing
//! of readers behind writers, the grant runs after an exclusive release, upgrade priority,
//! writer FIFO order), cancel-safety (queued and grant-then-drop), resumption through the
//! waiter's own executor, and a multi-threaded stress test in the shape of folly's
//! SharedMutexTest.StressTest.

use coro::cancel::{CancellationSource, Cancelled, cancellable};
use coro::executor::{JoinError, JoinHandle, ManualExecutor};
use coro::sync::{
    Read, ReadGuard, SharedMutexFair, UpgradableRead, UpgradableReadGuard, Upgrade, Write,
    WriteGuard,
};
use coro::{Task, ThreadPool, block_wait};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Hand-polled waiters
// ---------------------------------------------------------------------------------------------

/// A waker that counts its wakes.
#[derive(Default)]
struct WakeCount(AtomicUsize);

impl Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A lock future polled by hand with an observable waker; once ready it keeps the guard.
struct Waiter<'a, G> {
    name: &'static str,
    fut: Option<Pin<Box<dyn Future<Output = G> + 'a>>>,
    guard: Option<G>,
    wakes: Arc<WakeCount>,
}

impl<'a, G> Waiter<'a, G> {
    /// Polls `fut` once; it must not be ready (so it is now queued, behind anything queued
    /// before it).
    fn queue(name: &'static str, fut: impl Future<Output = G> + 'a) -> Self {
        let mut waiter = Waiter {
            name,
            fut: Some(Box::pin(fut)),
            guard: None,
            wakes: Arc::default(),
        };
        assert!(
            !waiter.poll(),
            "{name} got the lock at once; it should have queued"
        );
        waiter
    }

    /// Polls again (if not ready yet); whether it holds its guard now.
    fn poll(&mut self) -> bool {
        if self.guard.is_some() {
            return true;
        }
        let fut = self
            .fut
            .as_mut()
            .unwrap_or_else(|| panic!("{} was already released", self.name));
        let waker = Waker::from(self.wakes.clone());
        let mut cx = Context::from_waker(&waker);
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(guard) => {
                self.fut = None;
                self.guard = Some(guard);
                true
            }
            Poll::Pending => false,
        }
    }

    fn woken(&self) -> bool {
        self.wakes.0.load(SeqCst) > 0
    }

    /// Takes the guard out; the waiter must be ready.
    fn take(&mut self) -> G {
        assert!(self.poll(), "{} should hold the lock by now", self.name);
        self.guard.take().expect("checked above")
    }

    /// Drops the guard (releasing the lock); the waiter must be ready.
    fn release(&mut self) {
        drop(self.take());
    }
}

/// What the checks need of a waiter, whatever its guard type.
trait Probe {
    fn name(&self) -> &'static str;
    fn is_ready(&mut self) -> bool;
    fn was_woken(&self) -> bool;
}

impl<G> Probe for Waiter<'_, G> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn is_ready(&mut self) -> bool {
        self.poll()
    }

    fn was_woken(&self) -> bool {
        self.woken()
    }
}

/// Asserts that exactly the waiters in `granted` hold the lock now (each was woken and is
/// ready), and that every waiter in `waiting` is still pending.
fn expect(granted: &mut [&mut dyn Probe], waiting: &mut [&mut dyn Probe], when: &str) {
    for w in granted.iter_mut() {
        assert!(w.was_woken(), "{when}: {} was not woken", w.name());
        assert!(
            w.is_ready(),
            "{when}: {} should have been granted",
            w.name()
        );
    }
    for w in waiting.iter_mut() {
        assert!(!w.is_ready(), "{when}: {} should still wait", w.name());
    }
}

/// Which of try_read / try_upgradable_read / try_write succeed now (each guard is dropped at
/// once).
fn try_all<T>(lock: &SharedMutexFair<T>) -> [bool; 3] {
    // One statement each: a guard held to the end of the array expression would change the
    // answers of the later tries.
    let read = lock.try_read().is_some();
    let upgrade = lock.try_upgradable_read().is_some();
    let write = lock.try_write().is_some();
    [read, upgrade, write]
}

// ---------------------------------------------------------------------------------------------
// Bounded waiting on spawned tasks
// ---------------------------------------------------------------------------------------------

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(
            Instant::now() < deadline,
            "{what}: not done within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The task's value, waiting at most 10 s; a panic in the task is re-raised.
fn join<T>(handle: JoinHandle<T>, what: &str) -> T {
    wait_until(what, Duration::from_secs(10), || handle.is_finished());
    match block_wait(handle) {
        Ok(value) => value,
        Err(JoinError::Panicked(payload)) => std::panic::resume_unwind(payload),
        Err(JoinError::Cancelled) => panic!("{what}: the task was cancelled"),
    }
}

/// Runs `fut`, counting it in `waits` the first time it returns `Pending` (so the test knows a
/// lock future is queued, or how many had to wait).
struct CountWait<F> {
    fut: Pin<Box<F>>,
    waits: Arc<AtomicUsize>,
    counted: bool,
}

impl<F: Future> Future for CountWait<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let poll = self.fut.as_mut().poll(cx);
        if poll.is_pending() && !self.counted {
            self.counted = true;
            self.waits.fetch_add(1, SeqCst);
        }
        poll
    }
}

fn count_wait<F: Future>(fut: F, waits: &Arc<AtomicUsize>) -> CountWait<F> {
    CountWait {
        fut: Box::pin(fut),
        waits: waits.clone(),
        counted: false,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. folly's try_ state table
// ---------------------------------------------------------------------------------------------

#[test]
fn try_acquire_follows_follys_state_table() {
    const ALL: [bool; 3] = [true, true, true];
    const NONE: [bool; 3] = [false, false, false];
    let lock = SharedMutexFair::new(0u32);

    // [try_read, try_upgradable_read, try_write]
    assert_eq!(try_all(&lock), ALL, "unlocked");

    let r = lock.try_read().unwrap();
    assert_eq!(try_all(&lock), [true, true, false], "read-held");
    drop(r);

    let u = lock.try_upgradable_read().unwrap();
    assert_eq!(try_all(&lock), [true, false, false], "upgrade-held");
    drop(u);

    let r = lock.try_read().unwrap();
    let u = lock.try_upgradable_read().unwrap();
    assert_eq!(try_all(&lock), [true, false, false], "read+upgrade held");
    drop((r, u));

    let w = lock.try_write().unwrap();
    assert_eq!(try_all(&lock), NONE, "write-held");
    drop(w);

    {
        let r = lock.try_read().unwrap();
        let mut w = Waiter::queue("W", lock.write());
        assert_eq!(try_all(&lock), NONE, "read-held with a writer queued");
        assert!(!w.poll(), "the try_s must not have let W in");
        drop(r);
        expect(&mut [&mut w], &mut [], "reader left");
    }

    {
        let u1 = lock.try_upgradable_read().unwrap();
        let mut u2 = Waiter::queue("U2", lock.upgradable_read());
        assert_eq!(
            try_all(&lock),
            [true, false, false],
            "upgrade-held with a second upgrader queued"
        );
        assert!(!u2.poll(), "the try_s must not have let U2 in");
        drop(u1);
        expect(&mut [&mut u2], &mut [], "first upgrader left");
    }

    {
        let r = lock.try_read().unwrap();
        let u = lock.try_upgradable_read().unwrap();
        let mut up = Waiter::queue("upgrade", u.upgrade());
        assert_eq!(
            try_all(&lock),
            NONE,
            "read+upgrade held, upgrade transition pending"
        );
        assert!(!up.poll(), "the try_s must not have completed the upgrade");
        drop(r);
        expect(&mut [&mut up], &mut [], "other reader left");
        assert_eq!(try_all(&lock), NONE, "upgraded to write");
    }

    assert_eq!(try_all(&lock), ALL, "unlocked again");
}

#[test]
fn try_upgrade_needs_no_other_reader_and_skips_queued_writers() {
    let lock = SharedMutexFair::new(0u32);

    // Fails while another reader holds, succeeds once alone.
    let u = lock.try_upgradable_read().unwrap();
    let r = lock.try_read().unwrap();
    let u = u
        .try_upgrade()
        .expect_err("try_upgrade succeeded while another reader held the lock");
    drop(r);
    let mut w = u
        .try_upgrade()
        .expect("try_upgrade failed with no other reader");
    *w = 1;
    assert_eq!(try_all(&lock), [false, false, false], "upgraded to write");
    drop(w);
    assert_eq!(try_all(&lock), [true, true, true]);

    // Succeeds even with a writer queued: the transition skips the queue.
    let u = lock.try_upgradable_read().unwrap();
    let mut queued = Waiter::queue("W", lock.write());
    let mut w = u
        .try_upgrade()
        .expect("try_upgrade failed because a writer was queued");
    *w = 2;
    assert!(
        !queued.poll(),
        "the queued writer got in beside the upgrade"
    );
    drop(w);
    expect(&mut [&mut queued], &mut [], "upgraded writer left");
    assert_eq!(*queued.take(), 2);
    assert_eq!(try_all(&lock), [true, true, true]);
}

// ---------------------------------------------------------------------------------------------
// 2-6. Queue order and grant runs
// ---------------------------------------------------------------------------------------------

#[test]
fn reader_arriving_behind_a_queued_writer_waits_for_the_writer() {
    let lock = SharedMutexFair::new(0u32);
    let r0 = lock.try_read().unwrap();
    let mut w = Waiter::queue("W", lock.write());
    // The lock is only read-held, yet the new reader queues behind W.
    let mut r1 = Waiter::queue("R1", lock.read());

    drop(r0);
    expect(&mut [&mut w], &mut [&mut r1], "first reader left");
    *w.take() = 7;
    expect(&mut [&mut r1], &mut [], "writer released");
    assert_eq!(*r1.take(), 7, "R1 ran after W's write");
}

#[test]
fn exclusive_release_grants_readers_and_one_upgrader_up_to_the_next_writer() {
    // folly's scenario: write-held; queue U1 S1 U2 S2 W S3.
    let lock = SharedMutexFair::new(0u32);
    let w0 = lock.try_write().unwrap();
    let mut u1 = Waiter::queue("U1", lock.upgradable_read());
    let mut s1 = Waiter::queue("S1", lock.read());
    let mut u2 = Waiter::queue("U2", lock.upgradable_read());
    let mut s2 = Waiter::queue("S2", lock.read());
    let mut w = Waiter::queue("W", lock.write());
    let mut s3 = Waiter::queue("S3", lock.read());

    drop(w0);
    expect(
        &mut [&mut u1, &mut s1, &mut s2],
        &mut [&mut u2, &mut w, &mut s3],
        "write guard dropped",
    );

    u1.release();
    expect(
        &mut [&mut u2],
        &mut [&mut w, &mut s3],
        "U1 released (S1, S2 still in)",
    );

    s1.release();
    expect(&mut [], &mut [&mut w, &mut s3], "S1 released");
    u2.release();
    expect(&mut [], &mut [&mut w, &mut s3], "U2 released (S2 still in)");
    s2.release();
    expect(&mut [&mut w], &mut [&mut s3], "everyone released");

    w.release();
    expect(&mut [&mut s3], &mut [], "W released");
    s3.release();
    assert_eq!(try_all(&lock), [true, true, true]);
}

#[test]
fn exclusive_release_grants_at_most_one_upgrader() {
    let lock = SharedMutexFair::new(0u32);
    let w0 = lock.try_write().unwrap();
    let mut u1 = Waiter::queue("U1", lock.upgradable_read());
    let mut u2 = Waiter::queue("U2", lock.upgradable_read());
    let mut s1 = Waiter::queue("S1", lock.read());

    drop(w0);
    expect(
        &mut [&mut u1, &mut s1],
        &mut [&mut u2],
        "write guard dropped",
    );
    u1.release();
    expect(&mut [&mut u2], &mut [], "U1 released");
}

#[test]
fn upgrade_goes_ahead_of_a_queued_writer() {
    let lock = SharedMutexFair::new(0u32);
    let r1 = lock.try_read().unwrap();
    let u = lock.try_upgradable_read().unwrap();
    let mut w = Waiter::queue("W", lock.write());
    let mut up = Waiter::queue("upgrade", u.upgrade());
    // While the transition is pending, a new reader queues.
    let mut r2 = Waiter::queue("R2", lock.read());

    drop(r1);
    expect(&mut [&mut up], &mut [&mut w, &mut r2], "R1 left");
    *up.take() = 1;
    expect(&mut [&mut w], &mut [&mut r2], "upgraded writer released");
    *w.take() = 2;
    expect(&mut [&mut r2], &mut [], "W released");
    assert_eq!(*r2.take(), 2);
}

#[test]
fn queued_writers_are_granted_one_at_a_time_in_fifo_order() {
    let lock = SharedMutexFair::new(Vec::new());
    let r = lock.try_read().unwrap();
    let mut w1 = Waiter::queue("W1", lock.write());
    let mut w2 = Waiter::queue("W2", lock.write());
    let mut w3 = Waiter::queue("W3", lock.write());

    drop(r);
    expect(&mut [&mut w1], &mut [&mut w2, &mut w3], "reader left");
    w1.take().push(1);
    expect(&mut [&mut w2], &mut [&mut w3], "W1 released");
    w2.take().push(2);
    expect(&mut [&mut w3], &mut [], "W2 released");
    w3.take().push(3);
    assert_eq!(*lock.try_read().unwrap(), [1, 2, 3]);
}

/// No writer starvation, with the spin before queueing: readers that keep the lock read-held
/// without a gap (each takes its next read lock before it drops the last) do not keep a waiting
/// writer out. Its spin is bounded; then it queues, and from then on readers are refused.
#[test]
fn overlapping_readers_do_not_starve_a_waiting_writer() {
    let lock = SharedMutexFair::new(0u64);
    let first = lock.try_read().unwrap();
    let give_up = AtomicBool::new(false);
    let (handovers, written) = std::thread::scope(|s| {
        let readers = s.spawn(|| {
            let mut held = first;
            let mut handovers = 0u64;
            while !give_up.load(SeqCst) {
                match lock.try_read() {
                    // The previous guard is dropped only once the next one is held.
                    Some(next) => held = next,
                    None => break,
                }
                handovers += 1;
            }
            drop(held);
            handovers
        });
        let writer = s.spawn(|| *block_wait(lock.write()) += 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !writer.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Whatever happened, let the readers' loop end, so that the scope can join it.
        let written = writer.is_finished();
        give_up.store(true, SeqCst);
        (readers.join().unwrap(), written)
    });
    assert!(
        written,
        "the writer did not get the lock within 10 s of readers coming and going \
         ({handovers} read hand-overs)"
    );
    assert_eq!(lock.into_inner(), 1);
}

// ---------------------------------------------------------------------------------------------
// 7. Cancel-safety
// ---------------------------------------------------------------------------------------------

#[test]
fn dropping_a_queued_writer_grants_the_readers_behind_it() {
    let lock = SharedMutexFair::new(0u32);
    let r0 = lock.try_read().unwrap();
    let w1 = Waiter::queue("W1", lock.write());
    let mut r1 = Waiter::queue("R1", lock.read());
    let mut r2 = Waiter::queue("R2", lock.read());
    let mut w2 = Waiter::queue("W2", lock.write());
    let mut r3 = Waiter::queue("R3", lock.read());

    drop(w1);
    expect(
        &mut [&mut r1, &mut r2],
        &mut [&mut w2, &mut r3],
        "queued W1 dropped (R0 still in)",
    );
    drop(r0);
    r1.release();
    expect(&mut [], &mut [&mut w2, &mut r3], "R0, R1 released");
    r2.release();
    expect(&mut [&mut w2], &mut [&mut r3], "all readers released");
}

#[test]
fn a_writer_dropped_after_its_grant_passes_the_lock_on() {
    let lock = SharedMutexFair::new(0u32);

    // To the next waiter.
    let r = lock.try_read().unwrap();
    let w1 = Waiter::queue("W1", lock.write());
    let mut w2 = Waiter::queue("W2", lock.write());
    drop(r);
    assert!(w1.woken(), "W1 was not granted when the reader left");
    drop(w1); // granted, never polled again
    expect(&mut [&mut w2], &mut [], "granted W1 dropped");
    w2.release();
    assert_eq!(try_all(&lock), [true, true, true], "W2 released");

    // To nobody: the lock ends free.
    let r = lock.try_read().unwrap();
    let w = Waiter::queue("W", lock.write());
    drop(r);
    assert!(w.woken(), "W was not granted when the reader left");
    drop(w);
    assert_eq!(try_all(&lock), [true, true, true], "granted W dropped");
}

#[test]
fn a_reader_dropped_after_its_grant_passes_the_lock_on() {
    let lock = SharedMutexFair::new(0u32);

    // To the next waiter.
    let w0 = lock.try_write().unwrap();
    let r1 = Waiter::queue("R1", lock.read());
    let mut w = Waiter::queue("W", lock.write());
    drop(w0);
    assert!(r1.woken(), "R1 was not granted when the writer left");
    drop(r1);
    expect(&mut [&mut w], &mut [], "granted R1 dropped");
    w.release();

    // Only its own share: another granted reader still holds the lock.
    let w0 = lock.try_write().unwrap();
    let r1 = Waiter::queue("R1", lock.read());
    let mut r2 = Waiter::queue("R2", lock.read());
    let mut w = Waiter::queue("W", lock.write());
    drop(w0);
    assert!(r1.woken(), "R1 was not granted when the writer left");
    drop(r1);
    expect(
        &mut [&mut r2],
        &mut [&mut w],
        "granted R1 dropped, R2 still in",
    );
    r2.release();
    expect(&mut [&mut w], &mut [], "R2 released");
    w.release();

    // To nobody: the lock ends free.
    let w0 = lock.try_write().unwrap();
    let r = Waiter::queue("R", lock.read());
    drop(w0);
    assert!(r.woken(), "R was not granted when the writer left");
    drop(r);
    assert_eq!(try_all(&lock), [true, true, true], "granted R dropped");
}

#[test]
fn an_upgrader_dropped_after_its_grant_passes_the_lock_on() {
    let lock = SharedMutexFair::new(0u32);

    // To the next waiter.
    let w0 = lock.try_write().unwrap();
    let u = Waiter::queue("U", lock.upgradable_read());
    let mut w = Waiter::queue("W", lock.write());
    drop(w0);
    assert!(u.woken(), "U was not granted when the writer left");
    drop(u);
    expect(&mut [&mut w], &mut [], "granted U dropped");
    w.release();

    // The next upgrader gets the upgrade lock.
    let w0 = lock.try_write().unwrap();
    let u1 = Waiter::queue("U1", lock.upgradable_read());
    let mut u2 = Waiter::queue("U2", lock.upgradable_read());
    drop(w0);
    assert!(u1.woken(), "U1 was not granted when the writer left");
    drop(u1);
    expect(&mut [&mut u2], &mut [], "granted U1 dropped");
    u2.release();

    // To nobody: the lock ends free.
    let w0 = lock.try_write().unwrap();
    let u = Waiter::queue("U", lock.upgradable_read());
    drop(w0);
    assert!(u.woken(), "U was not granted when the writer left");
    drop(u);
    assert_eq!(try_all(&lock), [true, true, true], "granted U dropped");
}

#[test]
fn dropping_a_pending_upgrade_releases_the_upgrade_lock() {
    let lock = SharedMutexFair::new(0u32);
    let r = lock.try_read().unwrap();
    let u = lock.try_upgradable_read().unwrap();
    let mut w = Waiter::queue("W", lock.write());
    let up = Waiter::queue("upgrade", u.upgrade());

    drop(up);
    assert!(!w.poll(), "W got in while a reader still held the lock");
    drop(r);
    expect(
        &mut [&mut w],
        &mut [],
        "upgrade dropped, then the reader left",
    );
    w.release();
    assert_eq!(
        try_all(&lock),
        [true, true, true],
        "the upgrade lock was leaked"
    );

    // Dropped after the transition was granted but before it was polled again: the exclusive
    // lock passes on.
    let r = lock.try_read().unwrap();
    let u = lock.try_upgradable_read().unwrap();
    let mut w = Waiter::queue("W", lock.write());
    let up = Waiter::queue("upgrade", u.upgrade());
    drop(r);
    assert!(
        up.woken(),
        "the upgrade was not granted when the reader left"
    );
    drop(up);
    expect(&mut [&mut w], &mut [], "granted upgrade dropped");
    w.release();
    assert_eq!(try_all(&lock), [true, true, true]);
}

#[test]
fn cancellable_write_returns_cancelled_and_leaves_the_lock_usable() {
    let lock = Arc::new(SharedMutexFair::new(0u32));
    let reader = lock.try_read().unwrap();
    let source = CancellationSource::new();
    let manual = ManualExecutor::new();
    let task_lock = lock.clone();
    let handle = Task::new(async move {
        cancellable(task_lock.write()).await.map(|mut guard| {
            *guard += 1;
        })
    })
    .with_cancellation(source.token())
    .schedule_on(manual.handle())
    .start();

    manual.run_until_idle();
    assert!(
        !handle.is_finished(),
        "the writer did not wait for the reader"
    );
    assert!(
        lock.try_read().is_none(),
        "the waiting writer should keep new readers out"
    );

    source.request_cancellation();
    manual.run_until_idle();
    assert!(
        handle.is_finished(),
        "cancellation did not end the writer's wait"
    );
    assert_eq!(join(handle, "cancelled writer"), Err(Cancelled));

    // The cancelled writer left the queue: readers get in again, and writing works once the
    // reader leaves.
    assert!(
        lock.try_read().is_some(),
        "the cancelled writer still blocks readers"
    );
    drop(reader);
    *lock.try_write().expect("the lock was left held") += 10;
    block_wait(async { *lock.write().await += 1 });
    assert_eq!(*lock.try_read().unwrap(), 11);
}

// ---------------------------------------------------------------------------------------------
// 8-9. Where waiters resume
// ---------------------------------------------------------------------------------------------

#[test]
fn releasing_wakes_the_waiter_without_running_it_inline() {
    let lock = Arc::new(SharedMutexFair::new(0u32));
    let reader = lock.try_read().unwrap();
    let manual = ManualExecutor::new();
    let after = Arc::new(AtomicBool::new(false));
    let (task_lock, task_after) = (lock.clone(), after.clone());
    let handle = manual.handle().spawn(async move {
        let mut guard = task_lock.write().await;
        task_after.store(true, SeqCst);
        *guard = 1;
    });

    manual.run_until_idle();
    assert_eq!(manual.pending(), 0, "the writer should be waiting");
    assert!(!after.load(SeqCst));

    drop(reader);
    assert_eq!(manual.pending(), 1, "releasing did not re-queue the writer");
    assert!(
        !after.load(SeqCst),
        "the writer's code ran inline in the releasing thread"
    );
    assert!(lock.try_read().is_none(), "the lock should be the writer's");

    assert!(manual.run_one());
    assert!(after.load(SeqCst));
    assert!(handle.is_finished());
    join(handle, "writer");
    assert_eq!(*lock.try_read().unwrap(), 1);
}

#[test]
fn each_waiter_resumes_on_its_own_executor() {
    let pool = |name: &str| {
        ThreadPool::builder()
            .worker_threads(1)
            .thread_name(name)
            .build()
            .unwrap()
    };
    let (a, b) = (pool("a"), pool("b"));
    let lock = Arc::new(SharedMutexFair::new(0u32));
    let writer = lock.try_write().unwrap();

    let spawn_reader = |on: &ThreadPool, queued: &Arc<AtomicUsize>| {
        let (lock, queued) = (lock.clone(), queued.clone());
        on.spawn(async move {
            let guard = count_wait(lock.read(), &queued).await;
            let name = std::thread::current().name().map(str::to_owned);
            (name, *guard)
        })
    };
    let (queued_a, queued_b) = (Arc::default(), Arc::default());
    let ha = spawn_reader(&a, &queued_a);
    let hb = spawn_reader(&b, &queued_b);
    wait_until("both readers queued", Duration::from_secs(10), || {
        queued_a.load(SeqCst) == 1 && queued_b.load(SeqCst) == 1
    });
    assert!(!ha.is_finished() && !hb.is_finished());

    drop(writer);
    let (name_a, value_a) = join(ha, "reader on pool a");
    let (name_b, value_b) = join(hb, "reader on pool b");
    assert_eq!((value_a, value_b), (0, 0));
    let (name_a, name_b) = (name_a.unwrap_or_default(), name_b.unwrap_or_default());
    assert!(
        name_a.starts_with("a-"),
        "reader of pool a resumed on {name_a:?}"
    );
    assert!(
        name_b.starts_with("b-"),
        "reader of pool b resumed on {name_b:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Stress
// ---------------------------------------------------------------------------------------------

#[test]
fn stress_readers_upgraders_and_writers_keep_the_invariant() {
    const TARGET: u64 = 100_000;
    const TASKS: u64 = 16;
    let pool = ThreadPool::new(4).unwrap();
    let lock = Arc::new(SharedMutexFair::new((0u64, 0u64)));
    let waits = Arc::new(AtomicUsize::new(0));

    let handles: Vec<JoinHandle<u64>> = (0..TASKS)
        .map(|id| {
            let (lock, waits) = (lock.clone(), waits.clone());
            pool.spawn(async move {
                let mut mine = 0;
                let mut i = id;
                loop {
                    i += 1;
                    {
                        let guard = count_wait(lock.read(), &waits).await;
                        assert_eq!(guard.0, guard.1, "a reader saw a half-done write");
                        if guard.0 >= TARGET {
                            break;
                        }
                        if i % 32 == 0 {
                            // Hold the read lock across a suspension.
                            coro::yield_now().await;
                            assert_eq!(guard.0, guard.1);
                        }
                    }
                    if i % 8 == 0 {
                        let mut guard = count_wait(lock.write(), &waits).await;
                        assert_eq!(guard.0, guard.1, "a writer saw a half-done write");
                        if guard.0 < TARGET {
                            guard.0 += 1;
                            if i % 64 == 0 {
                                coro::yield_now().await;
                            }
                            guard.1 += 1;
                            mine += 1;
                        }
                    } else if i % 4 == 1 {
                        let guard = count_wait(lock.upgradable_read(), &waits).await;
                        assert_eq!(guard.0, guard.1, "an upgrader saw a half-done write");
                        let seen = guard.0;
                        if seen < TARGET {
                            let mut guard = count_wait(guard.upgrade(), &waits).await;
                            assert_eq!(guard.0, seen, "a writer got in during an upgrade");
                            assert_eq!(guard.1, seen);
                            guard.0 += 1;
                            guard.1 += 1;
                            mine += 1;
                        }
                    } else if let Some(guard) = lock.try_read() {
                        assert_eq!(guard.0, guard.1, "try_read saw a half-done write");
                    }
                }
                mine
            })
        })
        .collect();

    let deadline = Instant::now() + Duration::from_secs(60);
    while !handles.iter().all(JoinHandle::is_finished) {
        if Instant::now() >= deadline {
            let left = handles.iter().filter(|h| !h.is_finished()).count();
            // The stuck tasks may never finish: leak the pool rather than join its workers.
            std::mem::forget(pool);
            panic!("{left} of {TASKS} stress tasks hung (60 s deadline)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let total: u64 = handles.into_iter().map(|h| join(h, "stress task")).sum();
    assert_eq!(total, TARGET, "increments done by the tasks");
    assert_eq!(*lock.try_read().unwrap(), (TARGET, TARGET));
    // Holding guards across yields on 4 workers makes waiting certain: the queue was exercised.
    let waits = waits.load(SeqCst);
    eprintln!("stress: {waits} lock futures had to wait");
    assert!(
        waits > 0,
        "no lock future ever waited: the stress test did not contend"
    );
}

// ---------------------------------------------------------------------------------------------
// Auto traits
// ---------------------------------------------------------------------------------------------

fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}
fn assert_send_val<T: Send>(_: &T) {}

#[test]
fn lock_guards_and_futures_are_send_and_sync() {
    assert_send::<SharedMutexFair<Vec<u8>>>();
    assert_sync::<SharedMutexFair<Vec<u8>>>();
    assert_send::<Read<'static, Vec<u8>>>();
    assert_send::<Write<'static, Vec<u8>>>();
    assert_send::<UpgradableRead<'static, Vec<u8>>>();
    assert_send::<Upgrade<'static, Vec<u8>>>();
    assert_send::<ReadGuard<'static, Vec<u8>>>();
    assert_sync::<ReadGuard<'static, Vec<u8>>>();
    assert_send::<WriteGuard<'static, Vec<u8>>>();
    assert_send::<UpgradableReadGuard<'static, Vec<u8>>>();

    // And a task holding guards across awaits is Send.
    let lock = SharedMutexFair::new(vec![1u8]);
    let fut = async {
        let r = lock.read().await;
        coro::yield_now().await;
        drop(r);
        let u = lock.upgradable_read().await;
        let mut w = u.upgrade().await;
        coro::yield_now().await;
        w.push(2);
    };
    assert_send_val(&fut);
    block_wait(fut);
    assert_eq!(lock.into_inner(), [1, 2]);
}
