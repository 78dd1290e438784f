//! [`collect_all_unordered`]: every child's output as a stream, in completion order.

use super::children::{Children, Failure, flatten, spawn_guarded, unwrap_child};
use coro_executor::JoinError;
use coro_executor::PanicPayload;
use futures_core::Stream;
use std::collections::VecDeque;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

const NAME: &str = "collect_all_unordered";

/// Runs every future of `iter` concurrently and yields their outputs as they finish, in
/// completion order (folly's `collectAllUnordered` / `makeUnorderedAsyncGenerator`).
///
/// Lazy: the children are spawned on the current executor at the first poll, each named
/// `collect_all_unordered[index]`, with a cancellation token merged from the polling task's and
/// the collect's own. The stream ends once every child's output has been yielded.
///
/// Dropping the stream drops every unfinished child (no orphans) and every output not yet
/// yielded.
///
/// # Panics
///
/// The first child to panic, in time, cancels its siblings' token. Nothing that finished is
/// lost: every output completed before the failure, and every one the cancelled siblings still
/// return, is yielded first, in completion order; once every child has finished and its output
/// has been yielded, that panic is resumed from `poll_next`. The stream then ends.
///
/// ```
/// use futures::StreamExt;
/// use std::time::Duration;
///
/// let mut stream = coro::collect_all_unordered([60u64, 10, 30].map(|ms| async move {
///     coro::time::sleep(Duration::from_millis(ms)).await.unwrap();
///     ms
/// }));
/// let order = coro::block_wait(async move {
///     let mut order = Vec::new();
///     while let Some(ms) = stream.next().await {
///         order.push(ms);
///     }
///     order
/// });
/// assert_eq!(order, [10, 30, 60]);
/// ```
pub fn collect_all_unordered<I, T>(iter: I) -> impl Stream<Item = T> + Send + Unpin + 'static
where
    I: IntoIterator,
    I::Item: IntoFuture<Output = T>,
    <I::Item as IntoFuture>::IntoFuture: Send + 'static,
    T: Send + 'static,
{
    let futs: Vec<_> = iter.into_iter().map(IntoFuture::into_future).collect();
    Unordered {
        unstarted: Some(futs),
        failure: Failure::new(),
        finished: Arc::new(AtomicUsize::new(0)),
        children: Children::with_capacity(0),
        running: Vec::new(),
        ready: VecDeque::new(),
        failed: Vec::new(),
        done: false,
    }
}

/// The stream of [`collect_all_unordered`].
struct Unordered<F: Future> {
    /// The children, until the first poll spawns them.
    unstarted: Option<Vec<F>>,
    failure: Arc<Failure>,
    /// Stamps each output with its completion order.
    finished: Arc<AtomicUsize>,
    children: Children<Result<(F::Output, usize), PanicPayload>>,
    /// The indices of the children not yet finished.
    running: Vec<usize>,
    /// Outputs not yet yielded, with their completion order, earliest first.
    ready: VecDeque<(usize, F::Output)>,
    /// The children that panicked or were dropped by their executor.
    failed: Vec<(usize, JoinError)>,
    done: bool,
}

// No field is ever pinned: the children run as spawned tasks, behind join handles.
impl<F: Future> Unpin for Unordered<F> {}

impl<F> Unordered<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn start(&mut self, futs: Vec<F>) {
        let token = self.failure.child_token();
        self.children = Children::with_capacity(futs.len());
        for (index, fut) in futs.into_iter().enumerate() {
            let finished = self.finished.clone();
            let body = async move {
                let output = fut.await;
                (output, finished.fetch_add(1, Ordering::SeqCst))
            };
            self.children.push(spawn_guarded(
                NAME,
                index,
                &self.failure,
                &token,
                |_| false,
                body,
            ));
            self.running.push(index);
        }
    }

    /// Ends the stream once every child has finished and every output was yielded, resuming
    /// the first failure if any.
    fn finish(&mut self) -> Poll<Option<F::Output>> {
        self.done = true;
        let failed = std::mem::take(&mut self.failed);
        let first = self.failure.first();
        if let Some((index, error)) = failed
            .into_iter()
            .min_by_key(|(index, _)| Some(*index) != first)
        {
            unwrap_child::<()>(NAME, index, Err(error));
        }
        Poll::Ready(None)
    }
}

impl<F> Stream for Unordered<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Item = F::Output;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(futs) = this.unstarted.take() {
            this.start(futs);
        }
        let before = this.ready.len();
        let (children, ready, failed) = (&mut this.children, &mut this.ready, &mut this.failed);
        this.running
            .retain(|&index| match children.poll_child(index, cx) {
                Poll::Pending => true,
                Poll::Ready(outcome) => {
                    match flatten(outcome) {
                        Ok((output, order)) => ready.push_back((order, output)),
                        Err(error) => failed.push((index, error)),
                    }
                    false
                }
            });
        if this.ready.len() > before {
            this.ready
                .make_contiguous()
                .sort_by_key(|(order, _)| *order);
        }
        // After a failure too: every finished output is yielded before the failure is resumed
        // (by `finish`, once nothing runs and nothing is left to yield).
        if let Some((_, output)) = this.ready.pop_front() {
            return Poll::Ready(Some(output));
        }
        if this.running.is_empty() {
            return this.finish();
        }
        Poll::Pending
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let unstarted = self.unstarted.as_ref().map_or(0, Vec::len);
        let upper = self.ready.len() + self.running.len() + unstarted;
        (0, Some(upper))
    }
}
