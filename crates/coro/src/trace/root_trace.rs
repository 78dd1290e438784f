//! Publishing a root task's async stack for task dumps: the root's trace cell, attached to its
//! executor task on the first poll, and the suspension check that publishes the stack from the
//! innermost frame that suspends. Calls go one way: `task` (the roots and frames that poll)
//! calls this, and this calls the engine's `coro_executor::trace`.
//!
//! Built with `--cfg coro_untraced`, roots carry no trace cell and publish nothing: that build
//! exists only to measure what tracing costs (benches/README.md), and is not a supported
//! configuration (task dumps then show no frames).

#[cfg(not(coro_untraced))]
pub(crate) use traced::{RootTrace, note_relinked, publish_suspension, without_publishing};
#[cfg(coro_untraced)]
pub(crate) use untraced::{RootTrace, publish_suspension, without_publishing};

#[cfg(not(coro_untraced))]
mod traced {
    use crate::trace::frame_chain::{
        Frame, FrameNode, current_fingerprint, has_published_continuation, inside_frame,
        walk_published,
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
        /// any of its own being relinked. `node` is the root frame's node if the body enters
        /// it as its outermost frame: linked as such once the cell is attached, so that
        /// entering it does not look for a cell to attach (see `FrameNode::link_outermost`).
        #[inline]
        pub(crate) fn enter(self: Pin<&mut Self>, root: &Frame, node: Option<&FrameNode>) {
            let this = self.into_ref().get_ref();
            if !this.cell.is_attached() {
                attach_first(&this.cell, root, node);
            }
            if inside_frame() {
                note_relinked();
            }
        }
    }

    /// The first poll's part of [`RootTrace::enter`]: once per task, so out of line, which
    /// keeps every later poll's `enter` to its two checks.
    #[inline(never)]
    fn attach_first(cell: &TraceCell, root: &Frame, node: Option<&FrameNode>) {
        // SAFETY: `cell` and `root` (the body's frame) are pinned inside the root future (see
        // `Root::poll`), so they stay in place until the future is dropped, and a spawned
        // body's frame is never renamed. (It is polled inside the executor task it was spawned
        // as, so there is a task to attach to; a root polled by hand, in a unit test, just has
        // none, and then its frame is left to link itself when entered.)
        let attached = unsafe { trace::attach(cell, root) };
        if attached && let Some(node) = node {
            node.link_outermost();
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
            innermost.is_outermost() && !has_published_continuation(),
            current_fingerprint,
            current_frames,
        );
    }

    /// Copies the stack being polled on this thread as the root publishes it (only needed
    /// when it changed).
    fn current_frames() -> Vec<Frame> {
        let mut frames = Vec::new();
        walk_published(|f| frames.push(f.clone()));
        frames
    }
}

/// Tracing compiled out, for measuring its cost: the same interface, doing nothing.
#[cfg(coro_untraced)]
mod untraced {
    use crate::trace::frame_chain::Frame;
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
        pub(crate) fn enter(
            self: Pin<&mut Self>,
            _root: &Frame,
            _node: Option<&crate::trace::frame_chain::FrameNode>,
        ) {
        }
    }

    #[inline]
    pub(crate) fn publish_suspension(_innermost: &crate::trace::frame_chain::FrameNode) {}

    pub(crate) fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
        f()
    }
}
