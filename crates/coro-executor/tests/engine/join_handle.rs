//! Integration tests of `JoinHandle` and `JoinError`: `cancel()` drops the task's
//! future (polled or not), dropping or detaching a handle lets the task run to completion,
//! `is_finished`, the texts and accessors of `JoinError`, and a stress test racing completion with
//! `cancel()`, with dropping the handle and with awaiting it from other threads.

use coro_executor::{JoinError, JoinHandle, ManualExecutor, ThreadPool};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::support::{TIMEOUT, wait, wait_until};

/// Sends `()` when dropped.
struct SendOnDrop(mpsc::Sender<()>);

impl Drop for SendOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn cancel_runs_the_futures_destructor() {
    let pool = ThreadPool::new(2).unwrap();
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let (polled_tx, polled_rx) = mpsc::channel();
    let handle = pool.spawn(async move {
        let _guard = SendOnDrop(dropped_tx);
        polled_tx.send(()).unwrap();
        std::future::pending::<()>().await;
    });
    polled_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: the task was never polled");
    assert!(dropped_rx.try_recv().is_err());
    handle.cancel();
    dropped_rx
        .recv_timeout(TIMEOUT)
        .expect("cancel() never dropped the pending future");
}

#[test]
fn cancel_of_a_never_polled_task_drops_its_future() {
    let pool = ThreadPool::new(1).unwrap();
    // Keep the only worker busy so the next task stays queued.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (busy_tx, busy_rx) = mpsc::channel();
    let blocker = pool.spawn(async move {
        busy_tx.send(()).unwrap();
        release_rx.recv_timeout(TIMEOUT).unwrap();
    });
    busy_rx.recv_timeout(TIMEOUT).unwrap();

    let (dropped_tx, dropped_rx) = mpsc::channel();
    let guard = SendOnDrop(dropped_tx);
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let handle = pool.spawn(async move {
        let _guard = guard;
        ran2.fetch_add(1, SeqCst);
    });
    handle.cancel();
    release_tx.send(()).unwrap();
    dropped_rx
        .recv_timeout(TIMEOUT)
        .expect("cancel() never dropped the queued future");
    wait("blocker", blocker).unwrap();
    assert_eq!(ran.load(SeqCst), 0, "a cancelled task was polled");
}

#[test]
fn dropping_a_join_handle_detaches_the_task() {
    let pool = ThreadPool::new(2).unwrap();
    let (gate_tx, gate_rx) = oneshot::channel::<u32>();
    let (done_tx, done_rx) = mpsc::channel();
    let handle = pool.spawn(async move {
        let v = gate_rx.await.unwrap();
        done_tx.send(v + 1).unwrap();
    });
    drop(handle);
    // Only now can the task finish: it must still be alive.
    gate_tx.send(41).unwrap();
    assert_eq!(
        done_rx
            .recv_timeout(TIMEOUT)
            .expect("a task whose handle was dropped never ran to completion"),
        42
    );
}

#[test]
fn detach_lets_the_task_run_to_completion() {
    let pool = ThreadPool::new(2).unwrap();
    let (gate_tx, gate_rx) = oneshot::channel::<u32>();
    let (done_tx, done_rx) = mpsc::channel();
    pool.spawn(async move {
        let v = gate_rx.await.unwrap();
        done_tx.send(v * 2).unwrap();
    })
    .detach();
    gate_tx.send(21).unwrap();
    assert_eq!(
        done_rx
            .recv_timeout(TIMEOUT)
            .expect("a detached task never ran to completion"),
        42
    );
}

