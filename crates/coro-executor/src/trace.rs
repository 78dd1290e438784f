//! Task introspection: ids, states and published async stacks of live tasks, for task dumps.
//!
//! Every task spawned through an [`ExecutorHandle`](crate::ExecutorHandle) carries a small
//! header (id, the id of the task that spawned it, its state) and is listed where
//! [`snapshot_tasks`] can find it. A layer above (coro's `Task`) embeds a [`TraceCell`] in the
//! task's future and [`attach`]es it, then publishes the task's stack of frames into it when
//! the task suspends. Snapshots copy that under short locks that are never held while a task
//! runs, so they work at any time, from any thread, without stopping anything.

mod name;

use crate::loom::sync::Mutex;
use name::FrameName;
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, Ordering::*};

/// One frame of an async stack: a name and the source location it stands for.
///
/// ```
/// use coro_executor::trace::Frame;
///
/// let frame = Frame::new("load_user", std::panic::Location::caller());
/// assert_eq!(frame.name(), "load_user");
/// assert!(frame.to_string().starts_with("load_user ("));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Frame {
    name: FrameName,
    location: &'static Location<'static>,
}

impl Frame {
    /// A frame named `name` at `location`.
    ///
    /// ```
    /// let frame = coro_executor::trace::Frame::new(String::from("dynamic"), std::panic::Location::caller());
    /// assert_eq!(frame.name(), "dynamic");
    /// ```
    pub fn new(name: impl Into<Cow<'static, str>>, location: &'static Location<'static>) -> Self {
        Frame {
            name: FrameName::new(name.into()),
            location,
        }
    }

    /// The frame's name (for a task: set with `Task::named`, or the type of its future).
    ///
    /// ```
    /// let frame = coro_executor::trace::Frame::new("f", std::panic::Location::caller());
    /// assert_eq!(frame.name(), "f");
    /// ```
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Where the frame's task was created.
    ///
    /// ```
    /// let here = std::panic::Location::caller();
    /// assert_eq!(coro_executor::trace::Frame::new("f", here).location(), here);
    /// ```
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// Mixes what the frame shows (its name and location) into `hash`, so that a stack can be
    /// recognised as the one already published without copying it: equal frames always mix
    /// equally, different ones almost never do. A name that is a `&'static str` is mixed by
    /// address and length (static text cannot change); an owned one by its text, since
    /// another name may later be allocated at the same address.
    ///
    /// ```
    /// use coro_executor::trace::Frame;
    ///
    /// let here = std::panic::Location::caller();
    /// let a = Frame::new(String::from("load"), here);
    /// let b = Frame::new(String::from("load"), here);
    /// let c = Frame::new(String::from("save"), here);
    /// assert_eq!(a.mix_into(1), b.mix_into(1));
    /// assert_ne!(a.mix_into(1), c.mix_into(1));
    /// ```
    #[inline]
    pub fn mix_into(&self, hash: u64) -> u64 {
        let mut hash = mix(hash, ptr::from_ref(self.location) as usize as u64);
        let name = self.name.as_str();
        if self.name.is_owned() {
            for chunk in name.as_bytes().chunks(8) {
                let mut word = [0; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                hash = mix(hash, u64::from_le_bytes(word));
            }
        } else {
            hash = mix(hash, name.as_ptr() as usize as u64);
        }
        mix(hash, name.len() as u64)
    }

    /// Renames the frame.
    ///
    /// ```
    /// let mut frame = coro_executor::trace::Frame::new("a", std::panic::Location::caller());
    /// frame.set_name("b");
    /// assert_eq!(frame.name(), "b");
    /// ```
    pub fn set_name(&mut self, name: impl Into<Cow<'static, str>>) {
        self.name = FrameName::new(name.into());
    }
}

/// One FNV-1a step on a whole word.
#[inline]
fn mix(hash: u64, word: u64) -> u64 {
    (hash ^ word).wrapping_mul(0x0100_0000_01b3)
}

impl fmt::Display for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}:{})",
            self.name.as_str(),
            self.location.file(),
            self.location.line()
        )
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Where a task is in its life.
///
/// ```
/// use coro_executor::trace::TaskState;
/// assert_eq!(TaskState::Suspended.to_string(), "suspended");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Being polled on some thread right now.
    Running,
    /// Woken and queued on its executor, waiting for a thread.
    Scheduled,
    /// Waiting for a wake-up.
    Suspended,
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TaskState::Running => "running",
            TaskState::Scheduled => "scheduled",
            TaskState::Suspended => "suspended",
        })
    }
}

