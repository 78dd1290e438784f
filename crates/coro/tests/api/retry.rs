//! Retrying: `retry::retry_n` (folly's retryN) and `retry::retry_with_backoff`
//! (folly's retryWithExponentialBackoff), after folly's RetryTest, behaviour by behaviour.

use crate::support::{BoxFuture, CountDrop, ms};
use coro::cancel::CancellationSource;
use coro::retry::{Backoff, retry_n, retry_with_backoff};
use coro::time::{Elapsed, sleep, timeout};
use coro::{Task, current_cancellation_token};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Failure {
    /// Worth retrying; carries the attempt number (from 1) that failed.
    Transient(usize),
    /// Not worth retrying.
    Fatal(usize),
}

/// What an operation under test did: its calls, when, and what of it was dropped.
#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
    times: Mutex<Vec<Instant>>,
    /// Drops of the futures the operation returned (one guard moved into each).
    futures_dropped: Arc<AtomicUsize>,
    /// Drops of the operation itself (a guard it captures).
    op_dropped: Arc<AtomicUsize>,
}

impl Probe {
    fn new() -> Arc<Self> {
        Arc::default()
    }

    fn calls(&self) -> usize {
        self.calls.load(SeqCst)
    }

    /// The time between consecutive calls.
    fn gaps(&self) -> Vec<Duration> {
        let times = self.times.lock().unwrap();
        times.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// Every future the operation made was dropped exactly once, and so was the operation.
    fn assert_nothing_leaked(&self) {
        assert_eq!(
            self.futures_dropped.load(SeqCst),
            self.calls(),
            "each attempt's future is dropped exactly once"
        );
        assert_eq!(
            self.op_dropped.load(SeqCst),
            1,
            "the operation is dropped once"
        );
    }
}

type Op = Box<dyn FnMut() -> BoxFuture<Result<usize, Failure>> + Send>;

/// An operation whose attempt `k` (from 1) has the outcome `outcome(k)`, recorded in `probe`.
fn op(
    probe: &Arc<Probe>,
    outcome: impl Fn(usize) -> Result<usize, Failure> + Send + 'static,
) -> Op {
    let probe = probe.clone();
    let guard = CountDrop(probe.op_dropped.clone());
    Box::new(move || {
        let _captured = &guard;
        let attempt = probe.calls.fetch_add(1, SeqCst) + 1;
        probe.times.lock().unwrap().push(Instant::now());
        let dropped = CountDrop(probe.futures_dropped.clone());
        let result = outcome(attempt);
        Box::pin(async move {
            let _dropped = dropped;
            coro::yield_now().await; // a real suspension point in every attempt
            result
        })
    })
}

/// Fails transiently until attempt `k`, which returns `Ok(k)`.
fn succeeds_on(k: usize) -> impl Fn(usize) -> Result<usize, Failure> + Send + 'static {
    move |attempt| {
        if attempt < k {
            Err(Failure::Transient(attempt))
        } else {
            Ok(attempt)
        }
    }
}

fn always_fails(attempt: usize) -> Result<usize, Failure> {
    Err(Failure::Transient(attempt))
}

/// A policy with constant or growing delays of a few milliseconds.
fn policy(retries: usize, initial: u64, max: u64, jitter: bool) -> Backoff<Failure> {
    Backoff::builder()
        .max_retries(retries)
        .initial_delay(ms(initial))
        .max_delay(ms(max))
        .jitter(jitter)
        .build()
}

// ---- retry_n --------------------------------------------------------------------------------

#[coro::test(timeout_ms = 5000)]
async fn retry_n_succeeds_on_the_kth_attempt_with_exactly_k_calls() {
    let probe = Probe::new();
    assert_eq!(retry_n(5, op(&probe, succeeds_on(3))).await, Ok(3));
    assert_eq!(probe.calls(), 3);
    probe.assert_nothing_leaked();

    let first = Probe::new();
    assert_eq!(retry_n(5, op(&first, succeeds_on(1))).await, Ok(1));
    assert_eq!(first.calls(), 1, "a first success makes no retry");
    first.assert_nothing_leaked();
}

#[coro::test(timeout_ms = 5000)]
async fn retry_n_exhausted_returns_the_last_error_after_n_plus_one_calls() {
    let probe = Probe::new();
    assert_eq!(
        retry_n(4, op(&probe, always_fails)).await,
        Err(Failure::Transient(5))
    );
    assert_eq!(probe.calls(), 5);
    probe.assert_nothing_leaked();

    // The last attempt is the one that counts, even when it is the only success.
    let last = Probe::new();
    assert_eq!(retry_n(4, op(&last, succeeds_on(5))).await, Ok(5));
    assert_eq!(last.calls(), 5);
}

