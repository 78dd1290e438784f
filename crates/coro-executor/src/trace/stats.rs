//! [`TaskStats`]: what is counted about a task for a console (polls, time busy and queued,
//! wakes, when it entered its state), in a [`StatsBlock`] outside the task, and the switch
//! that turns the per-poll counting on only while someone looks.
//!
//! Rule: while nobody has asked for statistics recently, a poll costs one relaxed load of
//! [`ENABLED`] more than without them (the guard of the poll keeps what it read), and a
//! schedule one more; no task has a block, so the tasks are no bigger. While they are on, a
//! task gets its block when it suspends (installed by its header: see `task/header.rs`,
//! `STATS_BLOCK`); until then a time [`mark`] in its header says since when it has been queued
//! or running. A task spawned before they came on and not polled since has neither and shows
//! zero counters. The thread that polls or schedules a task writes
//! its counters with plain loads and stores: async-task runs a task's poll and its schedule
//! function one at a time, with its own state atomics ordering one before the next, so each
//! counter has one writer at a time. Readers (snapshots) may see a counter one event behind.
//!
//! Times are nanoseconds since a process-wide epoch ([`now`]); a `since` older than the moment
//! the statistics were last switched on is stale (written in an earlier period, or never) and
//! reads as unknown, so that a task that changed state while nobody counted is never reported
//! as stuck since then.
//!
//! Polls and schedules read the time from [`TICK`], a clock that a thread of its own (started
//! while the statistics are on, gone when they go off) advances every millisecond: one relaxed
//! load, where reading the OS clock costs about 75 ns on a virtual machine, more than a whole
//! poll of a small task. Busy and queued times are therefore sums of the ticks each poll or
//! wait spans: over many polls an unbiased estimate of the real time (as a sampling profiler's),
//! while one short poll counts 0 or 1 ms. The same ticker switches the statistics off once
//! nobody holds them and the last request has expired.

use super::TraceCell;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

/// Whether per-poll statistics are being collected. The only thing a poll reads while they
/// are off.
static ENABLED: AtomicBool = AtomicBool::new(false);
/// [`now`] when the statistics were last switched on (see the module doc).
static ON_SINCE: AtomicU64 = AtomicU64::new(u64::MAX);
/// [`now`] until which a recent [`request_stats`] keeps the statistics on.
static REQUESTED_UNTIL: AtomicU64 = AtomicU64::new(0);
/// Live [`StatsGuard`]s (attached consoles): while there is one, the statistics stay on.
static HOLDERS: AtomicUsize = AtomicUsize::new(0);

coro_loom::thread_local_const! {
    /// The index of the pool worker this thread is, plus one (0: not a worker).
    static WORKER: Cell<u32> = Cell::new(0);
}

/// Marks this thread as worker `index` of its pool, for the tasks it polls while statistics
/// are on (which worker runs a task).
pub(crate) fn set_worker_index(index: usize) {
    WORKER.with(|w| w.set(index as u32 + 1));
}

/// How long a [`request_stats`] (a snapshot) keeps the statistics on.
pub const REQUEST_KEEPS_ON: Duration = Duration::from_secs(10);

/// [`now`] as of the ticker's last tick (see the module doc); 0 before the first.
static TICK: AtomicU64 = AtomicU64::new(0);
/// How late the ticker's ticks have been: the longest gap between two ticks, decaying by one
/// part in 65,536 each tick (to 86% after ten seconds). A time read from [`TICK`] may be this
/// much older than the moment it stands for.
static SLACK: AtomicU64 = AtomicU64::new(0);
/// Whether the ticker thread runs.
static TICKING: AtomicBool = AtomicBool::new(false);
/// The ticker's period.
const TICK_EVERY: Duration = Duration::from_millis(1);

/// [`now`] to the last millisecond: what polls and schedules read.
#[inline]
fn tick() -> u64 {
    TICK.load(Relaxed)
}

/// Starts the ticker thread unless it runs. It ticks while the statistics are on, switches them
/// off when nobody asks for them any more, and then ends.
fn start_ticker() {
    if TICKING.swap(true, SeqCst) {
        return;
    }
    TICK.store(now(), Relaxed);
    let started = std::thread::Builder::new()
        .name("coro-stats-clock".into())
        .spawn(|| {
            loop {
                let now = now();
                let gap = now.saturating_sub(TICK.swap(now, Relaxed));
                let slack = SLACK.load(Relaxed);
                SLACK.store(gap.max(slack - slack / 65_536), Relaxed);
                if HOLDERS.load(SeqCst) == 0 && now > REQUESTED_UNTIL.load(SeqCst) {
                    ENABLED.store(false, SeqCst);
                    TICKING.store(false, SeqCst);
                    // Switched on again meanwhile by someone who saw the ticker running: keep
                    // ticking for them.
                    if ENABLED.load(SeqCst) && !TICKING.swap(true, SeqCst) {
                        continue;
                    }
                    return;
                }
                std::thread::sleep(TICK_EVERY);
            }
        });
    if started.is_err() {
        // No thread for the clock: the statistics stay off (nothing would advance it).
        TICKING.store(false, SeqCst);
        ENABLED.store(false, SeqCst);
    }
}

