//! The monitor: a pool thread that wakes a parked worker for an offer that stays posted, and
//! hands off the work queued behind a poll that holds up its worker (Go's sysmon, reduced to
//! those two duties; the second is `handoff.rs`).
//!
//! Posting an [`Offer`](super::offer::Offer) wakes nobody, and costs no memory barrier, so that
//! short stretches of inline work cost nothing but their bookkeeping. Someone must still notice
//! a long one: a worker busy in a long poll cannot. The monitor looks at every worker's offer
//! slot periodically; an offer whose slot has not changed since the previous look has been
//! posted for at least one period, and gets a parked worker woken for it (through the usual
//! policy: only if nobody is searching). The period starts at [`MIN_PERIOD`] and doubles after
//! every look that woke nobody, up to [`MAX_PERIOD`] while offers are being posted and up to
//! [`QUIET_PERIOD`] after [`QUIET_LOOKS`] looks without any, so a busy pool costs this thread at
//! most one wake-up per `QUIET_PERIOD` when it posts no offers (the period never exceeds the
//! handoff threshold, so a held-up poll is noticed within about twice that threshold). While
//! every worker is parked (and no helper runs), no offer can be posted and no poll can be held
//! up: the monitor then sleeps until a worker is woken (the waker wakes it too, see
//! `Idle::monitor_may_sleep`), so an idle pool costs nothing.

use super::handoff;
use super::offer::OfferSlot;
use super::shared::Shared;
use super::stall::{StallConfig, StallReport};
use super::watch::Watch;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest period between looks: how soon a stuck offer is noticed while offers are
/// being taken.
pub(crate) const MIN_PERIOD: Duration = Duration::from_micros(50);
/// The longest period between looks while offers are being posted: with two looks needed, a
/// stuck offer is noticed within about two of these.
pub(crate) const MAX_PERIOD: Duration = Duration::from_millis(1);
/// The longest period between looks once no offer was seen for a while (Go's sysmon backs
/// off to the same 10 ms): the bound on how late the first offer after a quiet stretch is
/// noticed.
pub(crate) const QUIET_PERIOD: Duration = Duration::from_millis(10);
/// Looks in a row without any posted offer that make a quiet stretch.
const QUIET_LOOKS: u32 = 16;

/// Updates each worker's watch with its poll counter: a counter that moved starts a new watch.
pub(crate) fn observe(shared: &Shared, watches: &mut [Watch], now: Instant) {
    for (remote, watch) in shared.remotes.iter().zip(watches.iter_mut()) {
        let polls = remote.counters.polls.get();
        if polls != watch.polls {
            *watch = Watch {
                polls,
                ..Watch::new(now)
            };
        }
    }
}

/// What the monitor saw of the slots in one look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Look {
    /// Some offer was posted.
    pub(crate) posted: bool,
    /// Some offer with work left stayed posted since the previous look, and a parked worker
    /// was notified for it (if the policy had one to wake).
    pub(crate) notified: bool,
}

/// One look at every slot: notifies a parked worker (as the pool's policy allows) if an offer
/// with work left has stayed posted since the previous look, whose slot states are in `last`.
pub(crate) fn look(shared: &Shared, last: &mut [usize]) -> Look {
    let mut seen = Look {
        posted: false,
        notified: false,
    };
    for (remote, last) in shared.remotes.iter().zip(last.iter_mut()) {
        let state = remote.offer.state();
        if OfferSlot::is_posted(state) {
            seen.posted = true;
            if state == *last && !seen.notified && remote.offer.get().is_some() {
                seen.notified = true;
                shared.notify_parked();
            }
        }
        *last = state;
    }
    seen
}

/// If every worker of `shared` is parked, sleeps until one is woken (or the pool shuts down)
/// and returns true; returns false at once otherwise.
pub(crate) fn sleep_while_all_parked(shared: &Shared) -> bool {
    if shared.helpers.any_running() {
        return false;
    }
    let sleeps = shared.idle.monitor_may_sleep();
    if sleeps {
        shared.monitor.parker.park();
    }
    sleeps
}

/// How long sockets may go without anyone polling the OS for them before the monitor does
/// (Go's sysmon polls the netpoller after 10 ms): every worker is busy, and none reached the
/// non-blocking poll of its 61st tick.
#[cfg(all(unix, not(any(loom, shuttle))))]
const IO_NEGLECT_MS: u64 = 10;

