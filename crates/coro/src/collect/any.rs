//! [`collect_any`], [`try_collect_any`] and [`collect_any_no_discard`]: the first child to finish
//! decides; the rest are cancelled and awaited (cooperative, as folly).

use super::children::unwrap_child;
use super::range::{run_all, slots};
use crate::Task;
use coro_executor::JoinError;
use std::borrow::Cow;
use std::future::{Future, IntoFuture};
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const ANY: &str = "collect_any";
const TRY_ANY: &str = "try_collect_any";
const NO_DISCARD: &str = "collect_any_no_discard";

/// Turns `iter` into its futures, panicking (at the caller) if there are none.
#[track_caller]
fn futures_of<I>(name: &str, iter: I) -> Vec<<I::Item as IntoFuture>::IntoFuture>
where
    I: IntoIterator,
    I::Item: IntoFuture,
{
    let futs: Vec<_> = iter.into_iter().map(IntoFuture::into_future).collect();
    assert!(
        !futs.is_empty(),
        "{name}: the input is empty, so no child could ever finish first; pass at least one \
         future, or use collect_all_range (which gives an empty Vec for no input)"
    );
    futs
}

/// Called when no child finished at all: every one was dropped by its executor. Panics with
/// [`unwrap_child`]'s message for the first of them.
fn no_finisher<R>(name: &str, outcomes: Vec<Result<R, JoinError>>) -> ! {
    for (index, outcome) in outcomes.into_iter().enumerate() {
        unwrap_child(name, index, outcome);
    }
    unreachable!("{name}: a child that finished is recorded as the first finisher")
}

/// Runs every future of `iter` concurrently and returns the index and output of the first to
/// finish, in time (folly's `collectAny`).
///
/// The first child to finish decides: it cancels its siblings' token (the collect's own,
/// merged into each child's with the caller's), every sibling is awaited (cancellation is
/// cooperative: a child that ignores it is waited for), then the first finisher's value is
/// returned, or its panic resumed. The siblings' later outputs and panics are discarded.
///
/// Lazy, a [`Task`] named `collect_any`: nothing starts until it is awaited. Dropping it drops
/// every unfinished child.
///
/// # Panics
///
/// At once (at the call) if `iter` is empty: there would be no first finisher. Use
/// [`collect_all_range`](crate::collect_all_range) if the input may be empty.
///
/// ```
/// use std::time::Duration;
///
/// let fastest = coro::collect_any([100, 10, 60_000].map(|ms| async move {
///     // The slower children's sleeps return Err(Cancelled) once the fastest has finished.
///     let _ = coro::time::sleep(Duration::from_millis(ms)).await;
///     ms
/// }));
/// assert_eq!(coro::block_wait(fastest), (1, 10));
/// ```
#[track_caller]
pub fn collect_any<I, T>(iter: I) -> Task<(usize, T)>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    let location = Location::caller();
    let futs = futures_of(ANY, iter);
    let body = async move {
        // Every outcome counts as decisive: the first in time cancels the rest.
        let (mut outcomes, first) = run_all(slots(futs, ANY, location, |_| true), true).await;
        let Some(index) = first else {
            no_finisher(ANY, outcomes)
        };
        (index, unwrap_child(ANY, index, outcomes.swap_remove(index)))
    };
    Task::with_frame(body, Cow::Borrowed(ANY), location)
}