const RUNNING: u8 = 0;
const SCHEDULED: u8 = 1;
const SUSPENDED: u8 = 2;
/// The bits of [`TaskHeader::state`] that hold the [`TaskState`].
const STATE: u8 = 3;
/// Per-poll bit of [`TaskHeader::state`]: this poll has published its stack (or publication is
/// off), so later suspensions in it do not. Cleared by the store that marks the task running.
const PUBLISHED: u8 = 4;
/// Per-poll bit of [`TaskHeader::state`]: a frame was entered under another awaiter than at its
/// previous poll, so this poll's stack may differ from the one last published.
const RELINKED: u8 = 8;

/// [`TaskHeader::last`] when the next suspension must compare the whole stack.
const UNKNOWN: usize = 0;

/// What the executor keeps about each task inside the task's allocation (async-task's
/// metadata): its id, the id of the task that spawned it, its state, and the trace cell attached
/// by a layer above. Reached through [`Runnable::metadata`](async_task::Runnable::metadata).
///
/// ```
/// let ex = coro_executor::ManualExecutor::new();
/// let join = ex.handle().spawn(async {});
/// assert_eq!(ex.pending(), 1);
/// ex.run_until_idle();
/// # drop(join);
/// ```
pub struct TaskHeader {
    id: u64,
    /// The attached cell: in the task's future ([`attach`]), or owned by this header (tagged
    /// with [`OWNED_CELL`], from [`attach_owned`]) and freed with it. Read through [`cell`].
    trace: AtomicPtr<TraceCell>,
    /// The [`TaskState`] in the low bits; while the task runs, also the per-poll publication
    /// bits ([`PUBLISHED`], [`RELINKED`]). Only the thread polling the task writes it during a
    /// poll (async-task calls the schedule function, which marks it scheduled, only between
    /// polls), so plain loads and stores suffice; other threads only read it, for snapshots.
    state: AtomicU8,
    /// The address of the innermost frame of the stack last published, while nothing since can
    /// have changed that stack; else [`UNKNOWN`]. Only the polling thread uses it. (Here rather
    /// than in the trace cell, so that the common check needs no cell.)
    last: AtomicUsize,
    /// The pool of a pool task. Kept here rather than captured by the schedule function, so that
    /// the schedule function is zero-sized and async-task does not take and release a
    /// reference to the task around every call of it.
    pool: Option<std::sync::Arc<crate::pool::Shared>>,
}

impl TaskHeader {
    /// A header for a new task.
    pub(crate) fn new() -> TaskHeader {
        TaskHeader::with_pool(None)
    }

    /// A header for a new task of `pool`.
    pub(crate) fn for_pool(pool: std::sync::Arc<crate::pool::Shared>) -> TaskHeader {
        TaskHeader::with_pool(Some(pool))
    }

    fn with_pool(pool: Option<std::sync::Arc<crate::pool::Shared>>) -> TaskHeader {
        TaskHeader {
            id: next_id(),
            trace: AtomicPtr::new(ptr::null_mut()),
            state: AtomicU8::new(SCHEDULED),
            last: AtomicUsize::new(UNKNOWN),
            pool,
        }
    }

    /// The pool of a pool task.
    pub(crate) fn pool(&self) -> Option<&std::sync::Arc<crate::pool::Shared>> {
        self.pool.as_ref()
    }

    /// Marks the task queued (woken, or just spawned). Compiled out with tracing
    /// (`--cfg coro_untraced`, a build for measuring its cost), as the other state marks are.
    #[inline]
    pub(crate) fn mark_scheduled(&self) {
        #[cfg(not(coro_untraced))]
        self.state.store(SCHEDULED, Relaxed);
    }

