//! Cancellation-aware waiting: `cancellable`, `safe_point`, `time::sleep`,
//! `time::sleep_until` and `time::timeout`.

use coro::cancel::{CancellationCallback, CancellationSource, Cancelled, cancellable, safe_point};
use coro::executor::ManualExecutor;
use coro::time::{Elapsed, sleep, sleep_until, timeout};
use coro::{Task, ThreadPool, block_wait};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

fn cancel_after(source: CancellationSource, ms: u64) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(ms));
        source.request_cancellation();
    });
}

#[test]
fn sleep_never_completes_early_under_a_pool_and_a_manual_executor() {
    let pool = ThreadPool::new(1).unwrap();
    let elapsed = block_wait(
        Task::new(async {
            let start = Instant::now();
            sleep(Duration::from_millis(20)).await.unwrap();
            start.elapsed()
        })
        .schedule_on(&pool),
    );
    assert!(elapsed >= Duration::from_millis(20));
    let manual = ManualExecutor::new();
    let deadline = Instant::now() + Duration::from_millis(10);
    let handle = Task::new(async move { sleep_until(deadline).await })
        .schedule_on(manual.handle())
        .start();
    while !handle.is_finished() {
        manual.run_until_idle();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(Instant::now() >= deadline);
    assert_eq!(block_wait(handle).unwrap(), Ok(()));
}

#[test]
fn sleep_returns_cancelled_promptly_when_the_token_fires() {
    let source = CancellationSource::new();
    let token = source.token();
    cancel_after(source, 20);
    let start = Instant::now();
    let result = block_wait(
        Task::new(async { sleep(Duration::from_secs(60)).await }).with_cancellation(token),
    );
    assert_eq!(result, Err(Cancelled));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn cancellable_prefers_a_ready_result_and_drops_the_future_on_cancellation() {
    let source = CancellationSource::new();
    source.request_cancellation();
    let ready = block_wait(
        Task::new(async { cancellable(async { 5 }).await }).with_cancellation(source.token()),
    );
    assert_eq!(ready, Ok(5), "a ready result wins over cancellation");

    let dropped = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(dropped.clone());
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let source = CancellationSource::new();
    let token = source.token();
    cancel_after(source, 20);
    let result = block_wait(
        Task::new(async move {
            let outcome = cancellable(async move {
                let _guard = guard;
                std::future::pending::<()>().await
            })
            .await;
            // The inner future is gone by the time the error is seen.
            seen_tx.send(dropped.load(SeqCst)).unwrap();
            outcome
        })
        .with_cancellation(token),
    );
    assert_eq!(result, Err(Cancelled));
    assert!(
        seen_rx.recv().unwrap(),
        "the inner future was not dropped on cancellation"
    );
}

#[test]
fn cancellable_without_a_token_just_waits() {
    let result = block_wait(cancellable(async {
        sleep(Duration::from_millis(5)).await.unwrap();
        1
    }));
    assert_eq!(result, Ok(1));
}

#[test]
fn safe_point_reports_the_current_token() {
    assert_eq!(safe_point(), Ok(()));
    let source = CancellationSource::new();
    let token = source.token();
    let result = block_wait(
        Task::new(async move {
            let before = safe_point();
            source.request_cancellation();
            (before, safe_point())
        })
        .with_cancellation(token),
    );
    assert_eq!(result, (Ok(()), Err(Cancelled)));
}

#[test]
fn timeout_cancels_the_operations_token_then_drops_it() {
    let token_fired = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let (fired, guard) = (token_fired.clone(), SetOnDrop(dropped.clone()));
    let start = Instant::now();
    let result = block_wait(timeout(Duration::from_millis(20), async move {
        let _guard = guard;
        let _callback = CancellationCallback::new(&coro::current_cancellation_token(), move || {
            fired.store(true, SeqCst)
        });
        std::future::pending::<()>().await
    }));
    assert_eq!(result, Err(Elapsed));
    assert!(start.elapsed() >= Duration::from_millis(20));
    assert!(
        token_fired.load(SeqCst),
        "the operation's token was not cancelled at the deadline"
    );
    assert!(dropped.load(SeqCst), "the operation was not dropped");
}

#[test]
fn timeout_returns_the_value_of_a_fast_operation() {
    assert_eq!(
        block_wait(timeout(Duration::from_secs(60), async { "fast" })),
        Ok("fast")
    );
}

#[test]
fn the_operations_token_is_the_callers_merged_with_the_timeouts() {
    let source = CancellationSource::new();
    let token = source.token();
    cancel_after(source, 20);
    let start = Instant::now();
    let result = block_wait(
        Task::new(async { timeout(Duration::from_secs(60), sleep(Duration::from_secs(60))).await })
            .with_cancellation(token),
    );
    assert_eq!(
        result,
        Ok(Err(Cancelled)),
        "the caller's cancellation reaches the operation"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn errors_are_values_with_messages() {
    assert_eq!(Elapsed.to_string(), "deadline has elapsed");
    let e: Box<dyn std::error::Error> = Box::new(Elapsed);
    assert!(!e.to_string().is_empty());
}
