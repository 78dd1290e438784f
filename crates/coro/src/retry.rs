//! Retrying a fallible async operation: [`retry_n`] retries at once,
//! [`retry_with_backoff`] waits an exponentially growing, jittered delay between attempts.
//!
//! # The folly correspondence
//!
//! - [`retry_n`] is folly's `coro::retryN`: the operation runs once, and after each failure is
//!   run again immediately, up to `n` more times; the first success or the last error is the
//!   result. `retry_n(0, op)` runs `op` exactly once, as `retryN(0, ...)` does.
//! - [`retry_with_backoff`] is folly's `coro::retryWithExponentialBackoff`: up to a maximum
//!   number of retries, a delay that doubles (by default) from an initial value up to a
//!   maximum, a decider choosing which errors are worth retrying ([`BackoffBuilder::retry_if`]),
//!   and cancellation-aware sleeps between attempts.
//!
//! # Where coro differs
//!
//! - **Errors are values.** The operation returns `Result<T, E>` and the retry functions return
//!   the same `Result<T, E>`. When the caller's cancellation token fires between attempts (or
//!   during a backoff sleep), there is no `OperationCancelled` exception to throw: the functions
//!   return the *last error of the operation* at once, without another attempt. A caller that
//!   needs to tell the two apart checks [`current_cancellation_token`](crate::current_cancellation_token)
//!   or [`cancel::safe_point`](crate::cancel::safe_point) afterwards.
//! - **Full jitter.** folly scales each delay by a random log-normal factor (its relative jitter
//!   standard deviation) and clamps the result to `[min, max]`. coro uses the "full jitter" of
//!   AWS's architecture blog: the delay before retry `k` (from 0) is uniform in
//!   `[0, min(max_delay, initial_delay * multiplier^k)]`, which spreads competing clients out
//!   the most. [`BackoffBuilder::jitter`]`(false)` gives the plain capped exponential instead.
//! - **A policy value.** The knobs are collected in a [`Backoff`] built with a builder (with
//!   defaults, checked once at [`BackoffBuilder::build`]) rather than passed positionally, and
//!   the random generator is internal.
//!
//! The operation itself is called inside the caller's task, so it inherits the caller's
//! cancellation token, executor and task-locals like any awaited child.
//!
//! ```
//! use coro::retry::{Backoff, retry_with_backoff};
//! use std::time::Duration;
//!
//! # coro::block_wait(async {
//! let mut calls = 0;
//! let policy = Backoff::builder()
//!     .max_retries(5)
//!     .initial_delay(Duration::from_millis(1))
//!     .max_delay(Duration::from_millis(10))
//!     .build();
//! let answer = retry_with_backoff(policy, || {
//!     calls += 1;
//!     let attempt = calls;
//!     async move { if attempt < 3 { Err("busy") } else { Ok(42) } }
//! })
//! .await;
//! assert_eq!((answer, calls), (Ok(42), 3));
//! # });
//! ```

use crate::cancel::safe_point;
use crate::time::sleep;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

/// Runs `op`, and after each `Err` runs it again at once, up to `n` retries (so at most `n + 1`
/// calls); returns the first `Ok`, or the last `Err`.
///
/// - `retry_n(0, op)` calls `op` exactly once (no retry), as folly's `retryN(0, ...)` does; it is
///   not an error.
/// - Retries are immediate: no delay, no yield in between (use [`retry_with_backoff`] for
///   delays).
/// - Cancellation: each attempt runs in the caller's task and so sees the caller's token. If
///   that token has fired when an attempt fails, `retry_n` returns that attempt's `Err` at once
///   instead of trying again. The first attempt always runs.
/// - Each future `op` returns is awaited to completion and dropped before the next call.
///
/// ```
/// use coro::retry::retry_n;
///
/// # coro::block_wait(async {
/// let mut calls = 0;
/// let result: Result<u32, &str> = retry_n(2, || {
///     calls += 1;
///     async { Err("down") }
/// })
/// .await;
/// assert_eq!((result, calls), (Err("down"), 3)); // one call plus two retries
///
/// let mut calls = 0;
/// let once: Result<(), &str> = retry_n(0, || {
///     calls += 1;
///     async { Err("down") }
/// })
/// .await;
/// assert_eq!((once, calls), (Err("down"), 1));
/// # });
/// ```
pub async fn retry_n<T, E, F, Fut>(n: usize, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut retries_left = n;
    loop {
        let error = match op().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if retries_left == 0 || safe_point().is_err() {
            return Err(error);
        }
        retries_left -= 1;
    }
}

