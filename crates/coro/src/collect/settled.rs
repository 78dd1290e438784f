//! [`collect_all_settled_range`]: every child's outcome, never cancelling siblings.

use super::range::{run_all, slots};
use crate::Task;
use coro_executor::JoinError;
use std::borrow::Cow;
use std::future::IntoFuture;
use std::panic::Location;

const NAME: &str = "collect_all_settled_range";

/// Runs every future of `iter` concurrently and returns each one's outcome in input order:
/// `Ok(value)`, or `Err(JoinError::Panicked)` for a child that panicked (folly's
/// `collectAllTryRange`).
///
/// A failure never cancels the siblings: each child runs with the caller's cancellation token,
/// to its end. Lazy, a [`Task`] named `collect_all_settled_range`; dropping it drops every
/// unfinished child.
///
/// ```
/// let outcomes = coro::block_wait(coro::collect_all_settled_range((0..3u32).map(|i| async move {
///     assert_ne!(i, 1, "child 1 fails");
///     i
/// })));
/// assert_eq!(*outcomes[0].as_ref().unwrap(), 0);
/// assert!(outcomes[1].as_ref().unwrap_err().is_panic());
/// assert_eq!(*outcomes[2].as_ref().unwrap(), 2);
/// ```
#[track_caller]
pub fn collect_all_settled_range<I, T>(iter: I) -> Task<Vec<Result<T, JoinError>>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    let location = Location::caller();
    let slots = slots(iter, NAME, location, |_| false);
    // No failure record and no token of its own: a failure never cancels the siblings.
    let body = async move { run_all(slots, false).await.0 };
    Task::with_frame(body, Cow::Borrowed(NAME), location)
}
