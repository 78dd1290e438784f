//! [`InlineExecutor`]: runs each task at once, on the thread that schedules it.

use crate::executor::Executor;
use crate::task::Runnable;
use std::cell::RefCell;
use std::collections::VecDeque;

/// Runs a scheduled task at once, on the scheduling thread (folly's `InlineExecutor`).
///
/// A task woken while an inline task is already running on this thread (for example one that
/// wakes itself) is queued and run as soon as the outer one returns, so yielding in a loop does
/// not grow the stack without bound.
///
/// ```
/// use coro_executor::{ExecutorHandle, InlineExecutor};
///
/// let handle = ExecutorHandle::new(InlineExecutor);
/// let here = std::thread::current().id();
/// let join = handle.spawn(async move { std::thread::current().id() == here });
/// assert!(futures::executor::block_on(join).unwrap());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct InlineExecutor;

thread_local! {
    /// `Some` while this thread is inside an inline run: the tasks scheduled meanwhile.
    static TRAMPOLINE: RefCell<Option<VecDeque<Runnable>>> = const { RefCell::new(None) };
}

/// Leaves trampoline mode even if a task panics; tasks still queued are dropped (cancelled)
/// rather than run during unwinding.
struct ExitTrampoline;

impl Drop for ExitTrampoline {
    fn drop(&mut self) {
        let queued = TRAMPOLINE.with(|t| t.borrow_mut().take());
        drop(queued);
    }
}

impl Executor for InlineExecutor {
    fn schedule(&self, runnable: Runnable) {
        let runnable = TRAMPOLINE.with(|t| match t.borrow_mut().as_mut() {
            Some(queue) => {
                queue.push_back(runnable);
                None
            }
            None => Some(runnable),
        });
        let Some(mut runnable) = runnable else { return };
        TRAMPOLINE.with(|t| *t.borrow_mut() = Some(VecDeque::new()));
        let _exit = ExitTrampoline;
        loop {
            runnable.run();
            let next = TRAMPOLINE.with(|t| t.borrow_mut().as_mut().and_then(VecDeque::pop_front));
            match next {
                Some(next) => runnable = next,
                None => break,
            }
        }
    }
}
