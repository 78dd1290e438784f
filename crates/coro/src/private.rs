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