/// Runs `op`, and after each retryable `Err` sleeps a backoff delay and runs it again, up to
/// `policy`'s maximum number of retries; returns the first `Ok`, or the error that ended the
/// retrying.
///
/// After a failed attempt, in order:
///
/// 1. no retries left (`max_retries` already made): that error is returned;
/// 2. the policy's [`retry_if`](BackoffBuilder::retry_if) predicate says the error is not
///    retryable: it is returned at once (the predicate is consulted only when a retry is left);
/// 3. the caller's cancellation token has fired: the error is returned at once;
/// 4. the delay for this retry (see [`Backoff`]) is slept with [`time::sleep`](crate::time::sleep),
///    which is cancellation-aware: if the caller's token fires during the sleep, the sleep ends
///    early and the error is returned at once, with no further attempt. This is how cancelling
///    the caller stops the retrying immediately, even in the middle of a long delay.
///
/// Each attempt runs in the caller's task and so sees the caller's token (an attempt that is
/// itself cancellation-aware stops early too, and its error goes through the steps above).
///
/// ```
/// use coro::cancel::CancellationSource;
/// use coro::retry::{Backoff, retry_with_backoff};
/// use std::time::{Duration, Instant};
///
/// // A caller cancelled during a 60 s backoff gets the last error back promptly.
/// let source = CancellationSource::new();
/// let cancel = source.clone();
/// let policy = Backoff::builder()
///     .initial_delay(Duration::from_secs(60))
///     .max_delay(Duration::from_secs(60))
///     .jitter(false)
///     .build();
/// let start = Instant::now();
/// let task = coro::Task::new(retry_with_backoff(policy, move || {
///     cancel.request_cancellation(); // cancel the caller from inside the first attempt
///     async { Err::<(), _>("unavailable") }
/// }))
/// .with_cancellation(source.token());
/// assert_eq!(coro::block_wait(task), Err("unavailable"));
/// assert!(start.elapsed() < Duration::from_secs(10));
/// ```
pub async fn retry_with_backoff<T, E, F, Fut>(policy: Backoff<E>, mut op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut rng = None;
    let mut retry = 0;
    loop {
        let error = match op().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if retry >= policy.max_retries || !(policy.retry_if)(&error) || safe_point().is_err() {
            return Err(error);
        }
        let delay = policy.delay(retry, &mut rng);
        if !delay.is_zero() && sleep(delay).await.is_err() {
            return Err(error);
        }
        // A zero delay does not sleep, and a sleep that finished as the token fired reports
        // `Ok`: check once more so that no attempt starts after cancellation.
        if safe_point().is_err() {
            return Err(error);
        }
        retry += 1;
    }
}

