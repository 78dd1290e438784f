//! Deep task chains without stack overflow: polling and dropping a task runs on a fresh stack
//! segment when the current one runs low (stacker), with a fast check in front of it.
//!
//! stacker asks the OS-specific code for the stack pointer on every call; at every task level
//! that costs more than the rest of the bookkeeping. Instead, the address of a local variable
//! stands for the stack pointer and is compared with a per-thread limit cached on first use and
//! re-cached inside every new segment; stacker is called only below that limit. (Stacks grow
//! downwards on every target Rust supports with threads and stacker.)

use std::cell::Cell;

/// Below this much free stack, work continues on a fresh segment.
const RED_ZONE: usize = 64 * 1024;
/// Size of each extra segment.
const SEGMENT: usize = 1024 * 1024;
/// "Not computed yet" for [`LIMIT`].
const UNKNOWN: usize = usize::MAX;

thread_local! {
    /// The lowest stack address at which the current segment still has `RED_ZONE` free.
    static LIMIT: Cell<usize> = const { Cell::new(UNKNOWN) };
}

#[inline(always)]
fn approximate_sp() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Runs `f`, on a fresh stack segment if this one is nearly exhausted.
#[inline]
pub(crate) fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    let limit = LIMIT.with(Cell::get);
    if limit != UNKNOWN && approximate_sp() > limit {
        return f();
    }
    grow(f)
}

#[cold]
fn grow<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, || {
        // Now on a segment with at least RED_ZONE left (the old one, or a new one): cache its
        // limit for the fast path, and restore the caller's when we leave it.
        let limit = match stacker::remaining_stack() {
            Some(remaining) => approximate_sp().saturating_sub(remaining) + RED_ZONE,
            // Unknown stack bounds: let stacker decide every time.
            None => UNKNOWN,
        };
        let previous = LIMIT.with(|l| l.replace(limit));
        struct Restore(usize);
        impl Drop for Restore {
            fn drop(&mut self) {
                LIMIT.with(|l| l.set(self.0));
            }
        }
        let _restore = Restore(previous);
        f()
    })
}
