//! `time::timeout_no_discard` (folly's `timeoutNoDiscard`): at the deadline the
//! operation's token is cancelled and the operation awaited; its own result is kept unless it
//! ends cancelled, which alone gives `Err(Elapsed)`.

use crate::support::{CountDrop, ms};
use coro::cancel::CancelledOutcome;
use coro::cancel::{CancellationCallback, CancellationSource, Cancelled, cancellable};
use coro::time::{Elapsed, sleep, timeout_no_discard};
use coro::{Task, ThreadPool, block_wait};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Sleeps on the executor's own timer, which does not watch the cancellation token.
async fn uncancellable_sleep(d: Duration) {
    coro::executor::time::sleep(d).await;
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn an_op_finishing_before_the_deadline_gives_its_value() {
    let start = Instant::now();
    let result = timeout_no_discard(Duration::from_secs(60), async {
        sleep(ms(5)).await?;
        Ok::<_, Cancelled>(5)
    })
    .await;
    assert_eq!(result, Ok(Ok(5)));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "waited for the deadline"
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn an_op_ignoring_cancellation_is_awaited_and_its_value_kept() {
    let token_fired = Arc::new(AtomicBool::new(false));
    let fired = token_fired.clone();
    let start = Instant::now();
    let result = timeout_no_discard(ms(20), async move {
        let _callback = CancellationCallback::new(&coro::current_cancellation_token(), move || {
            fired.store(true, SeqCst)
        });
        uncancellable_sleep(ms(150)).await;
        Ok::<_, Cancelled>("finished anyway")
    })
    .await;
    assert_eq!(result, Ok(Ok("finished anyway")), "the value was discarded");
    assert!(
        start.elapsed() >= ms(150),
        "returned after {:?}, before the operation finished",
        start.elapsed()
    );
    assert!(
        token_fired.load(SeqCst),
        "the operation's token was not cancelled at the deadline"
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn a_partial_result_made_after_the_deadline_is_kept() {
    let result = timeout_no_discard(ms(20), async {
        let interrupted = sleep(Duration::from_secs(60)).await.is_err();
        Ok::<_, Cancelled>(if interrupted { "partial" } else { "complete" })
    })
    .await;
    assert_eq!(result, Ok(Ok("partial")));
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn an_op_honouring_cancellation_gives_elapsed_promptly() {
    let start = Instant::now();
    let slept = timeout_no_discard(ms(20), sleep(Duration::from_secs(60))).await;
    assert_eq!(slept, Err(Elapsed));
    assert!(start.elapsed() >= ms(20), "before the deadline");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );

    let start = Instant::now();
    let waited = timeout_no_discard(ms(20), cancellable(std::future::pending::<u8>())).await;
    assert_eq!(waited, Err(Elapsed));
    assert!(start.elapsed() >= ms(20) && start.elapsed() < Duration::from_secs(5));
}

#[test]
fn the_ops_token_is_the_callers_merged_with_the_timeouts() {
    let pool = ThreadPool::new(2).unwrap();
    let source = CancellationSource::new();
    let canceller = source.clone();
    std::thread::spawn(move || {
        std::thread::sleep(ms(20));
        canceller.request_cancellation();
    });
    let start = Instant::now();
    let result = block_wait(
        Task::new(timeout_no_discard(
            Duration::from_secs(60),
            sleep(Duration::from_secs(60)),
        ))
        .with_cancellation(source.token())
        .schedule_on(&pool),
    );
    assert_eq!(
        result,
        Ok(Err(Cancelled)),
        "the caller's cancellation must reach the operation, and is not a timeout"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_cancelled_output_before_the_deadline_is_not_elapsed() {
    assert_eq!(
        block_wait(timeout_no_discard(Duration::from_secs(60), async {
            Err::<(), _>(Cancelled)
        })),
        Ok(Err(Cancelled))
    );
}

#[test]
fn the_op_is_dropped_exactly_once_however_it_ends() {
    let pool = ThreadPool::new(2).unwrap();
    let run = |deadline: Duration, op_time: Duration, watches_token: bool| {
        let drops = Arc::new(AtomicUsize::new(0));
        let guard = CountDrop(drops.clone());
        let result = block_wait(
            Task::new(timeout_no_discard(deadline, async move {
                let _guard = guard;
                if watches_token {
                    sleep(op_time).await
                } else {
                    uncancellable_sleep(op_time).await;
                    Ok(())
                }
            }))
            .schedule_on(&pool),
        );
        (result, drops.load(SeqCst))
    };
    assert_eq!(run(Duration::from_secs(60), ms(1), true), (Ok(Ok(())), 1));
    assert_eq!(run(ms(10), ms(60), false), (Ok(Ok(())), 1));
    assert_eq!(
        run(ms(10), Duration::from_secs(60), true),
        (Err(Elapsed), 1)
    );

    // Dropped unfinished (after the deadline passed, while the operation still runs).
    let drops = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(drops.clone());
    let fut = timeout_no_discard(ms(5), async move {
        let _guard = guard;
        uncancellable_sleep(Duration::from_secs(60)).await;
        Ok::<_, Cancelled>(())
    });
    let outer = block_wait(coro::time::timeout(ms(30), fut));
    assert_eq!(outer, Err(Elapsed));
    assert_eq!(drops.load(SeqCst), 1);
}

/// An error type of the caller's own, one variant of which means "cancelled".
#[derive(Debug, PartialEq)]
enum FetchError {
    Cancelled,
    NotFound,
}

impl CancelledOutcome for FetchError {
    fn is_cancelled(&self) -> bool {
        matches!(self, FetchError::Cancelled)
    }
}

#[test]
fn other_error_types_can_say_they_were_cancelled() {
    let own = block_wait(timeout_no_discard(ms(10), async {
        match sleep(Duration::from_secs(60)).await {
            Ok(()) => Ok(()),
            Err(Cancelled) => Err(FetchError::Cancelled),
        }
    }));
    assert_eq!(own, Err(Elapsed));
    let other = block_wait(timeout_no_discard(ms(10), async {
        let _ = sleep(Duration::from_secs(60)).await;
        Err::<(), _>(FetchError::NotFound)
    }));
    assert_eq!(other, Ok(Err(FetchError::NotFound)));

    type BoxError = Box<dyn std::error::Error + Send + Sync>;
    let boxed = block_wait(timeout_no_discard(ms(10), async {
        sleep(Duration::from_secs(60)).await?;
        Ok::<_, BoxError>(())
    }));
    assert!(matches!(boxed, Err(Elapsed)), "{boxed:?}");
    let boxed_other = block_wait(timeout_no_discard(ms(10), async {
        let _ = sleep(Duration::from_secs(60)).await;
        Err::<(), BoxError>("disk on fire".into())
    }));
    assert_eq!(
        boxed_other.unwrap().unwrap_err().to_string(),
        "disk on fire"
    );
}
