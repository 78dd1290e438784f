//! Async stack frames: one per task, linked child to awaiter while the child is polled.

pub use coro_executor::trace::Frame;
use std::cell::Cell;
use std::ptr;

/// A frame as it lives inside a task, with the link to its awaiter's frame. The link is set
/// each time the task is polled, and read while every frame on the chain is being polled (so
/// alive and pinned): on the polling thread, or by a thread that was handed an [`Origin`] of
/// the chain while that poll still runs. Setting it to another value than at the previous poll
/// tells the root's publication that the stack may have changed.
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

// SAFETY: `link` is written only on the thread polling the task, when the frame is entered,
// and read on that thread during the poll or by another one through an `Origin` (see
// `Origin::frames` for why that read races with no write); between polls it is a stale value
// that is only compared, never dereferenced. The rest is Send.
unsafe impl Send for FrameNode {}

/// Frames that continue the chain being polled on a thread, past its outermost node: those of
/// the awaiter of the root task being polled, which runs elsewhere. `published`: `frames` if
/// they belong in the stack the root publishes for dumps, else null (see
/// [`continue_into_unpublished`]); a pointer rather than a flag, so that the check each
/// suspension makes ([`has_published_continuation`]) is one load and one test.
#[derive(Clone, Copy)]
struct Continuation {
    frames: *const Frame,
    len: usize,
    published: *const Frame,
}

const NO_CONTINUATION: Continuation = Continuation {
    frames: ptr::null(),
    len: 0,
    published: ptr::null(),
};

thread_local! {
    /// The innermost frame being polled on this thread.
    static CURRENT: Cell<*const FrameNode> = const { Cell::new(ptr::null()) };
    /// The frames of the awaiter, elsewhere, of the root task being polled on this thread, if
    /// it has one (a task awaited through `schedule_on`, a collect's child driven by a task of
    /// its own): the stack continues there.
    static CONTINUATION: Cell<Continuation> = const { Cell::new(NO_CONTINUATION) };
}

/// Makes `frames` (the awaiter's, outermost last) the continuation of the stack being polled on
/// this thread until the guard drops; the root publishes them as part of its stack.
///
/// The slice must stay alive and in place until the guard is dropped.
pub(crate) fn continue_into(frames: &[Frame]) -> ContinuationGuard {
    continue_with(frames, true)
}

/// [`continue_into`] for frames that the root does not publish as part of its stack: those of
/// a task that awaits it where it waits, whose own published stack a dump appends at dump time
/// (a collect's driven child, see `trace/dump.rs`). `current_stack()` shows them all the same.
pub(crate) fn continue_into_unpublished(frames: &[Frame]) -> ContinuationGuard {
    continue_with(frames, false)
}

fn continue_with(frames: &[Frame], published: bool) -> ContinuationGuard {
    let continuation = Continuation {
        frames: frames.as_ptr(),
        len: frames.len(),
        published: if published {
            frames.as_ptr()
        } else {
            ptr::null()
        },
    };
    let previous = CONTINUATION.with(|c| c.replace(continuation));
    ContinuationGuard { previous }
}

pub(crate) struct ContinuationGuard {
    previous: Continuation,
}

impl Drop for ContinuationGuard {
    fn drop(&mut self) {
        CONTINUATION.with(|c| c.set(self.previous));
    }
}

