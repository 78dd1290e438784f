//! Async stack frames: one per task, linked child to awaiter while the child is polled.

pub use coro_executor::trace::Frame;
use std::cell::Cell;
use std::ptr;

/// A frame as it lives inside a task, with the link to its awaiter's frame. The link is set
/// each time the task is polled, and only read on the polling thread while every frame on the
/// chain is being polled (so alive and pinned). Setting it to another value than at the
/// previous poll tells the root's publication that the stack may have changed.
pub(crate) struct FrameNode {
    pub(crate) frame: Frame,
    /// The awaiter's node (aligned to 8), with the owner's [`FLAGS`] in its low three bits:
    /// a Task keeps its state there rather than in a byte of its own, which padding made a
    /// word (see `task/lazy.rs`).
    link: Cell<*const FrameNode>,
}

/// The bits of [`FrameNode::link`] that hold the owner's flags, not the parent's address.
pub(crate) const FLAGS: u8 = 0b111;

const _: () = assert!(
    std::mem::align_of::<FrameNode>() > FLAGS as usize,
    "a node's address must leave the flag bits free"
);

// SAFETY: `link` is written and read only on the thread polling the task, during that poll
// (see `enter`); between polls it is a stale value that is only compared, never dereferenced.
// The rest is Send.
unsafe impl Send for FrameNode {}

thread_local! {
    /// The innermost frame being polled on this thread.
    static CURRENT: Cell<*const FrameNode> = const { Cell::new(ptr::null()) };
    /// The frames of the awaiter, on another executor, of the root task being polled on this
    /// thread, if it has one (a task awaited through `schedule_on`): the stack continues there.
    static CONTINUATION: Cell<(*const Frame, usize)> = const { Cell::new((ptr::null(), 0)) };
}

/// Makes `frames` (the awaiter's, outermost last) the continuation of the stack being polled on
/// this thread until the guard drops.
///
/// The slice must stay alive and in place until the guard is dropped.
pub(crate) fn continue_into(frames: &[Frame]) -> ContinuationGuard {
    let previous = CONTINUATION.with(|c| c.replace((frames.as_ptr(), frames.len())));
    ContinuationGuard { previous }
}

pub(crate) struct ContinuationGuard {
    previous: (*const Frame, usize),
}

impl Drop for ContinuationGuard {
    fn drop(&mut self) {
        CONTINUATION.with(|c| c.set(self.previous));
    }
}

/// Whether the stack being polled continues in an awaiter on another executor.
#[inline]
pub(crate) fn has_continuation() -> bool {
    !CONTINUATION.with(Cell::get).0.is_null()
}

/// The link of a frame not entered since it was made or renamed: no frame lives at this
/// address (it is below any allocation), and `CURRENT` is never it, so the next entry always
/// counts as relinked.
const UNLINKED: *const FrameNode = ptr::dangling();

impl FrameNode {
    pub(crate) fn new(frame: Frame) -> Self {
        FrameNode {
            frame,
            link: Cell::new(UNLINKED),
        }
    }

    /// Renames the frame; its next entry counts as relinked, so the new name gets published.
    pub(crate) fn set_name(&mut self, name: std::borrow::Cow<'static, str>) {
        self.frame.set_name(name);
        self.set_parent(UNLINKED);
    }

    /// The awaiter's node at this frame's last entry (a stale value between polls: compared,
    /// never dereferenced), or [`UNLINKED`].
    #[inline]
    fn parent(&self) -> *const FrameNode {
        self.link.get().map_addr(|a| a & !(FLAGS as usize))
    }

    #[inline]
    fn set_parent(&self, parent: *const FrameNode) {
        let flags = self.flags() as usize;
        self.link.set(parent.map_addr(|a| a | flags));
    }

    /// The owner's flags (within [`FLAGS`]).
    #[inline]
    pub(crate) fn flags(&self) -> u8 {
        (self.link.get().addr() & FLAGS as usize) as u8
    }

