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
/// [`LIMIT`] before it is first computed on a thread.
const UNKNOWN: usize = usize::MAX;
/// [`LIMIT`] on a thread whose stack bounds stacker cannot tell: every call asks stacker.
const UNBOUNDED: usize = usize::MAX - 1;

thread_local! {
    /// The lowest stack address at which the current segment still has `RED_ZONE` free: the
    /// thread's own stack's, computed once, or while inside a fresh segment, that segment's.
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
    // `UNKNOWN` and `UNBOUNDED` are above every address: both take the slow path.
    if approximate_sp() > LIMIT.with(Cell::get) {
        return f();
    }
    grow(f)
}

/// The limit of the segment this runs on, as stacker sees it.
fn segment_limit() -> usize {
    match stacker::remaining_stack() {
        Some(remaining) => approximate_sp().saturating_sub(remaining) + RED_ZONE,
        None => UNBOUNDED,
    }
}

#[cold]
fn grow<R>(f: impl FnOnce() -> R) -> R {
    if LIMIT.with(Cell::get) == UNKNOWN {
        // First use on this thread: cache its own stack's limit for good (it must not be
        // restored to `UNKNOWN` when this call returns, or every later top-level call would
        // come back here and ask stacker again).
        let limit = segment_limit();
        LIMIT.with(|l| l.set(limit));
        if approximate_sp() > limit {
            return f();
        }
    }
    stacker::maybe_grow(RED_ZONE, SEGMENT, || {
        // Now on a segment with at least RED_ZONE left (usually a new one): cache its limit
        // for the fast path, and restore the caller's when we leave it.
        let previous = LIMIT.with(|l| l.replace(segment_limit()));
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_threads_own_limit_is_computed_once_and_kept() {
        std::thread::spawn(|| {
            assert_eq!(LIMIT.with(Cell::get), UNKNOWN);
            assert_eq!(with_stack(|| 7), 7);
            let limit = LIMIT.with(Cell::get);
            assert_ne!(limit, UNKNOWN, "the first call must cache the limit");
            assert!(
                limit < approximate_sp(),
                "a fresh thread is far from its limit"
            );
            with_stack(|| ());
            assert_eq!(LIMIT.with(Cell::get), limit);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_fresh_segment_has_its_own_limit_and_the_callers_comes_back() {
        std::thread::spawn(|| {
            with_stack(|| ());
            let outer = LIMIT.with(Cell::get);
            // Recurse until a fresh segment is in use, then check its limit is not the outer one.
            fn dig(depth: usize, outer: usize) -> bool {
                let mut pad = [0u8; 4096];
                std::hint::black_box(&mut pad);
                with_stack(|| {
                    if LIMIT.with(Cell::get) != outer {
                        true
                    } else if depth == 0 {
                        false
                    } else {
                        dig(depth - 1, outer)
                    }
                })
            }
            assert!(dig(10_000, outer), "never switched to a fresh segment");
            assert_eq!(LIMIT.with(Cell::get), outer);
        })
        .join()
        .unwrap();
    }
}
