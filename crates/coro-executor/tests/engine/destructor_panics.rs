//! A panic in a task's destructors never aborts the process: not in its future's Drop (after
//! it finished, when it is cancelled, at shutdown) nor in its output's Drop (a detached task's
//! output, or one whose handle is dropped unread). A future whose destructor panics after it
//! finished is reported through its `JoinHandle`, as tokio does; the pool keeps serving.
//!
//! Before, async-task dropped these under its abort-on-panic guard, and each of these tests
//! aborted the test binary. (A destructor that panics while a panic unwinds through it still
//! aborts, as everywhere in Rust: that is the language's double panic, not coro's.)

use coro_executor::{JoinError, ThreadPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Panics when dropped, after counting the drop.
struct PanicOnDrop(Arc<AtomicUsize>, &'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
        panic!("{}", self.1);
    }
}

fn message(error: JoinError) -> String {
    let payload = error.try_into_panic().expect("a panic");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// The pool still runs tasks.
fn still_serves(pool: &ThreadPool) {
    assert_eq!(
        futures::executor::block_on(pool.spawn(async { 7 })).unwrap(),
        7
    );
}

fn wait_for(count: &AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while count.load(SeqCst) < n {
        assert!(Instant::now() < deadline, "the destructor never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_future_whose_destructor_panics_after_it_finished_reports_through_its_handle() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = PanicOnDrop(drops.clone(), "future drop after completion");
    let handle = pool.spawn(async move {
        let _guard = guard;
        5
    });
    let error = futures::executor::block_on(handle).unwrap_err();
    assert_eq!(message(error), "future drop after completion");
    assert_eq!(drops.load(SeqCst), 1);
    still_serves(&pool);
}

#[test]
fn a_cancelled_future_whose_destructor_panics_does_not_abort() {
    let pool = ThreadPool::new(1).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = PanicOnDrop(drops.clone(), "future drop at cancellation");
    let handle = pool.spawn(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    });
    std::thread::sleep(Duration::from_millis(10));
    handle.cancel();
    wait_for(&drops, 1);
    still_serves(&pool);
}

#[test]
fn a_future_whose_destructor_panics_at_shutdown_does_not_abort() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let guard = PanicOnDrop(drops.clone(), "future drop at shutdown");
        pool.spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        })
        .detach();
    }
    std::thread::sleep(Duration::from_millis(10));
    pool.shutdown();
    assert_eq!(drops.load(SeqCst), 3, "each future dropped once");
}

#[test]
fn a_detached_tasks_output_whose_destructor_panics_does_not_abort() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    pool.spawn(async move { PanicOnDrop(d, "output drop, detached") })
        .detach();
    wait_for(&drops, 1);
    still_serves(&pool);
}

#[test]
fn an_output_dropped_with_its_unread_handle_whose_destructor_panics_does_not_abort() {
    let pool = ThreadPool::new(2).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let handle = pool.spawn(async move { PanicOnDrop(d, "output drop, handle dropped") });
    while !handle.is_finished() {
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(handle);
    wait_for(&drops, 1);
    still_serves(&pool);
}
