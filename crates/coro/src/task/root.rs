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
pub(crate) use traced::{RootTrace, publish_suspension, without_publishing};
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
    use crate::trace::frame::{Frame, current_fingerprint, walk_current};
    use coro_executor::trace::{TraceCell, attach};
    use std::cell::Cell;
    use std::pin::Pin;
    use std::ptr;

    thread_local! {
        /// The trace cell of the root being polled here, until the innermost suspending frame
        /// has published its stack for this poll (then null).
        static PUBLISH_TO: Cell<*const TraceCell> = const { Cell::new(ptr::null()) };
    }

    /// A root task's trace cell, attached to its executor task on the first poll.
    pub(crate) struct RootTrace {
        cell: TraceCell,
        attached: bool,
    }

    impl RootTrace {
        /// The trace of a task whose outermost frame is `frame`, spawned by the task running
        /// on this thread (its parent in dumps).
        pub(crate) fn new(frame: Frame) -> RootTrace {
            RootTrace {
                cell: TraceCell::new(frame),
                attached: false,
            }
        }

        /// The trace of a task shown in dumps under task `parent` rather than the spawner.
        pub(crate) fn under(frame: Frame, parent: Option<u64>) -> RootTrace {
            RootTrace {
                cell: TraceCell::with_parent(frame, parent),
                attached: false,
            }
        }

        /// Attaches the cell (first poll) and makes it where this poll's suspension publishes,
        /// until the guard drops, also on unwind: a panicking body must not leave this thread
        /// pointing at a cell that is about to be freed.
        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>) -> Publishing {
            // SAFETY: only `attached` is written; `cell` stays in place.
            let this = unsafe { self.get_unchecked_mut() };
            if !this.attached {
                // SAFETY: `cell` is pinned inside the root future (see `Root::poll`), so it
                // stays in place until the future is dropped.
                this.attached = unsafe { attach(&this.cell) };
            }
            Publishing(PUBLISH_TO.with(|p| p.replace(&this.cell)))
        }
    }

    /// Restores the previous publication target when a root's poll ends.
    pub(crate) struct Publishing(*const TraceCell);

    impl Drop for Publishing {
        #[inline]
        fn drop(&mut self) {
            PUBLISH_TO.with(|p| p.set(self.0));
        }
    }

    /// Called by a task frame that is about to return `Pending`, while it is still the
    /// innermost frame: the first such frame in a root's poll is the innermost suspension
    /// point, so it publishes the stack from there (skipped when the chain is the one already
    /// published).
    #[inline]
    pub(crate) fn publish_suspension() {
        let cell = PUBLISH_TO.with(|p| p.replace(ptr::null()));
        // SAFETY: `PUBLISH_TO` points at the `TraceCell` of the root being polled further up
        // this thread's stack (set and restored, also on unwind, around that poll), which is
        // alive and pinned.
        if let Some(cell) = unsafe { cell.as_ref() } {
            cell.publish(current_fingerprint(), current_frames);
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
    pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
        let _restore = Publishing(PUBLISH_TO.with(|p| p.replace(ptr::null())));
        f()
    }

    #[cfg(test)]
    pub(super) fn publish_target() -> *const TraceCell {
        PUBLISH_TO.with(Cell::get)
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
    pub(crate) fn publish_suspension() {}

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
            traced::publish_target().is_null(),
            "a later suspension on this thread would publish into the freed root"
        );
    }
}
