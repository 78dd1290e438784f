//! Integration tests of the blocking pool behind `spawn_blocking`: thread names
//! `{thread_name}-blocking-{n}`, panics reported as `JoinError::Panicked`, the
//! `max_blocking_threads` bound, retirement of idle threads after `blocking_keep_alive`,
//! `max_blocking_threads(0)` rejected, and shutdown (queued blocking tasks cancelled, running ones
//! waited for).

use coro_executor::{JoinError, ThreadPool};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use crate::support::{TIMEOUT, wait};

/// Polls `cond` until it holds or `limit` passes; fails the test, naming `what`, if it never does.
fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what} (waited {limit:?})");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

/// Asserts `name` is `{prefix}-blocking-{n}` for a number `n`.
fn assert_blocking_name(prefix: &str, name: &str) {
    let n = name
        .strip_prefix(&format!("{prefix}-blocking-"))
        .unwrap_or_else(|| panic!("blocking thread named {name:?}, not {prefix}-blocking-N"));
    assert!(
        n.parse::<usize>().is_ok(),
        "blocking thread named {name:?}: suffix is not a number"
    );
}

#[test]
fn spawn_blocking_runs_on_threads_named_after_the_pool() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("blk")
        .build()
        .unwrap();
    let name = wait("blocking task", pool.spawn_blocking(thread_name)).unwrap();
    assert_blocking_name("blk", &name);

    // Default name prefix.
    let default = ThreadPool::new(1).unwrap();
    let name = wait("blocking task", default.spawn_blocking(thread_name)).unwrap();
    assert_blocking_name("coro-worker", &name);
}

#[test]
fn spawn_blocking_from_a_pool_task_uses_that_pools_blocking_threads() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("home")
        .build()
        .unwrap();
    let name = wait(
        "task spawning blocking work",
        pool.spawn(async { coro_executor::spawn_blocking(thread_name).await.unwrap() }),
    )
    .unwrap();
    assert_blocking_name("home", &name);

    // Outside any pool it goes to the default pool's blocking threads.
    let name = wait(
        "blocking task on the default pool",
        coro_executor::spawn_blocking(thread_name),
    )
    .unwrap();
    assert_blocking_name("coro-default", &name);
}

#[test]
fn panic_in_a_blocking_closure_is_reported_as_panicked() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let handle = pool.spawn_blocking(|| -> u32 {
        if std::hint::black_box(true) {
            panic!("blocking closure exploded");
        }
        0
    });
    match wait("panicking blocking task", handle) {
        Err(JoinError::Panicked(payload)) => {
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"blocking closure exploded")
            );
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
    // The single blocking thread survived (or was replaced): more blocking work runs.
    assert_eq!(
        wait("blocking task after a panic", pool.spawn_blocking(|| 3)).unwrap(),
        3
    );
}

#[test]
fn max_blocking_threads_bounds_how_many_run_at_once() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("bounded")
        .max_blocking_threads(2)
        .build()
        .unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (running, max_seen, gate) = (running.clone(), max_seen.clone(), gate.clone());
            pool.spawn_blocking(move || {
                let now = running.fetch_add(1, SeqCst) + 1;
                max_seen.fetch_max(now, SeqCst);
                let deadline = Instant::now() + TIMEOUT;
                while !gate.load(SeqCst) {
                    assert!(Instant::now() < deadline, "the gate never opened");
                    std::thread::sleep(Duration::from_millis(1));
                }
                running.fetch_sub(1, SeqCst);
                thread_name()
            })
        })
        .collect();

    // Two start, and the other four wait for them, however long that takes.
    wait_until("two blocking tasks never ran at once", TIMEOUT, || {
        running.load(SeqCst) == 2
    });
    let m = pool.metrics();
    assert_eq!(m.blocking_threads, 2, "{m:?}");
    assert_eq!(m.blocking_queue_depth, 4, "{m:?}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(running.load(SeqCst), 2, "a third blocking task started");
    gate.store(true, SeqCst);

    let names: BTreeSet<String> = handles
        .into_iter()
        .map(|h| wait("bounded blocking task", h).unwrap())
        .collect();
    assert!(names.len() <= 2, "ran on {names:?}");
    for name in &names {
        assert_blocking_name("bounded", name);
    }
    assert_eq!(max_seen.load(SeqCst), 2);
    assert!(pool.metrics().blocking_threads <= 2);
}

#[test]
fn idle_blocking_threads_retire_after_the_keep_alive() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .blocking_keep_alive(Duration::from_millis(50))
        .build()
        .unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            pool.spawn_blocking(move || {
                std::thread::sleep(Duration::from_millis(10));
                i
            })
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(wait("blocking task", h).unwrap(), i);
    }
    wait_until(
        "idle blocking threads did not retire after a 50 ms keep-alive",
        Duration::from_secs(2),
        || pool.metrics().blocking_threads == 0,
    );
    // A retired pool starts a thread again on demand.
    assert_eq!(
        wait("blocking task after retirement", pool.spawn_blocking(|| 8)).unwrap(),
        8
    );
}

#[test]
fn max_blocking_threads_zero_is_a_build_error() {
    let err = ThreadPool::builder()
        .worker_threads(1)
        .max_blocking_threads(0)
        .build()
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("max_blocking_threads"), "{message}");
    assert!(message.contains("at least 1"), "{message}");
}

#[test]
fn shutdown_cancels_queued_blocking_tasks_and_waits_for_running_ones() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .max_blocking_threads(1)
        .build()
        .unwrap();
    let (started_tx, started_rx) = mpsc::channel();
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    let running = pool.spawn_blocking(move || {
        started_tx.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        f.store(true, SeqCst);
        7
    });
    started_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: the blocking task never started");

    // The only blocking thread is busy: these queue.
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let mut queued = Vec::new();
    let mut dropped = Vec::new();
    for _ in 0..3 {
        let flag = Arc::new(AtomicBool::new(false));
        let guard = SetOnDrop(flag.clone());
        dropped.push(flag);
        let ran = ran.clone();
        queued.push(pool.spawn_blocking(move || {
            let _guard = guard;
            ran.fetch_add(1, SeqCst);
        }));
    }
    assert_eq!(pool.metrics().blocking_queue_depth, 3);

    let (stopped_tx, stopped_rx) = mpsc::channel();
    std::thread::spawn(move || {
        pool.shutdown();
        let _ = stopped_tx.send(());
    });
    stopped_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: shutdown with blocking work did not return");
    assert!(
        finished.load(SeqCst),
        "shutdown returned before the running blocking task finished"
    );
    assert_eq!(wait("running blocking task", running).unwrap(), 7);
    for handle in queued {
        assert!(matches!(
            wait("queued blocking task", handle),
            Err(JoinError::Cancelled)
        ));
    }
    assert_eq!(
        ran.load(SeqCst),
        0,
        "a queued blocking task ran during shutdown"
    );
    assert!(
        dropped.iter().all(|d| d.load(SeqCst)),
        "a queued closure was not dropped"
    );
}