/// Polls the OS without waiting if sockets are registered and nobody polled for
/// [`IO_NEGLECT_MS`]; the tasks it wakes go through the global queue.
#[cfg(all(unix, not(any(loom, shuttle))))]
fn poll_io_if_neglected(shared: &Shared) {
    if let Some(io) = shared.io_to_poll() {
        if io.ms_since_poll() >= IO_NEGLECT_MS {
            io.poll_now();
        }
    }
}

/// The monitor thread of pool `shared`: looks periodically while a worker is awake, sleeps
/// while every worker is parked, until the pool shuts down.
pub(crate) fn run(shared: Arc<Shared>) {
    let _ = shared.monitor.thread.set(std::thread::current());
    let mut last = vec![0; shared.remotes.len()];
    let mut watches = vec![Watch::new(Instant::now()); shared.remotes.len()];
    // Looks at least this often, so that a held-up poll is noticed within twice the threshold
    // (of handoff, and of stall reports when they are on).
    let stall_threshold = shared.stall.as_ref().map_or(Duration::MAX, |s| s.threshold);
    let longest = QUIET_PERIOD
        .min(shared.handoff_after)
        .min(stall_threshold)
        .max(MIN_PERIOD);
    let mut period = MIN_PERIOD;
    let mut quiet_looks = 0;
    while !shared.is_shutdown() {
        if quiet_looks >= QUIET_LOOKS && sleep_while_all_parked(&shared) {
            quiet_looks = 0;
            period = MIN_PERIOD;
            // Whatever was seen before the sleep is stale: every worker has parked since.
            watches.fill(Watch::new(Instant::now()));
        } else {
            // Cut short by shutdown (or, harmlessly, by a spurious wake-up: one early look).
            std::thread::park_timeout(period);
        }
        let seen = look(&shared, &mut last);
        let now = Instant::now();
        observe(&shared, &mut watches, now);
        let handed = handoff::look(&shared, &mut watches, now, shared.handoff_after);
        if let Some(config) = &shared.stall {
            stall_look(&shared, config, &mut watches, now);
        }
        #[cfg(all(unix, not(any(loom, shuttle))))]
        poll_io_if_neglected(&shared);
        // Timers due while every worker stays in one poll (no keeper, no global-queue tick):
        // their tasks go through the global queue.
        #[cfg(not(any(loom, shuttle)))]
        if let Some(timers) = shared.timers() {
            if timers.may_be_due() {
                timers.fire_due_now();
            }
        }
        quiet_looks = if seen.posted || handed > 0 {
            0
        } else {
            quiet_looks + 1
        };
        period = if seen.notified || handed > 0 {
            MIN_PERIOD
        } else if quiet_looks >= QUIET_LOOKS {
            (period * 2).min(longest)
        } else {
            (period * 2).min(MAX_PERIOD.min(longest))
        };
    }
}

/// Reports the task that worker `index` of `shared` is polling, if any and if it is still
/// listed, as a stall of `elapsed` through `config`'s hook. A panic in the hook is caught:
/// the monitor must outlive a faulty hook.
fn stall_report(shared: &Shared, config: &StallConfig, index: usize, elapsed: Duration) {
    let running = shared.remotes[index].running_task();
    if running.is_null() {
        return;
    }
    // SAFETY: `with_listed` keeps the task alive while its header is read.
    let snapshot = |header: &_| unsafe { crate::trace::snapshot_of(header) };
    let Some(task) = shared.tasks.with_listed(running.cast_const(), snapshot) else {
        // Finished meanwhile.
        return;
    };
    let report = StallReport {
        task,
        elapsed,
        worker: index,
        thread: shared.thread_name(index),
    };
    let hook = &config.hook;
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report))).is_err() {
        eprintln!("coro: the stall hook panicked while reporting: {report}");
    }
}

/// One look for stalls: reports each worker (or helper) whose poll counter has not moved for
/// the threshold while it polls a task, once per stalled poll.
fn stall_look(shared: &Shared, config: &StallConfig, watches: &mut [Watch], now: Instant) {
    for (index, watch) in watches.iter_mut().enumerate() {
        let elapsed = now.duration_since(watch.since);
        if elapsed >= config.threshold && watch.stall_reported != Some(watch.polls) {
            if shared.remotes[index].running_task().is_null() {
                // Parked or searching: not a poll.
                continue;
            }
            watch.stall_reported = Some(watch.polls);
            stall_report(shared, config, index, elapsed);
        }
    }
}
