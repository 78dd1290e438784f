//! What a worker uses besides its queues and its parker: the pool's IO driver (an idle worker
//! waits in the OS with it, a busy one looks at it on its global-queue ticks), its timers (one
//! sleeping worker keeps them, a busy one fires what is due), and a simulation's seeded draws.
//!
//! Rule: the loom and shuttle models have none of these (no OS, no clock, no simulation), and
//! this file is the only place that says so: there, a worker never holds a [`PollToken`] (the
//! type has no values), keeps no timers and draws nothing, so that `worker.rs` reads as the
//! production loop with no model switch of its own.

use super::park::Parker;
use super::shared::Shared;
use std::time::Duration;

/// The right to wait in the OS that a parking worker may hold: one worker at a time.
#[cfg(not(any(loom, shuttle)))]
pub(super) type PollToken<'a> = crate::io::driver::PollGuard<'a>;

/// The right to wait in the OS, which nobody holds in the models (no IO driver): no values.
#[cfg(any(loom, shuttle))]
pub(super) enum PollToken<'a> {
    #[allow(dead_code)]
    Never(std::convert::Infallible, std::marker::PhantomData<&'a ()>),
}

/// The right to wait in the OS with the pool's IO driver, if it has one and no other worker
/// waits there.
#[inline]
pub(super) fn try_poll_io(shared: &Shared) -> Option<PollToken<'_>> {
    #[cfg(not(any(loom, shuttle)))]
    return shared.io_to_poll().and_then(|io| io.try_poll());
    #[cfg(any(loom, shuttle))]
    {
        let _ = shared;
        None
    }
}

/// For a worker that has counted itself parked after [`try_poll_io`] found the token taken:
/// tries again after a `SeqCst` fence, its half of the Dekker pair with a poll that gives the
/// token back (`OsPoller::need_waiter`), so that a poll which was not going to wait cannot
/// leave it asleep while nobody waits in the OS.
pub(super) fn retry_poll_io(shared: &Shared) -> Option<PollToken<'_>> {
    crate::loom::sync::atomic::fence(crate::loom::sync::atomic::Ordering::SeqCst);
    try_poll_io(shared)
}

/// Parks on `parker` while waiting in the OS with `token`, for at most `timeout`;
/// `on_events` runs before the wake-ups of any IO events the wait returns.
pub(super) fn park_polling(
    parker: &Parker,
    token: PollToken<'_>,
    timeout: Option<Duration>,
    on_events: impl FnOnce(),
) {
    #[cfg(not(any(loom, shuttle)))]
    parker.park_polling(|| {
        token.wait(timeout, on_events);
    });
    #[cfg(any(loom, shuttle))]
    {
        let _ = (parker, timeout, on_events);
        match token {
            PollToken::Never(never, _) => match never {},
        }
    }
}

/// A busy worker's look at the OS and the clock, on its global-queue ticks: sockets that
/// became ready and timers that fell due while every worker ran tasks must not wait for one to
/// idle. Out of line: it runs on one tick in 61, and inlined it would weigh on every tick.
#[inline(never)]
pub(super) fn look_while_busy(shared: &Shared) {
    #[cfg(not(any(loom, shuttle)))]
    {
        if let Some(io) = shared.io_to_poll() {
            io.poll_now();
        }
        if let Some(timers) = shared.timers() {
            if timers.may_be_due() {
                timers.fire_due_now();
            }
        }
    }
    #[cfg(any(loom, shuttle))]
    let _ = shared;
}

/// A lingering searcher's look at the OS, which a socket wait asked for (`linger.rs`,
/// [`LookAtIo`](super::linger::LookAtIo)): polls without waiting, if no other thread holds the
/// poll token; the events' tasks land on this worker's queue, where its next pass finds them.
///
/// Unlike a busy worker's look, it gives nothing back: a worker that parked without the token
/// while this held it is this searcher's to answer for, as every parked worker is a searcher's:
/// the searcher either parks too, and then takes the token itself, or finds work, and then (the
/// last searcher to stop) wakes a parked worker, which does.
pub(super) fn look_at_io(shared: &Shared) {
    #[cfg(not(any(loom, shuttle)))]
    if let Some(token) = try_poll_io(shared) {
        token.wait(Some(Duration::ZERO), || {});
    }
    #[cfg(any(loom, shuttle))]
    let _ = shared;
}

/// Before worker `index` sleeps: it becomes the keeper of the pool's timers unless another
/// worker is, and learns how long to sleep (`Some(None)`: until woken). `None` if timers were
/// due: then `awake` (which takes the worker off the idle list: their tasks land on its queue)
/// ran before they fired, and the worker must not sleep.
pub(super) fn keep_timers(
    shared: &Shared,
    index: usize,
    awake: impl FnOnce(),
) -> Option<Option<Duration>> {
    #[cfg(not(any(loom, shuttle)))]
    {
        let Some(timers) = shared.timers() else {
            return Some(None);
        };
        match timers.keep(index) {
            crate::time::Keep::Other => Some(None),
            crate::time::Keep::Wait(timeout) => Some(timeout),
            crate::time::Keep::Due => {
                timers.leave(index);
                awake();
                timers.fire_due_now();
                None
            }
        }
    }
    #[cfg(any(loom, shuttle))]
    {
        let _ = (shared, index, awake);
        Some(None)
    }
}

/// Worker `index` wakes: it no longer keeps the timers (if it did).
#[inline]
pub(super) fn leave_timers(shared: &Shared, index: usize) {
    #[cfg(not(any(loom, shuttle)))]
    if let Some(timers) = shared.timers() {
        timers.leave(index);
    }
    #[cfg(any(loom, shuttle))]
    let _ = (shared, index);
}

/// A seeded draw for `what` inside a simulation; `None` outside one (where the race it stands
/// for is the OS's to decide).
#[inline]
pub(super) fn draw(what: &'static str) -> Option<u64> {
    #[cfg(not(any(loom, shuttle)))]
    return crate::sim::state::draw(what);
    #[cfg(any(loom, shuttle))]
    {
        let _ = what;
        None
    }
}
