//! How every task is built: the future wrapped so that it catches panics, tracks its state and
//! removes itself from its task list when dropped, with a [`TaskHeader`] as async-task metadata.

use crate::join::{CatchUnwind, Panic};
use crate::pool::{TaskKey, TaskList};
use crate::trace::{self, TaskHeader};
use async_task::{Builder, Runnable, Schedule};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) type RawTask<T> = async_task::Task<Result<T, Panic>, TaskHeader>;

/// Builds the task for the future `make` returns, listed in its task list under `key`. The
/// future is made in the task's allocation, not moved there through the spawn's layers: a
/// future over 128 bytes is otherwise copied by a `memcpy` call at each of them.
pub(crate) fn build<M, F, S>(
    key: TaskKey,
    make: M,
    header: TaskHeader,
    schedule: S,
) -> (Runnable<TaskHeader>, RawTask<F::Output>)
where
    M: FnOnce() -> F,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule<TaskHeader> + Send + Sync + 'static,
{
    let entry = Entry { key };
    // The header reference is typed `'static` so the future meets async-task's bounds; it is
    // really valid for the life of the task's allocation, which outlives the future.
    let make = move |header: &'static TaskHeader| Tracked {
        _entry: entry,
        header,
        future: CatchUnwind::new(make()),
    };
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

/// Builds a task that is not listed anywhere (blocking tasks, tasks refused at shutdown).
pub(crate) fn build_unlisted<F, S>(
    fut: F,
    schedule: S,
) -> (Runnable<TaskHeader>, RawTask<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule<TaskHeader> + Send + Sync + 'static,
{
    Builder::new()
        .metadata(TaskHeader::new())
        .spawn(move |_| CatchUnwind::new(fut), schedule)
}

/// A spawned future with its list entry. `_entry` is the first field so that it is dropped (the
/// task leaves its list) before the future is: a snapshot holding the list's lock may be
/// reading data inside the future.
struct Tracked<'a, F> {
    _entry: Entry,
    header: &'a TaskHeader,
    future: F,
}

struct Entry {
    key: TaskKey,
}

impl Drop for Entry {
    fn drop(&mut self) {
        TaskList::remove(self.key);
    }
}

impl<F: Future> Future for Tracked<'_, F> {
    type Output = F::Output;

    // Called from one place, async-task's `run`. Left to itself the compiler often keeps it out
    // of line, and then the task's state marks and the current-task switch (see
    // `trace::enter`) cost a call frame of their own, with registers saved around the inner
    // poll: about 8 instructions per poll more than inlined (`benches/tracing_cost.py
    // --instructions`).
    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: `Tracked` never moves it and has no Drop impl
        // (only `entry` has one, and it is not pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let _running = trace::enter(this.header);
        // SAFETY: as above.
        unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx)
    }
}
