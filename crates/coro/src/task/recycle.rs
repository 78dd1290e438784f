//! Where a [`Task`](crate::Task)'s body lives: a heap block that each thread recycles itself.
//!
//! Every level of a call graph of Tasks allocates its body when it is created and frees it when
//! it is dropped. A chain of nested Tasks allocates its levels going down and frees them coming
//! back up, a thousand at a time in `benches/benches/user_path.rs`'s `task_chain`, which
//! overflows the system allocator's per-thread cache (glibc keeps 7 blocks of a size) on every
//! chain: each level then paid about 225 instructions in `malloc` and `free` (arena bins,
//! consolidation checks), half of what a level cost (`valgrind --tool=callgrind` of
//! `benches/examples/tracing_instructions.rs chain`). Here each thread keeps the blocks it
//! frees in a free list per size class and hands them out again: a pop and a push, about 10
//! instructions each (Go recycles its goroutine descriptors per P the same way).
//!
//! The rules:
//! - size classes are multiples of 16 bytes up to [`MAX_CACHED`]; a body that is larger, or
//!   aligned to more than 16, goes to the global allocator directly;
//! - a block freed on another thread than the one that allocated it joins the freeing
//!   thread's lists: blocks are plain global-allocator blocks of their class's layout, so any
//!   thread may keep or free them;
//! - a thread keeps at most [`BUDGET`] bytes; what would go over is freed at once, so a burst
//!   of tasks costs nothing for good;
//! - a thread frees what it keeps when it exits (a thread-local destructor); a block freed
//!   after that goes to the global allocator.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::cell::Cell;
use std::ptr::{self, NonNull};

/// Size classes are multiples of this; every block is aligned to it.
const GRANULE: usize = 16;
/// The largest body kept in a free list.
const MAX_CACHED: usize = 512;
/// Size classes: 16, 32, ..., [`MAX_CACHED`].
const CLASSES: usize = MAX_CACHED / GRANULE;
/// The most bytes a thread keeps in its free lists: room for a 1,000-level chain of small
/// Tasks (about 100 bytes a level) and then some.
const BUDGET: usize = 256 * 1024;

/// A free block: the link to the next free block of its class is stored in the block.
struct Free {
    next: *mut Free,
}

/// One thread's free lists.
struct Lists {
    heads: [Cell<*mut Free>; CLASSES],
    /// Bytes held in `heads`; [`UNREGISTERED`] before the thread first keeps a block, and
    /// [`CLOSED`] once its locals are being torn down. Both are over the budget, so a free
    /// makes one comparison on its fast path and finds the rest out on its slow one.
    kept: Cell<usize>,
}

/// [`Lists::kept`] before the release at thread exit is registered.
const UNREGISTERED: usize = usize::MAX / 4;
/// [`Lists::kept`] once the lists were emptied at thread exit: every later free goes to the
/// global allocator.
const CLOSED: usize = usize::MAX / 2;

impl Lists {
    /// Frees every kept block and closes the lists.
    fn release(&self) {
        for (class, head) in self.heads.iter().enumerate() {
            let layout = class_layout(class);
            let mut block = head.replace(ptr::null_mut());
            while !block.is_null() {
                // SAFETY: every block on a list is a live allocation of `layout` (see `free`),
                // owned by this list alone; its first word is the link.
                unsafe {
                    let next = (*block).next;
                    dealloc(block.cast(), layout);
                    block = next;
                }
            }
        }
        self.kept.set(CLOSED);
    }
}

/// Releases the thread's lists when its locals are destroyed. A separate local, touched once
/// (when the thread first keeps a block), so that the lists themselves have no destructor and
/// reaching them is a plain thread-local access, with no "registered yet?" check.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        LISTS.with(Lists::release);
    }
}

thread_local! {
    static LISTS: Lists = const {
        Lists {
            heads: [const { Cell::new(ptr::null_mut()) }; CLASSES],
            kept: Cell::new(UNREGISTERED),
        }
    };
    static RELEASE: Release = const { Release };
}

/// The size class of `layout`, if it is one that is recycled.
#[inline]
fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() == 0 || layout.size() > MAX_CACHED || layout.align() > GRANULE {
        return None;
    }
    Some((layout.size() - 1) / GRANULE)
}

/// The layout of every block of `class`.
#[inline]
fn class_layout(class: usize) -> Layout {
    // SAFETY: the size is a non-zero multiple of the alignment, a power of two, and far from
    // overflowing `isize`.
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRANULE, GRANULE) }
}