/// The retry policy of [`retry_with_backoff`]: how many retries, how long to wait before each,
/// and which errors are worth retrying. Build one with [`Backoff::builder`].
///
/// The delay before retry `k` (counting from 0) is capped at
/// `min(max_delay, initial_delay * multiplier^k)`; with jitter (the default) the delay is
/// uniformly random in `[0, cap]` ("full jitter"), without it the delay is the cap itself.
///
/// | setting | default |
/// |---|---|
/// | [`max_retries`](BackoffBuilder::max_retries) | 3 (so at most 4 calls) |
/// | [`initial_delay`](BackoffBuilder::initial_delay) | 100 ms |
/// | [`max_delay`](BackoffBuilder::max_delay) | 10 s |
/// | [`multiplier`](BackoffBuilder::multiplier) | 2.0 |
/// | [`jitter`](BackoffBuilder::jitter) | on (full jitter) |
/// | [`retry_if`](BackoffBuilder::retry_if) | every error is retryable |
///
/// `E` is the operation's error type (the predicate's argument). A policy is cheap to clone
/// (the predicate is shared), so one can serve many calls.
///
/// ```
/// use coro::retry::{Backoff, retry_with_backoff};
/// use std::io::{Error, ErrorKind};
/// use std::time::Duration;
///
/// let policy: Backoff<Error> = Backoff::builder()
///     .max_retries(4)
///     .initial_delay(Duration::from_millis(50))
///     .max_delay(Duration::from_secs(2))
///     .retry_if(|e: &Error| e.kind() != ErrorKind::NotFound)
///     .build();
/// let mut calls = 0;
/// let result: Result<(), Error> = coro::block_wait(retry_with_backoff(policy.clone(), || {
///     calls += 1;
///     async { Err(Error::from(ErrorKind::NotFound)) }
/// }));
/// assert_eq!((result.unwrap_err().kind(), calls), (ErrorKind::NotFound, 1)); // not retried
/// ```
pub struct Backoff<E> {
    max_retries: usize,
    initial_delay: Duration,
    max_delay: Duration,
    multiplier: f64,
    jitter: bool,
    retry_if: Predicate<E>,
}

type Predicate<E> = Arc<dyn Fn(&E) -> bool + Send + Sync>;

impl<E> Backoff<E> {
    /// A builder with the defaults listed on [`Backoff`].
    ///
    /// ```
    /// let policy = coro::retry::Backoff::<String>::builder().build();
    /// assert_eq!(
    ///     format!("{policy:?}"),
    ///     "Backoff { max_retries: 3, initial_delay: 100ms, max_delay: 10s, multiplier: 2.0, \
    ///      jitter: true, .. }"
    /// );
    /// ```
    pub fn builder() -> BackoffBuilder<E> {
        BackoffBuilder::new()
    }

    /// The upper bound of the delay before retry `retry` (from 0).
    fn cap(&self, retry: usize) -> Duration {
        if self.initial_delay.is_zero() {
            return Duration::ZERO;
        }
        let exponent = i32::try_from(retry).unwrap_or(i32::MAX);
        let secs = self.initial_delay.as_secs_f64() * self.multiplier.powi(exponent);
        // `secs` may be infinite for late retries; anything at or above the cap is the cap.
        if secs < self.max_delay.as_secs_f64() {
            Duration::from_secs_f64(secs).min(self.max_delay)
        } else {
            self.max_delay
        }
    }

    /// The delay before retry `retry`, drawing from `rng` (seeded on first use) if jittered.
    fn delay(&self, retry: usize, rng: &mut Option<XorShift>) -> Duration {
        let cap = self.cap(retry);
        if !self.jitter || cap.is_zero() {
            return cap;
        }
        let unit = rng.get_or_insert_with(XorShift::seeded).next_unit();
        cap.mul_f64(unit).min(cap)
    }
}

impl<E> Clone for Backoff<E> {
    fn clone(&self) -> Self {
        Backoff {
            max_retries: self.max_retries,
            initial_delay: self.initial_delay,
            max_delay: self.max_delay,
            multiplier: self.multiplier,
            jitter: self.jitter,
            retry_if: self.retry_if.clone(),
        }
    }
}

