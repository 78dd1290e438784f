//! [`TaskHeader`]: what the executor keeps about each task in the task's allocation (id,
//! state and wait slot, the attached trace cell or statistics block, its owner), the task
//! states, and the per-thread id blocks.
//!
//! Rule: the header is 48 bytes and stays so; every task pays for it, and the memory budgets
//! (`tests/memory.rs`, coro's `tests/allocations.rs`) hold it there. (Its task-list entry is
//! here rather than in the task's future so that a task is listed after it is built: nothing
//! of a spawner's runs under the list's lock. The task as a whole is no larger for it.) What a console counts per
//! task (`trace/stats.rs`) lives in a block outside the task, reached through the trace
//! pointer's tag, and exists only for tasks that suspended while statistics were on. What a
//! task waits on shares the state word: it must be known at all times (a deadlock that formed
//! before anyone looked is still one), and the state byte left 56 bits of padding.

use super::owner::OwnerRef;
use crate::trace::{FirstPoll, OwnedCell, PollCount, StatsBlock, TaskStats, TraceCell};
use std::cell::Cell;
use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering, Ordering::*};
/// The state word and the trace pointer are the models' (`trace/loom_publish.rs` checks a poll
/// against a snapshot taken on another thread); the other words are std's.
type StateWord = crate::loom::sync::atomic::AtomicU64;
/// See [`StateWord`].
type TracePtr = crate::loom::sync::atomic::AtomicPtr<TraceCell>;

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

