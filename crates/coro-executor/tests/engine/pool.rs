//! Integration tests of `ThreadPool` as a whole: a panicking task does not take a
//! worker down, a million tasks spawned from outside all complete, work spawned on one worker is
//! stolen by the others, two pools never run each other's tasks (even when they spawn onto and wake
//! each other), worker threads are named `{thread_name}-{index}`, and `ExecutorHandle::current_pool`
//! / `coro_executor::spawn` pick the right pool.

use coro_executor::{ExecutorHandle, JoinError, JoinHandle, ThreadPool};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use crate::support::TIMEOUT;

/// Awaits `handle` on a helper thread; fails the test, naming `what`, if it hangs.
fn wait<T: Send + 'static>(what: &str, handle: JoinHandle<T>) -> Result<T, JoinError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(block_on(handle));
    });
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("hung: {what} did not finish within {TIMEOUT:?}"))
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

/// Spawns `n` tasks on `handle` that each wait (blocking their thread) until all `n` are running
/// at the same time, so each must hold a different worker; returns their thread names. A task
/// that waits in vain panics, which fails the caller's `unwrap`.
fn names_of_simultaneous_tasks(handle: &ExecutorHandle, n: usize) -> BTreeSet<String> {
    let arrived = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let arrived = arrived.clone();
            handle.spawn(async move {
                arrived.fetch_add(1, SeqCst);
                let deadline = Instant::now() + TIMEOUT;
                while arrived.load(SeqCst) < n {
                    assert!(
                        Instant::now() < deadline,
                        "only {} of {n} tasks ever ran at once: some worker is not serving",
                        arrived.load(SeqCst)
                    );
                    std::thread::sleep(Duration::from_micros(200));
                }
                thread_name()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| wait("rendezvous task", h).unwrap())
        .collect()
}

fn expected_names(prefix: &str, workers: usize) -> BTreeSet<String> {
    (0..workers).map(|i| format!("{prefix}-{i}")).collect()
}

fn explode(message: &str) -> u32 {
    panic!("{message}")
}

#[test]
fn panicking_task_leaves_pool_serving() {
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("panicky")
        .build()
        .unwrap();

    // Panics on the first poll and after an await, several of them, so both workers catch some.
    for i in 0..20 {
        let message = format!("task {i} exploded on purpose");
        let expected = message.clone();
        let handle = pool.spawn(async move {
            if i % 2 == 1 {
                coro_executor::yield_now().await;
            }
            explode(&message)
        });
        match wait("panicking task", handle) {
            Err(JoinError::Panicked(payload)) => {
                let text = payload
                    .downcast_ref::<String>()
                    .expect("the payload of panic!(\"{}\", ..) is a String");
                assert_eq!(text, &expected);
            }
            Err(JoinError::Cancelled) => panic!("a panicking task was reported as Cancelled"),
            Ok(v) => panic!("a panicking task returned {v}"),
        }
    }

    // Both workers still serve: two tasks that can only finish by running at the same time.
    assert_eq!(
        names_of_simultaneous_tasks(&pool.handle(), 2),
        expected_names("panicky", 2)
    );
    // And plain tasks still complete.
    assert_eq!(
        wait("task after panics", pool.spawn(async { 7 })).unwrap(),
        7
    );
}

#[test]
fn one_million_tiny_tasks_from_two_outside_threads_all_complete() {
    const PER_THREAD: usize = 500_000;
    let pool = Arc::new(ThreadPool::new(2).unwrap());
    let counter = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..2 {
        let pool = pool.clone();
        let counter = counter.clone();
        let done_tx = done_tx.clone();
        std::thread::spawn(move || {
            let handles: Vec<_> = (0..PER_THREAD)
                .map(|_| {
                    let counter = counter.clone();
                    pool.spawn(async move {
                        counter.fetch_add(1, SeqCst);
                    })
                })
                .collect();
            let mut ok = 0;
            for handle in handles {
                block_on(handle).expect("a tiny task failed");
                ok += 1;
            }
            done_tx.send(ok).unwrap();
        });
    }
    let mut joined = 0;
    for _ in 0..2 {
        joined += done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("hung: a spawning thread did not get all of its 500,000 results");
    }
    assert_eq!(joined, 2 * PER_THREAD);
    assert_eq!(counter.load(SeqCst), 2 * PER_THREAD);
    // Every future was dropped before its handle resolved, so none is left alive.
    assert_eq!(pool.metrics().live_tasks, 0);
}

/// One task spawns `per_worker * workers` CPU-bound tasks on its own worker (fewer than the 256 a
/// local queue holds, so nothing overflows to the global queue): the other workers can only get
/// them by stealing.
fn cpu_bound_spread(workers: usize) {
    let prefix = format!("cpu{workers}");
    let pool = ThreadPool::builder()
        .worker_threads(workers)
        .thread_name(prefix.clone())
        .build()
        .unwrap();
    let n = 48 * workers;
    assert!(n < 256);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (holding_tx, holding_rx) = mpsc::channel::<()>();
    let parent = pool.spawn(async move {
        // Wait until every other worker has gone back to sleep: then only the pushes onto this
        // worker's queue below can get them going again.
        holding_tx.send(()).unwrap();
        go_rx.recv_timeout(TIMEOUT).expect("never told to go");
        let here = ExecutorHandle::current_pool().expect("the parent runs on a worker");
        (0..n)
            .map(|_| {
                here.spawn(async {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(2) {
                        std::hint::spin_loop();
                    }
                    thread_name()
                })
            })
            .collect::<Vec<_>>()
    });
    holding_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: the parent task never ran");
    let other_workers_asleep = || {
        let m = pool.metrics();
        m.searching_workers == 0 && m.workers.iter().filter(|w| w.parks > 0).count() >= workers - 1
    };
    let deadline = Instant::now() + TIMEOUT;
    loop {
        // Quiet twice in a row, 20 ms apart: nobody is searching, so the others are parked.
        if other_workers_asleep() {
            std::thread::sleep(Duration::from_millis(20));
            if other_workers_asleep() {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "hung: the idle workers never parked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    go_tx.send(()).unwrap();
    let children = wait("parent task", parent).unwrap();
    // On a loaded machine a 2 ms poll can take past the handoff threshold in wall time, and
    // a helper may then run some of the tasks too: only the workers' names are compared.
    let names: BTreeSet<String> = children
        .into_iter()
        .map(|h| wait("cpu-bound task", h).unwrap())
        .filter(|name| !name.contains("-helper-"))
        .collect();
    assert_eq!(
        names,
        expected_names(&prefix, workers),
        "every worker should have run some of the tasks spawned on one worker"
    );
    let metrics = pool.metrics();
    assert!(
        metrics.total_stolen() > 0,
        "tasks reached other workers without being stolen: {metrics:?}"
    );
}

#[test]
fn cpu_bound_tasks_spawned_on_one_worker_run_on_every_worker() {
    cpu_bound_spread(2);
    cpu_bound_spread(4);
}

/// Where a task was expected to run and where it did.
type Log = Arc<Mutex<Vec<(&'static str, String)>>>;

fn record(log: &Log, expected_prefix: &'static str) {
    log.lock().unwrap().push((expected_prefix, thread_name()));
}

#[test]
fn two_pools_never_run_each_others_tasks() {
    const A: &str = "pool-alpha";
    const B: &str = "pool-beta";
    const ROUNDS: usize = 100;
    let pool_a = ThreadPool::builder()
        .worker_threads(2)
        .thread_name(A)
        .build()
        .unwrap();
    let pool_b = ThreadPool::builder()
        .worker_threads(2)
        .thread_name(B)
        .build()
        .unwrap();
    let log: Log = Arc::default();
    let mut handles = Vec::new();

    for (home, home_name, other, other_name) in [
        (pool_a.handle(), A, pool_b.handle(), B),
        (pool_b.handle(), B, pool_a.handle(), A),
    ] {
        for _ in 0..ROUNDS {
            // 1. Plain tasks spawned from outside.
            let l = log.clone();
            handles.push(home.spawn(async move { record(&l, home_name) }));

            // 2. A task that spawns on the other pool through its handle, awaits that task (the
            //    wake-up crosses pools), and whose child spawns back onto the first pool.
            let l = log.clone();
            let (home2, other2) = (home.clone(), other.clone());
            handles.push(home.spawn(async move {
                record(&l, home_name);
                let l2 = l.clone();
                let child = other2.spawn(async move {
                    record(&l2, other_name);
                    let l3 = l2.clone();
                    let grandchild = home2.spawn(async move { record(&l3, home_name) });
                    grandchild.await.unwrap();
                    record(&l2, other_name);
                });
                child.await.unwrap();
                record(&l, home_name);
            }));

            // 3. A task on the other pool woken through a channel by a task on this one.
            let (tx, rx) = oneshot::channel::<()>();
            let l = log.clone();
            handles.push(other.spawn(async move {
                record(&l, other_name);
                rx.await.unwrap();
                record(&l, other_name);
            }));
            let l = log.clone();
            handles.push(home.spawn(async move {
                coro_executor::yield_now().await;
                record(&l, home_name);
                tx.send(()).unwrap();
            }));

            // 4. `coro_executor::spawn` from inside a task stays on the task's pool.
            let l = log.clone();
            handles.push(home.spawn(async move {
                let l2 = l.clone();
                coro_executor::spawn(async move { record(&l2, home_name) })
                    .await
                    .unwrap();
                record(&l, home_name);
            }));
        }
    }
    for handle in handles {
        wait("cross-pool task", handle).unwrap();
    }

    let log = log.lock().unwrap();
    // Per round and per direction: 1 + 5 + 2 + 1 + 2 records.
    assert_eq!(log.len(), 2 * ROUNDS * 11);
    for (expected, actual) in log.iter() {
        assert!(
            actual.starts_with(&format!("{expected}-")),
            "a task of {expected} ran on thread {actual}"
        );
    }
    // Both workers of both pools took part (the test is not vacuous).
    let seen: BTreeSet<&str> = log.iter().map(|(_, name)| name.as_str()).collect();
    assert!(seen.iter().any(|n| n.starts_with("pool-alpha-")));
    assert!(seen.iter().any(|n| n.starts_with("pool-beta-")));
}

#[test]
fn worker_threads_are_named_after_the_pool_and_their_index() {
    let named = ThreadPool::builder()
        .worker_threads(3)
        .thread_name("named")
        .build()
        .unwrap();
    assert_eq!(
        names_of_simultaneous_tasks(&named.handle(), 3),
        expected_names("named", 3)
    );

    let default = ThreadPool::new(2).unwrap();
    assert_eq!(
        names_of_simultaneous_tasks(&default.handle(), 2),
        expected_names("coro-worker", 2)
    );
}

#[test]
fn current_pool_is_the_pool_inside_a_task_and_none_outside() {
    assert_eq!(ExecutorHandle::current_pool(), None);
    let pool = ThreadPool::new(2).unwrap();
    let other = ThreadPool::new(1).unwrap();
    let inside = wait(
        "current_pool task",
        pool.spawn(async { ExecutorHandle::current_pool() }),
    )
    .unwrap();
    assert_eq!(inside, Some(pool.handle()));
    assert_ne!(inside, Some(other.handle()));
    // Still none on the test thread after the pool ran things.
    assert_eq!(ExecutorHandle::current_pool(), None);
}

#[test]
fn spawn_inside_a_pool_task_runs_on_that_pool() {
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("spawn-home")
        .build()
        .unwrap();
    let (name, current) = wait(
        "outer task",
        pool.spawn(async {
            coro_executor::spawn(async { (thread_name(), ExecutorHandle::current_pool()) })
                .await
                .unwrap()
        }),
    )
    .unwrap();
    assert!(
        name.starts_with("spawn-home-"),
        "coro_executor::spawn inside a pool task ran on {name}"
    );
    assert_eq!(current, Some(pool.handle()));
}

#[test]
fn spawn_outside_any_pool_runs_on_the_default_pool() {
    let handle = coro_executor::spawn(async { (thread_name(), ExecutorHandle::current_pool()) });
    let (name, current) = wait("task on the default pool", handle).unwrap();
    assert!(
        name.starts_with("coro-default-"),
        "coro_executor::spawn outside a pool ran on {name}"
    );
    assert_eq!(current, Some(coro_executor::default_pool().handle()));
}