impl<E> fmt::Debug for Backoff<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backoff")
            .field("max_retries", &self.max_retries)
            .field("initial_delay", &self.initial_delay)
            .field("max_delay", &self.max_delay)
            .field("multiplier", &self.multiplier)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Backoff`]; every setting has a default (listed on [`Backoff`]).
///
/// Bad settings panic with a message saying what is wrong and how to fix it:
/// [`multiplier`](Self::multiplier) checks its argument at once, and [`build`](Self::build)
/// checks how the two delays relate (they may be set in either order).
///
/// ```
/// use coro::retry::{BackoffBuilder, retry_with_backoff};
/// use std::time::Duration;
///
/// let policy = BackoffBuilder::new()
///     .max_retries(1)
///     .initial_delay(Duration::from_millis(1))
///     .jitter(false)
///     .build();
/// let mut calls = 0;
/// let result: Result<(), _> = coro::block_wait(retry_with_backoff(policy, || {
///     calls += 1;
///     async { Err("down") }
/// }));
/// assert_eq!((result, calls), (Err("down"), 2));
/// ```
pub struct BackoffBuilder<E> {
    policy: Backoff<E>,
}

impl<E> BackoffBuilder<E> {
    /// A builder with the defaults listed on [`Backoff`] (the same as [`Backoff::builder`]).
    ///
    /// ```
    /// use coro::retry::{Backoff, BackoffBuilder};
    ///
    /// let new = format!("{:?}", BackoffBuilder::<()>::new());
    /// assert_eq!(new, format!("{:?}", Backoff::<()>::builder()));
    /// assert!(new.contains("max_retries: 3, initial_delay: 100ms, max_delay: 10s"));
    /// ```
    pub fn new() -> Self {
        BackoffBuilder {
            policy: Backoff {
                max_retries: 3,
                initial_delay: Duration::from_millis(100),
                max_delay: Duration::from_secs(10),
                multiplier: 2.0,
                jitter: true,
                retry_if: Arc::new(|_: &E| true),
            },
        }
    }

    /// At most `retries` retries after the first call (so at most `retries + 1` calls); 0 means
    /// the operation runs once.
    ///
    /// ```
    /// use coro::retry::{Backoff, retry_with_backoff};
    ///
    /// # coro::block_wait(async {
    /// let mut calls = 0;
    /// let policy = Backoff::builder().max_retries(0).build();
    /// let result: Result<(), _> = retry_with_backoff(policy, || {
    ///     calls += 1;
    ///     async { Err("no") }
    /// })
    /// .await;
    /// assert_eq!((result, calls), (Err("no"), 1));
    /// # });
    /// ```
    pub fn max_retries(mut self, retries: usize) -> Self {
        self.policy.max_retries = retries;
        self
    }

