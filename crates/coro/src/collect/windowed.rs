//! [`collect_all_windowed`] and [`collect_all_windowed_settled`]: like `collect_all_range` and
//! `collect_all_settled_range`, with at most `max_in_flight` children running at once.

use super::children::{Children, Failure, flatten, guarded, spawn_guarded, unwrap_child};
use crate::Task;
use coro_executor::JoinError;
use std::borrow::Cow;
use std::future::{Future, IntoFuture, poll_fn};
use std::panic::Location;
use std::task::Poll;

const NAME: &str = "collect_all_windowed";
const SETTLED: &str = "collect_all_windowed_settled";

/// Runs the futures of `iter` with at most `max_in_flight` of them running at once, starting
/// the next in input order whenever one finishes, and returns their outputs in input order
/// (folly's `collectAllWindowed`).
///
/// Children get the caller's cancellation token merged with the collect's own. The first child
/// to panic, in time, cancels the running siblings, and no further items are started: every
/// item after the last one started (in input order) is dropped unstarted, so with a window of
/// `w`, a failure leaves unstarted exactly the items that had not reached the window yet. Once
/// the running ones have finished, that panic is resumed. To run every item whatever happens
/// and get every outcome, use [`collect_all_windowed_settled`]. Lazy, a [`Task`] named
/// `collect_all_windowed`; dropping it drops every unfinished child.
///
/// # Panics
///
/// At once if `max_in_flight` is 0.
///
/// ```
/// let doubled = coro::collect_all_windowed((0..10u32).map(|i| async move { i * 2 }), 3);
/// assert_eq!(coro::block_wait(doubled), (0..10).map(|i| i * 2).collect::<Vec<_>>());
/// ```
#[track_caller]
pub fn collect_all_windowed<I, T>(iter: I, max_in_flight: usize) -> Task<Vec<T>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    check_window(NAME, max_in_flight);
    let futs: Vec<_> = iter.into_iter().map(IntoFuture::into_future).collect();
    let body = async move {
        let (mut outcomes, first) = run_windowed(futs, max_in_flight, true).await;
        if let Some(index) = first {
            let outcome = outcomes[index].take().expect("a failed child has finished");
            unwrap_child(NAME, index, outcome);
            unreachable!("the first failure of collect_all_windowed is a panic");
        }
        outcomes
            .into_iter()
            .enumerate()
            .map(|(index, outcome)| {
                unwrap_child(NAME, index, outcome.expect("every child has finished"))
            })
            .collect()
    };
    Task::with_frame(body, Cow::Borrowed(NAME), Location::caller())
}

/// Runs every future of `iter`, at most `max_in_flight` at once, starting the next in input
/// order whenever one finishes, and returns every one's outcome in input order: `Ok(value)`, or
/// `Err(JoinError::Panicked)` for a child that panicked (folly's `collectAllTryWindowed`).
///
/// A failure never cancels anything, nor stops the window: every item runs, with the caller's
/// cancellation token, to its end. Lazy, a [`Task`] named `collect_all_windowed_settled`;
/// dropping it drops every unfinished child and every item not started.
///
/// # Panics
///
/// At once if `max_in_flight` is 0.
///
/// ```
/// let outcomes = coro::block_wait(coro::collect_all_windowed_settled(
///     (0..4u32).map(|i| async move {
///         assert_ne!(i, 1, "item 1 fails");
///         i
///     }),
///     2,
/// ));
/// assert!(outcomes[1].as_ref().unwrap_err().is_panic());
/// assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 3); // the others all ran
/// ```
#[track_caller]
pub fn collect_all_windowed_settled<I, T>(
    iter: I,
    max_in_flight: usize,
) -> Task<Vec<Result<T, JoinError>>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    check_window(SETTLED, max_in_flight);
    let futs: Vec<_> = iter.into_iter().map(IntoFuture::into_future).collect();
    let body = async move {
        let (outcomes, _) = run_windowed(futs, max_in_flight, false).await;
        outcomes
            .into_iter()
            .map(|outcome| outcome.expect("a settled window starts every item"))
            .collect()
    };
    Task::with_frame(body, Cow::Borrowed(SETTLED), Location::caller())
}

#[track_caller]
fn check_window(name: &str, max_in_flight: usize) {
    assert!(
        max_in_flight > 0,
        "{name}: max_in_flight is 0, so no child could ever start; pass at least 1 (1 runs the \
         children one at a time), or use collect_all_range for no limit"
    );
}

/// Runs `futs` at most `max_in_flight` at once, in input order; `cancels`: whether the first
/// failure in time cancels the running children and stops the window (whose unstarted items
/// are then dropped). Returns each item's outcome (`None`: never started) and the index of the
/// first failure, if `cancels`.
async fn run_windowed<F>(
    futs: Vec<F>,
    max_in_flight: usize,
    cancels: bool,
) -> (Vec<Option<Result<F::Output, JoinError>>>, Option<usize>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let total = futs.len();
    let failure = cancels.then(Failure::new);
    let token = failure.as_ref().map(|failure| failure.child_token());
    let mut pending = futs.into_iter().enumerate();
    let mut children = Children::with_capacity(total);
    let mut running: Vec<usize> = Vec::with_capacity(max_in_flight.min(total));
    let mut outcomes: Vec<Option<_>> = (0..total).map(|_| None).collect();
    let failed = |failure: &Option<std::sync::Arc<Failure>>| {
        failure.as_ref().is_some_and(|f| f.first().is_some())
    };
    poll_fn(|cx| {
        loop {
            while running.len() < max_in_flight && !failed(&failure) {
                let Some((index, fut)) = pending.next() else {
                    break;
                };
                let handle = match (&failure, &token) {
                    (Some(failure), Some(token)) => {
                        spawn_guarded(NAME, index, failure, token, |_| false, fut)
                    }
                    // Settled: the caller's token as it is, and no failure record.
                    _ => {
                        crate::spawn(Task::new(guarded(index, None, |_| false, fut)).named(SETTLED))
                    }
                };
                children.insert(index, handle);
                running.push(index);
            }
            if running.is_empty() {
                return Poll::Ready(());
            }
            let before = running.len();
            running.retain(|&index| match children.poll_child(index, cx) {
                Poll::Pending => true,
                Poll::Ready(outcome) => {
                    outcomes[index] = Some(flatten(outcome));
                    false
                }
            });
            if running.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await;
    // After a failure, the items never started are dropped here, unstarted.
    drop(pending);
    (outcomes, failure.and_then(|failure| failure.first()))
}