/// How much older than the moment it stands for a time the statistics recorded may be (the
/// ticker's recent lateness, at least its period): verdicts about how long a task has been in
/// its state subtract it, so that a late tick never makes a task look stuck.
///
/// ```
/// let _stats = coro_executor::trace::collect_stats();
/// assert!(coro_executor::trace::stats_clock_slack() >= std::time::Duration::from_millis(1));
/// ```
pub fn stats_clock_slack() -> Duration {
    // A ticker that has not run for a while (starved of CPU) is late by at least that long now.
    let late_now = now().saturating_sub(TICK.load(Relaxed));
    Duration::from_nanos(SLACK.load(Relaxed).max(late_now)).max(TICK_EVERY)
}

/// Nanoseconds since the process-wide epoch (the first call); never 0 (0 means unknown).
#[inline]
pub(crate) fn now() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    (epoch.elapsed().as_nanos() as u64).max(1)
}

/// The [`Instant`] of a [`now`] value.
pub(crate) fn instant_of(ns: u64) -> Instant {
    let (here, now) = (Instant::now(), now());
    if ns >= now {
        here + Duration::from_nanos(ns - now)
    } else {
        here.checked_sub(Duration::from_nanos(now - ns))
            .unwrap_or(here)
    }
}

/// Nanoseconds since the epoch at `instant` (for deadlines), at least 1.
pub(crate) fn ns_of(instant: Instant) -> u64 {
    let here = Instant::now();
    let now = now();
    if instant >= here {
        now.saturating_add((instant - here).as_nanos() as u64)
    } else {
        now.saturating_sub((here - instant).as_nanos() as u64)
            .max(1)
    }
}

/// Whether statistics are collected right now.
///
/// ```
/// use coro_executor::trace::{request_stats, stats_enabled};
/// request_stats();
/// assert!(stats_enabled());
/// ```
#[inline]
pub fn stats_enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Turns per-poll statistics on for the next [`REQUEST_KEEPS_ON`] (what a snapshot does): polls,
/// busy and queued time and wakes of every task are counted from now on.
///
/// ```
/// coro_executor::trace::request_stats();
/// assert!(coro_executor::trace::stats_enabled());
/// ```
pub fn request_stats() {
    let now = now();
    REQUESTED_UNTIL.fetch_max(now + REQUEST_KEEPS_ON.as_nanos() as u64, Relaxed);
    switch_on(now);
}

fn switch_on(now: u64) {
    if !ENABLED.load(SeqCst) {
        // ON_SINCE first: a transition that sees ENABLED reads a later time (see module doc).
        ON_SINCE.store(now, SeqCst);
        TICK.store(now, SeqCst);
        ENABLED.store(true, SeqCst);
    }
    start_ticker();
}

/// Keeps per-poll statistics on while it lives (an attached console); from [`collect_stats`].
#[derive(Debug)]
#[must_use = "statistics stay on only while the guard lives"]
pub struct StatsGuard(());

/// Keeps per-poll statistics on until the guard is dropped.
///
/// ```
/// let guard = coro_executor::trace::collect_stats();
/// assert!(coro_executor::trace::stats_enabled());
/// drop(guard);
/// ```
pub fn collect_stats() -> StatsGuard {
    HOLDERS.fetch_add(1, SeqCst);
    switch_on(now());
    StatsGuard(())
}

impl Drop for StatsGuard {
    /// The statistics stay on while a recent [`request_stats`] asks for them, and go off at
    /// the ticker's next tick otherwise.
    fn drop(&mut self) {
        HOLDERS.fetch_sub(1, SeqCst);
    }
}

/// A task's statistics and, in its stead, the task's trace pointer (see `task/header.rs`):
/// allocated for a task spawned or polled while statistics are on, freed with the task.
#[derive(Debug)]
pub(crate) struct StatsBlock {
    pub(crate) stats: TaskStats,
    /// The attached cell, with its ownership tag, as the header would hold it.
    pub(crate) cell: AtomicPtr<TraceCell>,
}

