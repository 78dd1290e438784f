//! [`collect_all_windowed`]: like `collect_all_range`, with at most `max_in_flight` children
//! running at once.

use super::children::{Children, Failure, flatten, spawn_guarded, unwrap_child};
use crate::Task;
use std::borrow::Cow;
use std::future::{IntoFuture, poll_fn};
use std::panic::Location;
use std::task::Poll;

const NAME: &str = "collect_all_windowed";

/// Runs the futures of `iter` with at most `max_in_flight` of them running at once, starting
/// the next in input order whenever one finishes, and returns their outputs in input order
/// (folly's `collectAllWindowed`).
///
/// Children get the caller's cancellation token merged with the collect's own. The first child
/// to panic, in time, cancels the running siblings, and no further items are started (they are
/// dropped unstarted); once the running ones have finished, that panic is resumed. Lazy, a
/// [`Task`] named `collect_all_windowed`; dropping it drops every unfinished child.
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
    assert!(
        max_in_flight > 0,
        "collect_all_windowed: max_in_flight is 0, so no child could ever start; pass at least 1 \
         (1 runs the children one at a time), or use collect_all_range for no limit"
    );
    let futs: Vec<_> = iter.into_iter().map(IntoFuture::into_future).collect();
    let body = async move {
        let total = futs.len();
        let failure = Failure::new();
        let token = failure.child_token();
        let mut pending = futs.into_iter().enumerate();
        let mut children = Children::with_capacity(total);
        let mut running: Vec<usize> = Vec::with_capacity(max_in_flight.min(total));
        let mut outcomes: Vec<Option<_>> = (0..total).map(|_| None).collect();
        poll_fn(|cx| {
            loop {
                while running.len() < max_in_flight && failure.first().is_none() {
                    let Some((index, fut)) = pending.next() else {
                        break;
                    };
                    let handle = spawn_guarded(NAME, index, &failure, &token, |_| false, fut);
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
        if let Some(index) = failure.first() {
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
