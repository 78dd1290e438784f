//! [`TaskRoot`]: what a layer above keeps in a task beside the future it spawns, and polls that
//! future through (coro's Task layer keeps its executor, trace cell, frame and context there).
//!
//! Rule: a spawn hands the engine values, never code to run during the spawn. The engine
//! moves the root and reads the future into the task's allocation itself; the root's code runs
//! only when the task is polled. A plain spawn's root is `()`, which adds nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The per-task state a layer above keeps inside the engine's task, beside the future it
/// spawned, and how the task polls that future: every poll of the task is a `poll_root`.
///
/// Hidden: it is how coro's Task layer spawns, through
/// [`ExecutorHandle::spawn_root`](crate::ExecutorHandle::spawn_root).
///
/// ```
/// use coro_executor::{TaskRoot, ThreadPool};
/// use std::future::Future;
/// use std::mem::ManuallyDrop;
/// use std::pin::Pin;
/// use std::task::{Context, Poll};
///
/// /// Adds its offset to the future's output.
/// struct Offset(u32);
///
/// impl<F: Future<Output = u32>> TaskRoot<F> for Offset {
///     fn poll_root(self: Pin<&mut Self>, future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<u32> {
///         future.poll(cx).map(|value| value + self.0)
///     }
/// }
///
/// let pool = ThreadPool::new(1).unwrap();
/// let future = ManuallyDrop::new(async { 2 });
/// // SAFETY: the future is read once into the task, and never used or dropped here again.
/// let join = unsafe { pool.handle().spawn_root(Offset(40), &*future) };
/// assert_eq!(futures::executor::block_on(join).unwrap(), 42);
/// ```
#[doc(hidden)]
pub trait TaskRoot<F: Future>: Send + 'static {
    /// Polls the task's future, with whatever this root makes current around it.
    fn poll_root(
        self: Pin<&mut Self>,
        future: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output>;
}

/// A plain spawn: nothing beside the future.
impl<F: Future> TaskRoot<F> for () {
    #[inline(always)]
    fn poll_root(
        self: Pin<&mut Self>,
        future: Pin<&mut F>,
        cx: &mut Context<'_>,
    ) -> Poll<F::Output> {
        future.poll(cx)
    }
}

/// A task's future with its root, as it lives in the task. The future is declared first, so
/// that it is dropped first: the root's state (a trace cell that snapshots read, the frame the
/// future's own frames hang under) outlives it.
pub(crate) struct Rooted<R, F> {
    future: F,
    root: R,
}

impl<R, F> Rooted<R, F> {
    /// The rooted future, the future read from `source`.
    ///
    /// # Safety
    ///
    /// `source` points at a live `F` that the caller owns and hands over: it must neither use
    /// nor drop it again.
    #[inline(always)]
    pub(crate) unsafe fn read(root: R, source: *const F) -> Self {
        Rooted {
            // SAFETY: the caller's contract: a live value, whose ownership moves here.
            future: unsafe { std::ptr::read(source) },
            root,
        }
    }
}

impl<R: TaskRoot<F>, F: Future> Future for Rooted<R, F> {
    type Output = F::Output;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: both fields are structurally pinned: `Rooted` never moves them, has no
        // `Drop` of its own, and is not `Unpin` unless both are.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `self` is pinned and both fields are structurally pinned (see above), so
        // neither moves while these pins live.
        let (root, future) = unsafe {
            (
                Pin::new_unchecked(&mut this.root),
                Pin::new_unchecked(&mut this.future),
            )
        };
        root.poll_root(future, cx)
    }
}
