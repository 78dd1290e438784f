//! [`TaskHeader`]: what the executor keeps about each task in the task's allocation (id,
//! state, the attached trace cell, its owner), the task states, and the per-thread id blocks.

use super::owner::OwnerRef;
use crate::trace::{OwnedCell, TaskStats, TraceCell};
use std::cell::Cell;
use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, Ordering::*};

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

pub(crate) const RUNNING: u8 = 0;
const SCHEDULED: u8 = 1;
pub(crate) const SUSPENDED: u8 = 2;
/// The bits of [`TaskHeader::state`] that hold the [`TaskState`].
const STATE: u8 = 3;
/// Per-poll bit of [`TaskHeader::state`]: this poll has published its stack (or publication is
/// off), so later suspensions in it do not. Cleared by the store that marks the task running.
pub(crate) const PUBLISHED: u8 = 4;
/// Per-poll bit of [`TaskHeader::state`]: a frame was entered under another awaiter than at its
/// previous poll, so this poll's stack may differ from the one last published.
pub(crate) const RELINKED: u8 = 8;

/// [`TaskHeader::last`] when the next suspension must compare the whole stack.
pub(crate) const UNKNOWN: usize = 0;

/// What the executor keeps about each task inside the task's allocation (async-task's
/// metadata): its id, the id of the task that spawned it, its state, and the trace cell attached
/// by a layer above. Reached through [`Runnable::metadata`](async_task::Runnable::metadata).
///
/// ```
/// use coro_executor::trace::{TaskState, current_task_id};
/// use coro_executor::{Executor, ExecutorHandle, Runnable};
/// use std::sync::{Mutex, mpsc};
///
/// /// Sends each runnable it is given to a channel.
/// struct Channel(Mutex<mpsc::Sender<Runnable>>);
///
/// impl Executor for Channel {
///     fn schedule(&self, runnable: Runnable) {
///         self.0.lock().unwrap().send(runnable).unwrap();
///     }
/// }
///
/// let (tx, rx) = mpsc::channel();
/// let join = ExecutorHandle::new(Channel(Mutex::new(tx))).spawn(async { current_task_id() });
/// let runnable = rx.recv().unwrap();
/// let header = runnable.metadata();
/// assert_eq!(header.state(), TaskState::Scheduled);
/// let id = header.id();
/// runnable.run();
/// assert_eq!(futures::executor::block_on(join).unwrap(), Some(id));
/// ```
pub struct TaskHeader {
    id: u64,
    /// The attached cell: in the task's future (`trace::attach`), or owned by this header
    /// (tagged with [`OWNED_CELL`], from `trace::attach_owned`) and freed with it. Read through
    /// [`cell`](Self::cell).
    pub(crate) trace: AtomicPtr<TraceCell>,
    /// The [`TaskState`] in the low bits; while the task runs, also the per-poll publication
    /// bits ([`PUBLISHED`], [`RELINKED`]). Only the thread polling the task writes it during a
    /// poll (async-task calls the schedule function, which marks it scheduled, only between
    /// polls), so plain loads and stores suffice; other threads only read it, for snapshots.
    pub(crate) state: AtomicU8,
    /// The address of the innermost frame of the stack last published, while nothing since can
    /// have changed that stack; else [`UNKNOWN`]. Only the polling thread uses it. (Here rather
    /// than in the trace cell, so that the common check needs no cell.)
    pub(crate) last: AtomicUsize,
    /// The executor of a task whose schedule function finds it here (a pool's). Kept here
    /// rather than captured by the schedule function, so that the schedule function is
    /// zero-sized and async-task does not take and release a reference to the task around
    /// every call of it. Type-erased (see `owner.rs`) so that this layer names no executor.
    owner: Option<OwnerRef>,
    /// Counters for consoles (polls, busy and queued time, wakes, what it waits on); counted
    /// only while someone looks (see `trace/stats.rs`).
    pub(crate) stats: TaskStats,
}

impl TaskHeader {
    /// A header for a new task.
    pub(crate) fn new() -> TaskHeader {
        TaskHeader::with_owner(None)
    }