    /// Sets the owner's flags `flags` (within [`FLAGS`]), keeping the others.
    #[inline]
    pub(crate) fn add_flags(&self, flags: u8) {
        debug_assert_eq!(flags & !FLAGS, 0, "not a flag bit");
        self.link
            .set(self.link.get().map_addr(|a| a | flags as usize));
    }

    /// Whether nothing encloses this frame in the poll it is entered in: it is the root of the
    /// stack being polled on this thread (a spawned task's own frame, polled by a worker).
    /// Only meaningful while the frame is entered.
    #[inline]
    #[cfg(not(coro_untraced))]
    pub(crate) fn is_outermost(&self) -> bool {
        self.parent().is_null()
    }

    /// Makes this frame the innermost one, linked to the current one, until the guard drops.
    ///
    /// The node must stay in place until the guard is dropped (it is inside a pinned task).
    #[inline]
    #[cfg(not(coro_untraced))]
    pub(crate) fn enter(&self) -> FrameGuard {
        let parent = CURRENT.with(|c| c.replace(self));
        if self.parent() != parent {
            if parent.is_null() {
                // The outermost frame of an executor task. A coro root (`coro::spawn`, `start`)
                // has its trace cell already; a Task handed to an executor directly
                // (`ThreadPool::spawn`, `ExecutorHandle::spawn`, a user's executor) has none:
                // give it one, so dumps show its name and stack rather than `<untraced>`.
                // (Checked only when the link changes: a frame first entered, or moved.)
                coro_executor::trace::attach_owned(&self.frame);
            }
            self.set_parent(parent);
            // The engine tracks whether the stack changed since it was last published.
            coro_executor::trace::note_relinked();
        }
        FrameGuard { parent }
    }

    /// Tracing compiled out (`--cfg coro_untraced`, a build for measuring its cost): frames
    /// are not linked, and stacks are empty.
    #[inline]
    #[cfg(coro_untraced)]
    pub(crate) fn enter(&self) -> FrameGuard {
        FrameGuard {
            parent: CURRENT.with(Cell::get),
        }
    }
}

pub(crate) struct FrameGuard {
    parent: *const FrameNode,
}

#[cfg(not(coro_untraced))]
impl Drop for FrameGuard {
    #[inline]
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.parent));
    }
}

/// Whether a frame is being polled on this thread.
#[inline]
pub(crate) fn inside_frame() -> bool {
    !CURRENT.with(Cell::get).is_null()
}

/// A fingerprint of the chain of frames being polled on this thread: chains that show the same
/// frames give equal values (different ones almost never do), and it is never 0 (the "nothing
/// published" value). It mixes what the frames show, not where they live: a finished task's
/// frame is often followed by a new one allocated at the same address.
#[inline]
pub(crate) fn current_fingerprint() -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    walk_current(|frame| hash = frame.mix_into(hash));
    hash | 1
}

/// Calls `f` on each frame from the innermost one being polled on this thread out to the root,
/// then on the frames of the root's awaiter on another executor, if any, out to its root.
pub(crate) fn walk_current(mut f: impl FnMut(&Frame)) {
    let mut node = CURRENT.with(Cell::get);
    // SAFETY: every node on the chain is a frame whose task is being polled further up this
    // thread's call stack (its `FrameGuard` is live), so it is alive and has not moved; the
    // guards restore `CURRENT` in LIFO order, so the chain never points at a finished poll.
    while let Some(n) = unsafe { node.as_ref() } {
        f(&n.frame);
        node = n.parent();
    }
    let (continuation, len) = CONTINUATION.with(Cell::get);
    if !continuation.is_null() {
        // SAFETY: set by `continue_into` from a slice that outlives its guard, which is live
        // (the guards restore `CONTINUATION` in LIFO order).
        for frame in unsafe { std::slice::from_raw_parts(continuation, len) } {
            f(frame);
        }
    }
}