#[test]
fn is_finished_is_false_before_and_true_after_completion() {
    // Deterministic on a manual executor.
    let ex = ManualExecutor::new();
    let handle = ex.handle().spawn(async { 5 });
    assert!(!handle.is_finished());
    assert_eq!(ex.run_until_idle(), 1);
    assert!(handle.is_finished());
    assert_eq!(block_on(handle).unwrap(), 5);

    // And on a pool, across a wake-up.
    let pool = ThreadPool::new(2).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let (polled_tx, polled_rx) = mpsc::channel();
    let handle = pool.spawn(async move {
        polled_tx.send(()).unwrap();
        rx.await.unwrap();
        "done"
    });
    polled_rx.recv_timeout(TIMEOUT).unwrap();
    assert!(!handle.is_finished(), "finished while still waiting");
    tx.send(()).unwrap();
    wait_until("is_finished() never became true", || handle.is_finished());
    assert_eq!(block_on(handle).unwrap(), "done");

    // A panicked task is finished too.
    let handle = pool.spawn(async {
        if std::hint::black_box(true) {
            panic!("finished by panicking");
        }
    });
    wait_until("a panicked task never counted as finished", || {
        handle.is_finished()
    });
}

fn panicked(handle: JoinHandle<()>) -> JoinError {
    match wait("panicking task", handle) {
        Err(e @ JoinError::Panicked(_)) => e,
        other => panic!("expected Panicked, got {other:?}"),
    }
}

#[test]
fn join_error_texts_and_accessors() {
    let pool = ThreadPool::new(1).unwrap();

    // A `&'static str` payload.
    let err = panicked(pool.spawn(async {
        if std::hint::black_box(true) {
            panic!("static message");
        }
    }));
    assert!(err.is_panic());
    assert!(!err.is_cancelled());
    let display = err.to_string();
    assert!(
        display.contains("panicked") && display.contains("static message"),
        "{display}"
    );
    let debug = format!("{err:?}");
    assert!(
        debug.contains("Panicked") && debug.contains("static message"),
        "{debug}"
    );
    let payload = err.try_into_panic().expect("a panic gives its payload");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"static message"));

    // A formatted (`String`) payload.
    let n = std::hint::black_box(7);
    let err = panicked(pool.spawn(async move {
        if n > 0 {
            panic!("formatted message {n}");
        }
    }));
    assert!(err.to_string().contains("formatted message 7"), "{err}");
    assert!(
        format!("{err:?}").contains("formatted message 7"),
        "{err:?}"
    );
    let payload = err.try_into_panic().unwrap();
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("formatted message 7")
    );

    // A payload that is not a string.
    let err = panicked(pool.spawn(async {
        if std::hint::black_box(true) {
            std::panic::panic_any(42_i32);
        }
    }));
    assert!(err.to_string().contains("panicked"), "{err}");
    assert!(format!("{err:?}").contains("Panicked"), "{err:?}");
    assert_eq!(
        err.try_into_panic().unwrap().downcast_ref::<i32>(),
        Some(&42)
    );

    // A real cancellation: the pool shuts down with the task unfinished.
    let handle = pool.spawn(std::future::pending::<()>());
    pool.shutdown();
    let err = wait("task of a shut-down pool", handle).unwrap_err();
    assert!(err.is_cancelled());
    assert!(!err.is_panic());
    assert!(err.to_string().contains("cancel"), "{err}");
    assert!(format!("{err:?}").contains("Cancelled"), "{err:?}");
    match err.try_into_panic() {
        Err(JoinError::Cancelled) => {}
        other => panic!("try_into_panic of Cancelled gave {other:?}"),
    }

    // It is a std error.
    let boxed: Box<dyn std::error::Error + Send> = Box::new(JoinError::Cancelled);
    assert!(boxed.to_string().contains("cancel"));
}

const ITERATIONS: usize = 20_000;

/// Counts each drop in its own slot, so that a double drop cannot hide behind a missed one.
struct Guard {
    counts: Arc<Vec<AtomicUsize>>,
    slot: usize,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.counts[self.slot].fetch_add(1, SeqCst);
    }
}

fn counters(n: usize) -> Arc<Vec<AtomicUsize>> {
    Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect())
}