#[coro::test(timeout_ms = 5000)]
async fn retry_n_zero_calls_the_operation_once() {
    let probe = Probe::new();
    assert_eq!(
        retry_n(0, op(&probe, always_fails)).await,
        Err(Failure::Transient(1))
    );
    assert_eq!(probe.calls(), 1);
    probe.assert_nothing_leaked();

    let ok = Probe::new();
    assert_eq!(retry_n(0, op(&ok, succeeds_on(1))).await, Ok(1));
    assert_eq!(ok.calls(), 1);
}

#[coro::test(timeout_ms = 5000)]
async fn retry_n_retries_immediately() {
    let probe = Probe::new();
    let start = Instant::now();
    assert_eq!(
        retry_n(50, op(&probe, always_fails)).await,
        Err(Failure::Transient(51))
    );
    assert_eq!(probe.calls(), 51);
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "retry_n waited between attempts: {:?}",
        start.elapsed()
    );
}

#[coro::test(timeout_ms = 5000)]
async fn retry_n_stops_between_attempts_once_the_caller_is_cancelled() {
    let source = CancellationSource::new();
    let token = source.token();
    let probe = Probe::new();
    let saw_callers_token = Arc::new(AtomicBool::new(true));
    let (saw, expected) = (saw_callers_token.clone(), token.clone());
    let cancelling = op(&probe, move |attempt| {
        // The operation runs in the caller's task and sees its token.
        if current_cancellation_token() != expected {
            saw.store(false, SeqCst);
        }
        if attempt == 2 {
            source.request_cancellation();
        }
        Err(Failure::Transient(attempt))
    });
    let result = Task::new(retry_n(10, cancelling))
        .with_cancellation(token)
        .await;
    assert_eq!(result, Err(Failure::Transient(2)));
    assert_eq!(probe.calls(), 2, "no attempt after the cancellation");
    assert!(saw_callers_token.load(SeqCst));
    probe.assert_nothing_leaked();
}

// ---- retry_with_backoff ---------------------------------------------------------------------

#[coro::test(timeout_ms = 5000)]
async fn backoff_succeeds_on_the_kth_attempt_with_exactly_k_calls() {
    let probe = Probe::new();
    assert_eq!(
        retry_with_backoff(policy(5, 1, 5, true), op(&probe, succeeds_on(4))).await,
        Ok(4)
    );
    assert_eq!(probe.calls(), 4);
    probe.assert_nothing_leaked();
}

#[coro::test(timeout_ms = 5000)]
async fn backoff_exhausted_returns_the_last_error_after_max_retries_plus_one_calls() {
    let probe = Probe::new();
    assert_eq!(
        retry_with_backoff(policy(3, 1, 5, true), op(&probe, always_fails)).await,
        Err(Failure::Transient(4))
    );
    assert_eq!(probe.calls(), 4);
    probe.assert_nothing_leaked();

    let once = Probe::new();
    assert_eq!(
        retry_with_backoff(policy(0, 1, 5, true), op(&once, always_fails)).await,
        Err(Failure::Transient(1))
    );
    assert_eq!(once.calls(), 1, "max_retries(0) calls once");
}

