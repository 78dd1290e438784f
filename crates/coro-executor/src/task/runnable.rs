//! The [`Runnable`], and how every task is built: the future wrapped so that it catches panics,
//! tracks its state and removes itself from its task list (if it was listed, after it was
//! built: see `list.rs`) when dropped, with a [`TaskHeader`] as async-task metadata.
//!
//! No user code runs under async-task's abort-on-panic guards: async-task drops a finished
//! future, a cancelled one and an outcome nobody took inside `abort_on_panic`, so a panicking
//! destructor there would abort the process. Instead the wrapper drops a finished future itself,
//! in its poll, where a panic in the destructor is caught and becomes the task's outcome (as
//! tokio reports it through the `JoinHandle`); it drops an unfinished one (cancellation,
//! shutdown) in its own `Drop`, catching a panic (the panic hook has printed it, and the handle
//! resolves `Cancelled`); and the outcome's own `Drop` catches a panic of the value's.

use super::current;
use super::header::TaskHeader;
use super::list::TaskList;
use super::panic::{CatchUnwind, Outcome, PanicPayload, drop_catching};
use async_task::{Builder, Schedule};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A task ready to be polled: run it with [`Runnable::run`](async_task::Runnable::run).
///
/// An [`Executor`](crate::Executor) receives these and must eventually run each one, on one of its threads, or drop
/// it (which cancels the task and drops its future). Its metadata is the task's
/// [`TaskHeader`](crate::trace::TaskHeader).
///
/// ```
/// use coro_executor::{Executor, ExecutorHandle, Runnable};
/// use std::sync::{Arc, Mutex};
///
/// /// Runs tasks when asked, in the order they were scheduled.
/// #[derive(Clone, Default)]
/// struct Queue(Arc<Mutex<Vec<Runnable>>>);
///
/// impl Executor for Queue {
///     fn schedule(&self, runnable: Runnable) {
///         self.0.lock().unwrap().push(runnable);
///     }
/// }
///
/// let queue = Queue::default();
/// let handle = ExecutorHandle::new(queue.clone()).spawn(async { 5 });
/// let runnable: Runnable = queue.0.lock().unwrap().remove(0);
/// runnable.run();
/// assert_eq!(futures::executor::block_on(handle).unwrap(), 5);
/// ```
pub type Runnable = async_task::Runnable<TaskHeader>;

pub(crate) type RawTask<T> = async_task::Task<Outcome<T>, TaskHeader>;

/// Builds the task for the future `make` returns, not listed yet (a spawner lists it next,
/// see `TaskList::insert`). The future is made in the task's allocation, not moved there
/// through the spawn's layers: a future over 128 bytes is otherwise copied by a `memcpy` call
/// at each of them. `make` is the engine's own (it reads the spawned future into place): no
/// code of a layer above runs while a task is built.
pub(crate) fn build<M, F, S>(
    header: TaskHeader,
    make: M,
    schedule: S,
) -> (Runnable, RawTask<F::Output>)
where
    M: FnOnce() -> F,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule<TaskHeader> + Send + Sync + 'static,
{
    // The header reference is typed `'static` so the future meets async-task's bounds; it is
    // really valid for the life of the task's allocation, which outlives the future.
    let make = move |header: &'static TaskHeader| Tracked::new(header, make());
    // SAFETY: `spawn_unchecked` is used only so that the future may borrow the task's own
    // metadata (the header), which async-task keeps alive for as long as the future: it is
    // dropped with the allocation, after the future. Everything else meets `spawn`'s bounds: the
    // future is `Send` and borrows nothing else, the schedule function is
    // `Send + Sync + 'static`, and `make` runs inside this call (async-task calls it once, at
    // once), so it need not be `Send` or `'static`.
    unsafe {
        Builder::new()
            .metadata(header)
            .spawn_unchecked(make, schedule)
    }
}

/// A spawned future, which leaves its task list (if it is listed: its header says) before the
/// future is dropped, always: a snapshot holding the list's lock may be reading data inside
/// the future (its trace cell and frames).
struct Tracked<'a, F> {
    /// `None` once the future was dropped (it finished): a flag that costs no space.
    header: Option<&'a TaskHeader>,
    future: ManuallyDrop<CatchUnwind<F>>,
}

impl<'a, F> Tracked<'a, F> {
    fn new(header: &'a TaskHeader, future: F) -> Self {
        Tracked {
            header: Some(header),
            future: ManuallyDrop::new(CatchUnwind::new(future)),
        }
    }

    /// Unlists the task, then drops its future in place, catching a panic in the future's
    /// destructor; does nothing the second time. If shutdown took the task's entry, tells it
    /// once the future is dropped (see `ClosedEntry`).
    fn drop_future(&mut self) -> Option<PanicPayload> {
        let header = self.header.take()?;
        // The entry goes first (see the type's doc).
        let closed = TaskList::unlist(header);
        // SAFETY: once (`header` was taken above, so this is not reached again); dropped in
        // place: the pinned future never moves. A destructor that panics has still dropped the
        // whole value (drop glue finishes while unwinding), and it is not dropped again.
        let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.future)
        }))
        .err();
        // The future is dropped: shutdown, which may be waiting for this task, may return.
        drop(closed);
        panic
    }
}

impl<F: Future> Future for Tracked<'_, F> {
    type Output = Outcome<F::Output>;

    // Called from one place, async-task's `run`. Left to itself the compiler often keeps it out
    // of line, and then the task's state marks and the current-task switch (see
    // `current::enter`) cost a call frame of their own, with registers saved around the inner
    // poll: about 8 instructions per poll more than inlined (`benches/tracing_cost.py
    // --instructions`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<F::Output>> {
        // SAFETY: `future` is structurally pinned: `Tracked` never moves it, and drops it only in
        // place (in `drop_future`); the other fields are not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let header = this.header.expect("a finished task was polled again");
        let outcome = {
            let mut running = current::enter(header);
            let _waker = current::enter_task_waker(cx.waker());
            // SAFETY: `future` is structurally pinned (never moved, dropped only in place) and
            // not dropped yet: `header` is set until `drop_future` runs.
            match unsafe { Pin::new_unchecked(&mut *this.future) }.poll(cx) {
                Poll::Pending => {
                    running.suspends();
                    return Poll::Pending;
                }
                Poll::Ready(outcome) => outcome,
            }
        };
        // Finished: drop the future here rather than leave it to async-task, which would drop
        // it under its abort-on-panic guard; a panic in its destructor becomes the outcome.
        let drop_panic = this.drop_future();
        Poll::Ready(Outcome::new(match (outcome, drop_panic) {
            (Ok(value), Some(payload)) => {
                // The value is lost with the task's failure; its own destructor may panic too.
                drop_catching(value);
                Err(payload)
            }
            (outcome, None) => outcome,
            // The poll's panic is the one reported; the destructor's is dropped.
            (Err(payload), Some(second)) => {
                drop_catching(second);
                Err(payload)
            }
        }))
    }
}

impl<F> Drop for Tracked<'_, F> {
    fn drop(&mut self) {
        // Cancelled, or dropped at shutdown, unfinished: a panic in the future's destructor is
        // caught (the panic hook has printed it); the handle resolves `Cancelled`.
        if let Some(payload) = self.drop_future() {
            drop_catching(payload);
        }
    }
}