/// A block of memory for a value of `layout` (not zero-sized), from this thread's free lists if
/// it has one; free it with [`free`] and the same layout.
#[inline(always)]
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() != 0, "recycled blocks are never zero-sized");
    let Some(class) = class_of(layout) else {
        return global(layout);
    };
    let recycled = LISTS.with(|lists| {
        let head = &lists.heads[class];
        let block = head.get();
        if !block.is_null() {
            // SAFETY: a block on the list is ours and starts with its link (see `free`).
            head.set(unsafe { (*block).next });
            lists
                .kept
                .set(lists.kept.get() - class_layout(class).size());
        }
        block
    });
    match NonNull::new(recycled) {
        Some(block) => block.cast(),
        None => global(class_layout(class)),
    }
}

/// Frees a block that [`allocate`] returned for `layout` (on any thread), keeping it for this
/// thread's next allocation of its size class if there is room.
///
/// # Safety
///
/// `block` came from [`allocate`] with this `layout`, holds no live value any more, and is not
/// used again.
#[inline(always)]
pub(crate) unsafe fn free(block: NonNull<u8>, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: `allocate` took it from the global allocator with exactly this layout.
        unsafe { dealloc(block.as_ptr(), layout) };
        return;
    };
    LISTS.with(|lists| {
        let kept = lists.kept.get() + class_layout(class).size();
        if kept <= BUDGET {
            keep(lists, class, block, kept);
        } else {
            // SAFETY: passed on from the caller.
            unsafe { free_slow(lists, class, block) };
        }
    });
}

/// Puts `block` on the list of `class`, with `kept` bytes kept afterwards.
#[inline(always)]
fn keep(lists: &Lists, class: usize, block: NonNull<u8>, kept: usize) {
    let head = &lists.heads[class];
    let free = block.as_ptr().cast::<Free>();
    // SAFETY: the block is ours (`free`'s contract), at least 16 bytes and aligned to 16 (its
    // class's layout), so its first word can hold the link.
    unsafe { free.write(Free { next: head.get() }) };
    head.set(free);
    lists.kept.set(kept);
}

/// [`free`] past the budget: the thread's first kept block registers the release at its exit;
/// otherwise the block goes back to the global allocator.
///
/// # Safety
///
/// As for [`free`]; `class` is the block's.
#[cold]
unsafe fn free_slow(lists: &Lists, class: usize, block: NonNull<u8>) {
    // `try_with` fails once the thread's locals are being torn down: then keep nothing.
    if lists.kept.get() == UNREGISTERED && RELEASE.try_with(|_| ()).is_ok() {
        keep(lists, class, block, class_layout(class).size());
        return;
    }
    // SAFETY: blocks of a recycled class come from the global allocator with the class's
    // layout, whichever path `allocate` took.
    unsafe { dealloc(block.as_ptr(), class_layout(class)) };
}

#[cold]
fn global(layout: Layout) -> NonNull<u8> {
    // SAFETY: `layout` is not zero-sized (the callers' contract, and class layouts never are).
    NonNull::new(unsafe { alloc(layout) }).unwrap_or_else(|| handle_alloc_error(layout))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn kept() -> usize {
        LISTS.with(|lists| lists.kept.get() % UNREGISTERED)
    }

    #[test]
    fn a_freed_block_is_handed_out_again_for_its_class() {
        std::thread::spawn(|| {
            let layout = Layout::from_size_align(72, 8).unwrap();
            let first = allocate(layout);
            // SAFETY: allocated above with this layout, unused.
            unsafe { free(first, layout) };
            assert_eq!(kept(), 80);
            // Same class (65..=80 bytes), another alignment below 16: the same block.
            let again = allocate(Layout::from_size_align(80, 16).unwrap());
            assert_eq!(again, first);
            assert_eq!(kept(), 0);
            // SAFETY: `again` came from `allocate` and is unused; `free` files a block by its
            // size class, which `layout` shares with the layout `again` was allocated with.
            unsafe { free(again, layout) };
        })
        .join()
        .unwrap();
    }

    #[test]
    fn large_and_overaligned_blocks_are_not_kept() {
        std::thread::spawn(|| {
            for layout in [
                Layout::from_size_align(MAX_CACHED + 1, 8).unwrap(),
                Layout::from_size_align(64, 64).unwrap(),
            ] {
                let block = allocate(layout);
                assert_eq!(block.as_ptr() as usize % layout.align(), 0);
                // SAFETY: allocated above with this layout, unused.
                unsafe { free(block, layout) };
                assert_eq!(kept(), 0, "{layout:?} was kept");
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_keeps_no_more_than_its_budget() {
        std::thread::spawn(|| {
            let layout = Layout::from_size_align(512, 16).unwrap();
            let blocks: Vec<_> = (0..2 * BUDGET / 512).map(|_| allocate(layout)).collect();
            for block in blocks {
                // SAFETY: allocated above with this layout, unused.
                unsafe { free(block, layout) };
            }
            assert_eq!(kept(), BUDGET);
        })
        .join()
        .unwrap();
    }
}
