//! The task being polled on this thread, set around each poll: its header (with the task's
//! state marked running, then suspended) and the identity of the waker it is polled with.

use super::header::TaskHeader;
#[cfg(not(coro_untraced))]
use super::header::{RUNNING, SUSPENDED};
use crate::trace::PollCount;
use std::cell::Cell;
use std::ptr;
#[cfg(not(coro_untraced))]
use std::sync::atomic::Ordering::Relaxed;
use std::task::{RawWakerVTable, Waker};

coro_loom::thread_local_const! {
    /// The header of the task being polled on this thread.
    static CURRENT: Cell<*const TaskHeader> = Cell::new(ptr::null());
}

/// Marks `header`'s task running on this thread until the guard drops, which marks it suspended
/// (a wake-up during the poll makes async-task schedule it right after, which marks it
/// scheduled again).
#[inline]
#[cfg(not(coro_untraced))]
pub(crate) fn enter(header: &TaskHeader) -> Running<'_> {
    let stats = if crate::trace::stats_enabled() {
        header.count_poll_start()
    } else {
        PollCount::OFF
    };
    // The waits of the previous poll's `wait_until_polled` end as this one starts.
    let word = crate::trace::poll_starts(header.state.load(Relaxed));
    header.set_state(word, RUNNING);
    let prev = CURRENT.with(|c| c.replace(header));
    Running {
        header,
        prev,
        stats,
        pending: false,
    }
}

/// Tracing compiled out (`--cfg coro_untraced`, a build only for measuring what tracing costs):
/// no state, no current task.
#[inline]
#[cfg(coro_untraced)]
pub(crate) fn enter(header: &TaskHeader) -> Running<'_> {
    Running {
        header,
        prev: ptr::null(),
        stats: PollCount::OFF,
        pending: false,
    }
}

/// The guard [`enter`] returns.
pub(crate) struct Running<'a> {
    header: &'a TaskHeader,
    prev: *const TaskHeader,
    stats: PollCount,
    /// The poll returned `Pending` (see [`Running::suspends`]).
    pending: bool,
}

impl Running<'_> {
    /// The poll returns `Pending`: the task suspends (its statistics need a block to outlive
    /// the poll; a poll that finishes the task needs none).
    #[inline]
    pub(crate) fn suspends(&mut self) {
        self.pending = true;
    }
}

#[cfg(not(coro_untraced))]
impl Drop for Running<'_> {
    #[inline]
    fn drop(&mut self) {
        self.header.count_poll_end(self.stats, self.pending);
        // Release: the stack this poll published is seen by whoever sees it suspended.
        self.header
            .set_state_release(self.header.state.load(Relaxed), SUSPENDED);
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// The header of the task being polled on this thread, if any.
#[inline]
pub(crate) fn header<'a>() -> Option<&'a TaskHeader> {
    // SAFETY: `CURRENT` points at the header of the task whose poll is on this thread's stack
    // (set by `enter`, restored when that poll returns), which outlives the poll; callers use
    // the reference only within the poll they are called from.
    CURRENT.with(|c| unsafe { c.get().as_ref() })
}

coro_loom::thread_local_const! {
    /// The identity (data and vtable) of the waker of the task being polled on this thread,
    /// while it is polled. A coro task's own waker runs no user code when cloned, woken or
    /// dropped (a user executor's panicking `schedule` is caught: see `ExecutorHandle::spawn`),
    /// so a handle polled with it, the common `handle.await` inside a task, hands it to
    /// async-task directly instead of through its relay waker (`join.rs`).
    static TASK_WAKER: Cell<WakerId> = Cell::new((ptr::null(), ptr::null()));
}

type WakerId = (*const (), *const RawWakerVTable);

fn waker_id(waker: &Waker) -> WakerId {
    (waker.data(), waker.vtable())
}

/// Makes `waker`, the waker a task is polled with, the current task's until the guard drops.
#[inline]
pub(crate) fn enter_task_waker(waker: &Waker) -> TaskWakerGuard {
    TaskWakerGuard {
        prev: TASK_WAKER.with(|c| c.replace(waker_id(waker))),
    }
}

pub(crate) struct TaskWakerGuard {
    prev: WakerId,
}

impl Drop for TaskWakerGuard {
    #[inline]
    fn drop(&mut self) {
        TASK_WAKER.with(|c| c.set(self.prev));
    }
}

/// Whether `waker` is (a clone of) the waker of the task being polled on this thread.
pub(crate) fn is_task_waker(waker: &Waker) -> bool {
    TASK_WAKER.with(|c| c.get() == waker_id(waker))
}
