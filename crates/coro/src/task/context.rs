//! What a running task can ask about itself: its executor, cancellation token, task-locals and
//! async stack frame, kept in thread-locals for exactly the duration of each poll.
//!
//! A [`TaskContext`] is immutable and cheap to clone (two optional `Arc`s, both `None` in the common
//! case); a child task captures its awaiter's context when it first starts (folly's
//! RequestContext), and a `scope` or `with_cancellation` makes a new one rather than mutating the
//! shared one, so a child can never leak a change back into its parent.

use crate::cancel::CancellationToken;
use coro_executor::ExecutorHandle;
use std::any::Any;
use std::cell::Cell;
use std::ptr;
use std::sync::Arc;

/// The inheritable part of a task's environment.
#[derive(Clone, Default)]
pub(crate) struct TaskContext {
    pub(crate) token: CancellationToken,
    pub(crate) locals: Locals,
}

/// The task-local values in scope: an immutable, shared list.
#[derive(Clone, Default)]
pub(crate) struct Locals(Option<Arc<Node>>);

struct Node {
    key: usize,
    value: Box<dyn Any + Send + Sync>,
    next: Locals,
}

impl Locals {
    /// Whether both are the same list (not just equal values).
    pub(crate) fn ptr_eq(&self, other: &Locals) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    pub(crate) fn get(&self, key: usize) -> Option<&(dyn Any + Send + Sync)> {
        let mut node = self.0.as_deref();
        while let Some(n) = node {
            if n.key == key {
                return Some(n.value.as_ref());
            }
            node = n.next.0.as_deref();
        }
        None
    }

    pub(crate) fn with(&self, key: usize, value: Box<dyn Any + Send + Sync>) -> Locals {
        Locals(Some(Arc::new(Node {
            key,
            value,
            next: self.clone(),
        })))
    }
}

thread_local! {
    /// The context of the code being polled on this thread, if inside a coro task.
    static CONTEXT: Cell<*const TaskContext> = const { Cell::new(ptr::null()) };
    /// The executor the polled root task belongs to.
    static EXECUTOR: Cell<*const ExecutorHandle> = const { Cell::new(ptr::null()) };
}

/// Runs `f` with the current context, if any.
#[inline]
pub(crate) fn with_context<R>(f: impl FnOnce(Option<&TaskContext>) -> R) -> R {
    // `f` runs outside the thread-local's closure: inside it, a larger `f` kept `LocalKey::with`
    // out of line, a call through the key's accessor on every Task level.
    let ctx = CONTEXT.with(Cell::get);
    // SAFETY: `CONTEXT` is only ever set by `enter_context`, whose guard restores the previous
    // value before the pointed-to `TaskContext` (owned by the future being polled, which is pinned
    // or otherwise outlives that poll) can be dropped or moved; `f` runs within this call.
    f(unsafe { ctx.as_ref() })
}

/// A clone of the current context, or the default one outside any task.
pub(crate) fn current_context() -> TaskContext {
    with_context(|c| c.cloned().unwrap_or_default())
}

impl TaskContext {
    /// True for the context of a task with no token and no task-locals: everything that reads
    /// the context treats it exactly as no context at all.
    #[inline]
    fn is_empty(&self) -> bool {
        self.token == CancellationToken::none() && self.locals.ptr_eq(&Locals::default())
    }
}

/// Makes `ctx` current until the guard drops, unless the current context is the same (equal
/// token and locals, or no context and an empty one), in which case there is nothing to switch
/// and nothing to restore.
#[inline]
pub(crate) fn enter_context_if_changed(ctx: &TaskContext) -> Option<ContextGuard> {
    let same = with_context(|current| match current {
        Some(current) => current.token == ctx.token && current.locals.ptr_eq(&ctx.locals),
        None => ctx.is_empty(),
    });
    (!same).then(|| enter_context(ctx))
}

/// Makes `ctx` current until the guard drops (also on unwind).
#[inline]
pub(crate) fn enter_context(ctx: &TaskContext) -> ContextGuard {
    let prev = CONTEXT.with(|c| c.replace(ctx));
    ContextGuard { prev }
}

pub(crate) struct ContextGuard {
    prev: *const TaskContext,
}

impl Drop for ContextGuard {
    #[inline]
    fn drop(&mut self) {
        CONTEXT.with(|c| c.set(self.prev));
    }
}

/// The executor of the current task: the root task's, or else the pool whose worker this is.
pub(crate) fn current_executor() -> Option<ExecutorHandle> {
    with_current_executor(|executor| executor.cloned())
}

/// Runs `f` with the current executor (see [`current_executor`]), lent rather than cloned.
pub(crate) fn with_current_executor<R>(f: impl FnOnce(Option<&ExecutorHandle>) -> R) -> R {
    let root = EXECUTOR.with(Cell::get);
    // SAFETY: as for `CONTEXT`: set only by `enter_executor`, restored before the handle it
    // points to (owned by the root task being polled) can go away; `f` runs within this call.
    match unsafe { root.as_ref() } {
        Some(root) => f(Some(root)),
        None => ExecutorHandle::with_current_pool(f),
    }
}

/// Makes `executor` the current executor until the guard drops.
#[inline]
pub(crate) fn enter_executor(executor: &ExecutorHandle) -> ExecutorGuard {
    let prev = EXECUTOR.with(|e| e.replace(executor));
    ExecutorGuard { prev }
}

pub(crate) struct ExecutorGuard {
    prev: *const ExecutorHandle,
}

impl Drop for ExecutorGuard {
    #[inline]
    fn drop(&mut self) {
        EXECUTOR.with(|e| e.set(self.prev));
    }
}
