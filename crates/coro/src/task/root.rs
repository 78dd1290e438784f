//! The future a spawned task runs as on its executor: the task's body plus its executor, made
//! current for every poll so that code inside can find it (`current_executor`, `spawn`).
//!
//! Where a root's stack is published for task dumps is `trace/publish.rs`'s business: a root
//! only holds its [`RootTrace`] and enters it at each poll.

use super::context::enter_executor;
use super::lazy::{Framed, Task};
use crate::trace::Frame;
use crate::trace::frame::FrameNode;
use crate::trace::publish::RootTrace;
use coro_executor::{ExecutorHandle, JoinHandle};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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

    /// The node of [`root_frame`](Self::root_frame), if the body enters it as its outermost
    /// frame: linked as such when the root's trace cell is attached (see
    /// `FrameNode::link_outermost`).
    fn root_node(&self) -> Option<&FrameNode> {
        None
    }
}

impl<T> RootBody for Task<T> {
    fn root_frame(&self) -> &Frame {
        self.frame()
    }

    fn root_node(&self) -> Option<&FrameNode> {
        Some(self.frame_node())
    }
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
        unsafe { Pin::new_unchecked(&mut this.trace) }
            .enter(this.body.root_frame(), this.body.root_node());
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

    fn root_node(&self) -> Option<&FrameNode> {
        Some(self.0.frame_node())
    }
}

impl<F: Future> Future for FramedRoot<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the single field is structurally pinned.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll_framed(cx)
    }
}
