//! [`collect_all_range`] and [`try_collect_all_range`]: every child at once, results in input
//! order, the first failure in time cancels the rest.

use super::children::unwrap_child;
use super::launch::{Collect, run};
use super::slot::{Slot, joined};
use crate::Task;
use coro_executor::JoinError;
use std::borrow::Cow;
use std::future::{Future, IntoFuture};
use std::panic::Location;

/// The slots of a range collect named `name`, created at `location`.
pub(super) fn slots<I>(
    iter: I,
    name: &'static str,
    location: &'static Location<'static>,
    is_failure: fn(&<I::Item as IntoFuture>::Output) -> bool,
) -> Box<[Slot<<I::Item as IntoFuture>::IntoFuture>]>
where
    I: IntoIterator,
    I::Item: IntoFuture,
    <I::Item as IntoFuture>::IntoFuture: 'static,
    <I::Item as IntoFuture>::Output: 'static,
{
    iter.into_iter()
        .map(|item| Slot::new(item.into_future(), name, location, is_failure))
        .collect()
}

/// Runs every child in `slots` (see `launch`), awaits them all, and returns their outcomes in
/// input order with the index of the first to fail in time (`cancels`: whether that failure
/// cancelled the others).
pub(super) async fn run_all<F>(
    slots: Box<[Slot<F>]>,
    cancels: bool,
) -> (Vec<Result<F::Output, JoinError>>, Option<usize>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let collect = Collect::start(slots, cancels);
    run(&collect).await;
    let outcomes = collect
        .children()
        .iter()
        // SAFETY: `run` returned: every slot is ours (see `Collect::children`).
        .map(|slot| joined(unsafe { slot.take() }))
        .collect();
    (outcomes, collect.first_failure())
}

const ALL: &str = "collect_all_range";
const TRY_ALL: &str = "try_collect_all_range";

/// Runs every future of `iter` concurrently (in parallel on a [`ThreadPool`](crate::ThreadPool))
/// and returns their outputs in input order (folly's `collectAllRange`).
///
/// The result is a lazy [`Task`] named `collect_all_range`: nothing starts until it is awaited
/// (the iterator itself is consumed here, turning each item into its future). Each child runs
/// in the caller's context, with a cancellation token merged from the caller's and the
/// collect's own, in a frame of its own under the collect's: a [`Task`] child in its own
/// frame, any other future in one named after the collect. The collect polls each child
/// inline until it first suspends, and a child that suspends continues as a task of its own on
/// the current executor; while a child keeps the worker busy, idle workers of a
/// [`ThreadPool`](crate::ThreadPool) take up the children not started yet (the pool's monitor
/// wakes one after 50 µs to about 10 ms, depending on how recently it saw such work). So
/// children that are ready at once cost no spawn, and CPU-bound ones still run in parallel.
/// Wherever a child runs, its async stack reads its own frame, the collect's, then the
/// caller's, out to the root.
///
/// # Panics
///
/// The first child to panic, in time, cancels its siblings' token; once every child has
/// finished, that panic is resumed in the awaiter. Dropping the collect drops every unfinished
/// child.
///
/// ```
/// use std::time::Duration;
///
/// let squares = coro::collect_all_range((1..=4u64).map(|i| async move {
///     // Later inputs finish first; the results are still in input order.
///     coro::time::sleep(Duration::from_millis(8 - 2 * i)).await.unwrap();
///     i * i
/// }));
/// assert_eq!(coro::block_wait(squares), [1, 4, 9, 16]);
///
/// // Each child's stack: its own frame, the collect's, then the caller's.
/// let names = |stack: &coro::trace::AsyncStack| -> Vec<String> {
///     stack.frames().iter().map(|f| f.name().to_owned()).collect()
/// };
/// let child = |name: &'static str| {
///     coro::Task::new(async { coro::trace::current_stack() }).named(name)
/// };
/// let stacks = coro::block_wait(
///     coro::Task::new(async move { coro::collect_all_range([child("a"), child("b")]).await })
///         .named("caller"),
/// );
/// assert_eq!(names(&stacks[1]), ["b", "collect_all_range", "caller"]);
/// ```
#[track_caller]
pub fn collect_all_range<I, T>(iter: I) -> Task<Vec<T>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    let location = Location::caller();
    let slots = slots(iter, ALL, location, |_| false);
    Task::with_frame(all(ALL, slots), Cow::Borrowed(ALL), location)
}

/// Like [`collect_all_range`], for children that return `Result<T, E>`: `Ok` with every value in
/// input order, or the first failure in time. This is Rust's *try-join* over a range (with
/// cancellation), not folly's `collectAllTryRange`, which keeps every child's outcome and
/// cancels nothing: that one is
/// [`collect_all_settled_range`](crate::collect_all_settled_range).
///
/// The first child to fail, by returning `Err` or by panicking, cancels its siblings' token;
/// once every child has finished, that `Err` is returned (or that panic resumed). Later
/// failures and the other children's values are dropped. Lazy, a [`Task`] named
/// `try_collect_all_range`.
///
/// ```
/// use std::time::Duration;
///
/// let all_ok = coro::try_collect_all_range((1..=3u32).map(|i| async move { Ok::<_, String>(i) }));
/// assert_eq!(coro::block_wait(all_ok), Ok(vec![1, 2, 3]));
///
/// let failing = coro::try_collect_all_range((0..3u32).map(|i| async move {
///     if i == 1 {
///         return Err(format!("child {i} failed"));
///     }
///     // The siblings are cancelled: this sleep returns Err(Cancelled) at once.
///     coro::time::sleep(Duration::from_secs(60)).await.map_err(|e| e.to_string())?;
///     Ok(i)
/// }));
/// assert_eq!(coro::block_wait(failing), Err("child 1 failed".to_owned()));
/// ```
#[track_caller]
pub fn try_collect_all_range<I, T, E>(iter: I) -> Task<Result<Vec<T>, E>>
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = Result<T, E>>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let location = Location::caller();
    let slots = slots(iter, TRY_ALL, location, Result::is_err);
    Task::with_frame(try_all(TRY_ALL, slots), Cow::Borrowed(TRY_ALL), location)
}

/// The body of a `try_` collect named `name`: `Ok` with every value in input order, or the
/// first failure in time.
async fn try_all<F, T, E>(name: &'static str, slots: Box<[Slot<F>]>) -> Result<Vec<T>, E>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    let (mut outcomes, first) = run_all(slots, true).await;
    if let Some(index) = first {
        return Err(unwrap_child(name, index, outcomes.swap_remove(index))
            .err()
            .expect("the first failure of a try_ collect is an Err or a panic"));
    }
    outcomes
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| unwrap_child(name, index, outcome))
        .collect()
}

/// The body of a collect named `name`: every value in input order, or the first panic in time
/// resumed.
async fn all<F>(name: &'static str, slots: Box<[Slot<F>]>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (mut outcomes, first) = run_all(slots, true).await;
    if let Some(index) = first {
        unwrap_child(name, index, outcomes.swap_remove(index));
        unreachable!("the first failure of {name} is a panic");
    }
    outcomes
        .into_iter()
        .enumerate()
        .map(|(index, outcome)| unwrap_child(name, index, outcome))
        .collect()
}
