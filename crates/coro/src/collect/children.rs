//! What every collect shares: its children's join handles (cancelled, not detached, when the
//! collect is dropped), its own cancellation source, and the record of the first failure in time.

use crate::Task;
use crate::cancel::{CancellationSource, CancellationToken};
use coro_executor::{JoinError, JoinHandle, PanicPayload};
use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::Poll;

/// The collect's own cancellation source and the index of the child that failed first.
pub(crate) struct Failure {
    source: CancellationSource,
    /// The index of the first child to fail, or `NONE`.
    first: AtomicUsize,
}

/// No child has failed.
const NONE: usize = usize::MAX;

impl Failure {
    pub(crate) fn new() -> Arc<Failure> {
        Arc::new(Failure {
            source: CancellationSource::new(),
            first: AtomicUsize::new(NONE),
        })
    }

    /// A failure record to embed in a collect's own shared state, with a token of its source
    /// for the children: a recycled pair if this thread has one (see `recycle`).
    pub(super) fn unshared() -> (Failure, CancellationToken) {
        let (source, token) = SPARE_SOURCE.with(Cell::take).unwrap_or_else(|| {
            let source = CancellationSource::new();
            let token = source.token();
            (source, token)
        });
        let failure = Failure {
            source,
            first: AtomicUsize::new(NONE),
        };
        (failure, token)
    }

    /// Ends a collect's failure record: its source and `token` (the one `unshared` gave) are
    /// kept for this thread's next collect if nothing else observes them and nothing cancelled
    /// them.
    pub(super) fn recycle(self, token: CancellationToken) {
        if let Some(pair) = self.source.into_reusable(token) {
            // Dropped, not kept, if the thread is exiting (its locals are gone).
            let _ = SPARE_SOURCE.try_with(|spare| spare.set(Some(pair)));
        }
    }

    /// The token children run with: the caller's (the current task's) merged with the
    /// collect's own.
    pub(crate) fn child_token(&self) -> CancellationToken {
        CancellationToken::merge([crate::current_cancellation_token(), self.source.token()])
    }

    /// Records child `index` as failed; the first to do so cancels its siblings.
    ///
    /// A cancellation callback a child registered on its token may panic in there (it runs
    /// here, once every other reaction has run): the panic is caught and dropped (the panic
    /// hook has reported it). The child's failure stays the collect's first; unwinding from
    /// here would end the collect early when the child ran inline (dropping its siblings rather
    /// than awaiting them), or vanish with a driver task when it did not.
    pub(super) fn record(&self, index: usize) {
        if self
            .first
            .compare_exchange(NONE, index, AcqRel, Acquire)
            .is_ok()
        {
            let cancelled = catch_unwind(AssertUnwindSafe(|| self.source.request_cancellation()));
            if let Err(payload) = cancelled {
                let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            }
        }
    }

    /// The child that failed first, if any did.
    pub(crate) fn first(&self) -> Option<usize> {
        Some(self.first.load(Acquire)).filter(|&index| index != NONE)
    }
}

thread_local! {
    /// A collect's source (with its children's token) that nothing else observed and nobody
    /// cancelled, kept for the next collect on this thread: most collects never cancel, and a
    /// fresh source is an allocation and its initialisation, a large part of a collect of a
    /// few quick children.
    static SPARE_SOURCE: Cell<Option<(CancellationSource, CancellationToken)>> =
        const { Cell::new(None) };
}

/// Runs `fut`, catching a panic as `Err(payload)`; a panic, or an output that `is_failure`
/// says is a failure, is recorded in `failure` (if any) as child `index`'s.
pub(super) async fn guarded<F: Future>(
    index: usize,
    failure: Option<Arc<Failure>>,
    is_failure: fn(&F::Output) -> bool,
    fut: F,
) -> Result<F::Output, PanicPayload> {
    let mut fut = pin!(fut);
    let outcome = poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        },
    )
    .await;
    if outcome.as_ref().is_ok_and(|v| !is_failure(v)) {
        return outcome;
    }
    if let Some(failure) = failure {
        failure.record(index);
    }
    outcome
}

/// Spawns child `index` on the current executor, with `token`, guarded by `failure`.
pub(crate) fn spawn_guarded<F>(
    name: &'static str,
    index: usize,
    failure: &Arc<Failure>,
    token: &CancellationToken,
    is_failure: fn(&F::Output) -> bool,
    fut: F,
) -> JoinHandle<Result<F::Output, PanicPayload>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let body = guarded(index, Some(failure.clone()), is_failure, fut);
    // A static name: a per-child `format!` was a measurable part of each child's cost, and the
    // dump tree already shows which collect (the parent task) a child belongs to.
    crate::spawn(Task::new(body).named(name).with_cancellation(token.clone()))
}

/// The join handles of a collect's children, by input index. Dropping it cancels (drops) every
/// child not yet awaited to completion: a plain drop of a `JoinHandle` would detach it.
pub(super) struct Children<R> {
    handles: Vec<Option<JoinHandle<R>>>,
}

impl<R> Children<R> {
    pub(super) fn with_capacity(n: usize) -> Self {
        Children {
            handles: Vec::with_capacity(n),
        }
    }

    /// Adds the handle of the next child in input order.
    pub(super) fn push(&mut self, handle: JoinHandle<R>) {
        self.handles.push(Some(handle));
    }

    /// Sets the handle of child `index` (growing the set as needed).
    pub(super) fn insert(&mut self, index: usize, handle: JoinHandle<R>) {
        if self.handles.len() <= index {
            self.handles.resize_with(index + 1, || None);
        }
        self.handles[index] = Some(handle);
    }

    /// Polls child `index`'s handle; on completion the slot is emptied.
    pub(super) fn poll_child(
        &mut self,
        index: usize,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<R, JoinError>> {
        let slot = &mut self.handles[index];
        let handle = slot.as_mut().expect("each child is awaited once");
        let outcome = std::task::ready!(Pin::new(handle).poll(cx));
        *slot = None;
        Poll::Ready(outcome)
    }
}

impl<R> Drop for Children<R> {
    fn drop(&mut self) {
        for handle in self.handles.drain(..).flatten() {
            handle.cancel();
        }
    }
}

/// The outcome of a guarded child as a `JoinError` for a caught panic.
pub(crate) fn flatten<R>(
    outcome: Result<Result<R, PanicPayload>, JoinError>,
) -> Result<R, JoinError> {
    outcome.and_then(|caught| caught.map_err(JoinError::Panicked))
}

/// A child's value, resuming its panic; `what` names the collect in the message for a child
/// its executor dropped unfinished.
pub(crate) fn unwrap_child<R>(what: &str, index: usize, outcome: Result<R, JoinError>) -> R {
    match outcome {
        Ok(value) => value,
        Err(JoinError::Panicked(payload)) => std::panic::resume_unwind(payload),
        Err(JoinError::Cancelled) => panic!(
            "{what}: child {index} was dropped before it finished: its executor shut down while \
             the collect was waiting for it"
        ),
    }
}