#[coro::test(timeout_ms = 5000)]
async fn a_non_retryable_error_stops_at_once() {
    let asked = Arc::new(AtomicUsize::new(0));
    let policy = {
        let asked = asked.clone();
        Backoff::builder()
            .max_retries(10)
            .initial_delay(ms(1))
            .max_delay(ms(2))
            .retry_if(move |e: &Failure| {
                asked.fetch_add(1, SeqCst);
                matches!(e, Failure::Transient(_))
            })
            .build()
    };
    let probe = Probe::new();
    let outcome = |attempt| {
        if attempt < 3 {
            Err(Failure::Transient(attempt))
        } else {
            Err(Failure::Fatal(attempt))
        }
    };
    assert_eq!(
        retry_with_backoff(policy.clone(), op(&probe, outcome)).await,
        Err(Failure::Fatal(3))
    );
    assert_eq!(probe.calls(), 3);
    assert_eq!(asked.load(SeqCst), 3, "the predicate sees every error");
    probe.assert_nothing_leaked();

    let first = Probe::new();
    let start = Instant::now();
    assert_eq!(
        retry_with_backoff(policy, op(&first, |a| Err(Failure::Fatal(a)))).await,
        Err(Failure::Fatal(1))
    );
    assert_eq!(first.calls(), 1);
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[coro::test(timeout_ms = 5000)]
async fn the_predicate_is_not_asked_when_no_retry_is_left() {
    let asked = Arc::new(AtomicUsize::new(0));
    let policy = {
        let asked = asked.clone();
        Backoff::builder()
            .max_retries(2)
            .initial_delay(ms(1))
            .max_delay(ms(1))
            .retry_if(move |_: &Failure| {
                asked.fetch_add(1, SeqCst);
                true
            })
            .build()
    };
    let probe = Probe::new();
    assert_eq!(
        retry_with_backoff(policy, op(&probe, always_fails)).await,
        Err(Failure::Transient(3))
    );
    assert_eq!(asked.load(SeqCst), 2);
}

#[coro::test(timeout_ms = 10000)]
async fn delays_without_jitter_grow_exponentially() {
    // Caps 5, 10, 20 ms: with jitter off each delay is its cap, and a sleep is never short.
    let probe = Probe::new();
    let policy = policy(3, 5, 1000, false);
    assert_eq!(
        retry_with_backoff(policy, op(&probe, always_fails)).await,
        Err(Failure::Transient(4))
    );
    let gaps = probe.gaps();
    for (gap, cap) in gaps.iter().zip([5, 10, 20]) {
        assert!(*gap >= ms(cap), "gaps {gaps:?}");
        assert!(*gap < ms(cap + 500), "gaps {gaps:?}");
    }
    probe.assert_nothing_leaked();
}

#[coro::test(timeout_ms = 10000)]
async fn jittered_delays_stay_within_zero_and_their_cap() {
    // Caps 10, 20, 40, 40, 40, 40, 40, 40 ms.
    let probe = Probe::new();
    let caps = [10, 20, 40, 40, 40, 40, 40, 40];
    let start = Instant::now();
    assert_eq!(
        retry_with_backoff(policy(8, 10, 40, true), op(&probe, always_fails)).await,
        Err(Failure::Transient(9))
    );
    let (total, gaps) = (start.elapsed(), probe.gaps());
    assert_eq!(gaps.len(), caps.len());
    for (gap, cap) in gaps.iter().zip(caps) {
        assert!(*gap < ms(cap + 500), "gaps {gaps:?}");
    }
    assert!(total < ms(270 + 1500), "took {total:?}");
    // Without jitter every gap would be at least its cap; with full jitter one of eight is
    // below 90% of its cap unless all eight draws land in their top tenth (1 in 10^8).
    assert!(
        gaps.iter()
            .zip(caps)
            .any(|(gap, cap)| *gap < ms(cap) * 9 / 10),
        "no delay was jittered: {gaps:?}"
    );
}

#[coro::test(timeout_ms = 10000)]
async fn max_delay_caps_the_delays() {
    // Uncapped, the delays would be 1, 10, 100, 1000 ms; capped at 15 ms: 1, 10, 15, 15.
    let probe = Probe::new();
    let policy = Backoff::builder()
        .max_retries(4)
        .initial_delay(ms(1))
        .max_delay(ms(15))
        .multiplier(10.0)
        .jitter(false)
        .build();
    let start = Instant::now();
    assert_eq!(
        retry_with_backoff(policy, op(&probe, always_fails)).await,
        Err(Failure::Transient(5))
    );
    let (total, gaps) = (start.elapsed(), probe.gaps());
    for (gap, cap) in gaps.iter().zip([1, 10, 15, 15]) {
        assert!(*gap >= ms(cap), "gaps {gaps:?}");
    }
    assert!(
        gaps[3] < ms(500),
        "the fourth delay was not capped: {gaps:?}"
    );
    assert!(total < ms(1000), "took {total:?}");
}

#[coro::test(timeout_ms = 5000)]
async fn zero_delays_retry_immediately() {
    let probe = Probe::new();
    let start = Instant::now();
    assert_eq!(
        retry_with_backoff(policy(20, 0, 0, true), op(&probe, always_fails)).await,
        Err(Failure::Transient(21))
    );
    assert_eq!(probe.calls(), 21);
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[coro::test(timeout_ms = 5000)]
async fn cancelling_the_caller_during_a_backoff_sleep_returns_promptly_with_the_last_error() {
    let source = CancellationSource::new();
    let probe = Probe::new();
    // A 10 s delay before the first retry, cancelled 20 ms into it.
    let retrying = coro::spawn(
        Task::new(retry_with_backoff(
            policy(5, 10_000, 10_000, false),
            op(&probe, always_fails),
        ))
        .with_cancellation(source.token()),
    );
    while probe.calls() == 0 {
        sleep(ms(1)).await.unwrap();
    }
    sleep(ms(20)).await.unwrap();
    let cancelled_at = Instant::now();
    source.request_cancellation();
    let result = retrying.await.unwrap();
    let waited = cancelled_at.elapsed();
    assert_eq!(result, Err(Failure::Transient(1)));
    assert!(
        waited < Duration::from_secs(1),
        "returned {waited:?} after cancellation"
    );
    assert_eq!(probe.calls(), 1);
    // Nothing runs later either.
    sleep(ms(100)).await.unwrap();
    assert_eq!(probe.calls(), 1, "an attempt ran after the cancellation");
    probe.assert_nothing_leaked();
}

#[coro::test(timeout_ms = 5000)]
async fn a_caller_cancelled_before_a_zero_delay_makes_no_further_attempt() {
    let source = CancellationSource::new();
    let probe = Probe::new();
    let mut attempt = op(&probe, always_fails);
    let cancel = source.clone();
    let cancelling = move || {
        cancel.request_cancellation();
        attempt()
    };
    let result = Task::new(retry_with_backoff(policy(5, 0, 0, true), cancelling))
        .with_cancellation(source.token())
        .await;
    assert_eq!(result, Err(Failure::Transient(1)));
    assert_eq!(probe.calls(), 1);
    probe.assert_nothing_leaked();
}

#[coro::test(timeout_ms = 5000)]
async fn dropping_a_retry_drops_the_running_attempt_and_the_operation() {
    let probe = Probe::new();
    let (futures_dropped, op_dropped) = (probe.futures_dropped.clone(), probe.op_dropped.clone());
    let hanging = {
        let probe = probe.clone();
        move || -> BoxFuture<Result<(), Failure>> {
            probe.calls.fetch_add(1, SeqCst);
            let dropped = CountDrop(probe.futures_dropped.clone());
            Box::pin(async move {
                let _dropped = dropped;
                std::future::pending().await
            })
        }
    };
    let guard = CountDrop(op_dropped.clone());
    let hanging = move || {
        let _captured = &guard;
        hanging()
    };
    let outcome = timeout(ms(20), retry_with_backoff(policy(3, 1, 1, true), hanging)).await;
    assert_eq!(outcome, Err(Elapsed));
    assert_eq!(probe.calls(), 1);
    assert_eq!(futures_dropped.load(SeqCst), 1);
    assert_eq!(op_dropped.load(SeqCst), 1);

    // The same for a retry dropped in the middle of a backoff sleep.
    let sleeping = Probe::new();
    let outcome = timeout(
        ms(20),
        retry_with_backoff(
            policy(3, 10_000, 10_000, false),
            op(&sleeping, always_fails),
        ),
    )
    .await;
    assert_eq!(outcome, Err(Elapsed));
    sleep(ms(50)).await.unwrap();
    assert_eq!(sleeping.calls(), 1);
    sleeping.assert_nothing_leaked();
}

// ---- bad input ------------------------------------------------------------------------------

#[test]
#[should_panic(
    expected = "the backoff multiplier must be a finite number of at least 1.0, got 0.5"
)]
fn a_multiplier_below_one_panics() {
    let _ = Backoff::<Failure>::builder().multiplier(0.5);
}

