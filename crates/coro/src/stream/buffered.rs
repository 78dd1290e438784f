//! [`buffered`]: a stream's items mapped to futures that run as children on the pool, at most
//! `limit` at once, their outputs yielded in input order.
//!
//! The children are spawned and guarded as `collect_all_windowed`'s are (`collect/children.rs`):
//! on the current executor, under the consumer's task in dumps, with a token merged from the
//! consumer's and the stream's own, the first panic in time recorded and cancelling the rest.

use crate::cancel::{CancellationSource, CancellationToken};
use crate::collect::children::{Failure, flatten, spawn_guarded, unwrap_child};
use coro_executor::PanicPayload;
use coro_executor::{JoinError, JoinHandle};
use futures_core::{FusedStream, Stream};
use pin_project::pin_project;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

/// The name of each child task in dumps.
const NAME: &str = "buffered";

/// Maps each item of `stream` to the future `f(item)` and runs it as a child task, with at most
/// `limit` children outstanding at once, yielding their outputs in input order (folly's
/// `collectAllWindowed` as a stream; futures' `StreamExt::buffered` with the futures on the
/// pool).
///
/// - **Lazy**: nothing is pulled from `stream` until the first poll.
/// - **Parallel**: each child is spawned on the current executor (the pool whose worker polls,
///   the thread of a [`block_wait`](crate::block_wait); the default pool outside any), so on a
///   thread pool they run in parallel with each other and with the consumer. Children show
///   under the consumer's task in [`trace::dump_all`](crate::trace::dump_all).
/// - **Bounded**: a child counts against `limit` from its start until its output is yielded;
///   the next item is pulled from `stream` only when one leaves.
/// - **Cancellation**: children run with the consumer's cancellation token (as it is at the
///   first poll) merged with the stream's own.
/// - **Panics**: the first child to panic, in time, cancels its siblings' token and no further
///   item is pulled (`stream` is dropped). The outputs before it in input order are still
///   yielded; at its turn, once every outstanding child has finished, its panic is resumed
///   from `poll_next`, and the stream has ended.
/// - **Dropped**: dropping the stream cancels the outstanding children's token and cancels
///   their tasks (each is dropped at its next suspension point): no orphans.
///
/// `Buffered` is `Unpin` when `stream` is, and `Send` when `stream` and `f` are.
///
/// # Panics
///
/// At once if `limit` is 0.
///
/// ```
/// use futures::StreamExt;
/// use std::time::Duration;
///
/// let items = futures::stream::iter([30u64, 10, 20]);
/// let slept = coro::stream::buffered(items, 2, |ms| async move {
///     coro::time::sleep(Duration::from_millis(ms)).await.unwrap();
///     ms
/// });
/// // Input order, although 10 finishes first.
/// assert_eq!(coro::block_wait(slept.collect::<Vec<_>>()), [30, 10, 20]);
/// ```
#[track_caller]
pub fn buffered<S, F, Fut>(stream: S, limit: usize, f: F) -> Buffered<S, F, Fut>
where
    S: Stream,
    F: FnMut(S::Item) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    assert!(
        limit > 0,
        "coro::stream::buffered: limit is 0, so no item could ever start; pass at least 1 (1 \
         runs the items one at a time)"
    );
    Buffered {
        stream: Some(stream),
        f,
        limit,
        next_index: 0,
        in_flight: None,
        done: false,
    }
}

/// The stream of [`buffered`]: `S` is the input stream, `F` the function that maps each item to
/// a child future, `Fut`, whose outputs are the items. A [`FusedStream`].
///
/// Its children are spawned on the executor of whoever polls it. Polled from a
/// [`block_wait`](crate::block_wait), that is the waiting thread, which runs them only while
/// it waits: consume the whole stream inside one `block_wait` (or in a task on a pool), as
/// below, rather than one `block_wait` per item.
///
/// ```
/// use futures::StreamExt;
///
/// let lengths = coro::stream::buffered(futures::stream::iter(["a", "bb", "ccc"]), 2, |s| async move {
///     s.len()
/// });
/// let pool = coro::ThreadPool::new(2).unwrap();
/// let all = coro::block_wait(coro::Task::new(lengths.collect::<Vec<_>>()).schedule_on(&pool));
/// assert_eq!(all, [1, 2, 3]);
/// ```
#[pin_project]
#[must_use = "streams do nothing unless polled"]
pub struct Buffered<S, F, Fut: Future> {
    /// The input, until it ends, or a child fails (no further item is pulled then).
    #[pin]
    stream: Option<S>,
    f: F,
    limit: usize,
    /// The index of the next item, in input order.
    next_index: usize,
    /// Made at the first poll, in the consumer's context.
    in_flight: Option<InFlight<Fut::Output>>,
    /// Every output was yielded (or the failure resumed): `None` from here on.
    done: bool,
}

/// A child task's outcome: its output, or its caught panic.
type Child<R> = JoinHandle<Result<R, PanicPayload>>;

