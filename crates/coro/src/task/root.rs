//! The future a spawned task runs as on its executor: the task's body plus its executor, made
//! current for every poll so that code inside can find it (`current_executor`, `spawn`).
//!
//! Built with `--cfg coro_untraced`, roots carry no trace cell and publish nothing: that build
//! exists only to measure what tracing costs (benches/README.md), and is not a supported
//! configuration (task dumps then show no frames).

use super::context::enter_executor;
use super::lazy::Framed;
use crate::trace::Frame;
use coro_executor::{ExecutorHandle, JoinHandle};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

#[cfg(not(coro_untraced))]
pub(crate) use traced::{RootTrace, note_relinked, publish_suspension, without_publishing};
#[cfg(coro_untraced)]
pub(crate) use untraced::{RootTrace, publish_suspension, without_publishing};

/// The future a spawned task runs as: its body, its executor, and where its async stack is
/// published for task dumps.
pub(crate) struct Root<F, E> {
    /// The executor to make current while polling: an [`ExecutorHandle`], or [`OnPool`] for a
    /// thread pool's task, whose workers know their pool already. (Holding a handle per pool
    /// task would cost every task 16 bytes, bump the pool's reference count on the spawning
    /// worker and drop it on whichever worker completes the task: a contended cache line on
    /// every spawn.)
    executor: E,
    trace: RootTrace,
    body: F,
}

/// A thread pool's task needs no executor of its own in its root (see [`Root::executor`]).
pub(crate) struct OnPool;

/// What a root makes current while it polls its body.
pub(crate) trait RootExecutor {
    /// Makes the executor current until the guard drops (`None`: nothing to make current).
    fn enter(&self) -> Option<super::context::ExecutorGuard>;
}

impl RootExecutor for OnPool {
    #[inline]
    fn enter(&self) -> Option<super::context::ExecutorGuard> {
        None
    }
}

impl RootExecutor for ExecutorHandle {
    #[inline]
    fn enter(&self) -> Option<super::context::ExecutorGuard> {
        Some(enter_executor(self))
    }
}

/// A root task's body: a future with the frame it runs as, which dumps show as the task's name.
pub(crate) trait RootBody: Future {
    /// The body's outermost frame: it must not change once the body is spawned.
    fn root_frame(&self) -> &Frame;
}

impl<F: RootBody, E: RootExecutor> Future for Root<F, E> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `body` is structurally pinned (never moved out; `Root` has no Drop impl);
        // `trace` is pinned too (the executor reads it through a pointer until the future is
        // dropped), and only ever reached through `RootTrace::enter`'s `Pin`; the executor is
        // plain data.
        let this = unsafe { self.get_unchecked_mut() };
        let _executor = this.executor.enter();
        // SAFETY: as above; the root frame is in the pinned body, and never changes.
        unsafe { Pin::new_unchecked(&mut this.trace) }.enter(this.body.root_frame());
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(&mut this.body) }.poll(cx)
    }
}

/// Spawns the body `make` returns (a `Task` or a [`Framed`] future whose context is captured)
/// as a root task of `executor`, traced as the [`RootTrace`] it returns with it says.
///
/// The root is made in place in the task's allocation: a root with its trace cell is well over
/// the 128 bytes that the compiler still copies inline, and moving it through the spawn's layers
/// cost a `memcpy` call at each of them (a sixth of `chained_spawn`'s time). A pool's task and
/// another executor's are roots of two types, so that the pool's carries no executor handle.
pub(crate) fn spawn_root<F>(
    executor: &ExecutorHandle,
    make: impl FnOnce() -> (RootTrace, F),
) -> JoinHandle<F::Output>
where
    F: RootBody + Send + 'static,
    F::Output: Send + 'static,
{
    if executor.is_thread_pool() {
        return executor.spawn_with(move || {
            let (trace, body) = make();
            Root {
                executor: OnPool,
                trace,
                body,
            }
        });
    }
    let keep = executor.clone();
    executor.spawn_with(move || {
        let (trace, body) = make();
        Root {
            executor: keep,
            trace,
            body,
        }
    })
}