    /// The delay cap of the first retry, which then grows by the multiplier. Zero means no
    /// delay at all (every cap is zero), whatever the maximum.
    ///
    /// It must not exceed [`max_delay`](Self::max_delay): [`build`](Self::build) panics
    /// otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = coro::retry::Backoff::<()>::builder()
    ///     .initial_delay(Duration::from_millis(20))
    ///     .build();
    /// assert!(format!("{policy:?}").contains("initial_delay: 20ms"));
    /// ```
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.policy.initial_delay = delay;
        self
    }

    /// The largest delay between two attempts: the exponential growth stops here.
    ///
    /// It must be at least [`initial_delay`](Self::initial_delay) (in particular it may be
    /// zero only if the initial delay is): [`build`](Self::build) panics otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = coro::retry::Backoff::<()>::builder()
    ///     .max_delay(Duration::from_secs(1))
    ///     .build();
    /// assert!(format!("{policy:?}").contains("max_delay: 1s"));
    /// ```
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.policy.max_delay = delay;
        self
    }

    /// The factor by which the delay cap grows after each retry (default 2.0; 1.0 gives a
    /// constant cap).
    ///
    /// # Panics
    ///
    /// If `multiplier` is below 1.0 (delays would shrink), infinite or NaN. Pass a finite value
    /// of at least 1.0.
    ///
    /// ```
    /// use coro::retry::Backoff;
    ///
    /// let policy = Backoff::<()>::builder().multiplier(1.5).build();
    /// assert!(format!("{policy:?}").contains("multiplier: 1.5"));
    /// assert!(std::panic::catch_unwind(|| Backoff::<()>::builder().multiplier(0.5)).is_err());
    /// ```
    #[track_caller]
    pub fn multiplier(mut self, multiplier: f64) -> Self {
        assert!(
            multiplier.is_finite() && multiplier >= 1.0,
            "coro::retry: the backoff multiplier must be a finite number of at least 1.0, got \
             {multiplier}; use 1.0 for a constant delay, 2.0 (the default) to double it"
        );
        self.policy.multiplier = multiplier;
        self
    }

    /// Whether delays are randomised (default `true`): with jitter the delay is uniform in
    /// `[0, cap]` ("full jitter", which keeps clients that failed together from retrying
    /// together); without it the delay is the cap itself.
    ///
    /// ```
    /// use coro::retry::{Backoff, retry_with_backoff};
    /// use std::time::{Duration, Instant};
    ///
    /// let policy = Backoff::builder()
    ///     .max_retries(1)
    ///     .initial_delay(Duration::from_millis(30))
    ///     .jitter(false)
    ///     .build();
    /// let start = Instant::now();
    /// let result: Result<(), _> =
    ///     coro::block_wait(retry_with_backoff(policy, || async { Err("busy") }));
    /// assert_eq!(result, Err("busy"));
    /// assert!(start.elapsed() >= Duration::from_millis(30)); // the full 30 ms before the retry
    /// ```
    pub fn jitter(mut self, jitter: bool) -> Self {
        self.policy.jitter = jitter;
        self
    }

    /// Which errors are worth retrying (default: all). An error for which `predicate` returns
    /// `false` is returned at once. It is only consulted when a retry is left.
    ///
    /// ```
    /// use coro::retry::{Backoff, retry_with_backoff};
    ///
    /// # coro::block_wait(async {
    /// let mut calls = 0;
    /// let policy = Backoff::builder()
    ///     .retry_if(|e: &&str| *e == "busy")
    ///     .build();
    /// let result: Result<(), _> = retry_with_backoff(policy, || {
    ///     calls += 1;
    ///     async { Err("forbidden") }
    /// })
    /// .await;
    /// assert_eq!((result, calls), (Err("forbidden"), 1));
    /// # });
    /// ```
    pub fn retry_if(mut self, predicate: impl Fn(&E) -> bool + Send + Sync + 'static) -> Self {
        self.policy.retry_if = Arc::new(predicate);
        self
    }

    /// The policy.
    ///
    /// # Panics
    ///
    /// - If the maximum delay is zero while the initial delay is not (every delay would be
    ///   silently cut to zero): set a maximum delay at least as large as the initial delay, or
    ///   set the initial delay to zero too if immediate retries are meant.
    /// - If the initial delay is greater than the maximum delay: raise the maximum or lower the
    ///   initial delay (note the defaults, 100 ms and 10 s, when setting only one of them).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let policy = coro::retry::Backoff::<()>::builder()
    ///     .initial_delay(Duration::from_secs(20)) // above the default maximum of 10 s...
    ///     .max_delay(Duration::from_secs(60)) // ...so raise it (either order works)
    ///     .build();
    /// assert!(format!("{policy:?}").contains("initial_delay: 20s, max_delay: 60s"));
    /// let unraised = || {
    ///     coro::retry::Backoff::<()>::builder().initial_delay(Duration::from_secs(20)).build()
    /// };
    /// assert!(std::panic::catch_unwind(unraised).is_err()); // max_delay left at 10 s
    /// ```
    #[track_caller]
    pub fn build(self) -> Backoff<E> {
        let Backoff {
            initial_delay,
            max_delay,
            ..
        } = self.policy;
        assert!(
            initial_delay.is_zero() || !max_delay.is_zero(),
            "coro::retry: the backoff max_delay is zero but initial_delay is {initial_delay:?}, \
             so every delay would be cut to zero; set max_delay to at least initial_delay, or \
             set initial_delay to zero for immediate retries"
        );
        assert!(
            initial_delay <= max_delay,
            "coro::retry: the backoff initial_delay ({initial_delay:?}) is greater than its \
             max_delay ({max_delay:?}); raise max_delay or lower initial_delay (the defaults \
             are 100ms and 10s)"
        );
        self.policy
    }
}

