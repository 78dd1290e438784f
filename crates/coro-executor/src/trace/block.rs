//! [`StatsBlock`]: a task's statistics outside the task, made when the task first suspends
//! while statistics are on, and the per-thread spares that blocks are recycled through.
//!
//! Rule: a block belongs to one task from its install (the end of the poll that made it, see
//! `task/header.rs`, `STATS_BLOCK`) until the task's header is dropped, and a snapshot reads
//! it only through a header it holds alive (listed, see `task/list.rs`): so a block handed
//! back at the header's drop is nobody's, as memory returned to the allocator would be, and
//! may be taken by the next task that suspends on that thread. What a recycled block held
//! before is never seen: the thread that takes it sets every counter before the `Release`
//! that installs it, and a snapshot reads the block after the `Acquire` that finds it
//! (`trace/loom_stats.rs` checks this against a snapshot on another thread).
//!
//! Why recycle: the tasks of a fan-out (many tasks that each suspend once) each made a block:
//! an allocation and a free each, more than the counting itself costs, made and freed on
//! different workers at once, which contended on the allocator's locks (`benches/README.md`,
//! "The console"). A thread keeps up to
//! [`SPARES_MAX`] blocks, which a suspension on that thread takes back; it keeps none once the
//! statistics are off (the next block handed back frees the thread's spares), and frees them
//! when it exits.

use super::TraceCell;
use super::stats::{FirstPoll, TaskStats, stats_enabled};
use crate::loom::sync::atomic::AtomicPtr;
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// A task's statistics and, in its stead, the task's trace pointer (see `task/header.rs`).
#[derive(Debug)]
pub(crate) struct StatsBlock {
    pub(crate) stats: TaskStats,
    /// The attached cell, with its ownership tag, as the header would hold it. While the block
    /// is a spare (nobody's), the next spare of its thread's list instead.
    pub(crate) cell: AtomicPtr<TraceCell>,
}

/// How many spare blocks a thread keeps at most: 1 MiB of them, kept only while statistics are
/// on. Blocks are made on the thread that polls a task and handed back on the one that drops
/// it, often another worker: with a small cap most of a large fan-out's blocks went back to the
/// allocator, which contended on its arena locks, used from both workers at once (futex calls;
/// the measurements are in `benches/README.md`, "The console").
const SPARES_MAX: usize = 16384;

/// A thread's spare blocks: a list linked through their `cell` words.
struct Spares {
    head: Cell<*mut StatsBlock>,
    /// Written only by the owning thread (plain stores); read by [`spare_blocks`] from others.
    len: AtomicUsize,
    /// Whether `len`'s address is in [`COUNTS`].
    counted: Cell<bool>,
}

/// The addresses of the `len` words of the threads that have kept a spare, so that
/// [`spare_blocks`] can add them up. An address is removed, under this lock, before its thread's
/// spares are dropped. Std's mutex in the models too: it is taken once per thread and around no
/// switch point of theirs.
static COUNTS: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());

/// How many statistics blocks the threads keep as spares right now: memory the statistics hold
/// for reuse, which a leak check that counts live allocations should leave out. 0 unless
/// statistics have been on.
///
/// ```
/// // No statistics have been on in this process: nothing is kept.
/// assert_eq!(coro_executor::trace::spare_blocks(), 0);
/// ```
pub fn spare_blocks() -> usize {
    let counts = COUNTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    counts
        .iter()
        // SAFETY: a listed address is the `len` of a live thread's spares: `Spares::drop` removes
        // it, under this lock, before that thread-local is freed.
        .map(|&len| unsafe { &*(len as *const AtomicUsize) }.load(Relaxed))
        .sum()
}

impl Spares {
    /// Frees every spare.
    fn free_all(&self) {
        let mut next = self.head.replace(ptr::null_mut());
        self.len.store(0, Relaxed);
        while let Some(block) = NonNull::new(next) {
            // SAFETY: a spare is nobody's (see the module doc) and in one list only; taken off
            // it here, it is freed once.
            let block = unsafe { Box::from_raw(block.as_ptr()) };
            next = block.cell.load(Relaxed).cast();
        }
    }
}

