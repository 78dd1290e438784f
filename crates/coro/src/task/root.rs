//! The future a spawned task runs as on its executor: the task's body plus its executor, made
//! current for every poll so that code inside can find it (`current_executor`, `spawn`).
//!
//! Built with `--cfg coro_untraced`, roots carry no trace cell and publish nothing: that build
//! exists only to measure what tracing costs (benches/README.md), and is not a supported
//! configuration (task dumps then show no frames).

use super::context::enter_executor;
use super::task::Framed;
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
pub(crate) struct Root<F> {
    /// The executor to make current while polling; `None` on a thread pool, whose workers know
    /// their pool already. (Holding a handle per task would bump the pool's reference count on
    /// the spawning worker and drop it on whichever worker completes the task: a contended cache
    /// line on every spawn.)
    executor: Option<ExecutorHandle>,
    trace: RootTrace,
    body: F,
}

impl<F: Future> Future for Root<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `body` is structurally pinned (never moved out; `Root` has no Drop impl);
        // `trace` is pinned too (the executor reads it through a pointer until the future is
        // dropped), and only ever reached through `RootTrace::enter`'s `Pin`; the executor is
        // plain data.
        let this = unsafe { self.get_unchecked_mut() };
        let _executor = this.executor.as_ref().map(enter_executor);
        // SAFETY: as above.
        let _publishing = unsafe { Pin::new_unchecked(&mut this.trace) }.enter();
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(&mut this.body) }.poll(cx)
    }
}

/// Spawns the body `make` returns (a `Task` or a [`Framed`] future whose context is captured)
/// as a root task of `executor`, traced as the [`RootTrace`] it returns with it says.
///
/// The root is made in place in the task's allocation: a root with its trace cell is well over
/// the 128 bytes that the compiler still copies inline, and moving it through the spawn's layers
/// cost a `memcpy` call at each of them (a sixth of `chained_spawn`'s time).
pub(crate) fn spawn_root<F>(
    executor: &ExecutorHandle,
    make: impl FnOnce() -> (RootTrace, F),
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let keep = (!executor.is_thread_pool()).then(|| executor.clone());
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

impl<F: Future> Future for FramedRoot<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the single field is structurally pinned.
        unsafe { self.map_unchecked_mut(|s| &mut s.0) }.poll_framed(cx)
    }
}

#[cfg(not(coro_untraced))]
mod traced {
    use crate::trace::frame::{Frame, FrameNode, current_fingerprint, inside_frame, walk_current};
    use coro_executor::trace::{TraceCell, attach};
    use std::cell::Cell;
    use std::pin::Pin;
    use std::ptr;

    thread_local! {
        /// Where a suspension on this thread publishes its stack: the address of the
        /// [`RootTrace`] of the root being polled here, until the innermost suspending frame
        /// has published (then 0); or'ed with [`RELINKED`] once a frame has been entered under
        /// another awaiter than at its previous poll, which may have changed the stack.
        static PUBLISH_TO: Cell<usize> = const { Cell::new(0) };
    }

    /// The bit of [`PUBLISH_TO`] that says a frame was relinked (a `RootTrace` is aligned to
    /// 8, so its address never has it).
    const RELINKED: usize = 1;

    /// [`RootTrace::last`] when the next suspension must look at the whole stack.
    const UNKNOWN: usize = 0;
    /// [`RootTrace::last`] before the first poll, which attaches the cell.
    const UNATTACHED: usize = 1;

    /// A root task's trace cell, attached to its executor task on the first poll.
    ///
    /// Most suspensions happen where the previous one did, in the same frames; recognising
    /// that is what keeps tracing cheap. The stack cannot have changed when the innermost
    /// suspending frame is the one last published and no frame was entered under another
    /// awaiter than at its previous poll: every frame on the stack is entered in each poll, a
    /// frame that is new (even at a finished one's address) or renamed counts as relinked,
    /// and the innermost frame and its chain of awaiters then are what they were. Otherwise
    /// the cell compares the stack's content with what it holds, and copies it only if it
    /// differs.
    pub(crate) struct RootTrace {
        cell: TraceCell,
        /// The address of the innermost frame of the stack last published, if nothing since
        /// can have changed it; else [`UNKNOWN`] (or [`UNATTACHED`]).
        last: Cell<usize>,
    }

    impl RootTrace {
        /// The trace of a task whose outermost frame is `frame`, spawned by the task running
        /// on this thread (its parent in dumps).
        pub(crate) fn new(frame: Frame) -> RootTrace {
            RootTrace {
                cell: TraceCell::new(frame),
                last: Cell::new(UNATTACHED),
            }
        }

        /// The trace of a task shown in dumps under task `parent` rather than the spawner.
        pub(crate) fn under(frame: Frame, parent: Option<u64>) -> RootTrace {
            RootTrace {
                cell: TraceCell::with_parent(frame, parent),
                last: Cell::new(UNATTACHED),
            }
        }

