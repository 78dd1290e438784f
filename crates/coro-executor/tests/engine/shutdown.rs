//! Integration tests of pool shutdown: `shutdown()` and dropping the pool drop every
//! unfinished task exactly once (polled and idle, queued and never polled, detached or not), resolve
//! the kept handles `Cancelled`, join the worker threads before returning, and run nothing
//! afterwards; spawning through the handle of a shut-down pool drops the future at once; a
//! destructor that spawns during shutdown neither hangs nor leaks; tasks asleep on the pool's
//! timers, which the timers' close wakes during shutdown, are dropped before it returns.

use coro_executor::{ExecutorHandle, JoinError, JoinHandle, ThreadPool};
use futures::channel::oneshot;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use crate::support::{TIMEOUT, wait, wait_until};

/// Counts its own drop in `counts[slot]`.
struct Guard {
    counts: Arc<Vec<AtomicUsize>>,
    slot: usize,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.counts[self.slot].fetch_add(1, SeqCst);
    }
}

/// Counts, when the thread that set it exits, that it exited.
struct ExitSignal(Arc<AtomicUsize>);

impl Drop for ExitSignal {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<ExitSignal>> = const { RefCell::new(None) };
}

/// A task that owns `guard` (moved in before the first poll), counts its first poll and then
/// never finishes: half of them wait on a channel whose sender `senders` keeps alive, half on
/// `std::future::pending`.
fn stuck_task(
    guard: Guard,
    polled: Arc<AtomicUsize>,
    senders: &Mutex<Vec<oneshot::Sender<()>>>,
) -> impl Future<Output = ()> + Send + 'static {
    let channel = if guard.slot % 2 == 0 {
        let (tx, rx) = oneshot::channel::<()>();
        senders.lock().unwrap().push(tx);
        Some(rx)
    } else {
        None
    };
    async move {
        let _guard = guard;
        polled.fetch_add(1, SeqCst);
        match channel {
            Some(rx) => {
                let _ = rx.await;
                unreachable!("the sender is kept alive until after shutdown");
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// Detaches every third task and keeps the others' handles.
fn keep_or_detach(kept: &mut Vec<JoinHandle<()>>, slot: usize, handle: JoinHandle<()>) {
    if slot % 3 == 0 {
        handle.detach();
    } else {
        kept.push(handle);
    }
}

const POLLED_FIRST: usize = 600;
const PER_BLOCKER: usize = 50;
const QUEUED: usize = 300;
const TOTAL: usize = POLLED_FIRST + 2 * PER_BLOCKER + QUEUED;

/// Builds a 2-worker pool holding `TOTAL` stuck tasks (idle after a poll; queued on a worker;
/// queued on the global queue and never polled), stops it with `stop`, and checks that every task
/// was dropped exactly once, every kept handle is `Cancelled`, the workers exited before `stop`
/// returned, and nothing ran afterwards.
fn stop_pool_with_stuck_tasks(stop: impl FnOnce(ThreadPool) + Send + 'static) {
    // No handoff: the tasks queued in step 3 must stay behind the two blockers. With the
    // default, a helper thread starts once the blockers' polls pass 10 ms and runs what waits,
    // the global queue too; a step 3 that reached its checks later than that (3 of about 300
    // processes) found tasks taken from the global queue and polled.
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("stopping")
        .handoff_after(Duration::MAX)
        .build()
        .unwrap();
    let drops: Arc<Vec<AtomicUsize>> = Arc::new((0..TOTAL).map(|_| AtomicUsize::new(0)).collect());
    let guard = |slot| Guard {
        counts: drops.clone(),
        slot,
    };
    let polled = Arc::new(AtomicUsize::new(0));
    let senders: Arc<Mutex<Vec<oneshot::Sender<()>>>> = Arc::default();
    let exited = Arc::new(AtomicUsize::new(0));
    let mut kept: Vec<JoinHandle<()>> = Vec::new();

    // 1. Tasks that get polled and then sit idle.
    for slot in 0..POLLED_FIRST {
        let task = stuck_task(guard(slot), polled.clone(), &senders);
        keep_or_detach(&mut kept, slot, pool.spawn(task));
    }
    wait_until("the first tasks were never all polled", || {
        polled.load(SeqCst) == POLLED_FIRST
    });

    // 2. Occupy both workers. Each blocker marks its thread (to see it exit), spawns tasks onto
    //    its own worker's queue, reports, and blocks until released.
    let (started_tx, started_rx) = mpsc::channel::<Vec<JoinHandle<()>>>();
    let mut release = Vec::new();
    let mut blockers = Vec::new();
    for b in 0..2 {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        release.push(release_tx);
        let started_tx = started_tx.clone();
        let exited = exited.clone();
        let children: Vec<_> = (0..PER_BLOCKER)
            .map(|i| {
                let slot = POLLED_FIRST + b * PER_BLOCKER + i;
                (slot, stuck_task(guard(slot), polled.clone(), &senders))
            })
            .collect();
        blockers.push(pool.spawn(async move {
            ON_EXIT.with(|e| *e.borrow_mut() = Some(ExitSignal(exited)));
            let here = ExecutorHandle::current_pool().unwrap();
            let mut kept = Vec::new();
            for (slot, task) in children {
                keep_or_detach(&mut kept, slot, here.spawn(task));
            }
            started_tx.send(kept).unwrap();
            release_rx
                .recv_timeout(TIMEOUT)
                .expect("blocker never released");
        }));
    }
    for _ in 0..2 {
        let children = started_rx
            .recv_timeout(TIMEOUT)
            .expect("hung: the two blockers never ran at once");
        kept.extend(children);
    }

    // 3. Both workers are blocked: these wait in the global queue, never polled.
    let polled_before_queued = polled.load(SeqCst);
    let first_queued = POLLED_FIRST + 2 * PER_BLOCKER;
    for slot in first_queued..TOTAL {
        let task = stuck_task(guard(slot), polled.clone(), &senders);
        keep_or_detach(&mut kept, slot, pool.spawn(task));
    }
    let metrics = pool.metrics();
    assert!(
        metrics.global_queue_depth >= QUEUED,
        "queued tasks were taken ({} helper threads started)",
        metrics.helpers_started
    );
    assert_eq!(metrics.live_tasks, TOTAL + 2);
    assert!(
        polled.load(SeqCst) <= polled_before_queued + 2 * PER_BLOCKER,
        "queued tasks were polled ({} helper threads started)",
        metrics.helpers_started
    );
    assert!(drops.iter().all(|d| d.load(SeqCst) == 0));

    // 4. Stop while both workers are still mid-poll with tasks in their queues; release them a
    //    little later, so that stopping has to wait for the poll they are in.
    let released = Arc::new(AtomicBool::new(false));
    let r = released.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        r.store(true, SeqCst);
        for tx in release {
            let _ = tx.send(());
        }
    });
    let (stopped_tx, stopped_rx) = mpsc::channel();
    std::thread::spawn(move || {
        stop(pool);
        let _ = stopped_tx.send(());
    });
    stopped_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: stopping the pool did not return");

    // Stopping waited for the workers' current polls, and for the threads to exit (their
    // thread-locals were destroyed).
    assert!(
        released.load(SeqCst),
        "the pool stopped without waiting for the polls its workers were in"
    );
    assert_eq!(
        exited.load(SeqCst),
        2,
        "the pool was stopped before its worker threads exited"
    );
    for (slot, count) in drops.iter().enumerate() {
        assert_eq!(
            count.load(SeqCst),
            1,
            "task {slot} was dropped the wrong number of times"
        );
    }
    for blocker in blockers {
        // They were mid-poll when the pool stopped: that poll finishes.
        wait("blocker", blocker).unwrap();
    }
    for handle in kept {
        match wait("handle of a task dropped by shutdown", handle) {
            Err(JoinError::Cancelled) => {}
            other => panic!("a handle of a dropped task gave {other:?}"),
        }
    }
    // Nothing runs after the pool stopped.
    let polled_after = polled.load(SeqCst);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(polled.load(SeqCst), polled_after);
    assert!(drops.iter().all(|d| d.load(SeqCst) == 1));
    drop(senders);
}

#[test]
fn shutdown_drops_pending_tasks_exactly_once() {
    stop_pool_with_stuck_tasks(ThreadPool::shutdown);
}

#[test]
fn dropping_the_pool_drops_pending_tasks_exactly_once() {
    stop_pool_with_stuck_tasks(drop);
}

#[test]
fn spawning_through_the_handle_of_a_shut_down_pool_drops_the_future_at_once() {
    let pool = ThreadPool::new(1).unwrap();
    let handle = pool.handle();
    let inside = wait(
        "task capturing its pool",
        pool.spawn(async { ExecutorHandle::current_pool().unwrap() }),
    )
    .unwrap();
    pool.shutdown();

    for via in [handle, inside] {
        let dropped = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicBool::new(false));
        struct SetOnDrop(Arc<AtomicBool>);
        impl Drop for SetOnDrop {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
            }
        }
        let guard = SetOnDrop(dropped.clone());
        let ran2 = ran.clone();
        let join = via.spawn(async move {
            let _guard = guard;
            ran2.store(true, SeqCst);
        });
        assert!(
            dropped.load(SeqCst),
            "the future was not dropped before spawn returned"
        );
        assert!(join.is_finished());
        assert!(matches!(
            wait("spawn on a shut-down pool", join),
            Err(JoinError::Cancelled)
        ));
        assert!(!ran.load(SeqCst), "a shut-down pool ran a task");
    }
}