/// Whether the stack being polled continues, in what its root publishes, in an awaiter
/// elsewhere.
#[inline]
pub(crate) fn has_published_continuation() -> bool {
    !CONTINUATION.with(|c| c.get().published).is_null()
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

    /// Links the frame as its task's outermost, and notes the stack relinked, as its first
    /// entry would: for a root whose trace cell was just attached, so that entering the frame
    /// finds it linked and does not look for a cell to attach.
    pub(crate) fn link_outermost(&self) {
        self.set_parent(ptr::null());
        coro_executor::trace::note_relinked();
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

/// A fingerprint of the stack being polled on this thread as its root publishes it: stacks
/// that show the same frames give equal values (different ones almost never do), and it is
/// never 0 (the "nothing published" value). It mixes what the frames show, not where they live:
/// a finished task's frame is often followed by a new one allocated at the same address.
#[inline]
pub(crate) fn current_fingerprint() -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    walk_published(|frame| hash = frame.mix_into(hash));
    hash | 1
}

/// Calls `f` on each frame from the innermost one being polled on this thread out to the root,
/// then on the frames of the root's awaiter elsewhere, if any, out to its root.
pub(crate) fn walk_current(f: impl FnMut(&Frame)) {
    // SAFETY: the current origin, walked on its own thread during the poll it was taken in.
    unsafe { current_origin().walk(true, f) }
}

/// [`walk_current`] for the stack the root publishes: without a continuation that a dump
/// appends itself ([`continue_into_unpublished`]).
pub(crate) fn walk_published(f: impl FnMut(&Frame)) {
    // SAFETY: the current origin, walked on its own thread during the poll it was taken in.
    unsafe { current_origin().walk(false, f) }
}

/// Where the chain being polled on a thread stood at some point of a poll: its innermost frame
/// and that thread's continuation, two pointers to copy the frames from later (a collect's
/// children that run on other threads continue their stacks into its chain, but copying the
/// chain for every collect would cost the many that never need it).
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    node: *const FrameNode,
    continuation: Continuation,
}

// SAFETY: an `Origin` is two addresses; what may be read through them, and when, is
// `Origin::frames`'s contract.
unsafe impl Send for Origin {}
// SAFETY: a shared `Origin` offers nothing but copies of its two addresses and the `unsafe`
// read of `Origin::frames`, whose contract says when that read is sound.
unsafe impl Sync for Origin {}

/// The chain being polled on this thread, from its innermost frame now.
#[inline]
pub(crate) fn current_origin() -> Origin {
    Origin {
        node: CURRENT.with(Cell::get),
        continuation: CONTINUATION.with(Cell::get),
    }
}

impl Origin {
    /// A copy of the chain's frames, innermost first, its whole continuation included (as
    /// `current_stack()` shows it).
    ///
    /// # Safety
    ///
    /// The poll in which this origin was taken is still running, inside the frame that was
    /// innermost then, and what its thread did up to taking it happens-before this call (on
    /// another thread: through an acquire of something it released afterwards).
    pub(crate) unsafe fn frames(&self) -> Vec<Frame> {
        let mut frames = Vec::new();
        // SAFETY: forwarded from the caller.
        unsafe { self.walk(true, |f| frames.push(f.clone())) };
        frames
    }

    /// Calls `f` on each frame of the chain, innermost first, then on its continuation, if
    /// any and, unless `unpublished`, only if the root publishes it.
    ///
    /// # Safety
    ///
    /// As for [`frames`](Self::frames).
    unsafe fn walk(&self, unpublished: bool, mut f: impl FnMut(&Frame)) {
        let mut node = self.node;
        // SAFETY: every node on the chain is a frame whose task is being polled further up the
        // origin thread's call stack (its `FrameGuard` is live, as the poll that took the
        // origin, inside the innermost of them, still runs), so it is alive and has not moved.
        // Its fields are not written during that poll: a link is written when its frame is
        // entered, and these were entered before the origin was taken (a write that happens-
        // before this read, by the caller's promise); a renaming takes `&mut`, impossible
        // while the frame is entered; a task's flags change before and after its poll.
        while let Some(n) = unsafe { node.as_ref() } {
            f(&n.frame);
            node = n.parent();
        }
        let continuation = self.continuation;
        if !continuation.frames.is_null() && (unpublished || !continuation.published.is_null()) {
            // SAFETY: set by `continue_with` from a slice that outlives its guard, which is live
            // while the origin's poll runs (the guards restore `CONTINUATION` in LIFO order,
            // and a root's guard encloses every frame entered in its poll); nothing writes
            // the slice while it is lent.
            let frames =
                unsafe { std::slice::from_raw_parts(continuation.frames, continuation.len) };
            frames.iter().for_each(f);
        }
    }
}