    /// A header for a new task whose schedule function finds its executor through `owner`.
    pub(crate) fn with_owner(owner: Option<OwnerRef>) -> TaskHeader {
        TaskHeader {
            id: next_id(),
            trace: AtomicPtr::new(ptr::null_mut()),
            state: AtomicU8::new(SCHEDULED),
            last: AtomicUsize::new(UNKNOWN),
            owner,
            stats: TaskStats::new(),
        }
    }

    /// The executor given to [`with_owner`](Self::with_owner).
    #[inline]
    pub(crate) fn owner(&self) -> Option<&OwnerRef> {
        self.owner.as_ref()
    }

    /// Marks the task queued (woken, or just spawned). Compiled out with tracing
    /// (`--cfg coro_untraced`, a build for measuring its cost), as the other state marks are.
    #[inline]
    pub(crate) fn mark_scheduled(&self) {
        #[cfg(not(coro_untraced))]
        {
            self.stats
                .on_scheduled(|| self.state.load(Relaxed) & STATE != SCHEDULED);
            self.state.store(SCHEDULED, Relaxed);
        }
    }

    /// The task's id.
    ///
    /// ```
    /// # use coro_executor::{Executor, ExecutorHandle, Runnable};
    /// # use std::sync::{Mutex, mpsc};
    /// # struct Channel(Mutex<mpsc::Sender<Runnable>>);
    /// # impl Executor for Channel {
    /// #     fn schedule(&self, runnable: Runnable) {
    /// #         self.0.lock().unwrap().send(runnable).unwrap();
    /// #     }
    /// # }
    /// # let (tx, rx) = mpsc::channel();
    /// # let handle = ExecutorHandle::new(Channel(Mutex::new(tx)));
    /// // `handle`'s executor sends each runnable it is given to `rx`.
    /// let join = handle.spawn(async { coro_executor::trace::current_task_id() });
    /// let runnable = rx.recv().unwrap();
    /// let id = runnable.metadata().id();
    /// runnable.run();
    /// assert_eq!(futures::executor::block_on(join).unwrap(), Some(id));
    /// ```
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The task's state right now.
    ///
    /// ```
    /// # use coro_executor::{Executor, ExecutorHandle, Runnable};
    /// # use std::sync::{Mutex, mpsc};
    /// # struct Channel(Mutex<mpsc::Sender<Runnable>>);
    /// # impl Executor for Channel {
    /// #     fn schedule(&self, runnable: Runnable) {
    /// #         self.0.lock().unwrap().send(runnable).unwrap();
    /// #     }
    /// # }
    /// # let (tx, rx) = mpsc::channel();
    /// # let handle = ExecutorHandle::new(Channel(Mutex::new(tx)));
    /// // `handle`'s executor sends each runnable it is given to `rx`.
    /// let join = handle.spawn(async {});
    /// let runnable = rx.recv().unwrap();
    /// // Queued on its executor, not run yet.
    /// assert_eq!(runnable.metadata().state(), coro_executor::trace::TaskState::Scheduled);
    /// runnable.run();
    /// assert!(join.is_finished());
    /// ```
    pub fn state(&self) -> TaskState {
        match self.state.load(Relaxed) & STATE {
            RUNNING => TaskState::Running,
            SCHEDULED => TaskState::Scheduled,
            _ => TaskState::Suspended,
        }
    }

    /// The attached cell, if any, without its ownership tag.
    pub(crate) fn cell(&self, order: Ordering) -> *mut TraceCell {
        self.trace.load(order).map_addr(|addr| addr & !OWNED_CELL)
    }
}

/// The tag of [`TaskHeader::trace`] for a cell the header owns (cells are 8-aligned, so the
/// bit is free).
pub(crate) const OWNED_CELL: usize = 1;

impl Drop for TaskHeader {
    fn drop(&mut self) {
        let tagged = *self.trace.get_mut();
        if tagged.addr() & OWNED_CELL != 0 {
            // SAFETY: a tagged pointer is the first field of an `OwnedCell` that came from
            // `Box::into_raw` in `trace::attach_owned` (`repr(C)`: the same address), and only this drop
            // frees it; the task is gone (async-task drops the header last), so no
            // snapshot can read the cell any more (it was unlisted before its future dropped).
            let owned = tagged
                .map_addr(|addr| addr & !OWNED_CELL)
                .cast::<OwnedCell>();
            // SAFETY: as above: the box `trace::attach_owned` made, freed once, here.
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
