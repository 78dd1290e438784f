//! `cancel::detach_on_cancel` (folly's `detachOnCancel`): the caller stops waiting
//! as soon as its token fires, and the operation runs to completion detached on its executor,
//! its future and output dropped once when it ends.

use crate::support::{CountDrop, SetOnDrop, ms, panic_message, wait_until};
use coro::cancel::{CancellationSource, Cancelled, detach_on_cancel};
use coro::time::{Elapsed, timeout_no_discard};
use coro::{Task, ThreadPool, block_wait};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// What a test operation lets the test observe: that it started, that it reached its end, and
/// how often its future and its output were dropped.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
    future_drops: Arc<AtomicUsize>,
    output_drops: Arc<AtomicUsize>,
}

impl Probe {
    /// An operation that ignores cancellation (the executor's own timer does not watch the
    /// token), runs `d`, and returns an output whose drop is counted.
    fn op(&self, d: Duration) -> impl Future<Output = CountDrop> + Send + 'static {
        let probe = self.clone();
        let guard = CountDrop(self.future_drops.clone());
        async move {
            let _guard = guard;
            probe.started.store(true, SeqCst);
            coro::executor::time::sleep(d).await;
            probe.finished.store(true, SeqCst);
            CountDrop(probe.output_drops.clone())
        }
    }

    /// Waits (bounded) until the operation has finished and both its future and its output
    /// were dropped, then checks that each was dropped exactly once.
    fn wait_until_finished_and_dropped(&self) {
        wait_until("the detached operation to finish and be dropped", || {
            self.finished.load(SeqCst)
                && self.future_drops.load(SeqCst) >= 1
                && self.output_drops.load(SeqCst) >= 1
        });
        // Any second drop would come right after the first.
        std::thread::sleep(ms(20));
        assert_eq!(self.future_drops.load(SeqCst), 1, "future drops");
        assert_eq!(self.output_drops.load(SeqCst), 1, "output drops");
    }
}

fn cancel_after(source: &CancellationSource, d: Duration) {
    let source = source.clone();
    std::thread::spawn(move || {
        std::thread::sleep(d);
        source.request_cancellation();
    });
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn an_op_finishing_first_gives_its_value() {
    let result = detach_on_cancel(async {
        coro::time::sleep(ms(5)).await.unwrap();
        42
    })
    .await;
    assert_eq!(result, Ok(42));

    // Also under a token that could fire but does not.
    let source = CancellationSource::new();
    let result = Task::new(detach_on_cancel(async { "done" }))
        .with_cancellation(source.token())
        .await;
    assert_eq!(result, Ok("done"));
}

#[test]
fn a_cancelled_caller_returns_promptly_and_the_op_finishes_detached() {
    let pool = ThreadPool::new(2).unwrap();
    let probe = Probe::default();
    let source = CancellationSource::new();
    cancel_after(&source, ms(20));
    let start = Instant::now();
    let result = block_wait(
        Task::new(detach_on_cancel(probe.op(ms(600))))
            .with_cancellation(source.token())
            .schedule_on(&pool),
    );
    let took = start.elapsed();
    assert!(matches!(result, Err(Cancelled)));
    assert!(took < ms(500), "returned only after {took:?}");
    assert!(
        !probe.finished.load(SeqCst),
        "returned only once the operation had finished"
    );
    assert!(probe.started.load(SeqCst));
    probe.wait_until_finished_and_dropped();
}

#[test]
fn an_already_cancelled_caller_returns_at_once_without_starting_the_op() {
    let pool = ThreadPool::new(2).unwrap();
    let probe = Probe::default();
    let source = CancellationSource::new();
    source.request_cancellation();
    let start = Instant::now();
    let result = block_wait(
        Task::new(detach_on_cancel(probe.op(Duration::from_secs(60))))
            .with_cancellation(source.token())
            .schedule_on(&pool),
    );
    assert!(matches!(result, Err(Cancelled)));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(!probe.started.load(SeqCst), "the operation was started");
    assert_eq!(probe.future_drops.load(SeqCst), 1, "future drops");
    assert_eq!(probe.output_drops.load(SeqCst), 0, "no output was made");
}

#[test]
fn dropping_the_future_detaches_the_op_rather_than_cancelling_it() {
    let pool = ThreadPool::new(2).unwrap();
    let probe = Probe::default();
    let op = probe.op(ms(100));
    let polled = block_wait(
        Task::new(async move {
            let mut waiting = Box::pin(detach_on_cancel(op));
            let first = futures::poll!(waiting.as_mut());
            drop(waiting);
            first.is_pending()
        })
        .schedule_on(&pool),
    );
    assert!(polled, "the operation finished within one poll");
    assert!(!probe.finished.load(SeqCst));
    probe.wait_until_finished_and_dropped();
}

#[test]
fn the_op_runs_with_the_callers_token_on_the_callers_executor() {
    let pool = ThreadPool::new(2).unwrap();
    let source = CancellationSource::new();
    let token = source.token();
    let handle = pool.handle();
    let (same_token, same_executor) = block_wait(
        Task::new(async move {
            detach_on_cancel(async move {
                (
                    coro::current_cancellation_token() == token,
                    coro::current_executor() == Some(handle),
                )
            })
            .await
            .unwrap()
        })
        .with_cancellation(source.token())
        .schedule_on(&pool),
    );
    assert!(
        same_token,
        "the operation did not inherit the caller's token"
    );
    assert!(
        same_executor,
        "the operation did not run on the caller's pool"
    );
}

#[test]
fn a_panic_in_the_op_resumes_in_the_caller() {
    let pool = ThreadPool::new(2).unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        block_wait(
            Task::new(detach_on_cancel(async {
                panic!("op failed");
            }))
            .schedule_on(&pool),
        )
    }));
    let payload = outcome.expect_err("the panic was swallowed");
    assert_eq!(panic_message(payload.as_ref()), "op failed");
}

#[test]
fn under_timeout_no_discard_the_deadline_detaches_a_slow_op() {
    // folly's pairing: an operation that cannot be cancelled, given a deadline.
    let pool = ThreadPool::new(2).unwrap();
    let probe = Probe::default();
    let start = Instant::now();
    let result = block_wait(
        Task::new(timeout_no_discard(
            ms(20),
            detach_on_cancel(probe.op(ms(600))),
        ))
        .schedule_on(&pool),
    );
    assert!(matches!(result, Err(Elapsed)));
    assert!(start.elapsed() < ms(500), "took {:?}", start.elapsed());
    assert!(!probe.finished.load(SeqCst));
    probe.wait_until_finished_and_dropped();
}

#[test]
fn dropping_before_the_first_poll_drops_the_op_unstarted() {
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(dropped.clone());
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    drop(detach_on_cancel(async move {
        let _guard = guard;
        s.store(true, SeqCst);
    }));
    assert!(dropped.load(SeqCst));
    assert!(!started.load(SeqCst));
}