/// Like [`collect_any`], for children that return `Result<T, E>`: the first `Ok` in time wins,
/// with its index; if every child returns `Err`, the last `Err` in time is returned (folly's
/// `collectAnyWithoutException`).
///
/// An `Err` never decides: the others keep running. The first child to return `Ok` or to
/// panic, in time, decides: it cancels its siblings' token, every sibling is awaited, then that
/// `Ok` is returned or that panic resumed; later outcomes are discarded. So a child that panics
/// before any `Ok` has been returned has its panic resumed, even if other children had already
/// returned `Err`.
///
/// Lazy, a [`Task`] named `try_collect_any`; dropping it drops every unfinished child.
///
/// # Panics
///
/// At once (at the call) if `iter` is empty: there would be neither an `Ok` nor an `Err` to
/// return.
///
/// ```
/// use std::time::Duration;
///
/// let first_ok = coro::try_collect_any((0..3u64).map(|i| async move {
///     if i == 0 {
///         return Err(format!("child {i} failed")); // first, but an Err does not decide
///     }
///     let ms = if i == 1 { 10 } else { 60_000 };
///     coro::time::sleep(Duration::from_millis(ms)).await.map_err(|e| e.to_string())?;
///     Ok(i)
/// }));
/// assert_eq!(coro::block_wait(first_ok), Ok((1, 1)));
///
/// let all_fail = coro::try_collect_any((0..3u64).map(|i| async move {
///     coro::time::sleep(Duration::from_millis(60 - 25 * i)).await.unwrap();
///     Err::<(), _>(i)
/// }));
/// assert_eq!(coro::block_wait(all_fail), Err(0)); // child 0 slept longest: the last Err
/// ```
#[track_caller]
pub fn try_collect_any<I, T, E>(iter: I) -> Task<Result<(usize, T), E>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = Result<T, E>>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let location = Location::caller();
    let futs = futures_of(TRY_ANY, iter);
    let body = async move {
        // Each child's output is stamped with its completion order, to find the last Err.
        let finished = Arc::new(AtomicUsize::new(0));
        let stamped: Vec<_> = futs
            .into_iter()
            .map(|fut| stamp(fut, finished.clone()))
            .collect();
        let (mut outcomes, first) =
            run_all(slots(stamped, TRY_ANY, location, |(r, _)| r.is_ok()), true).await;
        if let Some(index) = first {
            let (result, _) = unwrap_child(TRY_ANY, index, outcomes.swap_remove(index));
            return Ok((
                index,
                result
                    .ok()
                    .expect("the first decisive child returned Ok or panicked"),
            ));
        }
        // No Ok and no panic: every child returned Err (or was dropped by its executor).
        let mut last: Option<(usize, E)> = None;
        for (index, outcome) in outcomes.into_iter().enumerate() {
            let (result, order) = unwrap_child(TRY_ANY, index, outcome);
            let err = result.err().expect("a child that returned Ok decides");
            if last.as_ref().is_none_or(|(latest, _)| order > *latest) {
                last = Some((order, err));
            }
        }
        Err(last.expect("the input is not empty").1)
    };
    Task::with_frame(body, Cow::Borrowed(TRY_ANY), location)
}

/// Runs `fut`, then pairs its output with its completion order among the users of `finished`.
async fn stamp<F: Future>(fut: F, finished: Arc<AtomicUsize>) -> (F::Output, usize) {
    let output = fut.await;
    (output, finished.fetch_add(1, Ordering::SeqCst))
}

/// Like [`collect_any`], but keeps every child's outcome: once the first child finishes, the
/// rest are cancelled and awaited, and the result has one entry per input, in input order
/// (folly's `collectAnyNoDiscard`):
///
/// - `Some(Ok(value))`: the child returned a value: the first finisher, those that finished at
///   about the same time, those that ignored cancellation, and whatever the cancelled ones
///   returned (cancellation is cooperative: a cancelled sleep returns `Err(Cancelled)`, which
///   is a value);
/// - `Some(Err(JoinError::Panicked(..)))`: the child panicked (the first finisher's panic too:
///   nothing is resumed, so one child's panic never shifts the others' positions);
/// - `None`: the child was cancelled before it produced anything (its executor dropped it).
///
/// Give the children an output that tells a real value from a cancelled one (a `Result`, as in
/// the example) to keep only the values produced before cancellation. Lazy, a [`Task`] named
/// `collect_any_no_discard`; dropping it drops every unfinished child.
///
/// # Panics
///
/// At once (at the call) if `iter` is empty: there would be no first finisher.
///
/// ```
/// use std::time::Duration;
///
/// let outcomes = coro::collect_any_no_discard([60_000, 5].map(|ms| async move {
///     // Ok(ms) if the sleep ran to its end, Err(Cancelled) if it was cut short.
///     coro::time::sleep(Duration::from_millis(ms)).await.map(|()| ms)
/// }));
/// let outcomes = coro::block_wait(outcomes);
/// assert_eq!(outcomes.len(), 2);
/// assert!(outcomes[0].as_ref().unwrap().as_ref().unwrap().is_err()); // cancelled
/// assert_eq!(*outcomes[1].as_ref().unwrap().as_ref().unwrap(), Ok(5)); // the first finisher
/// ```
#[track_caller]
pub fn collect_any_no_discard<I, T>(iter: I) -> Task<Vec<Option<Result<T, JoinError>>>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    let location = Location::caller();
    let futs = futures_of(NO_DISCARD, iter);
    let body = async move {
        let (outcomes, _) = run_all(slots(futs, NO_DISCARD, location, |_| true), true).await;
        outcomes
            .into_iter()
            .map(|outcome| match outcome {
                Err(JoinError::Cancelled) => None,
                outcome => Some(outcome),
            })
            .collect()
    };
    Task::with_frame(body, Cow::Borrowed(NO_DISCARD), location)
}