impl Drop for Spares {
    /// The thread exits: its spares go back to the allocator.
    fn drop(&mut self) {
        if self.counted.get() {
            let me = ptr::from_ref(&self.len).addr();
            COUNTS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .retain(|&len| len != me);
        }
        self.free_all();
    }
}

coro_loom::thread_local_const! {
    /// This thread's spare blocks.
    static SPARES: Spares = Spares {
        head: Cell::new(ptr::null_mut()),
        len: AtomicUsize::new(0),
        counted: Cell::new(false),
    };
}

impl StatsBlock {
    /// The block of a task whose first counted poll, `poll`, just returned `Pending`, holding
    /// `cell` (the header's trace word before the block): a spare of this thread, or a new one.
    /// The caller installs it with a `Release` store.
    pub(crate) fn for_first_poll(cell: *mut TraceCell, poll: &FirstPoll) -> NonNull<StatsBlock> {
        let spare = SPARES
            .try_with(|spares| {
                let block = NonNull::new(spares.head.get())?;
                // SAFETY: a spare is nobody's (see the module doc): this thread may read it.
                let next = unsafe { block.as_ref() }.cell.load(Relaxed);
                spares.head.set(next.cast());
                spares.len.store(spares.len.load(Relaxed) - 1, Relaxed);
                Some(block)
            })
            .ok()
            .flatten();
        let block = spare.unwrap_or_else(|| {
            NonNull::from(Box::leak(Box::new(StatsBlock {
                stats: TaskStats::zero(),
                cell: AtomicPtr::new(ptr::null_mut()),
            })))
        });
        // SAFETY: the block is this thread's alone until the caller installs it (a spare taken
        // off this thread's list, or just allocated).
        let this = unsafe { block.as_ref() };
        this.stats.start(poll);
        this.cell.store(cell, Relaxed);
        block
    }

    /// Hands back the block of a task whose header is being dropped: a spare of this thread
    /// while statistics are on and it has room, else freed (with this thread's spares, once
    /// they are off).
    ///
    /// # Safety
    /// `block` came from [`for_first_poll`](Self::for_first_poll), was installed in a header
    /// that is being dropped (so no snapshot reads it any more), and is handed back once.
    // Out of line: a header's drop without a block (every task's while statistics are off)
    // stays as small as it was.
    #[inline(never)]
    pub(crate) unsafe fn hand_back(block: NonNull<StatsBlock>) {
        // SAFETY: the caller's contract is this one's.
        unsafe { Self::hand_back_keeping(block, stats_enabled()) }
    }

    /// [`hand_back`](Self::hand_back), keeping the block as a spare if `keep` (statistics are
    /// on) and this thread has room; with `keep` false, this thread's spares are freed too.
    ///
    /// # Safety
    /// As for [`hand_back`](Self::hand_back).
    pub(crate) unsafe fn hand_back_keeping(block: NonNull<StatsBlock>, keep: bool) {
        let kept = SPARES.try_with(|spares| {
            if !keep {
                spares.free_all();
                return false;
            }
            let len = spares.len.load(Relaxed);
            if len >= SPARES_MAX {
                return false;
            }
            if !spares.counted.replace(true) {
                let me = ptr::from_ref(&spares.len).addr();
                COUNTS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(me);
            }
            // SAFETY: the block is nobody's now (the caller's contract): this thread links it.
            let this = unsafe { block.as_ref() };
            this.cell.store(spares.head.get().cast(), Relaxed);
            spares.head.set(block.as_ptr());
            spares.len.store(len + 1, Relaxed);
            true
        });
        if !matches!(kept, Ok(true)) {
            // SAFETY: blocks are boxes (`for_first_poll`); this one is nobody's and handed back
            // once (the caller's contract), and was not kept as a spare.
            drop(unsafe { Box::from_raw(block.as_ptr()) });
        }
    }
}