    /// The task's id.
    ///
    /// ```
    /// # let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// # drop(pool);
    /// ```
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The task's state right now.
    ///
    /// ```
    /// # let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// # drop(pool);
    /// ```
    pub fn state(&self) -> TaskState {
        match self.state.load(Relaxed) & STATE {
            RUNNING => TaskState::Running,
            SCHEDULED => TaskState::Scheduled,
            _ => TaskState::Suspended,
        }
    }

    /// Copies what a dump shows of this task.
    ///
    /// The attached cell, if any, without its ownership tag.
    fn cell(&self, order: Ordering) -> *mut TraceCell {
        self.trace.load(order).map_addr(|addr| addr & !OWNED_CELL)
    }

    /// # Safety
    /// The caller holds the lock of the task-list shard listing this task, so the task's future
    /// (which owns the attached `TraceCell`) is not being dropped: the entry is removed, under
    /// that lock, before the future's fields are.
    pub(crate) unsafe fn snapshot(&self) -> TaskSnapshot {
        let cell = self.cell(Acquire);
        // SAFETY: a non-null `trace` points into this task's future, alive per the contract above.
        let (name, parent, frames) = match unsafe { cell.as_ref() } {
            Some(cell) => {
                // SAFETY: the root frame and the published box are alive as long as the cell
                // (inside the same future, or owned by the cell); `attach` set `root` before it
                // published the cell (Release, paired with the Acquire above).
                let root = unsafe { &*cell.root.load(Relaxed) };
                let published = cell.published.load(Acquire);
                // Nothing published yet (a task in its first poll, or never polled): its stack
                // is its root frame, as for a task suspended there.
                let frames = if published == ROOT_ONLY || published.is_null() {
                    vec![root.clone()]
                } else {
                    // SAFETY: any other non-null value is the cell's box (see `published`).
                    unsafe { published.as_ref() }
                        .map_or_else(Vec::new, |p| p.frames.lock().unwrap().clone())
                };
                (
                    Some(root.name.to_cow()),
                    cell.parent.map(NonZeroU64::get),
                    frames,
                )
            }
            None => (None, None, Vec::new()),
        };
        TaskSnapshot {
            id: self.id,
            parent,
            state: self.state(),
            name,
            frames,
        }
    }
}

/// The tag of [`TaskHeader::trace`] for a cell the header owns (cells are 8-aligned, so the
/// bit is free).
const OWNED_CELL: usize = 1;

impl Drop for TaskHeader {
    fn drop(&mut self) {
        let tagged = *self.trace.get_mut();
        if tagged.addr() & OWNED_CELL != 0 {
            // SAFETY: a tagged pointer is the first field of an `OwnedCell` that came from
            // `Box::into_raw` in `attach_owned` (`repr(C)`: the same address), and only this drop
            // frees it; the task is gone (async-task drops the header last), so no
            // snapshot can read the cell any more (it was unlisted before its future dropped).
            let owned = tagged
                .map_addr(|addr| addr & !OWNED_CELL)
                .cast::<OwnedCell>();
            // SAFETY: as above: the box `attach_owned` made, freed once, here.
            drop(unsafe { Box::from_raw(owned) });
        }
    }
}

impl fmt::Debug for TaskHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHeader")
            .field("id", &self.id)
            .field("state", &self.state())
            .finish()
    }
}

/// Ids are handed out in blocks per thread so that spawning on many threads at once does not
/// contend on one counter.
fn next_id() -> u64 {
    const BLOCK: u64 = 1024;
    static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static RANGE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    }
    RANGE.with(|r| {
        let (mut next, mut end) = r.get();
        if next == end {
            next = NEXT_BLOCK.fetch_add(BLOCK, Relaxed);
            end = next + BLOCK;
        }
        r.set((next + 1, end));
        next
    })
}