/// When dropped, spawns a child holding another `SpawnOnDrop` of depth `depth - 1` (none at 0).
struct SpawnOnDrop {
    pool: ExecutorHandle,
    depth: usize,
    dropped: Arc<AtomicUsize>,
    children: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, SeqCst);
        if self.depth == 0 {
            return;
        }
        let child = SpawnOnDrop {
            pool: self.pool.clone(),
            depth: self.depth - 1,
            dropped: self.dropped.clone(),
            children: self.children.clone(),
        };
        let handle = self.pool.spawn(async move {
            let _child = child;
            std::future::pending::<()>().await;
        });
        self.children.lock().unwrap().push(handle);
    }
}

#[test]
fn destructor_spawning_during_shutdown_neither_hangs_nor_leaks() {
    const PARENTS: usize = 200;
    const DEPTH: usize = 3;
    let pool = ThreadPool::new(2).unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let children: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let polled = Arc::new(AtomicUsize::new(0));
    let mut parents = Vec::new();
    for i in 0..PARENTS {
        let guard = SpawnOnDrop {
            pool: pool.handle(),
            depth: DEPTH,
            dropped: dropped.clone(),
            children: children.clone(),
        };
        let polled = polled.clone();
        parents.push(pool.spawn(async move {
            let _guard = guard;
            polled.fetch_add(1, SeqCst);
            if i % 2 == 0 {
                // Some spawn more of their kind onto the worker's own queue.
                let here = ExecutorHandle::current_pool().unwrap();
                here.spawn(std::future::pending::<()>()).detach();
            }
            std::future::pending::<()>().await;
        }));
    }
    // Stop while some are idle and some still queued.
    wait_until("no task was polled", || polled.load(SeqCst) > 0);
    assert_eq!(dropped.load(SeqCst), 0);

    let (stopped_tx, stopped_rx) = mpsc::channel();
    std::thread::spawn(move || {
        pool.shutdown();
        let _ = stopped_tx.send(());
    });
    stopped_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: shutdown with spawning destructors did not return");

    // Each parent, child, grandchild... was dropped exactly once.
    assert_eq!(dropped.load(SeqCst), PARENTS * (DEPTH + 1));
    for parent in parents {
        assert!(matches!(wait("parent", parent), Err(JoinError::Cancelled)));
    }
    let children = std::mem::take(&mut *children.lock().unwrap());
    assert_eq!(children.len(), PARENTS * DEPTH);
    for child in children {
        assert!(matches!(
            wait("child spawned by a destructor", child),
            Err(JoinError::Cancelled)
        ));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(dropped.load(SeqCst), PARENTS * (DEPTH + 1));
}

/// A task whose destructor, run by the pool's shutdown, wakes another task while holding a lock
/// that the other task's destructor takes (h2 wakes its streams under its streams mutex when a
/// connection is dropped): the other task is dropped after the lock is released, not inside the
/// wake, and shutdown completes.
#[test]
fn a_destructor_that_wakes_a_task_under_a_lock_the_task_drop_takes_does_not_deadlock() {
    use std::sync::{Arc, Mutex};
    use std::task::{Poll, Waker};

    struct Connection {
        lock: Arc<Mutex<()>>,
        stream: Arc<Mutex<Option<Waker>>>,
    }
    impl Drop for Connection {
        fn drop(&mut self) {
            let _held = self.lock.lock().unwrap();
            if let Some(waker) = self.stream.lock().unwrap().take() {
                waker.wake();
            }
        }
    }
    struct Stream(Arc<Mutex<()>>);
    impl Drop for Stream {
        fn drop(&mut self) {
            drop(self.0.lock().unwrap());
        }
    }

    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for round in 0..20 {
            let pool = coro_executor::ThreadPool::new(2).unwrap();
            let lock = Arc::new(Mutex::new(()));
            let stream_waker = Arc::new(Mutex::new(None::<Waker>));
            let stream = Stream(lock.clone());
            let registered = stream_waker.clone();
            let connection = Connection {
                lock,
                stream: stream_waker,
            };
            // Either may be dropped first; half the rounds spawn the connection first.
            let spawn_connection = || {
                drop(pool.spawn(async move {
                    let _connection = connection;
                    std::future::pending::<()>().await
                }))
            };
            let spawn_stream = || {
                drop(pool.spawn(async move {
                    let _stream = stream;
                    std::future::poll_fn(|cx| {
                        *registered.lock().unwrap() = Some(cx.waker().clone());
                        Poll::<()>::Pending
                    })
                    .await
                }))
            };
            if round % 2 == 0 {
                spawn_connection();
                spawn_stream();
            } else {
                spawn_stream();
                spawn_connection();
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            pool.shutdown();
        }
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("shutdown deadlocked: a task was dropped inside a wake under its own lock");
}

/// One round of the shape that caught shutdown returning early: a fresh 2-worker pool, four
/// tasks that each hold a drop-counting guard and wait on a 60 s pool timer, dropped once all
/// four have started. Dropping the pool closes its timers, which wakes the four sleepers: every
/// one of them must be dropped before the drop returns (not by another thread afterwards), and
/// every handle then resolves `Cancelled`.
fn drop_pool_with_sleeping_tasks(round: usize) {
    const TASKS: usize = 4;
    let pool = ThreadPool::new(2).unwrap();
    let drops: Arc<Vec<AtomicUsize>> = Arc::new((0..TASKS).map(|_| AtomicUsize::new(0)).collect());
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<JoinHandle<()>> = (0..TASKS)
        .map(|slot| {
            let guard = Guard {
                counts: drops.clone(),
                slot,
            };
            let started = started.clone();
            pool.spawn(async move {
                let _guard = guard;
                started.fetch_add(1, SeqCst);
                coro_executor::time::sleep(Duration::from_secs(60)).await;
                unreachable!("a 60 s sleep ended before the pool was dropped");
            })
        })
        .collect();
    wait_until("the sleeping tasks never all started", || {
        started.load(SeqCst) == TASKS
    });
    drop(pool);
    let dropped: Vec<usize> = drops.iter().map(|d| d.load(SeqCst)).collect();
    assert_eq!(
        dropped, [1; TASKS],
        "round {round}: dropping the pool returned before each of its sleeping tasks was \
         dropped exactly once (drops per task)"
    );
    for handle in handles {
        match wait("handle of a sleeping task dropped by shutdown", handle) {
            Err(JoinError::Cancelled) => {}
            other => panic!("round {round}: a handle of a dropped task gave {other:?}"),
        }
    }
    assert!(drops.iter().all(|d| d.load(SeqCst) == 1));
}

/// Dropping a pool whose tasks sleep on its timers returns only once every task is dropped.
/// Fifty fresh pools per process: when the timers' close sent the woken tasks to another thread
/// to drop, whether that thread had dropped them all by the time the drop returned varied from
/// round to round (about one process in two caught it within fifty).
#[test]
fn dropping_the_pool_drops_its_sleeping_tasks_before_returning() {
    for round in 0..50 {
        drop_pool_with_sleeping_tasks(round);
    }
}