pub(crate) const RUNNING: u64 = 0;
const SCHEDULED: u64 = 1;
pub(crate) const SUSPENDED: u64 = 2;
/// The bits of [`TaskHeader::state`] that hold the [`TaskState`].
const STATE: u64 = 3;
/// Per-poll bit of [`TaskHeader::state`]: this poll has published its stack (or publication is
/// off), so later suspensions in it do not. Cleared by the store that marks the task running.
pub(crate) const PUBLISHED: u64 = 4;
/// Per-poll bit of [`TaskHeader::state`]: a frame was entered under another awaiter than at its
/// previous poll, so this poll's stack may differ from the one last published.
pub(crate) const RELINKED: u64 = 8;
/// The low byte of [`TaskHeader::state`]: the [`TaskState`] and the publication bits. The
/// bits above it are the task's wait slot (`trace/wait.rs`), which state changes keep.
pub(crate) const STATE_BYTE: u64 = 0xff;

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
    /// (tagged with [`OWNED_CELL`], from `trace::attach_owned`) and freed with it. Or, tagged
    /// with [`STATS_BLOCK`], the task's statistics block, which holds the cell pointer in its
    /// stead. Read through [`cell`](Self::cell) and [`stats`](Self::stats); written only by
    /// the thread polling the task (attaching a cell, installing a block) or by the spawner
    /// before the task exists, so plain stores suffice; snapshots read it with `Acquire`.
    trace: TracePtr,
    /// The [`TaskState`] in the low bits and, while the task runs, the per-poll publication
    /// bits ([`PUBLISHED`], [`RELINKED`]): the [`STATE_BYTE`]. Above it, the task's wait slot
    /// (`trace/wait.rs`). Written only by the thread polling the task (the state around the
    /// poll, the wait slot by registrations made in the poll) or by the thread calling its
    /// schedule function, which async-task calls only between polls, its own state atomics
    /// ordering one writer before the next: so plain loads and stores suffice, and a write of
    /// one part keeps the other. Other threads only read it, for snapshots.
    pub(crate) state: StateWord,
    /// The address of the innermost frame of the stack last published, while nothing since can
    /// have changed that stack; else [`UNKNOWN`]. Only the polling thread uses it. (Here rather
    /// than in the trace cell, so that the common check needs no cell.)
    pub(crate) last: AtomicUsize,
    /// The executor of a task whose schedule function finds it here (a pool's). Kept here
    /// rather than captured by the schedule function, so that the schedule function is
    /// zero-sized and async-task does not take and release a reference to the task around
    /// every call of it. Type-erased (see `owner.rs`) so that this layer names no executor.
    owner: Option<OwnerRef>,
    /// The task's slot in its task list, type-erased (the list's business, see `list.rs`), or
    /// null while the task is not listed: not yet, or never (blocking tasks, tasks refused at
    /// shutdown). Written once, by the spawner listing the task, before the task is queued or
    /// its handle returned; read by whoever drops the task's future, which that hand-over
    /// orders after the write.
    entry: AtomicPtr<()>,
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
            trace: TracePtr::new(ptr::null_mut()),
            state: StateWord::new(SCHEDULED),
            // Spawned while statistics are on: marked, so that its time queued before its first
            // poll is known (a task that never gets polled is the one that starves).
            last: AtomicUsize::new(crate::trace::spawn_mark(UNKNOWN)),
            owner,
            entry: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The task's list entry (see the field), or null if it is not listed.
    #[inline]
    pub(crate) fn entry(&self) -> *mut () {
        self.entry.load(Relaxed)
    }

    /// Records the task's list entry: only its lister, once, before the task is shared.
    #[inline]
    pub(crate) fn set_entry(&self, entry: *mut ()) {
        self.entry.store(entry, Relaxed);
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
            let word = self.state.load(Relaxed);
            if crate::trace::stats_enabled() {
                self.count_schedule();
            }
            self.set_state(word, SCHEDULED);
        }
    }

    /// Replaces the [`STATE_BYTE`] of `word` (the state word as just loaded by its one writer)
    /// with `byte`, keeping the wait slot.
    #[inline]
    pub(crate) fn set_state(&self, word: u64, byte: u64) {
        self.state.store((word & !STATE_BYTE) | byte, Relaxed);
    }

    /// [`set_state`](Self::set_state) with a `Release` store: the end of a poll, after which a
    /// reader that sees the new state must see what the poll published (its stack).
    #[inline]
    pub(crate) fn set_state_release(&self, word: u64, byte: u64) {
        self.state.store((word & !STATE_BYTE) | byte, Release);
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
        // Acquire: pairs with the `Release` that ends a poll (`task/current.rs`), so a reader
        // that sees the task suspended sees the stack that suspension published (or a later
        // one): snapshots read the state before the stack for that reason.
        match self.state.load(Acquire) & STATE {
            RUNNING => TaskState::Running,
            SCHEDULED => TaskState::Scheduled,
            _ => TaskState::Suspended,
        }
    }

    /// The attached cell, if any, without its ownership tag.
    pub(crate) fn cell(&self, order: Ordering) -> *mut TraceCell {
        self.tagged_cell(order).map_addr(|addr| addr & !OWNED_CELL)
    }

    /// The attached cell, if any, with its [`OWNED_CELL`] tag.
    pub(crate) fn tagged_cell(&self, order: Ordering) -> *mut TraceCell {
        let word = self.trace.load(order);
        match Self::block_of(word) {
            // SAFETY: a block, once installed, lives as long as the header (freed by its drop).
            Some(block) => unsafe { block.as_ref() }.cell.load(order),
            None => word,
        }
    }

    /// Attaches `tagged` (a cell, perhaps with its [`OWNED_CELL`] tag) with a `Release` store.
    /// Only the thread polling the task calls it.
    pub(crate) fn set_cell(&self, tagged: *mut TraceCell) {
        let word = self.trace.load(Relaxed);
        match Self::block_of(word) {
            // SAFETY: a block, once installed, lives as long as the header (freed by its drop).
            Some(block) => unsafe { block.as_ref() }.cell.store(tagged, Release),
            None => self.trace.store(tagged, Release),
        }
    }

    /// The task's statistics, if it has a block (it suspended while they were on).
    #[inline]
    pub(crate) fn stats(&self) -> Option<&TaskStats> {
        // Acquire: pairs with the `Release` that installed the block (a snapshot's read; the
        // pollers and schedulers are ordered after the install by async-task already).
        self.block_stats(Acquire)
    }

    /// The statistics in the block that `word`, the trace word, is tagged with, if it is.
    #[inline]
    fn stats_of(&self, word: *mut TraceCell) -> Option<&TaskStats> {
        // Branches on the tag alone (an `Option` of the block's address would be tested for
        // null as well, once more per poll and schedule).
        if word.addr() & STATS_BLOCK == 0 {
            return None;
        }
        let block = word.map_addr(|a| a & !STATS_BLOCK).cast::<StatsBlock>();
        // SAFETY: the tag is set only on the address of an installed block (`install_block`),
        // which lives as long as the header (handed back by its drop), and `self` borrows it.
        Some(&unsafe { &*block }.stats)
    }

    /// The statistics in the task's block, if it has one, reading the trace word with `order`.
    #[inline]
    fn block_stats(&self, order: Ordering) -> Option<&TaskStats> {
        self.stats_of(self.trace.load(order))
    }

    /// Counts a schedule of the task (statistics are on): inline, a few instructions; nothing
    /// for a task without a block (one spawned while they are on is marked at its spawn).
    #[inline]
    fn count_schedule(&self) {
        // Relaxed: the block was installed at the end of a poll, which async-task orders before
        // this schedule of the task.
        if let Some(stats) = self.block_stats(Relaxed) {
            stats.on_scheduled();
        }
    }

    /// Counts the start of a poll on this thread (statistics are on); what it returns goes to
    /// [`count_poll_end`](Self::count_poll_end). A task without a block is marked running
    /// since now in its `last` word (see `trace/stats.rs`, `mark`).
    #[inline]
    pub(crate) fn count_poll_start(&self) -> PollCount {
        // Relaxed: only the thread polling the task installs a block, and async-task orders
        // this poll after the one that did.
        let word = self.trace.load(Relaxed);
        match self.stats_of(word) {
            Some(stats) => {
                stats.poll_started();
                PollCount::in_block(word)
            }
            None => PollCount::first(&self.last),
        }
    }

    /// Counts the end of the poll that [`count_poll_start`](Self::count_poll_start) began (or
    /// nothing, for one begun while statistics were off), which returned `Pending` if
    /// `pending`. A task without a block gets one when it suspends: one that finishes in its
    /// first poll never needs one.
    #[inline]
    pub(crate) fn count_poll_end(&self, count: PollCount, pending: bool) {
        if !count.counted() {
            return;
        }
        match self.stats_of(count.trace_word()) {
            Some(stats) => stats.poll_ended(),
            None if pending => {
                let (at, spawned) = count.first_poll();
                self.install_block(at, spawned);
            }
            None => {}
        }
    }

    /// Gives the task, whose first counted poll (begun at `at`; `spawned` as in
    /// [`PollCount::first_poll`]) just returned `Pending`, its block. Out of line: once per task.
    /// Only the thread polling the task calls it (`count_poll_end`, and the models in
    /// `trace/loom_stats.rs`).
    #[cold]
    #[inline(never)]
    pub(crate) fn install_block(&self, at: u64, spawned: u64) {
        // Relaxed: only this thread (polling the task) writes the trace word now.
        let word = self.trace.load(Relaxed);
        let now = crate::trace::tick();
        let block = StatsBlock::for_first_poll(word, &FirstPoll { at, spawned, now });
        // Release: a snapshot that sees the block sees its counters set and the cell pointer
        // moved into it (and none of what the block held for a task before, see
        // `trace/block.rs`).
        self.trace
            .store(block.as_ptr().map_addr(|a| a | STATS_BLOCK).cast(), Release);
        // The running mark is the block's business now (a mark in `last` only makes the next
        // publication compare the whole stack, as `UNKNOWN` does).
        if crate::trace::is_mark(self.last.load(Relaxed)) {
            self.last.store(UNKNOWN, Relaxed);
        }
    }

    /// The block `word` (the trace word) points at, if it is tagged as one.
    #[inline]
    fn block_of(word: *mut TraceCell) -> Option<ptr::NonNull<StatsBlock>> {
        if word.addr() & STATS_BLOCK == 0 {
            return None;
        }
        let block = word.map_addr(|a| a & !STATS_BLOCK).cast::<StatsBlock>();
        // SAFETY: the tag is set only on the address of a block (`install_block`), never null.
        Some(unsafe { ptr::NonNull::new_unchecked(block) })
    }
}
/// The tag of [`TaskHeader::trace`] for a cell the header owns (cells are 8-aligned, so the
/// bit is free).
pub(crate) const OWNED_CELL: usize = 1;

