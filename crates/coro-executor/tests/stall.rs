//! Stall reports (`ThreadPoolBuilder::stall_threshold` / `on_stall`): a poll that runs past the
//! threshold is reported once, with the task and the worker; short polls are not; a panicking
//! hook does not stop the monitor; a hook without a threshold is a build error.

use coro_executor::{StallReport, ThreadPool};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a test hook saw: (task id, the report's line, elapsed, worker, thread name).
type Seen = Arc<Mutex<Vec<(u64, String, Duration, usize, Option<String>)>>>;

fn pool_recording(threshold: Duration) -> (ThreadPool, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("stl")
        .stall_threshold(threshold)
        .on_stall(move |r: &StallReport| {
            log.lock().unwrap().push((
                r.task_id(),
                r.to_string(),
                r.elapsed(),
                r.worker(),
                r.thread_name().map(str::to_owned),
            ));
        })
        .build()
        .unwrap();
    (pool, seen)
}

#[test]
fn a_poll_that_blocks_its_worker_is_reported_once() {
    let (pool, seen) = pool_recording(Duration::from_millis(30));
    let blocker = pool.spawn(async {
        std::thread::sleep(Duration::from_millis(250));
        std::thread::current().name().unwrap().to_owned()
    });
    let ran_on = futures::executor::block_on(blocker).unwrap();
    // Give the monitor one more look after the poll ended: still one report.
    std::thread::sleep(Duration::from_millis(30));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one report per stalled poll: {seen:?}");
    let (id, line, elapsed, worker, thread) = &seen[0];
    // The default hook's line (it prints exactly this on stderr).
    assert!(
        line.starts_with(&format!("coro: task {id} `<untraced>` has run "))
            && line.contains(" ms in one poll on stl-"),
        "{line}"
    );
    assert!(*elapsed >= Duration::from_millis(30), "{elapsed:?}");
    assert!(
        *elapsed < Duration::from_millis(250),
        "reported late: {elapsed:?}"
    );
    assert_eq!(thread.as_deref(), Some(ran_on.as_str()));
    assert_eq!(ran_on, format!("stl-{worker}"));
}

#[test]
fn each_stalled_poll_of_a_task_is_reported() {
    let (pool, seen) = pool_recording(Duration::from_millis(20));
    let blocker = pool.spawn(async {
        std::thread::sleep(Duration::from_millis(120));
        coro_executor::yield_now().await;
        std::thread::sleep(Duration::from_millis(120));
    });
    futures::executor::block_on(blocker).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, seen[1].0, "the same task both times");
}

#[test]
fn short_polls_are_not_reported() {
    let (pool, seen) = pool_recording(Duration::from_millis(50));
    let start = Instant::now();
    let busy = pool.spawn(async move {
        // Many polls of 1 ms each: busy for 300 ms, never 50 ms in one poll.
        while start.elapsed() < Duration::from_millis(300) {
            let poll_start = Instant::now();
            while poll_start.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
            coro_executor::yield_now().await;
        }
    });
    futures::executor::block_on(busy).unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
}

#[test]
fn a_panicking_hook_does_not_stop_the_monitor() {
    let pool = ThreadPool::builder()
        .worker_threads(1)
        .stall_threshold(Duration::from_millis(20))
        .on_stall(|_| panic!("a faulty stall hook"))
        .handoff_after(Duration::from_millis(20))
        .build()
        .unwrap();
    // The monitor reports (the hook panics), then must still hand off the queued task to a
    // helper while the only worker is blocked.
    let started = Instant::now();
    // The blocker hands back the quick task's handle, to await from here.
    #[allow(clippy::async_yields_async)]
    let blocker = pool.spawn(async move {
        let quick = coro_executor::spawn(async move { started.elapsed() });
        std::thread::sleep(Duration::from_millis(300));
        quick
    });
    let quick = futures::executor::block_on(blocker).unwrap();
    let ran_after = futures::executor::block_on(quick).unwrap();
    assert!(
        ran_after < Duration::from_millis(250),
        "the monitor stopped after the hook panicked: the queued task waited {ran_after:?}"
    );
}

#[test]
fn a_hook_without_a_threshold_is_a_build_error() {
    let err = ThreadPool::builder().on_stall(|_| {}).build().unwrap_err();
    let message = err.to_string();
    assert!(message.contains("no stall_threshold"), "{message}");
    assert!(message.contains(".stall_threshold("), "{message}");
}
