//! What the Task layer keeps in a spawned task beside its body, inside the engine's task: the
//! executor made current for every poll (so that code inside can find it: `current_executor`,
//! `spawn`), the trace cell where the task's stack is published, and for a plain future its
//! frame and context. coro builds it, the engine allocates the task with it and polls the body
//! through it ([`TaskRoot`]): a spawn calls down and nothing calls back up.
//!
//! Where a root's stack is published for task dumps is `trace/root_trace.rs`'s business: a root
//! only holds its [`RootTrace`] and enters it at each poll.

use super::context::{TaskContext, current_context, enter_executor};
use super::lazy::{Task, poll_in_frame};
use crate::trace::Frame;
use crate::trace::frame_chain::FrameNode;
use crate::trace::root_trace::RootTrace;
use coro_executor::{ExecutorHandle, JoinHandle, TaskRoot};
use std::borrow::Cow;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The root of a task whose body carries its own frame (a `Task`, a collect's driven child):
/// its executor and where its async stack is published for task dumps.
pub(crate) struct Root<E> {
    /// The executor to make current while polling: an [`ExecutorHandle`], or [`OnPool`] for a
    /// thread pool's task, whose workers know their pool already. (Holding a handle per pool
    /// task would cost every task 16 bytes, bump the pool's reference count on the spawning
    /// worker and drop it on whichever worker completes the task: a contended cache line on
    /// every spawn.)
    executor: E,
    trace: RootTrace,
}

/// The root of a spawned plain future: a [`Root`]'s state plus the future's frame (named after
/// its type) and the context it inherited from its spawner, kept beside the future rather than
/// wrapped around it.
pub(crate) struct FramedRoot<E> {
    executor: E,
    trace: RootTrace,
    frame: FrameNode,
    ctx: TaskContext,
}

/// A thread pool's task needs no executor of its own in its root (see [`Root::executor`]).
pub(crate) struct OnPool;

/// What a root makes current while it polls its body.
pub(crate) trait RootExecutor: Send + 'static {
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

/// A root task's body that carries its frame, which dumps show as the task's name.
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

impl<F: RootBody, E: RootExecutor> TaskRoot<F> for Root<E> {
    fn poll_root(self: Pin<&mut Self>, body: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `trace` is pinned (the engine keeps the root in place until the task's
        // future is dropped, and snapshots read the cell through a pointer until then), and
        // only ever reached through `RootTrace::enter`'s `Pin`; the executor is plain data.
        let this = unsafe { self.get_unchecked_mut() };
        let _executor = this.executor.enter();
        // SAFETY: `this` is pinned, so `trace` stays in place (the engine keeps the root there
        // until the task's future is dropped); the root frame is in the pinned body, and never
        // changes.
        unsafe { Pin::new_unchecked(&mut this.trace) }.enter(body.root_frame(), body.root_node());
        body.poll(cx)
    }
}

impl<F: Future, E: RootExecutor> TaskRoot<F> for FramedRoot<E> {
    fn poll_root(
        self: Pin<&mut Self>,
        future: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        // SAFETY: `trace` and `frame` are pinned (the engine keeps the root in place until the
        // task's future is dropped; snapshots read the cell, the future's own frames link under
        // `frame`, both through pointers until then) and only reached through `Pin`s made
        // here; the executor and the context are plain data.
        let this = unsafe { self.get_unchecked_mut() };
        let _executor = this.executor.enter();
        // SAFETY: `this` is pinned, so `trace` stays in place until the task's future is
        // dropped; `frame` is pinned beside it.
        unsafe { Pin::new_unchecked(&mut this.trace) }.enter(&this.frame.frame, Some(&this.frame));
        poll_in_frame(&this.frame, Some(&this.ctx), future, cx)
    }
}

/// Spawns `body` (a `Task` whose context is captured, or a collect's driven child) as a root
/// task of `executor`, traced as `trace` says. A pool's task and another executor's have
/// roots of two types, so that the pool's carries no executor handle.
pub(crate) fn spawn_root<F>(
    executor: &ExecutorHandle,
    trace: RootTrace,
    body: F,
) -> JoinHandle<F::Output>
where
    F: RootBody + Send + 'static,
    F::Output: Send + 'static,
{
    let body = ManuallyDrop::new(body);
    if executor.is_thread_pool() {
        let root = Root {
            executor: OnPool,
            trace,
        };
        // SAFETY: `body` is read into the task, and never used or dropped here again (it is
        // in a `ManuallyDrop`).
        return unsafe { executor.spawn_root(root, &*body) };
    }
    let root = Root {
        executor: executor.clone(),
        trace,
    };
    // SAFETY: `body` is read into the task, and never used or dropped here again (it is in a
    // `ManuallyDrop`).
    unsafe { executor.spawn_root(root, &*body) }
}

/// Spawns `future` as a root task of `executor`, in a frame named `name` created at
/// `location`, with the context of the caller.
pub(crate) fn spawn_framed<F>(
    executor: &ExecutorHandle,
    future: F,
    name: &'static str,
    location: &'static Location<'static>,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // The future stays where it is until the engine reads it into the task's allocation: a
    // future over 128 bytes is copied by a `memcpy` call at each layer it is moved through.
    let future = ManuallyDrop::new(future);
    let frame = FrameNode::new(Frame::new(Cow::Borrowed(name), location));
    let (trace, ctx) = (RootTrace::new(), current_context());
    if executor.is_thread_pool() {
        let root = FramedRoot {
            executor: OnPool,
            trace,
            frame,
            ctx,
        };
        // SAFETY: `future` is read into the task, and never used or dropped here again (it is
        // in a `ManuallyDrop`).
        return unsafe { executor.spawn_root(root, &*future) };
    }
    let root = FramedRoot {
        executor: executor.clone(),
        trace,
        frame,
        ctx,
    };
    // SAFETY: `future` is read into the task, and never used or dropped here again (it is in
    // a `ManuallyDrop`).
    unsafe { executor.spawn_root(root, &*future) }
}