#[test]
#[should_panic(
    expected = "the backoff multiplier must be a finite number of at least 1.0, got NaN"
)]
fn a_nan_multiplier_panics() {
    let _ = Backoff::<Failure>::builder().multiplier(f64::NAN);
}

#[test]
#[should_panic(
    expected = "the backoff multiplier must be a finite number of at least 1.0, got inf"
)]
fn an_infinite_multiplier_panics() {
    let _ = Backoff::<Failure>::builder().multiplier(f64::INFINITY);
}

#[test]
#[should_panic(expected = "the backoff max_delay is zero but initial_delay is 5ms")]
fn a_zero_max_delay_with_a_nonzero_initial_delay_panics() {
    let _ = Backoff::<Failure>::builder()
        .max_delay(Duration::ZERO)
        .initial_delay(ms(5))
        .build();
}

#[test]
#[should_panic(expected = "the backoff initial_delay (2s) is greater than its max_delay (1s)")]
fn an_initial_delay_above_the_max_delay_panics() {
    let _ = Backoff::<Failure>::builder()
        .initial_delay(Duration::from_secs(2))
        .max_delay(Duration::from_secs(1))
        .build();
}

#[test]
#[should_panic(expected = "the backoff initial_delay (20s) is greater than its max_delay (10s)")]
fn an_initial_delay_above_the_default_max_delay_panics() {
    let _ = Backoff::<Failure>::builder()
        .initial_delay(Duration::from_secs(20))
        .build();
}

#[test]
fn boundary_settings_are_accepted() {
    let _ = Backoff::<Failure>::builder().multiplier(1.0).build();
    let _ = Backoff::<Failure>::builder()
        .initial_delay(Duration::ZERO)
        .max_delay(Duration::ZERO)
        .build();
    let _ = Backoff::<Failure>::builder()
        .initial_delay(ms(7))
        .max_delay(ms(7))
        .build();
}