fn assert_each_dropped_once(what: &str, drops: &[AtomicUsize]) {
    wait_until(&format!("{what}: not every future was dropped"), || {
        drops.iter().map(|d| d.load(SeqCst)).sum::<usize>() >= drops.len()
    });
    for (i, d) in drops.iter().enumerate() {
        assert_eq!(d.load(SeqCst), 1, "{what}: future {i} dropped {d:?} times");
    }
}

/// Spawns `ITERATIONS` short tasks (some yield once, so they are mid-flight longer) whose future
/// owns a guard, and hands each handle at once to another thread that applies `fate` to it.
fn race(what: &str, fate: fn(JoinHandle<usize>)) {
    let pool = ThreadPool::new(2).unwrap();
    let drops = counters(ITERATIONS);
    let (tx, rx) = mpsc::channel::<JoinHandle<usize>>();
    let other = std::thread::spawn(move || {
        for handle in rx {
            fate(handle);
        }
    });
    for i in 0..ITERATIONS {
        let guard = Guard {
            counts: drops.clone(),
            slot: i,
        };
        let handle = pool.spawn(async move {
            let _guard = guard;
            if i % 2 == 0 {
                coro_executor::yield_now().await;
            }
            i
        });
        tx.send(handle).unwrap();
    }
    drop(tx);
    other.join().unwrap();
    assert_each_dropped_once(what, &drops);
    wait_until(&format!("{what}: live_tasks never returned to 0"), || {
        pool.metrics().live_tasks == 0
    });
}

#[test]
fn racing_completion_with_cancel_and_drop_drops_each_future_once() {
    race("cancel from another thread", JoinHandle::cancel);
    race("drop from another thread", drop);
    race("detach from another thread", JoinHandle::detach);

    // Awaiting from another thread while the task completes: every handle resolves.
    let pool = ThreadPool::new(2).unwrap();
    let drops = counters(ITERATIONS);
    let (tx, rx) = mpsc::channel::<(usize, JoinHandle<usize>)>();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut resolved = 0;
        for (i, handle) in rx {
            assert_eq!(block_on(handle).unwrap(), i);
            resolved += 1;
        }
        done_tx.send(resolved).unwrap();
    });
    for i in 0..ITERATIONS {
        let guard = Guard {
            counts: drops.clone(),
            slot: i,
        };
        let handle = pool.spawn(async move {
            let _guard = guard;
            if i % 2 == 0 {
                coro_executor::yield_now().await;
            }
            i
        });
        tx.send((i, handle)).unwrap();
    }
    drop(tx);
    let resolved = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("hung: a JoinHandle awaited from another thread never resolved");
    assert_eq!(resolved, ITERATIONS);
    assert_each_dropped_once("await from another thread", &drops);

    // Inside the pool, each task cancels half of its children and awaits the other half: the
    // awaited ones resolve, and every child's future is dropped exactly once.
    let drops = counters(ITERATIONS);
    let mut awaiters = Vec::new();
    for chunk in 0..ITERATIONS / 100 {
        let drops = drops.clone();
        awaiters.push(pool.spawn(async move {
            let mut sum = 0;
            for i in chunk * 100..(chunk + 1) * 100 {
                let guard = Guard {
                    counts: drops.clone(),
                    slot: i,
                };
                let handle = coro_executor::spawn(async move {
                    let _guard = guard;
                    coro_executor::yield_now().await;
                    i
                });
                if i % 2 == 0 {
                    handle.cancel();
                } else {
                    sum += handle.await.unwrap();
                }
            }
            sum
        }));
    }
    let total: usize = awaiters
        .into_iter()
        .map(|h| wait("awaiting task", h).unwrap())
        .sum();
    assert_eq!(total, (0..ITERATIONS).filter(|i| i % 2 == 1).sum::<usize>());
    assert_each_dropped_once("cancel and await inside the pool", &drops);
}