impl StatsBlock {
    /// The block of a task whose first counted poll (begun at `start`, see
    /// [`PollStart::first`]) just returned `Pending`, holding `cell`: that poll counted.
    pub(crate) fn after_first_poll(cell: *mut TraceCell, start: PollStart) -> NonNull<StatsBlock> {
        let now = tick();
        // Its spawn time, if it was marked at its spawn (then it was queued since, until this
        // poll): counted if statistics were on since then (a mark of an earlier period is not
        // this period's time, see the module doc).
        let spawned = start.queued_since;
        let queued = if spawned != 0 && spawned >= ON_SINCE.load(Relaxed) {
            start.at.saturating_sub(spawned)
        } else {
            0
        };
        let block = Box::new(StatsBlock {
            stats: TaskStats {
                // The mark rounded the spawn time up: a unit less is at or before it (an age
                // errs long, as one read from the tick does, and is never below the busy time).
                created: AtomicU64::new(
                    spawned
                        .saturating_sub(1 << MARK_UNIT_SHIFT)
                        .max(u64::from(spawned != 0)),
                ),
                polls: AtomicU64::new(1),
                busy: AtomicU64::new(now.saturating_sub(start.at)),
                queued: AtomicU64::new(queued),
                since: AtomicU64::new(now),
                worker: AtomicU32::new(WORKER.with(Cell::get)),
                ..TaskStats::default()
            },
            cell: AtomicPtr::new(cell),
        });
        NonNull::from(Box::leak(block))
    }
}

/// A time mark, for a task without a [`StatsBlock`] while statistics are on, in its header's
/// `last` word: the top bit set (no user-space address has it, so publication never takes a
/// mark for the frame it last published, and treats it as "compare the whole stack"), the time
/// in units of 2^20 ns (about a millisecond, the tick's own resolution; rounded up, so a time
/// in a state read from a mark errs short, never raising a verdict early), and the worker that
/// set it (its index plus one, 0 for none, as [`WORKER`]). Set at the spawn (queued since then)
/// and at the start of its first counted poll (running since then, on that worker): what
/// `Starving`, `LongPoll` and a worker's current task need of a task that never suspended,
/// without allocating anything for the many tasks that finish in their first poll. Needs
/// 64-bit words.
#[inline]
pub(crate) fn mark(at: u64, worker: u32) -> usize {
    let units = at.div_ceil(1 << MARK_UNIT_SHIFT);
    (MARK | (units << MARK_WORKER_BITS) | u64::from(worker & MARK_WORKER_MASK)) as usize
}

/// The time of a [`mark`], if `last` is one.
#[inline]
pub(crate) fn mark_time(last: usize) -> Option<u64> {
    let last = last as u64;
    (last & MARK != 0).then_some(((last & !MARK) >> MARK_WORKER_BITS) << MARK_UNIT_SHIFT)
}

/// The worker of a [`mark`] (as [`WORKER`]), if `last` is one.
#[inline]
fn mark_worker(last: usize) -> Option<u32> {
    let last = last as u64;
    (last & MARK != 0).then_some((last as u32) & MARK_WORKER_MASK)
}

/// Whether `last` is a [`mark`].
#[inline]
pub(crate) fn is_mark(last: usize) -> bool {
    last as u64 & MARK != 0
}

const MARK: u64 = 1 << 63;
const MARK_UNIT_SHIFT: u32 = 20;
const MARK_WORKER_BITS: u32 = 23;
const MARK_WORKER_MASK: u32 = (1 << MARK_WORKER_BITS) - 1;

/// The `last` word of a task being spawned: a [`mark`] of now while statistics are on, else
/// `unknown`.
#[inline]
pub(crate) fn spawn_mark(unknown: usize) -> usize {
    if stats_enabled() {
        mark(tick(), 0)
    } else {
        unknown
    }
}

/// Per-task statistics, in the task's [`StatsBlock`]. See the module doc for who writes what.
#[derive(Debug, Default)]
pub(crate) struct TaskStats {
    /// [`now`] at the spawn, if the statistics were on then; else the first snapshot that saw
    /// the task sets it (so ages are lower bounds for tasks spawned while nobody looked).
    created: AtomicU64,
    polls: AtomicU64,
    /// Nanoseconds inside polls, summed.
    busy: AtomicU64,
    /// Nanoseconds queued (scheduled, not yet polled), summed.
    queued: AtomicU64,
    /// Times the task was woken (scheduled again after a poll).
    wakes: AtomicU64,
    /// [`now`] when the task entered its current state (queued, running, suspended).
    since: AtomicU64,
    /// The worker polling it (index plus one; 0: not a pool worker), set as a poll starts.
    worker: AtomicU32,
}

/// What a poll's guard keeps: whether it counts, when it started, and for a task without a
/// block, when it was spawned (its spawn [`mark`]; 0 if unknown).
#[derive(Clone, Copy)]
pub(crate) struct PollStart {
    at: u64,
    queued_since: u64,
}