/// The trace storage a layer above embeds in a task's future and [`attach`]es, with the task's
/// root frame: where snapshots find the task's name, its parent and its most recently published
/// stack.
///
/// Three words, as it is in every task: the published stack, which only tasks that suspend
/// need, is allocated at the first publication, and the root frame is the one the task's future
/// has anyway. (A larger cell made small roots larger than the compiler copies without a
/// `memcpy` call.)
///
/// ```
/// use coro_executor::trace::TraceCell;
///
/// let cell = TraceCell::new();
/// assert!(!cell.is_attached());
/// ```
pub struct TraceCell {
    /// The task's outermost frame, inside its future; null until [`attach`].
    root: AtomicPtr<Frame>,
    /// Task ids start at 1, so the niche keeps this at 8 bytes.
    parent: Option<NonZeroU64>,
    /// Null until the first publication; [`ROOT_ONLY`] while every publication so far was of
    /// the root frame alone (nothing to copy: snapshots read that frame from the task itself);
    /// then set once to a box, freed with the cell.
    published: AtomicPtr<Published>,
}

/// The bit of [`TraceCell::parent`] that says the parent awaits the task (ids never reach it).
const AWAITED_BY_PARENT: u64 = 1 << 63;

/// [`TraceCell::published`]: the stack is the root frame alone. Never the address of a box
/// (no allocation lives at the lowest aligned address).
const ROOT_ONLY: *mut Published = ptr::dangling_mut();

/// A task's most recently published stack, innermost frame first, and its fingerprint.
struct Published {
    frames: Mutex<Vec<Frame>>,
    fingerprint: AtomicU64,
}

impl TraceCell {
    /// A cell for a task spawned by the task running on this thread (if any), which becomes its
    /// parent in snapshots.
    ///
    /// ```
    /// let cell = coro_executor::trace::TraceCell::new();
    /// # drop(cell);
    /// ```
    #[inline]
    pub fn new() -> Self {
        TraceCell::with_parent(current_task_id())
    }

    /// A cell like [`new`](Self::new)'s, whose parent in snapshots is `parent` instead of the
    /// task running on this thread: for a task spawned on behalf of another one (a helper that
    /// a helper spawns for the same collect belongs under the collect's task). Task ids start
    /// at 1, so `Some(0)` means no parent, as `None` does.
    ///
    /// ```
    /// let cell = coro_executor::trace::TraceCell::with_parent(Some(7));
    /// # drop(cell);
    /// ```
    #[inline]
    pub fn with_parent(parent: Option<u64>) -> Self {
        TraceCell {
            root: AtomicPtr::new(ptr::null_mut()),
            parent: parent.and_then(NonZeroU64::new),
            published: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// A cell whose parent in snapshots is `parent`, which also *awaits* this task where it
    /// waits (a collect's child driven by a task of its own): a dump continues this task's stack
    /// into its parent's ([`TaskSnapshot::awaited_by_parent`]).
    ///
    /// ```
    /// let cell = coro_executor::trace::TraceCell::awaited_by(Some(7));
    /// # drop(cell);
    /// ```
    #[inline]
    pub fn awaited_by(parent: Option<u64>) -> Self {
        TraceCell {
            root: AtomicPtr::new(ptr::null_mut()),
            // Ids start at 1: 0 (no parent) stays no parent, without the mark.
            parent: parent
                .filter(|&p| p != 0)
                .and_then(|p| NonZeroU64::new(p | AWAITED_BY_PARENT)),
            published: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Whether [`attach`] has attached this cell to a task.
    ///
    /// ```
    /// assert!(!coro_executor::trace::TraceCell::new().is_attached());
    /// ```
    #[inline]
    pub fn is_attached(&self) -> bool {
        !self.root.load(Relaxed).is_null()
    }

    /// Publishes `frames()` unless `fingerprint` says it is the stack already published. Only
    /// the thread polling the task calls this.
    fn publish(&self, alone: bool, fingerprint: fn() -> u64, frames: fn() -> Vec<Frame>) {
        let current = self.published.load(Relaxed);
        if current.is_null() || current == ROOT_ONLY {
            if alone {
                // The common case of a spawned future waiting on something that is not a Task:
                // nothing to copy and nothing to allocate. Release: pairs with a snapshot's
                // Acquire, as for a box.
                if current.is_null() {
                    self.published.store(ROOT_ONLY, Release);
                }
                return;
            }
            let published = Box::new(Published {
                frames: Mutex::new(frames()),
                fingerprint: AtomicU64::new(fingerprint()),
            });
            // Release: a snapshot that sees the box sees its contents.
            self.published.store(Box::into_raw(published), Release);
        } else {
            // SAFETY: any other non-null value is a box this cell owns until it is dropped.
            let published = unsafe { &*current };
            let fingerprint = fingerprint();
            if published.fingerprint.load(Relaxed) != fingerprint {
                published.store(fingerprint, frames());
            }
        }
    }
}

impl Published {
    #[inline(never)]
    fn store(&self, fingerprint: u64, frames: Vec<Frame>) {
        *self.frames.lock().unwrap() = frames;
        self.fingerprint.store(fingerprint, Relaxed);
    }
}

impl Default for TraceCell {
    /// [`TraceCell::new`].
    ///
    /// ```
    /// let cell = coro_executor::trace::TraceCell::default();
    /// # drop(cell);
    /// ```
    fn default() -> Self {
        TraceCell::new()
    }
}

impl Drop for TraceCell {
    #[inline]
    fn drop(&mut self) {
        let published = *self.published.get_mut();
        if !published.is_null() && published != ROOT_ONLY {
            free_published(published);
        }
    }
}

/// Frees a published stack: out of line, as a task that never suspended has none.
#[inline(never)]
fn free_published(published: *mut Published) {
    // SAFETY: `published` was leaked by `TraceCell::publish` and is freed only here, by the
    // cell's drop. No snapshot reads it any more: the cell is dropped with its task's future,
    // after the task left its list (see `TaskHeader::snapshot`).
    drop(unsafe { Box::from_raw(published) });
}

impl fmt::Debug for TraceCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceCell")
            .field("attached", &self.is_attached())
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// The header of the task being polled on this thread.
    static CURRENT: Cell<*const TaskHeader> = const { Cell::new(ptr::null()) };
}

/// Marks `header`'s task running on this thread until the guard drops, which marks it suspended
/// (a wake-up during the poll makes async-task schedule it right after, which marks it
/// scheduled again).
#[inline]
#[cfg(not(coro_untraced))]
pub(crate) fn enter(header: &TaskHeader) -> Running<'_> {
    header.state.store(RUNNING, Relaxed);
    let prev = CURRENT.with(|c| c.replace(header));
    Running { header, prev }
}

/// Tracing compiled out (`--cfg coro_untraced`, a build only for measuring what tracing costs):
/// no state, no current task.
#[inline]
#[cfg(coro_untraced)]
pub(crate) fn enter(header: &TaskHeader) -> Running<'_> {
    Running {
        header,
        prev: ptr::null(),
    }
}

pub(crate) struct Running<'a> {
    header: &'a TaskHeader,
    prev: *const TaskHeader,
}