/// The tag of [`TaskHeader::trace`] for the task's statistics block (8-aligned too), which
/// holds the cell pointer, with its own tag, in its stead.
///
/// Why there and not in a field of its own: a field would add 8 bytes to every task, statistics
/// on or not, which the memory budgets forbid; an index into a global slab kept in the state
/// word's padding would leave no room for the wait slot there. The tag costs nothing while
/// statistics are off (no block, nothing to read), and one dependent load per poll while they
/// are on. A block is made only when a task suspends while they are on (at the end of that
/// poll, on the thread that polled it): most tasks of a spawn-heavy service finish in their
/// first poll, and a block made at the spawn cost those a second allocation (and a cache line
/// moved to the worker that polls it). A block stays until the task ends: freeing it when
/// statistics go off would race with a snapshot reading it. Then it goes to the spares of the
/// thread that drops the task, for the next task that suspends there (`trace/block.rs`).
pub(crate) const STATS_BLOCK: usize = 2;

impl Drop for TaskHeader {
    fn drop(&mut self) {
        // A load rather than `get_mut`, which the models' pointer lacks; nothing races a drop.
        let mut tagged = self.trace.load(Relaxed);
        if let Some(block) = Self::block_of(tagged) {
            // SAFETY: a block is installed by `install_block` (from `StatsBlock::for_first_poll`)
            // and handed back only by this drop, which runs once; the task is gone, so no
            // snapshot reads it any more.
            let block_ref = unsafe { block.as_ref() };
            tagged = block_ref.cell.load(Relaxed);
            // SAFETY: the block came from `StatsBlock::for_first_poll` (through `install_block`),
            // nothing reads it any more (the task is gone, the cell pointer was read out above),
            // and only this drop, which runs once, hands it back.
            unsafe { StatsBlock::hand_back(block) };
        }
        if tagged.addr() & OWNED_CELL != 0 {
            // SAFETY: a tagged pointer is the first field of an `OwnedCell` that came from
            // `Box::into_raw` in `trace::attach_owned` (`repr(C)`: the same address), and only this drop
            // frees it; the task is gone (async-task drops the header last), so no
            // snapshot can read the cell any more (it was unlisted before its future dropped).
            let owned = tagged
                .map_addr(|addr| addr & !OWNED_CELL)
                .cast::<OwnedCell>();
            // SAFETY: `owned` is the box `trace::attach_owned` made (see the comment above), and
            // this drop, which runs once, is the only place that frees it.
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
