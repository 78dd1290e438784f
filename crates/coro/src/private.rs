//! Support code for the expansions of coro's macros. Not a public API.

use crate::{TaskWithExecutor, ThreadPool, block_wait};
use coro_executor::JoinError;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

/// `#[coro::test(timeout_ms = N)]`: runs `task` on `pool`, panicking with "test timed out after
/// N ms" past the deadline. On a timeout the pool is leaked rather than shut down: its stuck
/// task may never yield, and joining its worker would hang the test instead of failing it.
pub fn block_wait_timeout<T: Send + 'static>(
    task: TaskWithExecutor<T>,
    timeout_ms: u64,
    pool: ThreadPool,
) -> T {
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut handle = task.start();
    let mut timer = coro_executor::time::sleep_until(deadline);
    let outcome = block_wait(poll_fn(|cx| {
        if let Poll::Ready(outcome) = Pin::new(&mut handle).poll(cx) {
            return Poll::Ready(Some(outcome));
        }
        Pin::new(&mut timer).poll(cx).map(|()| None)
    }));
    match outcome {
        Some(Ok(value)) => value,
        Some(Err(JoinError::Panicked(payload))) => std::panic::resume_unwind(payload),
        Some(Err(JoinError::Cancelled)) => {
            panic!("the test's task was cancelled before it finished")
        }
        None => {
            std::mem::forget(pool);
            panic!("test timed out after {timeout_ms} ms")
        }
    }
}

/// `coro::select!`: the branch a poll round starts at, uniform in `0..branches` (Go's select
/// picks among ready cases at random; starting each round at a random branch gives every
/// always-ready branch the same chance).
///
/// A per-thread xorshift64* (Vigna): fairness needs speed and spread, not quality. It is seeded
/// on a thread's first select from a fresh `RandomState` (SipHash under per-thread OS keys), so
/// threads draw different sequences without a dependency. Only the top 32 bits are used.
pub fn select_start(branches: usize) -> usize {
    use std::cell::Cell;
    use std::hash::{BuildHasher, RandomState};

    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    // Inside a simulation the start is one of its seeded decisions.
    #[cfg(not(any(loom, shuttle)))]
    if coro_executor::sim::is_simulated() {
        let draw = coro_executor::sim::random_u64() >> 32;
        return ((draw * branches as u64) >> 32) as usize;
    }
    let draw = STATE
        .try_with(|state| {
            let mut x = state.get();
            if x == 0 {
                // Zero is xorshift's fixed point: a seed is never zero.
                x = RandomState::new().hash_one(0x9e37_79b9_7f4a_7c15_u64) | 1;
            }
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            state.set(x);
            x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32
        })
        // During thread-local destruction: any start is correct, only fairness suffers.
        .unwrap_or(0);
    // Multiply-shift maps the 32-bit draw onto `0..branches` without a division.
    ((draw * branches as u64) >> 32) as usize
}

/// `coro::select!` without an `else` branch found every branch disabled: nothing is left to
/// wait for and no branch can produce the select's value.
#[cold]
#[track_caller]
pub fn select_all_disabled() -> ! {
    panic!(
        "coro::select!: every branch is disabled (its precondition was false, or its future's \
         output did not match its pattern) and there is no `else` branch to run; add \
         `else => ...` to handle that case"
    )
}
