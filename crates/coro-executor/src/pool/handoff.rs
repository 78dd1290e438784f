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

use super::monitor::Watch;
use super::queue::Local;
use super::shared::Shared;
use crate::task::Runnable;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The default of [`ThreadPoolBuilder::handoff_after`](crate::ThreadPoolBuilder::handoff_after):
/// Go's sysmon preempts a goroutine after the same 10 ms.
pub(crate) const DEFAULT_HANDOFF_AFTER: Duration = Duration::from_millis(10);

/// The spare worker slots of a pool and the helper threads running on them.
pub(crate) struct Helpers {
    /// Index of the first spare slot: the number of workers.
    first: usize,
    slots: Mutex<Slots>,
    thread_name: String,
}

struct Slots {
    /// The owner end of each spare slot's queue, while no helper holds it.
    locals: Vec<Option<Local<Runnable>>>,
    /// Which spare slots have a helper (started, not yet finished).
    busy: Vec<bool>,
    /// Helper threads started (joined at shutdown).
    threads: Vec<std::thread::JoinHandle<()>>,
    started: u64,
}

impl Helpers {
    /// Spare slots `first..first + locals.len()`, whose queues' owner ends are `locals`.
    pub(crate) fn new(first: usize, locals: Vec<Local<Runnable>>, thread_name: String) -> Helpers {
        let busy = vec![false; locals.len()];
        Helpers {
            first,
            slots: Mutex::new(Slots {
                locals: locals.into_iter().map(Some).collect(),
                busy,
                threads: Vec::new(),
                started: 0,
            }),
            thread_name,
        }
    }

    /// Starts a helper on a free spare slot, unless every slot has one or the pool is shutting
    /// down. Returns whether one was started.
    pub(crate) fn start(&self, shared: &Arc<Shared>) -> bool {
        let mut slots = self.slots.lock().unwrap();
        // Checked under the lock that shutdown's `join_all` takes after setting the flag: no
        // helper starts once shutdown has collected the threads.
        if shared.is_shutdown() {
            return false;
        }
        let Some(spare) = slots.busy.iter().position(|busy| !busy) else {
            return false;
        };
        let index = self.first + spare;
        let worker_shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("{}-helper-{spare}", self.thread_name))
            .spawn(move || super::worker::run_helper(worker_shared, index));
        match spawned {
            Ok(thread) => {
                slots.busy[spare] = true;
                slots.threads.retain(|t| !t.is_finished());
                slots.threads.push(thread);
                slots.started += 1;
                true
            }
            // Out of threads: the stuck work waits for its worker, as it would without handoff.
            Err(_) => false,
        }
    }

    /// The owner end of spare slot `index`'s queue, for the helper just started on it.
    pub(crate) fn take_local(&self, index: usize) -> Local<Runnable> {
        self.slots.lock().unwrap().locals[index - self.first]
            .take()
            .expect("a spare slot's queue is held by at most one helper")
    }

    /// The helper on spare slot `index` exits: its (empty) queue end goes back to the slot.
    pub(crate) fn finished(&self, index: usize, local: Local<Runnable>) {
        let mut slots = self.slots.lock().unwrap();
        slots.locals[index - self.first] = Some(local);
        slots.busy[index - self.first] = false;
    }

    /// Helpers started since the pool was built.
    pub(crate) fn started(&self) -> u64 {
        self.slots.lock().unwrap().started
    }

    /// Whether a helper is running (the monitor then keeps watching, even with every worker
    /// parked).
    pub(crate) fn any_running(&self) -> bool {
        self.slots.lock().unwrap().busy.iter().any(|busy| *busy)
    }

    /// Joins every helper thread but the calling one (shutdown, after the monitor is joined, so
    /// no new one starts).
    pub(crate) fn join_all(&self) {
        let threads = std::mem::take(&mut self.slots.lock().unwrap().threads);
        let me = std::thread::current().id();
        for thread in threads {
            if thread.thread().id() != me {
                // A helper only panics on a bug in the pool itself; shutdown goes on regardless.
                let _ = thread.join();
            }
        }
    }
}

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
                shared.helpers.start(shared);
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
            shared.helpers.start(shared);
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