impl PollStart {
    /// A poll that is not counted.
    #[allow(dead_code)]
    pub(crate) const NONE: PollStart = PollStart {
        at: 0,
        queued_since: 0,
    };

    /// Whether the poll is counted.
    #[inline]
    pub(crate) fn counted(self) -> bool {
        self.at != 0
    }

    /// The start of a counted poll of a task without a block, whose header's `last` word is
    /// `last`: takes its spawn mark, if any, and marks it running since now.
    #[inline]
    pub(crate) fn first(last: &AtomicUsize) -> PollStart {
        let at = tick();
        let queued_since = mark_time(last.load(Relaxed)).unwrap_or(0);
        last.store(mark(at, WORKER.with(Cell::get)), Relaxed);
        PollStart { at, queued_since }
    }
}

impl TaskStats {
    /// The task was scheduled (statistics are on): spawned, or woken if `woken` (it was
    /// polled before).
    #[inline]
    pub(crate) fn on_scheduled(&self, woken: bool) {
        if woken {
            self.wakes.store(self.wakes.load(Relaxed) + 1, Relaxed);
        }
        self.since.store(tick(), Relaxed);
    }

    /// A poll starts (statistics are on); what it returns goes to
    /// [`poll_ended`](Self::poll_ended).
    #[inline]
    pub(crate) fn poll_started(&self) -> PollStart {
        let now = tick();
        let since = self.since.load(Relaxed);
        if since >= ON_SINCE.load(Relaxed) && since <= now {
            self.queued
                .store(self.queued.load(Relaxed) + (now - since), Relaxed);
        }
        self.since.store(now, Relaxed);
        self.worker.store(WORKER.with(Cell::get), Relaxed);
        PollStart {
            at: now,
            queued_since: 0,
        }
    }

    /// The poll that [`poll_started`](Self::poll_started) began (and counted) returned.
    #[inline]
    pub(crate) fn poll_ended(&self, start: PollStart) {
        let start = start.at;
        let now = tick();
        self.busy
            .store(self.busy.load(Relaxed) + now.saturating_sub(start), Relaxed);
        self.polls.store(self.polls.load(Relaxed) + 1, Relaxed);
        self.since.store(now, Relaxed);
    }

    /// A copy for a snapshot taken at `now`.
    pub(crate) fn read(&self, now: u64) -> StatsCopy {
        let mut created = self.created.load(Relaxed);
        if created == 0 {
            // Spawned while nobody counted: its age is counted from the first look.
            created = match self.created.compare_exchange(0, now, Relaxed, Relaxed) {
                Ok(_) => now,
                Err(set) => set,
            };
        }
        let since = self.since.load(Relaxed);
        StatsCopy {
            age: Duration::from_nanos(now.saturating_sub(created)),
            in_state_for: in_state_for(since, now),
            polls: self.polls.load(Relaxed),
            busy: Duration::from_nanos(self.busy.load(Relaxed)),
            queued: Duration::from_nanos(self.queued.load(Relaxed)),
            wakes: self.wakes.load(Relaxed),
            worker: (self.worker.load(Relaxed) as usize).checked_sub(1),
        }
    }
}

/// How long a task that entered its state at `since` has been in it at `now`, if `since` was
/// recorded while statistics have been on (see the module doc).
fn in_state_for(since: u64, now: u64) -> Option<Duration> {
    (stats_enabled() && since >= ON_SINCE.load(Relaxed) && since <= now)
        .then(|| Duration::from_nanos(now - since))
}

impl StatsCopy {
    /// What a snapshot at `now` knows of a task without a block whose header's `last` word is
    /// `last`: how long it has been in its state if that is marked (a [`mark`]), and, for a task
    /// still queued since its spawn mark (`never_polled`), its age.
    pub(crate) fn of_mark(last: usize, now: u64, never_polled: bool) -> StatsCopy {
        let in_state = mark_time(last).and_then(|since| in_state_for(since, now));
        StatsCopy {
            age: in_state.filter(|_| never_polled).unwrap_or_default(),
            in_state_for: in_state,
            worker: mark_worker(last)
                .filter(|_| in_state.is_some())
                .and_then(|w| (w as usize).checked_sub(1)),
            ..StatsCopy::default()
        }
    }
}

/// What a snapshot copies of a task's [`TaskStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatsCopy {
    pub(crate) age: Duration,
    pub(crate) polls: u64,
    pub(crate) busy: Duration,
    pub(crate) queued: Duration,
    pub(crate) wakes: u64,
    /// How long the task has been in its current state, if known (counted since it entered it).
    pub(crate) in_state_for: Option<Duration>,
    /// The worker of its pool that last started polling it, if known.
    pub(crate) worker: Option<usize>,
}