        /// Attaches the cell (first poll) and makes this root where this poll's suspension
        /// publishes, until the guard drops, also on unwind: a panicking body must not leave
        /// this thread pointing at a root that is about to be freed.
        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>) -> Publishing<'_> {
            let this = self.into_ref().get_ref();
            if this.last.get() == UNATTACHED {
                this.attach();
            }
            // A root polled inside another task's poll (by an inline executor) has that task's
            // frames on its stack too, and those may have changed without any of its own
            // being relinked.
            let relinked = if inside_frame() { RELINKED } else { 0 };
            let target = ptr::from_ref(this) as usize | relinked;
            Publishing {
                prev: PUBLISH_TO.with(|p| p.replace(target)),
                root: this,
            }
        }

        #[inline]
        fn attach(&self) {
            // SAFETY: `cell` is pinned inside the root future (see `Root::poll`), so it stays
            // in place until the future is dropped. (It is polled inside the executor task it
            // was spawned as, so there is a task to attach to; a root polled by hand, in a
            // unit test, just has none.)
            unsafe { attach(&self.cell) };
            self.last.set(UNKNOWN);
        }

        /// Publishes the stack whose innermost frame is `innermost`, being polled on this
        /// thread, unless its content is what the cell holds already.
        #[inline(never)]
        fn publish(&self, innermost: usize) {
            self.last.set(innermost);
            self.cell.publish(current_fingerprint(), current_frames);
        }
    }

    /// Restores the previous publication target when a root's poll ends.
    pub(crate) struct Publishing<'a> {
        prev: usize,
        root: &'a RootTrace,
    }

    impl Drop for Publishing<'_> {
        #[inline]
        fn drop(&mut self) {
            let target = PUBLISH_TO.with(|p| p.replace(self.prev));
            if target & RELINKED != 0 {
                // A frame was relinked after this poll published (a task handed to another
                // awaiter, or a new one where a finished one was): the published stack may be
                // stale, so the next suspension must not trust `last`.
                self.root.last.set(UNKNOWN);
            }
        }
    }

    /// Called by [`FrameNode::enter`] when the frame is entered under another awaiter than at
    /// its previous poll (or for the first time).
    #[inline]
    pub(crate) fn note_relinked() {
        PUBLISH_TO.with(|p| p.set(p.get() | RELINKED));
    }

    /// Called by a task frame that is about to return `Pending`, while it is still the
    /// innermost frame: the first such frame in a root's poll is the innermost suspension
    /// point, so it publishes the stack from there, unless the stack cannot have changed since
    /// the last publication (see [`RootTrace`]).
    #[inline]
    pub(crate) fn publish_suspension(innermost: &FrameNode) {
        let target = PUBLISH_TO.with(Cell::get);
        if target <= RELINKED {
            return; // no root here, publication off, or done for this poll
        }
        PUBLISH_TO.with(|p| p.set(0));
        let node = ptr::from_ref(innermost) as usize;
        // SAFETY: `PUBLISH_TO` holds the address of the `RootTrace` of the root being polled
        // further up this thread's stack (set and restored, also on unwind, around that poll),
        // which is alive and pinned.
        let root = unsafe { &*((target & !RELINKED) as *const RootTrace) };
        if target & RELINKED != 0 || root.last.get() != node {
            root.publish(node);
        }
    }

    /// Copies the stack being polled on this thread: out of line, as it is only needed when the
    /// stack changed, and inlined it would bloat every task's poll.
    #[inline(never)]
    fn current_frames() -> Vec<Frame> {
        let mut frames = Vec::new();
        walk_current(|f| frames.push(f.clone()));
        frames
    }

    /// Runs `f`, an inline poll of a child that will move to a task of its own if it suspends,
    /// with publication off: the child's suspension is not where the root waits, so it must not
    /// publish its stack as the root's, nor use up the root's one publication of this poll.
    /// (Frames relinked inside are the child's, which is not on the root's stack afterwards.)
    pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                PUBLISH_TO.with(|p| p.set(self.0));
            }
        }
        let _restore = Restore(PUBLISH_TO.with(|p| p.replace(0)));
        f()
    }

    #[cfg(test)]
    pub(super) fn publish_target() -> usize {
        PUBLISH_TO.with(Cell::get) & !RELINKED
    }
}

/// Tracing compiled out, for measuring its cost: the same interface, doing nothing.
#[cfg(coro_untraced)]
mod untraced {
    use crate::trace::frame::Frame;
    use std::pin::Pin;

    pub(crate) struct RootTrace;

    pub(crate) struct Publishing;

    impl RootTrace {
        pub(crate) fn new(_frame: Frame) -> RootTrace {
            RootTrace
        }

        pub(crate) fn under(_frame: Frame, _parent: Option<u64>) -> RootTrace {
            RootTrace
        }

        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>) -> Publishing {
            Publishing
        }
    }

    #[inline]
    pub(crate) fn publish_suspension(_innermost: &crate::trace::frame::FrameNode) {}

    pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}

#[cfg(all(test, not(coro_untraced)))]
mod tests {
    use super::*;
    use crate::trace::frame::Frame;
    use std::panic::{AssertUnwindSafe, Location, catch_unwind};
    use std::task::Waker;

    #[test]
    fn a_panicking_root_restores_the_publication_target() {
        let frame = Frame::new("panics", Location::caller());
        let mut root = Box::pin(Root {
            executor: None,
            trace: RootTrace::new(frame),
            body: async { panic!("the body panics") },
        });
        let mut cx = Context::from_waker(Waker::noop());
        let polled = catch_unwind(AssertUnwindSafe(|| root.as_mut().poll(&mut cx)));
        assert!(polled.is_err());
        drop(root);
        assert!(
            traced::publish_target() == 0,
            "a later suspension on this thread would publish into the freed root"
        );
    }
}
