//! The future a spawned task runs as on its executor: the task's body plus its executor, made
//! current for every poll so that code inside can find it (`current_executor`, `spawn`).

use super::context::enter_executor;
use super::task::Framed;
use crate::trace::frame::{Frame, current_fingerprint, walk_current};
use coro_executor::trace::{TraceCell, attach};
use coro_executor::{ExecutorHandle, JoinHandle};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::task::{Context, Poll};

/// The future a spawned task runs as: its body, its executor, and where its async stack is
/// published for task dumps.
pub(crate) struct Root<F> {
    /// The executor to make current while polling; `None` on a thread pool, whose workers know
    /// their pool already. (Holding a handle per task would bump the pool's reference count on
    /// the spawning worker and drop it on whichever worker completes the task: a contended cache
    /// line on every spawn.)
    executor: Option<ExecutorHandle>,
    trace: TraceCell,
    attached: bool,
    body: F,
}

thread_local! {
    /// The trace cell of the root being polled here, until the innermost suspending frame has
    /// published its stack for this poll (then null).
    static PUBLISH_TO: Cell<*const TraceCell> = const { Cell::new(ptr::null()) };
}

impl<F: Future> Future for Root<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `body` is structurally pinned (never moved out; `Root` has no Drop impl);
        // `trace` never moves either (the executor reads it through a pointer until the future
        // is dropped); the other fields are plain data.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.attached {
            // SAFETY: `trace` is a field of this pinned future (see above), so it stays in place
            // until the future is dropped.
            this.attached = unsafe { attach(&this.trace) };
        }
        let _executor = this.executor.as_ref().map(enter_executor);
        let previous = PUBLISH_TO.with(|p| p.replace(&this.trace));
        // SAFETY: as above.
        let poll = unsafe { Pin::new_unchecked(&mut this.body) }.poll(cx);
        PUBLISH_TO.with(|p| p.set(previous));
        poll
    }
}

/// Called by a task frame that is about to return `Pending`, while it is still the innermost
/// frame: the first such frame in a root's poll is the innermost suspension point, so it
/// publishes the stack from there (skipped when the chain is the one already published).
#[inline]
pub(crate) fn publish_suspension() {
    let cell = PUBLISH_TO.with(|p| p.replace(ptr::null()));
    // SAFETY: `PUBLISH_TO` points at the `TraceCell` of the root being polled further up this
    // thread's stack (set and restored around that poll), which is alive and pinned.
    if let Some(cell) = unsafe { cell.as_ref() } {
        cell.publish(current_fingerprint(), || {
            let mut frames = Vec::new();
            walk_current(|f| frames.push(f.clone()));
            frames
        });
    }
}

/// Spawns `body` (a `Task` or a [`Framed`] future whose context is already captured) as a root
/// task of `executor`; `frame` is its outermost frame, named in task dumps.
pub(crate) fn spawn_root<F>(
    executor: &ExecutorHandle,
    frame: Frame,
    body: F,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    executor.spawn(root(executor, frame, body))
}

/// [`spawn_root`], shown in dumps under task `parent` rather than as a root of its own.
pub(crate) fn spawn_root_under<F>(
    executor: &ExecutorHandle,
    frame: Frame,
    body: F,
    parent: Option<u64>,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut root = root(executor, frame.clone(), body);
    root.trace = TraceCell::with_parent(frame, parent);
    executor.spawn(root)
}

/// Runs `f`, an inline poll of a child that will move to a task of its own if it suspends,
/// with publication off: the child's suspension is not where the root waits, so it must not
/// publish its stack as the root's, nor use up the root's one publication of this poll.
pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(*const TraceCell);
    impl Drop for Restore {
        fn drop(&mut self) {
            PUBLISH_TO.with(|p| p.set(self.0));
        }
    }
    let _restore = Restore(PUBLISH_TO.with(|p| p.replace(ptr::null())));
    f()
}

fn root<F>(executor: &ExecutorHandle, frame: Frame, body: F) -> Root<F> {
    let trace = TraceCell::new(frame);
    let keep = (!executor.is_thread_pool()).then(|| executor.clone());
    Root {
        executor: keep,
        trace,
        attached: false,
        body,
    }
}

/// A framed future as a root body.
pub(crate) struct FramedRoot<F>(pub(crate) Framed<F>);

impl<F: Future> Future for FramedRoot<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the single field is structurally pinned.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll_framed(cx)
    }
}
