//! Publication: attaching a trace cell to the running task, and publishing the stack where
//! the task suspends.

use super::*;
use crate::task::current::header as current_header;

/// The id of the task being polled on this thread, if any.
///
/// ```
/// assert_eq!(coro_executor::trace::current_task_id(), None);
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let id = futures::executor::block_on(pool.spawn(async { coro_executor::trace::current_task_id() }));
/// assert!(id.unwrap().is_some());
/// ```
#[inline]
pub fn current_task_id() -> Option<u64> {
    current_header().map(TaskHeader::id)
}

// `TraceCell`'s constructor for the running task lives here, beside `attach`, because it reads
// the running task: `cell.rs` holds plain data, below the task layer, and imports none of it.
impl TraceCell {
    /// A cell for a task spawned by the task running on this thread (if any), which becomes its
    /// parent in snapshots.
    ///
    /// ```
    /// use coro_executor::trace::{Frame, TraceCell, attach, current_task_id, snapshot_tasks};
    /// use std::panic::Location;
    ///
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let join = pool.spawn(async {
    ///     let parent = current_task_id();
    ///     // Made inside a task: that task is the new cell's parent.
    ///     let traced = Box::new((TraceCell::new(), Frame::new("child", Location::caller())));
    ///     let child = coro_executor::spawn(async move {
    ///         let (cell, root) = &*traced;
    ///         // SAFETY: the box lives in this future until it is dropped, and never moves.
    ///         unsafe { attach(cell, root) };
    ///         let me = current_task_id();
    ///         snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap().parent_id()
    ///     });
    ///     (parent, child.await.unwrap())
    /// });
    /// let (parent, childs_parent) = futures::executor::block_on(join).unwrap();
    /// assert_eq!(childs_parent, parent);
    /// assert!(!TraceCell::new().is_attached());
    /// ```
    #[inline]
    pub fn new() -> Self {
        TraceCell::with_parent(current_task_id())
    }
}

impl Default for TraceCell {
    /// [`TraceCell::new`].
    ///
    /// ```
    /// let cell = coro_executor::trace::TraceCell::default();
    /// assert!(!cell.is_attached());
    /// ```
    fn default() -> Self {
        TraceCell::new()
    }
}

/// Attaches `cell` to the task being polled on this thread, for [`snapshot_tasks`] to read,
/// with `root`, the task's outermost frame (whose name snapshots show). Returns false outside a
/// task spawned through an [`ExecutorHandle`](crate::ExecutorHandle).
///
/// # Safety
///
/// `cell` and `root` must stay alive, in place and unchanged until the task's future is
/// dropped: task snapshots read them, from any thread, until then. Fields of the (pinned)
/// future being polled meet this; values on the stack, or in a box the future may drop early,
/// do not.
///
/// ```
/// use coro_executor::trace::{Frame, TraceCell, attach};
///
/// let cell = TraceCell::new();
/// let root = Frame::new("x", std::panic::Location::caller());
/// // SAFETY: not inside a task, so nothing is attached.
/// assert!(!unsafe { attach(&cell, &root) });
/// assert!(!cell.is_attached());
/// ```
#[inline]
pub unsafe fn attach(cell: &TraceCell, root: &Frame) -> bool {
    match current_header() {
        Some(header) => {
            cell.root.store(ptr::from_ref(root).cast_mut(), Relaxed);
            forget_last(header);
            // Release: a snapshot that sees the cell sees its root.
            header.set_cell(ptr::from_ref(cell).cast_mut());
            true
        }
        None => false,
    }
}

/// Makes the next publication of the task compare its whole stack: `last` becomes `UNKNOWN`,
/// unless it holds a statistics time mark (`trace/stats.rs`), which snapshots still read and
/// which no frame address equals either.
fn forget_last(header: &TaskHeader) {
    if !super::stats::is_mark(header.last.load(Relaxed)) {
        header.last.store(UNKNOWN, Relaxed);
    }
}

/// Attaches a trace cell that the task itself owns (freed with the task), with a copy of
/// `root` as its outermost frame, to the task being polled on this thread, unless a cell is
/// attached already. For a future that carries a frame but no cell of its own: a coro `Task`
/// spawned through [`ExecutorHandle::spawn`](crate::ExecutorHandle::spawn) or a user's
/// executor rather than as a coro root. Returns whether it attached one. The cell shows no
/// spawning parent, and its stack is always copied when published.
///
/// ```
/// use coro_executor::trace::{Frame, attach_owned, snapshot_tasks};
/// use std::panic::Location;
///
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let join = pool.spawn(async {
///     let root = Frame::new("owned", Location::caller());
///     assert!(attach_owned(&root));
///     assert!(!attach_owned(&root), "attached once");
///     let me = coro_executor::trace::current_task_id().unwrap();
///     snapshot_tasks().into_iter().find(|t| t.id() == me).unwrap().name().to_owned()
/// });
/// assert_eq!(futures::executor::block_on(join).unwrap(), "owned");
/// ```
pub fn attach_owned(root: &Frame) -> bool {
    let Some(header) = current_header() else {
        return false;
    };
    if !header.tagged_cell(Relaxed).is_null() {
        return false;
    }
    let owned = Box::into_raw(Box::new(OwnedCell {
        cell: TraceCell::with_parent(None),
        root: root.clone(),
    }));
    // SAFETY: just allocated, and boxed: the frame stays where it is until the box is freed,
    // with the header, after every snapshot of the task.
    let cell = unsafe {
        (*owned)
            .cell
            .root
            .store(ptr::addr_of_mut!((*owned).root), Relaxed);
        ptr::addr_of_mut!((*owned).cell)
    };
    forget_last(header);
    // Release (in `set_cell`): a snapshot that sees the cell sees its root. Only the polling
    // thread attaches.
    header.set_cell(cell.map_addr(|addr| addr | OWNED_CELL));
    true
}

/// Publishes the stack of the task being polled on this thread into its attached cell, for
/// task dumps: called by the innermost frame that is about to return `Pending`, so the first
/// call in a poll is where the task waits, and later ones in the same poll do nothing.
///
/// Most suspensions happen where the previous one did; recognising that keeps publication
/// cheap. `innermost` identifies the innermost frame (its address). If it is the one published
/// last time and no frame was relinked since ([`note_relinked`]), the stack is unchanged and
/// nothing more is done; otherwise the cell compares `fingerprint()` with the stack it holds
/// and copies `frames()` (innermost first) only if they differ. `alone` says that the innermost
/// frame is the task's root frame (the one given to [`attach`]) with nothing around it: the
/// stack is then that one frame, which snapshots read from the task itself, so nothing is
/// copied and nothing allocated. Does nothing outside a task, in a task without a cell, or
/// inside [`without_publishing`].
///
/// ```
/// use coro_executor::trace::{Frame, TraceCell, attach, publish_suspension, snapshot_tasks};
/// use std::panic::Location;
/// use std::task::Poll;
///
/// let ex = coro_executor::ManualExecutor::new();
/// let traced = Box::new((TraceCell::new(), Frame::new("waiter", Location::caller())));
/// let mut polled = false;
/// let join = ex.handle().spawn(std::future::poll_fn(move |_| {
///     let (cell, root) = &*traced;
///     if !cell.is_attached() {
///         // SAFETY: the box is owned by this future until it is dropped, and never moves.
///         unsafe { attach(cell, root) };
///     }
///     if std::mem::replace(&mut polled, true) {
///         return Poll::Ready(());
///     }
///     let innermost: *const Frame = root;
///     let frames = || vec![Frame::new("inner", Location::caller())];
///     publish_suspension(innermost.cast(), false, || 1, frames);
///     Poll::Pending
/// }));
/// ex.run_until_idle();
/// let waiter = snapshot_tasks().into_iter().find(|t| t.name() == "waiter").unwrap();
/// assert_eq!(waiter.frames()[0].name(), "inner");
/// join.cancel();
/// ```
#[inline]
pub fn publish_suspension(
    innermost: *const (),
    alone: bool,
    fingerprint: fn() -> u64,
    frames: fn() -> Vec<Frame>,
) {
    let Some(header) = current_header() else {
        return;
    };
    let innermost = innermost as usize;
    let state = header.state.load(Relaxed);
    if state & STATE_BYTE == RUNNING {
        // The first suspension of this poll, and no frame relinked: the common case. (Plain
        // stores: only this thread writes the state word during the poll.)
        header.state.store(state | PUBLISHED, Relaxed);
        if header.last.load(Relaxed) != innermost {
            publish_from(header, innermost, alone, fingerprint, frames);
        }
    } else if state & PUBLISHED == 0 {
        // Relinked: the stack may have changed although the innermost frame did not.
        header.state.store(state | PUBLISHED, Relaxed);
        publish_from(header, innermost, alone, fingerprint, frames);
    }
}

/// The part of [`publish_suspension`] for a stack that may have changed: out of line, as it
/// is rarely needed and would bloat every task's poll.
#[inline(never)]
fn publish_from(
    header: &TaskHeader,
    innermost: usize,
    alone: bool,
    fingerprint: fn() -> u64,
    frames: fn() -> Vec<Frame>,
) {
    header.last.store(innermost, Relaxed);
    // An owned cell's root is a copy, not necessarily the frame that is outermost now: its
    // stack is always copied.
    let owned = header.tagged_cell(Relaxed).addr() & OWNED_CELL != 0;
    // SAFETY: a non-null `trace` points at the cell attached by this task's future (alive and
    // in place while it is polled on this thread) or owned by the header.
    if let Some(cell) = unsafe { header.cell(Relaxed).as_ref() } {
        cell.publish(alone && !owned, fingerprint, frames);
    }
}

/// Tells [`publish_suspension`] that a frame of the task being polled on this thread was
/// entered under another awaiter than at its previous poll (or for the first time), so its
/// stack may have changed: the next publication compares the whole stack. A relink after this
/// poll published makes the next poll's publication do so.
///
/// ```
/// use coro_executor::trace::{Frame, TraceCell, attach, note_relinked, publish_suspension};
/// use std::panic::Location;
/// use std::task::Poll;
///
/// let ex = coro_executor::ManualExecutor::new();
/// let traced = Box::new((TraceCell::new(), Frame::new("relinked", Location::caller())));
/// let mut polls = 0;
/// let join = ex.handle().spawn(std::future::poll_fn(move |cx| {
///     let (cell, root) = &*traced;
///     if !cell.is_attached() {
///         // SAFETY: the box is owned by this future until it is dropped, and never moves.
///         unsafe { attach(cell, root) };
///     }
///     polls += 1;
///     let innermost: *const Frame = root;
///     if polls == 1 {
///         let frames = || vec![Frame::new("a", Location::caller())];
///         publish_suspension(innermost.cast(), false, || 1, frames);
///         cx.waker().wake_by_ref();
///     } else {
///         // The same innermost frame, under another awaiter: without this, the stack
///         // published at the first poll would be taken as unchanged.
///         note_relinked();
///         let frames = || vec![Frame::new("b", Location::caller())];
///         publish_suspension(innermost.cast(), false, || 2, frames);
///     }
///     Poll::<()>::Pending
/// }));
/// assert_eq!(ex.run_until_idle(), 2);
/// let tasks = coro_executor::trace::snapshot_tasks();
/// let task = tasks.iter().find(|t| t.name() == "relinked").unwrap();
/// assert_eq!(task.frames()[0].name(), "b");
/// join.cancel();
/// ```
#[inline]
pub fn note_relinked() {
    let Some(header) = current_header() else {
        return;
    };
    let state = header.state.load(Relaxed);
    if state & PUBLISHED == 0 {
        header.state.store(state | RELINKED, Relaxed);
    } else {
        forget_last(header);
    }
}

/// Runs `f` with publication off for the task being polled on this thread: for an inline poll
/// of something whose suspension is not where the task waits (a child that moves to a task of
/// its own if it suspends), which must neither publish its stack as the task's nor use up the
/// task's one publication of this poll.
///
/// ```
/// let answer = coro_executor::trace::without_publishing(|| 42);
/// assert_eq!(answer, 42);
/// ```
pub fn without_publishing<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the state byte, keeping the wait slot (`f` may register or end waits).
    struct Restore<'a>(&'a TaskHeader, u64);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let header = self.0;
            header.set_state(header.state.load(Relaxed), self.1 & STATE_BYTE);
        }
    }
    let Some(header) = current_header() else {
        return f();
    };
    let saved = header.state.load(Relaxed);
    header.state.store(saved | PUBLISHED, Relaxed);
    let _restore = Restore(header, saved);
    f()
}