impl<E> Default for BackoffBuilder<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> fmt::Debug for BackoffBuilder<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BackoffBuilder").field(&self.policy).finish()
    }
}

/// xorshift64* (Vigna), seeded per retry loop from a fresh [`RandomState`].
///
/// Jitter only has to keep callers that failed together from retrying in lockstep; it has no
/// security role, and a few dozen draws per loop are far below what would expose this
/// generator's known weaknesses (which are in its low bits; only the top 53 are used). The
/// seed is SipHash under `RandomState`'s keys, which come from the OS per thread and change with
/// every `RandomState::new`, so concurrent loops, threads and processes draw different delays
/// without a dependency.
struct XorShift(u64);

impl XorShift {
    fn seeded() -> Self {
        // Inside a simulation the delays come from its seed, as every other draw.
        #[cfg(not(any(loom, shuttle)))]
        if coro_executor::sim::is_simulated() {
            return XorShift(coro_executor::sim::random_u64() | 1);
        }
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(0x9e37_79b9_7f4a_7c15);
        // The state must not be zero (zero is xorshift's fixed point).
        XorShift(hasher.finish() | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1]`, both ends included.
    fn next_unit(&mut self) -> f64 {
        const MAX: u64 = (1 << 53) - 1;
        (self.next_u64() >> 11) as f64 / MAX as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(initial_ms: u64, max_ms: u64, multiplier: f64, jitter: bool) -> Backoff<()> {
        Backoff::builder()
            .initial_delay(Duration::from_millis(initial_ms))
            .max_delay(Duration::from_millis(max_ms))
            .multiplier(multiplier)
            .jitter(jitter)
            .build()
    }

    #[test]
    fn caps_grow_by_the_multiplier_up_to_the_maximum() {
        let p = policy(10, 75, 2.0, false);
        let caps: Vec<u64> = (0..6).map(|k| p.cap(k).as_millis() as u64).collect();
        assert_eq!(caps, [10, 20, 40, 75, 75, 75]);
        let mut rng = None;
        assert_eq!(p.delay(2, &mut rng), Duration::from_millis(40));
        assert!(rng.is_none(), "no randomness is drawn without jitter");
    }

    #[test]
    fn huge_retry_counts_stay_at_the_cap() {
        let p = policy(1, 1000, 10.0, true);
        let mut rng = None;
        for retry in [1000, usize::MAX] {
            assert_eq!(p.cap(retry), Duration::from_secs(1));
            assert!(p.delay(retry, &mut rng) <= Duration::from_secs(1));
        }
        let zero = policy(0, 1000, 2.0, true);
        assert_eq!(zero.cap(usize::MAX), Duration::ZERO);
        assert_eq!(zero.delay(3, &mut rng), Duration::ZERO);
    }

    #[test]
    fn jittered_delays_are_spread_over_zero_to_the_cap() {
        let p = policy(100, 100, 1.0, true);
        let cap = Duration::from_millis(100);
        let mut rng = None;
        let draws: Vec<Duration> = (0..10_000).map(|_| p.delay(0, &mut rng)).collect();
        assert!(draws.iter().all(|d| *d <= cap));
        let mean = draws.iter().map(Duration::as_secs_f64).sum::<f64>() / draws.len() as f64;
        assert!((0.045..0.055).contains(&mean), "mean {mean}");
        let low = draws.iter().filter(|d| **d < cap / 10).count();
        let high = draws.iter().filter(|d| **d > cap * 9 / 10).count();
        assert!(low > 500 && high > 500, "low {low}, high {high}");
    }

    #[test]
    fn generators_are_seeded_differently() {
        let a: Vec<u64> = (0..4).map(|_| XorShift::seeded().next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] != w[1]), "{a:?}");
    }
}
