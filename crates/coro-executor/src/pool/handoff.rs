//! Handoff (Go's sysmon `retake`): what the monitor does for a worker stuck in one poll.
//!
//! A poll that blocks its thread (a `std::thread::sleep`, a blocking syscall, a long
//! computation) holds up everything queued on that worker: its next slot, which other workers
//! only steal from once its owner has run something else for a while, and its local queue,
//! which they steal from only when they are searching. The monitor notices a worker whose poll
//! counter has not moved for [`handoff_after`](crate::ThreadPoolBuilder::handoff_after) while
//! work waits on it, and hands that work off:
//! 1. the next slot goes to the global queue, where every worker looks;
//! 2. a parked worker is woken (as a searcher it steals half of the stuck worker's queue);
//! 3. if none could be woken because every worker is awake and none is searching (all busy,
//!    perhaps all stuck), a *helper* thread is started (likewise for work waiting in the
//!    global queue while every worker has been in one poll for the threshold): a worker of its own, on one of the
//!    pool's spare slots, that runs what it finds and exits as soon as it finds nothing (Go
//!    starts an M for the P it retakes). So nothing queued waits behind a blocking poll, and no
//!    `block_in_place` is needed.
//!
//! A pool has as many spare slots as workers: at most that many helpers run at once, each
//! standing in for a stuck thread. Helpers take part in stealing (their queues are stealable
//! and watched by the monitor like any worker's) but not in the idle bookkeeping: they never
//! park and never count as searchers.

use super::shared::Shared;
use super::watch::Watch;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One look for stuck polls: hands off the queued work of every worker (or helper) whose poll
/// counter has not moved for `after` while work waits on it, once per stuck poll. Returns how
/// many were handed off.
pub(crate) fn look(
    shared: &Arc<Shared>,
    watches: &mut [Watch],
    now: Instant,
    after: Duration,
) -> usize {
    let mut handed = 0;
    for (index, (remote, watch)) in shared.remotes.iter().zip(watches.iter_mut()).enumerate() {
        // Only the worker itself fills its queue and next slot, and it parks or searches only
        // once both are empty: queued work and a counter that did not move mean one long poll.
        let waiting = remote.has_next() || !remote.steal.is_empty();
        let polls = watch.polls;
        if waiting && watch.handed_off != Some(polls) && now.duration_since(watch.since) >= after {
            watch.handed_off = Some(polls);
            if hand_off(shared, index) {
                start_helper(shared);
            }
            handed += 1;
        }
    }
    // Work in the global queue (a task woken from outside the pool: by a timer the monitor
    // fired, a socket, another thread) while every worker has been in one poll all along: no
    // worker will look there until one of those polls ends.
    let workers = &watches[..shared.workers];
    if !shared.inject.is_empty() && workers.iter().all(|w| now.duration_since(w.since) >= after) {
        if !shared.notify_parked() && shared.idle.num_searching() == 0 {
            start_helper(shared);
        }
        handed += 1;
    }
    handed
}

/// Makes the queued work of worker `index`, stuck in a poll, available to the others. Returns
/// true if nobody could be woken for it because every worker is awake and none is searching:
/// the caller should then start a helper.
pub(crate) fn hand_off(shared: &Shared, index: usize) -> bool {
    let remote = &shared.remotes[index];
    // Only the monitor writes this counter.
    remote.counters.handoffs.add(1);
    if let Some(task) = remote.take_next() {
        if let Err(closed) = shared.inject.push(task) {
            // Shut down: the task is dropped, as everything queued is.
            drop(closed.into_inner());
            return false;
        }
    }
    // Every worker awake and none looking for work: they are all busy, perhaps all stuck too.
    !shared.notify_parked() && shared.idle.num_searching() == 0
}

/// Starts a helper (a worker of its own on a spare slot, see `helper_threads.rs`) unless the pool is
/// shutting down or every spare slot has one.
fn start_helper(shared: &Arc<Shared>) -> bool {
    let helper = shared.clone();
    shared.helpers.start(
        || shared.is_shutdown(),
        move |index| super::worker::run_helper(helper, index),
    )
}