#[cfg(not(coro_untraced))]
impl Drop for Running<'_> {
    #[inline]
    fn drop(&mut self) {
        self.header.state.store(SUSPENDED, Relaxed);
        CURRENT.with(|c| c.set(self.prev));
    }
}

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
            header.last.store(UNKNOWN, Relaxed);
            // Release: a snapshot that sees the cell sees its root.
            header.trace.store(ptr::from_ref(cell).cast_mut(), Release);
            true
        }
        None => false,
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
    if !header.trace.load(Relaxed).is_null() {
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
    header.last.store(UNKNOWN, Relaxed);
    // Release: a snapshot that sees the cell sees its root. Only the polling thread attaches.
    header
        .trace
        .store(cell.map_addr(|addr| addr | OWNED_CELL), Release);
    true
}

/// A cell owned by its task's header, with its own copy of the root frame (the frame it was
/// given may not outlive the task's future). `cell` first, so a pointer to it is one to the
/// whole (`repr(C)`).
#[repr(C)]
struct OwnedCell {
    cell: TraceCell,
    root: Frame,
}

/// The header of the task being polled on this thread, if any.
#[inline]
fn current_header<'a>() -> Option<&'a TaskHeader> {
    // SAFETY: `CURRENT` points at the header of the task whose poll is on this thread's stack
    // (set by `enter`, restored when that poll returns), which outlives the poll; callers use
    // the reference only within the poll they are called from.
    CURRENT.with(|c| unsafe { c.get().as_ref() })
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
    if state == RUNNING {
        // The first suspension of this poll, and no frame relinked: the common case. (Plain
        // stores: only this thread writes the state during the poll.)
        header.state.store(RUNNING | PUBLISHED, Relaxed);
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
    let owned = header.trace.load(Relaxed).addr() & OWNED_CELL != 0;
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
/// // Outside a task there is no stack to invalidate.
/// coro_executor::trace::note_relinked();
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
        header.last.store(UNKNOWN, Relaxed);
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
    struct Restore<'a>(&'a TaskHeader, u8);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.state.store(self.1, Relaxed);
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

/// A copy of what is known about one live task; from [`snapshot_tasks`].
///
/// ```
/// for task in coro_executor::trace::snapshot_tasks() {
///     println!("{} {} {}", task.id(), task.name(), task.state());
/// }
/// ```
#[derive(Clone, Debug)]
pub struct TaskSnapshot {
    id: u64,
    parent: Option<u64>,
    state: TaskState,
    name: Option<Cow<'static, str>>,
    frames: Vec<Frame>,
}

impl TaskSnapshot {
    /// The task's id, unique for the life of the process.
    ///
    /// ```
    /// let ids: Vec<u64> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.id()).collect();
    /// # drop(ids);
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id of the task that spawned this one, if it was spawned from inside a task and
    /// carries a trace cell.
    ///
    /// ```
    /// let parents: Vec<Option<u64>> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.parent_id()).collect();
    /// # drop(parents);
    /// ```
    pub fn parent_id(&self) -> Option<u64> {
        self.parent.map(|parent| parent & !AWAITED_BY_PARENT)
    }

    /// Whether the parent awaits this task where it waits ([`TraceCell::awaited_by`]: a
    /// collect's child driven by a task of its own), so that its stack continues into the
    /// parent's.
    ///
    /// ```
    /// let awaited = coro_executor::trace::snapshot_tasks().iter().filter(|t| t.awaited_by_parent()).count();
    /// # drop(awaited);
    /// ```
    pub fn awaited_by_parent(&self) -> bool {
        self.parent
            .is_some_and(|parent| parent & AWAITED_BY_PARENT != 0)
    }

    /// Appends `frames` (outermost last) to this task's stack: for a dump that continues an
    /// awaited task's stack into its awaiter's. Not for general use.
    ///
    /// ```
    /// # for mut task in coro_executor::trace::snapshot_tasks() {
    /// task.continue_into(&[]);
    /// # }
    /// ```
    #[doc(hidden)]
    pub fn continue_into(&mut self, frames: &[Frame]) {
        self.frames.extend_from_slice(frames);
    }

    /// Running, scheduled or suspended.
    ///
    /// ```
    /// let states: Vec<_> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.state()).collect();
    /// # drop(states);
    /// ```
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// The task's name: its root frame's, or `<not started>` for a task never polled yet, or
    /// `<untraced>` for a future spawned without a trace cell.
    ///
    /// ```
    /// let names: Vec<String> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.name().to_owned()).collect();
    /// # drop(names);
    /// ```
    pub fn name(&self) -> &str {
        match &self.name {
            Some(name) => name,
            None if self.state == TaskState::Scheduled && self.frames.is_empty() => "<not started>",
            None => "<untraced>",
        }
    }

    /// The stack where the task last suspended, innermost frame first (empty if it never did).
    ///
    /// ```
    /// let depth: usize = coro_executor::trace::snapshot_tasks().iter().map(|t| t.frames().len()).sum();
    /// # drop(depth);
    /// ```
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }
}

/// Every live task of every executor (pools, and any executor spawned on through an
/// [`ExecutorHandle`](crate::ExecutorHandle)), at one moment.
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let stuck = pool.spawn(std::future::pending::<()>());
/// std::thread::sleep(std::time::Duration::from_millis(20));
/// assert!(!coro_executor::trace::snapshot_tasks().is_empty());
/// stuck.cancel();
/// ```
pub fn snapshot_tasks() -> Vec<TaskSnapshot> {
    let mut out = Vec::new();
    crate::pool::for_each_pool_task_list(|list| list.snapshot_into(&mut out));
    crate::executor::other_tasks().snapshot_into(&mut out);
    out
}
