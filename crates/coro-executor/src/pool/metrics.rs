//! Counters that make the scheduling policy observable.
//!
//! Each worker bumps its own counters with plain relaxed load/store pairs (no read-modify-write:
//! only the owner writes them), so counting costs a few cycles on a cache line nobody else writes.

use crate::loom::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A snapshot of a [`ThreadPool`](crate::ThreadPool)'s counters, from
/// [`ThreadPool::metrics`](crate::ThreadPool::metrics).
///
/// ```
/// let pool = coro_executor::ThreadPool::new(2).unwrap();
/// futures::executor::block_on(pool.spawn(async {})).unwrap();
/// let m = pool.metrics();
/// assert_eq!(m.workers.len(), 2);
/// assert!(m.total_polls() >= 1);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PoolMetrics {
    /// One entry per worker, by index.
    pub workers: Vec<WorkerMetrics>,
    /// Tasks waiting in the global (injector) queue.
    pub global_queue_depth: usize,
    /// Tasks spawned on the pool and not yet finished (blocking tasks excluded). Counted when
    /// the metrics are read, by looking at the pool's task list: O(tasks listed at the peak).
    pub live_tasks: usize,
    /// Workers searching for work to steal right now.
    pub searching_workers: usize,
    /// The most workers ever seen searching at once (the policy caps it at half the workers,
    /// rounded up).
    pub max_searching_workers: usize,
    /// Threads of the blocking pool, running or idle.
    pub blocking_threads: usize,
    /// Blocking tasks queued and not yet started.
    pub blocking_queue_depth: usize,
    /// Helper threads the monitor started so far, for work queued behind a poll that held up
    /// its worker while every worker was busy (see
    /// [`ThreadPoolBuilder::handoff_after`](crate::ThreadPoolBuilder::handoff_after)).
    pub helpers_started: u64,
    /// The counters of every helper (those threads run on the pool's spare slots) added
    /// together; not in `workers`, but counted in the `total_` sums.
    pub helpers: WorkerMetrics,
}

impl PoolMetrics {
    /// Polls over all workers and helpers.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// assert_eq!(pool.metrics().total_polls(), 0);
    /// ```
    pub fn total_polls(&self) -> u64 {
        self.workers.iter().map(|w| w.polls).sum::<u64>() + self.helpers.polls
    }

    /// Tasks stolen over all workers and helpers.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// assert_eq!(pool.metrics().total_stolen(), 0);
    /// ```
    pub fn total_stolen(&self) -> u64 {
        self.workers.iter().map(|w| w.stolen_tasks).sum::<u64>() + self.helpers.stolen_tasks
    }

    /// Handoffs over all workers and helpers: times the monitor found a worker held up in one poll with
    /// work queued behind it, and made that work available to the others.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// assert_eq!(pool.metrics().total_handoffs(), 0);
    /// ```
    pub fn total_handoffs(&self) -> u64 {
        self.workers.iter().map(|w| w.handoffs).sum::<u64>() + self.helpers.handoffs
    }
}

