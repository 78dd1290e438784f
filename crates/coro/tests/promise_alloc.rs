//! A `SharedPromise` fulfilled before it handed out any future allocates nothing (DESIGN §9),
//! checked with a counting global allocator; hence its own test binary, with a single test.

use coro::sync::SharedPromise;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting the allocations each thread makes.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count_one() {
    // `try_with`: allocations can happen while this thread's locals are being torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

/// Allocations made by this thread so far.
fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to the system allocator; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_promise_fulfilled_before_any_future_allocates_nothing() {
    // Warm up this thread (its locals, the allocator's first use) outside the measurement.
    let _ = allocations();
    drop(std::hint::black_box(Box::new(0u8)));

    let before = allocations();
    let promise = std::hint::black_box(SharedPromise::<u64>::new());
    promise.set_value(std::hint::black_box(42)).unwrap();
    assert!(promise.is_fulfilled());
    let after = allocations();
    assert_eq!(
        after - before,
        0,
        "SharedPromise::new + set_value allocated {} time(s)",
        after - before
    );
    drop(promise);

    // Contrast: handing out a future shares the state, which allocates, so the counter counts.
    let promise = SharedPromise::<u64>::new();
    let before = allocations();
    let future = std::hint::black_box(promise.get_future());
    let after = allocations();
    assert!(
        after > before,
        "get_future did not allocate: the counting allocator is not counting"
    );
    promise.set_value(7).unwrap();
    assert_eq!(coro::block_wait(future), Ok(7));
}