/// A framed future as a root body.
pub(crate) struct FramedRoot<F>(pub(crate) Framed<F>);

impl<F: Future> RootBody for FramedRoot<F> {
    fn root_frame(&self) -> &Frame {
        self.0.frame()
    }
}

impl<F: Future> Future for FramedRoot<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the single field is structurally pinned.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll_framed(cx)
    }
}

#[cfg(not(coro_untraced))]
mod traced {
    use crate::trace::frame::{
        Frame, FrameNode, current_fingerprint, has_continuation, inside_frame, walk_current,
    };
    use coro_executor::trace::{self, TraceCell};
    use std::pin::Pin;
    use std::ptr;

    pub(crate) use coro_executor::trace::{note_relinked, without_publishing};

    /// A root task's trace cell, attached to its executor task on the first poll. Its stack is
    /// published by the innermost frame that suspends in each poll ([`publish_suspension`]);
    /// the per-poll state of that publication lives in the executor's task header, which is
    /// made current for every poll anyway.
    pub(crate) struct RootTrace {
        cell: TraceCell,
    }

    impl RootTrace {
        /// The trace of a task spawned by the task running on this thread (its parent in
        /// dumps).
        #[inline]
        pub(crate) fn new() -> RootTrace {
            RootTrace {
                cell: TraceCell::new(),
            }
        }

        /// The trace of a task that task `parent` awaits (a collect's driven child): dumps
        /// show it under `parent`, its stack continued into the parent's.
        #[inline]
        pub(crate) fn awaited_by(parent: Option<u64>) -> RootTrace {
            RootTrace {
                cell: TraceCell::awaited_by(parent),
            }
        }

        /// Prepares this poll's publication: attaches the cell on the first poll, and makes a
        /// root polled inside another task's poll (by an inline executor) check its whole
        /// stack, since the frames of that task are on it too and may have changed without
        /// any of its own being relinked.
        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>, root: &Frame) {
            let this = self.into_ref().get_ref();
            if !this.cell.is_attached() {
                // SAFETY: `cell` and `root` (the body's frame) are pinned inside the root
                // future (see `Root::poll`), so they stay in place until the future is dropped,
                // and a spawned body's frame is never renamed. (It is polled inside the executor
                // task it was spawned as, so there is a task to attach to; a root polled by
                // hand, in a unit test, just has none.)
                unsafe { trace::attach(&this.cell, root) };
            }
            if inside_frame() {
                note_relinked();
            }
        }
    }

    /// Called by a task frame that is about to return `Pending`, while it is still the
    /// innermost frame: the first such frame in a root's poll is the innermost suspension
    /// point, so it publishes the stack from there, unless the stack cannot have changed since
    /// the last publication (see [`trace::publish_suspension`]).
    #[inline]
    pub(crate) fn publish_suspension(innermost: &FrameNode) {
        trace::publish_suspension(
            ptr::from_ref(innermost).cast(),
            innermost.is_outermost() && !has_continuation(),
            current_fingerprint,
            current_frames,
        );
    }

    /// Copies the stack being polled on this thread (only needed when it changed).
    fn current_frames() -> Vec<Frame> {
        let mut frames = Vec::new();
        walk_current(|f| frames.push(f.clone()));
        frames
    }
}

/// Tracing compiled out, for measuring its cost: the same interface, doing nothing.
#[cfg(coro_untraced)]
mod untraced {
    use crate::trace::frame::Frame;
    use std::pin::Pin;

    pub(crate) struct RootTrace;

    impl RootTrace {
        pub(crate) fn new() -> RootTrace {
            RootTrace
        }

        pub(crate) fn awaited_by(_parent: Option<u64>) -> RootTrace {
            RootTrace
        }

        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>, _root: &Frame) {}
    }

    #[inline]
    pub(crate) fn publish_suspension(_innermost: &crate::trace::frame::FrameNode) {}

    pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}