/// One worker's counters, part of [`PoolMetrics`].
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let w = &pool.metrics().workers[0];
/// assert_eq!(w.polls, 0);
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Task polls run by this worker.
    pub polls: u64,
    /// Polls of a task taken from the next slot (the task most recently woken or spawned by the
    /// running task).
    pub next_slot_polls: u64,
    /// Times the next slot held a task but had been used 3 times in a row while the local queue
    /// held others, so the task went to the back of the queue and the queue was served.
    pub next_slot_capped: u64,
    /// Tasks that woke themselves while running (yielded) and went to the back of the queue.
    pub yielded_to_back: u64,
    /// Times this worker took a task from the global queue first because its tick was a
    /// multiple of 61.
    pub global_first_polls: u64,
    /// Tasks taken from the global queue, for any reason (a batch moved into the local queue
    /// counts each task).
    pub global_polls: u64,
    /// Successful steal operations (each takes half of a victim's queue).
    pub steal_operations: u64,
    /// Tasks moved here by those steals.
    pub stolen_tasks: u64,
    /// Times the local queue was full and half of it moved to the global queue.
    pub overflows: u64,
    /// Times this worker went to sleep for lack of work.
    pub parks: u64,
    /// Extra search passes this worker made, searching, after a search found nothing and
    /// before it parked or found work, while another worker was awake (its linger: it keeps
    /// searching while pushes elsewhere find it searching and so wake no parked worker, and
    /// backs off to one pass per linger when they do not).
    pub linger_passes: u64,
    /// Times this worker, idle, took from an offer another worker had posted
    /// ([`offer_while`](crate::offer_while)).
    pub offers_taken: u64,
    /// Tasks this worker, searching, took from another's next slot, whose owner had stayed in
    /// one poll through the grace period (also counted in `stolen_tasks`).
    pub next_slot_steals: u64,
    /// Times the monitor found this worker held up in one poll with work queued behind it and
    /// handed that work to the others.
    pub handoffs: u64,
    /// Tasks in this worker's local queue (plus its next slot) right now.
    pub local_queue_depth: usize,
}

#[derive(Default)]
#[repr(align(128))]
pub(crate) struct WorkerCounters {
    pub(crate) polls: Counter,
    pub(crate) next_slot_polls: Counter,
    pub(crate) next_slot_capped: Counter,
    pub(crate) yielded_to_back: Counter,
    pub(crate) global_first_polls: Counter,
    pub(crate) global_polls: Counter,
    pub(crate) steal_operations: Counter,
    pub(crate) stolen_tasks: Counter,
    pub(crate) overflows: Counter,
    pub(crate) parks: Counter,
    pub(crate) linger_passes: Counter,
    pub(crate) offers_taken: Counter,
    pub(crate) next_slot_steals: Counter,
    /// Written by the monitor only.
    pub(crate) handoffs: Counter,
}

/// A counter with a single writer.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning worker may call this (a racing add would lose counts, not
    /// corrupt memory).
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        self.0.store(self.0.load(Relaxed).wrapping_add(n), Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

impl WorkerMetrics {
    /// Adds `other`'s counts and depth to these (to sum the helpers' slots).
    pub(crate) fn add(&mut self, other: &WorkerMetrics) {
        self.polls += other.polls;
        self.next_slot_polls += other.next_slot_polls;
        self.next_slot_capped += other.next_slot_capped;
        self.yielded_to_back += other.yielded_to_back;
        self.global_first_polls += other.global_first_polls;
        self.global_polls += other.global_polls;
        self.steal_operations += other.steal_operations;
        self.stolen_tasks += other.stolen_tasks;
        self.overflows += other.overflows;
        self.parks += other.parks;
        self.linger_passes += other.linger_passes;
        self.offers_taken += other.offers_taken;
        self.next_slot_steals += other.next_slot_steals;
        self.handoffs += other.handoffs;
        self.local_queue_depth += other.local_queue_depth;
    }
}

impl WorkerCounters {
    pub(crate) fn snapshot(&self, local_queue_depth: usize) -> WorkerMetrics {
        WorkerMetrics {
            polls: self.polls.get(),
            next_slot_polls: self.next_slot_polls.get(),
            next_slot_capped: self.next_slot_capped.get(),
            yielded_to_back: self.yielded_to_back.get(),
            global_first_polls: self.global_first_polls.get(),
            global_polls: self.global_polls.get(),
            steal_operations: self.steal_operations.get(),
            stolen_tasks: self.stolen_tasks.get(),
            overflows: self.overflows.get(),
            parks: self.parks.get(),
            linger_passes: self.linger_passes.get(),
            offers_taken: self.offers_taken.get(),
            next_slot_steals: self.next_slot_steals.get(),
            handoffs: self.handoffs.get(),
            local_queue_depth,
        }
    }
}