/// The outstanding children and what they share.
struct InFlight<R> {
    /// The first failure in time; its source's token is part of the children's.
    failure: Arc<Failure>,
    /// Cancelled when the stream is dropped with children outstanding.
    dropped: CancellationSource,
    /// The children's token: the consumer's, `failure`'s and `dropped`'s.
    token: CancellationToken,
    /// The children not yet yielded, in input order, with their indices.
    queue: VecDeque<(usize, Child<R>)>,
    /// Once a failure reached the head: every failure seen while the rest finish, the head's
    /// first.
    failing: Option<Vec<(usize, JoinError)>>,
}

impl<R: Send + 'static> InFlight<R> {
    /// Starts in the current (the consumer's) context.
    fn start(limit: usize) -> Self {
        let failure = Failure::new();
        let dropped = CancellationSource::new();
        let token = CancellationToken::merge([failure.child_token(), dropped.token()]);
        InFlight {
            failure,
            dropped,
            token,
            queue: VecDeque::with_capacity(limit.min(64)),
            failing: None,
        }
    }

    /// Waits for every outstanding child, noting their failures; then gives the first failure
    /// in time (the head's if it was not recorded: its executor dropped it).
    fn poll_failing(&mut self, cx: &mut Context<'_>) -> Poll<(usize, JoinError)> {
        let failing = self.failing.as_mut().expect("a failure reached the head");
        self.queue
            .retain_mut(|(index, child)| match Pin::new(child).poll(cx) {
                Poll::Pending => true,
                Poll::Ready(outcome) => {
                    if let Err(error) = flatten(outcome) {
                        failing.push((*index, error));
                    }
                    false
                }
            });
        if !self.queue.is_empty() {
            return Poll::Pending;
        }
        let first = self.failure.first();
        let failing = self.failing.take().expect("a failure reached the head");
        // The head's failure comes first: it is the one when no other is recorded first.
        let first = failing
            .into_iter()
            .min_by_key(|(index, _)| Some(*index) != first);
        Poll::Ready(first.expect("the head's failure is listed"))
    }
}

impl<R> Drop for InFlight<R> {
    fn drop(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        // Children running right now see their token fire; every one is dropped at its next
        // suspension point (a plain drop of a `JoinHandle` would detach it instead).
        self.dropped.request_cancellation();
        for (_, child) in self.queue.drain(..) {
            child.cancel();
        }
    }
}

impl<S, F, Fut> Stream for Buffered<S, F, Fut>
where
    S: Stream,
    F: FnMut(S::Item) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    type Item = Fut::Output;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Fut::Output>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        let limit = *this.limit;
        let in_flight = this.in_flight.get_or_insert_with(|| InFlight::start(limit));
        if in_flight.failing.is_none() {
            // Start items while there is room, the input has some ready, and nothing failed.
            while in_flight.queue.len() < limit && in_flight.failure.first().is_none() {
                let Some(stream) = this.stream.as_mut().as_pin_mut() else {
                    break;
                };
                match stream.poll_next(cx) {
                    Poll::Ready(Some(item)) => {
                        let fut = (this.f)(item);
                        let index = *this.next_index;
                        *this.next_index += 1;
                        let child = spawn_guarded(
                            NAME,
                            index,
                            &in_flight.failure,
                            &in_flight.token,
                            |_| false,
                            fut,
                        );
                        in_flight.queue.push_back((index, child));
                    }
                    Poll::Ready(None) => this.stream.set(None),
                    Poll::Pending => break,
                }
            }
            if in_flight.failure.first().is_some() {
                // No further item will start: let go of the input now.
                this.stream.set(None);
            }
            let Some((index, head)) = in_flight.queue.front_mut() else {
                if this.stream.is_none() {
                    *this.done = true;
                    return Poll::Ready(None);
                }
                return Poll::Pending;
            };
            let index = *index;
            let outcome = ready!(Pin::new(head).poll(cx));
            in_flight.queue.pop_front();
            match flatten(outcome) {
                Ok(output) => return Poll::Ready(Some(output)),
                Err(error) => {
                    in_flight.failing = Some(vec![(index, error)]);
                    this.stream.set(None);
                }
            }
        }
        let (index, error) = ready!(in_flight.poll_failing(cx));
        *this.done = true;
        unwrap_child::<()>(NAME, index, Err(error));
        unreachable!("a failure resumes a panic")
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let outstanding = self.in_flight.as_ref().map_or(0, |f| f.queue.len());
        let failing = self.in_flight.as_ref().is_some_and(|f| f.failing.is_some());
        if failing {
            return (0, Some(0));
        }
        match &self.stream {
            None => (outstanding, Some(outstanding)),
            Some(stream) => {
                let (lower, upper) = stream.size_hint();
                let upper = upper.and_then(|upper| upper.checked_add(outstanding));
                (lower.saturating_add(outstanding), upper)
            }
        }
    }
}

impl<S, F, Fut> FusedStream for Buffered<S, F, Fut>
where
    S: Stream,
    F: FnMut(S::Item) -> Fut,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<S, F, Fut: Future> fmt::Debug for Buffered<S, F, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let outstanding = self.in_flight.as_ref().map_or(0, |f| f.queue.len());
        f.debug_struct("Buffered")
            .field("limit", &self.limit)
            .field("outstanding", &outstanding)
            .field("input_ended", &self.stream.is_none())
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}
