//! [`TaskStats`]: what is counted about a task for a console (polls, time busy and queued,
//! when it entered its state, where it runs), the switch that turns the per-poll counting on
//! only while someone looks, and the clock it counts with. The block that holds a task's
//! counters, and how blocks are recycled, is `block.rs`.
//!
//! Rule: while nobody has asked for statistics recently, a poll costs one relaxed load of
//! `CLOCK.enabled` more than without them (the guard of the poll keeps what it read), and a
//! schedule one more; no task has a block, so the tasks are no bigger. While they are on, a
//! task gets its block when it suspends (installed by its header: see `task/header.rs`,
//! `STATS_BLOCK`); until then a time [`mark`] in its header says since when it has been queued
//! or running. A task spawned before they came on and not polled since has neither and shows
//! zero counters. The thread that polls or schedules a task writes
//! its counters with plain loads and stores: async-task runs a task's poll and its schedule
//! function one at a time, with its own state atomics ordering one before the next, so each
//! counter has one writer at a time. Readers (snapshots) may see a counter one event off.
//!
//! What a poll and a wake do while statistics are on is kept to what the verdicts and the
//! counters need, all inline: a schedule stores the time it was queued; a poll's start adds the
//! time queued, counts the poll and notes its worker; its end adds the time busy. Wakes are not
//! counted where they happen: every poll but a task's first counted one follows a wake, so
//! wakes are the counted polls less one, plus one while the task is queued again.
//!
//! Times are nanoseconds since a process-wide epoch ([`now`]); a `since` older than the moment
//! the statistics were last switched on is stale (written in an earlier period, or never) and
//! reads as unknown, so that a task that changed state while nobody counted is never reported
//! as stuck since then.
//!
//! Polls and schedules read the time from `CLOCK.tick`, a clock that a thread of its own (started
//! while the statistics are on, gone when they go off) advances every [`TICK_EVERY`], in
//! multiples of [`TICK_UNIT`]: one relaxed load, where reading the OS clock costs about 75 ns on
//! a virtual machine, more than a whole poll of a small task. Busy and queued times are
//! therefore sums of the ticks each poll or wait spans: over many polls an unbiased estimate of
//! the real time (as a sampling profiler's), while one short poll counts 0 or one tick. The same
//! ticker switches the statistics off once nobody holds them and the last request has expired.

use super::TraceCell;
use crate::loom::sync::atomic::{AtomicU32 as ModelU32, AtomicU64 as ModelU64};
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

/// The switch and the clock, side by side: what polls and schedules read.
struct Clock {
    /// Whether per-poll statistics are being collected. The only thing a poll reads while they
    /// are off.
    enabled: AtomicBool,
    /// [`now`] as of the ticker's last tick, rounded down to a [`TICK_UNIT`] (see the module
    /// doc); 0 before the first. Only ever raised (`fetch_max`), so that a time read from it
    /// after another (ordered after it) is never earlier.
    tick: AtomicU64,
    /// [`now`] when the statistics were last switched on (see the module doc), rounded down
    /// to a [`TICK_UNIT`] as `tick` is.
    on_since: AtomicU64,
}

/// One static rather than three: code inlined into another crate (a task's poll is
/// monomorphised there) reaches a static through its address in the global offset table, one
/// more load per static; one address serves the switch, the tick and the period's start.
static CLOCK: Clock = Clock {
    enabled: AtomicBool::new(false),
    tick: AtomicU64::new(0),
    on_since: AtomicU64::new(u64::MAX),
};
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

/// This thread's worker index plus one (0: not a worker), as [`WORKER`] holds it.
#[inline]
fn worker() -> u32 {
    WORKER.with(Cell::get)
}

/// How long a [`request_stats`] (a snapshot) keeps the statistics on.
pub const REQUEST_KEEPS_ON: Duration = Duration::from_secs(10);

/// The resolution of the statistics' clock: every time `CLOCK.tick` holds is a multiple of it
/// (2^20 ns, about a millisecond), so that a time [`mark`] is the time with its flag and its
/// worker or'ed into the bits below.
pub(crate) const TICK_UNIT: u64 = 1 << 20;

/// How late the ticker's ticks have been: the longest gap between a tick and the time the
/// tick before it stands for, decaying by one part in 65,536 each tick (to 86% after ten
/// seconds at one tick a millisecond). A time read from `CLOCK.tick` may be this much older than
/// the moment it stands for.
static SLACK: AtomicU64 = AtomicU64::new(0);
/// Whether the ticker thread runs.
static TICKING: AtomicBool = AtomicBool::new(false);
/// The ticker's period.
const TICK_EVERY: Duration = Duration::from_millis(1);

/// `ns` rounded down to a [`TICK_UNIT`].
#[inline]
fn in_units(ns: u64) -> u64 {
    ns & !(TICK_UNIT - 1)
}

/// [`now`] to the last tick: what polls and schedules read.
#[inline]
pub(crate) fn tick() -> u64 {
    CLOCK.tick.load(Relaxed)
}

/// Starts the ticker thread unless it runs. It ticks while the statistics are on, switches them
/// off when nobody asks for them any more, and then ends.
fn start_ticker() {
    if TICKING.swap(true, SeqCst) {
        return;
    }
    CLOCK.tick.fetch_max(in_units(now()), Relaxed);
    let started = std::thread::Builder::new()
        .name("coro-stats-clock".into())
        .spawn(|| {
            loop {
                let now = now();
                let gap = now.saturating_sub(CLOCK.tick.fetch_max(in_units(now), Relaxed));
                let slack = SLACK.load(Relaxed);
                SLACK.store(gap.max(slack - slack / 65_536), Relaxed);
                if HOLDERS.load(SeqCst) == 0 && now > REQUESTED_UNTIL.load(SeqCst) {
                    CLOCK.enabled.store(false, SeqCst);
                    TICKING.store(false, SeqCst);
                    // Switched on again meanwhile by someone who saw the ticker running: keep
                    // ticking for them.
                    if CLOCK.enabled.load(SeqCst) && !TICKING.swap(true, SeqCst) {
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
        CLOCK.enabled.store(false, SeqCst);
    }
}

/// How much older than the moment it stands for a time the statistics recorded may be (the
/// ticker's recent lateness, at least its period and unit): verdicts about how long a task has
/// been in its state subtract it, so that a late tick never makes a task look stuck.
///
/// ```
/// let _stats = coro_executor::trace::collect_stats();
/// assert!(coro_executor::trace::stats_clock_slack() >= std::time::Duration::from_millis(1));
/// ```
pub fn stats_clock_slack() -> Duration {
    // A ticker that has not run for a while (starved of CPU) is late by at least that long now.
    let late_now = now().saturating_sub(CLOCK.tick.load(Relaxed));
    Duration::from_nanos(SLACK.load(Relaxed).max(late_now))
        .max(TICK_EVERY + Duration::from_nanos(TICK_UNIT))
}

/// The process-wide epoch that [`now`] counts from: the first call's moment.
#[inline]
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Nanoseconds since the process-wide epoch (the first call), plus one [`TICK_UNIT`]: never
/// below it, so that no time, rounded to the clock's unit, is 0 (which means unknown).
#[inline]
pub(crate) fn now() -> u64 {
    ns_of(Instant::now())
}

/// The [`Instant`] of a [`now`] value (the inverse of [`ns_of`]): arithmetic on the epoch, no
/// clock read.
pub(crate) fn instant_of(ns: u64) -> Instant {
    let epoch = epoch();
    match ns.checked_sub(TICK_UNIT) {
        Some(after) => epoch + Duration::from_nanos(after),
        None => epoch
            .checked_sub(Duration::from_nanos(TICK_UNIT - ns))
            .unwrap_or(epoch),
    }
}

/// The [`now`] value of `instant` (for deadlines), at least 1: arithmetic on the epoch, no
/// clock read, so that naming a timer a task waits on costs no more than the timer.
pub(crate) fn ns_of(instant: Instant) -> u64 {
    let epoch = epoch();
    match instant.checked_duration_since(epoch) {
        Some(after) => (after.as_nanos() as u64).saturating_add(TICK_UNIT),
        None => TICK_UNIT
            .saturating_sub((epoch - instant).as_nanos() as u64)
            .max(1),
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
    CLOCK.enabled.load(Relaxed)
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
    if !CLOCK.enabled.load(SeqCst) {
        // `on_since` first: a transition that sees `enabled` reads a later time (see module doc).
        CLOCK.on_since.store(in_units(now), SeqCst);
        CLOCK.tick.fetch_max(in_units(now), SeqCst);
        CLOCK.enabled.store(true, SeqCst);
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

/// A time mark, for a task without a block while statistics are on, in its header's `last`
/// word: the top bit set (no user-space address has it, so publication never takes a mark for
/// the frame it last published, and treats it as "compare the whole stack"), a time read from
/// `CLOCK.tick` (a multiple of [`TICK_UNIT`]), and in the bits below the unit the worker that set
/// it (its index plus one, 0 for none, as [`WORKER`]). Set at the spawn (queued since then)
/// and at the start of its first counted poll (running since then, on that worker): what
/// `Starving`, `LongPoll` and a worker's current task need of a task that never suspended,
/// without allocating anything for the many tasks that finish in their first poll. Needs
/// 64-bit words.
#[inline]
fn mark(at: u64, worker: u32) -> usize {
    (MARK | at | u64::from(worker & MARK_WORKER_MASK)) as usize
}

/// The time of a [`mark`], if `last` is one.
#[inline]
fn mark_time(last: usize) -> Option<u64> {
    let last = last as u64;
    (last & MARK != 0).then_some(last & !MARK & !u64::from(MARK_WORKER_MASK))
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
/// The bits of a [`mark`] below its time: its worker.
const MARK_WORKER_MASK: u32 = (TICK_UNIT - 1) as u32;

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

/// Per-task statistics, in the task's block (`block.rs`). See the module doc for who writes
/// what. The model's atomics (`crate::loom`): a block is recycled from task to task, and the
/// models check that a snapshot never sees the counters of the block's previous task.
#[derive(Debug)]
pub(crate) struct TaskStats {
    /// [`now`] at the spawn, if the statistics were on then; else the first snapshot that saw
    /// the task sets it (so ages are lower bounds for tasks spawned while nobody looked).
    created: ModelU64,
    /// Polls started while the statistics were on.
    polls: ModelU64,
    /// Nanoseconds inside polls, summed.
    busy: ModelU64,
    /// Nanoseconds queued (scheduled, not yet polled), summed.
    queued: ModelU64,
    /// [`tick`] when the task entered its current state (queued, running, suspended).
    since: ModelU64,
    /// The worker polling it (index plus one; 0: not a pool worker), set as a poll starts.
    worker: ModelU32,
}

/// What a poll's guard keeps of the counting it began (`TaskHeader::count_poll_start` in
/// `task/header.rs`, ended by `count_poll_end`), in two words, as the guard keeps them
/// across the poll: `word` is null for a poll not counted (statistics were off as it started),
/// the task's trace word for a poll counted in the task's block (tagged as one: the header
/// reads it), or else the time the first counted poll of a task without a block began (a
/// [`tick`], a nonzero multiple of [`TICK_UNIT`], so no tag), with `spawned` the time of the
/// task's spawn [`mark`] (0: unknown). Should that first poll suspend, the task gets a block
/// that counts it. (A tick read as 0, before the clock's first, leaves that poll uncounted.)
#[derive(Clone, Copy)]
pub(crate) struct PollCount {
    /// A pointer, so that a block's address keeps its provenance; a time is one without.
    word: *mut TraceCell,
    spawned: u64,
}

impl PollCount {
    /// A poll not counted.
    pub(crate) const OFF: PollCount = PollCount {
        word: std::ptr::null_mut(),
        spawned: 0,
    };

    /// A poll counted in the block that `trace_word`, the task's trace word, is tagged with.
    #[inline]
    pub(crate) fn in_block(trace_word: *mut TraceCell) -> PollCount {
        PollCount {
            word: trace_word,
            spawned: 0,
        }
    }

    /// The start of a counted poll of a task without a block, whose header's `last` word is
    /// `last`: takes its spawn mark, if any, and marks it running since now on this worker.
    #[inline]
    pub(crate) fn first(last: &std::sync::atomic::AtomicUsize) -> PollCount {
        let at = tick();
        let spawned = mark_time(last.load(Relaxed)).unwrap_or(0);
        last.store(mark(at, worker()), Relaxed);
        PollCount {
            word: std::ptr::without_provenance_mut(at as usize),
            spawned,
        }
    }

    /// Whether the poll is counted.
    #[inline]
    pub(crate) fn counted(self) -> bool {
        !self.word.is_null()
    }

    /// The task's trace word, for a poll counted in its block (see the type's doc).
    #[inline]
    pub(crate) fn trace_word(self) -> *mut TraceCell {
        self.word
    }

    /// For the first counted poll of a task without a block: when it began, and when the task
    /// was spawned (0: unknown).
    #[inline]
    pub(crate) fn first_poll(self) -> (u64, u64) {
        (self.word.addr() as u64, self.spawned)
    }
}

/// The values a block starts with, for the first counted poll of its task, begun at `at`
/// and just ended at `now`; `spawned` as in [`PollCount::first_poll`].
pub(crate) struct FirstPoll {
    pub(crate) at: u64,
    pub(crate) spawned: u64,
    pub(crate) now: u64,
}

impl TaskStats {
    /// Counters all zero, for a block just allocated (see [`start`](Self::start)).
    pub(crate) fn zero() -> TaskStats {
        TaskStats {
            created: ModelU64::new(0),
            polls: ModelU64::new(0),
            busy: ModelU64::new(0),
            queued: ModelU64::new(0),
            since: ModelU64::new(0),
            worker: ModelU32::new(0),
        }
    }

    /// Sets every counter of a block (new or recycled) for the task whose first counted poll
    /// `poll` was: that poll counted, and its time queued since its spawn if it was marked
    /// then and statistics were on since (a mark of an earlier period is not this period's
    /// time, see the module doc). Before the block is installed, by the thread that owns it.
    pub(crate) fn start(&self, poll: &FirstPoll) {
        let spawned = poll.spawned;
        let queued = if spawned != 0 && spawned >= CLOCK.on_since.load(Relaxed) {
            poll.at - spawned
        } else {
            0
        };
        // Its spawn time, if it was marked at its spawn: the mark holds a tick, at or before
        // the spawn (an age errs long, as one read from the tick does, and is never below the
        // busy time).
        self.created.store(spawned, Relaxed);
        self.polls.store(1, Relaxed);
        self.busy.store(poll.now - poll.at, Relaxed);
        self.queued.store(queued, Relaxed);
        self.since.store(poll.now, Relaxed);
        self.worker.store(worker(), Relaxed);
    }

    /// The task was scheduled (statistics are on): queued since now.
    #[inline]
    pub(crate) fn on_scheduled(&self) {
        self.since.store(tick(), Relaxed);
    }

    /// A poll starts (statistics are on): the time since the task was queued, if it was while
    /// they were on, is its time queued. Ends with [`poll_ended`](Self::poll_ended).
    #[inline]
    pub(crate) fn poll_started(&self) {
        let now = tick();
        let since = self.since.load(Relaxed);
        // Most waits end within the tick they began in: nothing to add, and `since` says now
        // already.
        if since != now {
            if since >= CLOCK.on_since.load(Relaxed) {
                // `since` was read from `CLOCK.tick` before this load of it (by the schedule, or the
                // end of the last poll), ordered before it by async-task: `CLOCK.tick` only grows,
                // so `now > since`.
                self.queued
                    .store(self.queued.load(Relaxed) + (now - since), Relaxed);
            }
            self.since.store(now, Relaxed);
        }
        self.polls.store(self.polls.load(Relaxed) + 1, Relaxed);
        self.worker.store(worker(), Relaxed);
    }

    /// The poll that [`poll_started`](Self::poll_started) began returned: its time busy is
    /// the time since it began.
    #[inline]
    pub(crate) fn poll_ended(&self) {
        let now = tick();
        // Set by `poll_started` on this thread, from `CLOCK.tick`, which only grows.
        let started = self.since.load(Relaxed);
        // Most polls end within the tick they began in: nothing to add, and `since` says now.
        if started != now {
            self.busy
                .store(self.busy.load(Relaxed) + (now - started), Relaxed);
            self.since.store(now, Relaxed);
        }
    }

    /// A copy for a snapshot taken at `now`, of a task that is queued if `scheduled`.
    pub(crate) fn read(&self, now: u64, scheduled: bool) -> StatsCopy {
        let mut created = self.created.load(Relaxed);
        if created == 0 {
            // Spawned while nobody counted: its age is counted from the first look.
            created = match self.created.compare_exchange(0, now, Relaxed, Relaxed) {
                Ok(_) => now,
                Err(set) => set,
            };
        }
        let since = self.since.load(Relaxed);
        let polls = self.polls.load(Relaxed);
        StatsCopy {
            age: Duration::from_nanos(now.saturating_sub(created)),
            in_state_for: in_state_for(since, now),
            polls,
            busy: Duration::from_nanos(self.busy.load(Relaxed)),
            queued: Duration::from_nanos(self.queued.load(Relaxed)),
            // A block counts from a poll: each later poll followed a wake, and a task queued
            // again waits on one more (see the module doc).
            wakes: polls.saturating_sub(1) + u64::from(scheduled && polls > 0),
            worker: (self.worker.load(Relaxed) as usize).checked_sub(1),
        }
    }
}

/// How long a task that entered its state at `since` has been in it at `now`, if `since` was
/// recorded while statistics have been on (see the module doc).
fn in_state_for(since: u64, now: u64) -> Option<Duration> {
    (stats_enabled() && since >= CLOCK.on_since.load(Relaxed) && since <= now)
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

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_and_its_nanoseconds_convert_exactly_both_ways() {
        let base = Instant::now();
        for instant in [
            base,
            base + Duration::from_nanos(1),
            base + Duration::from_secs(3600),
            epoch(),
        ] {
            assert_eq!(instant_of(ns_of(instant)), instant);
        }
        for ns in [1, TICK_UNIT - 1, TICK_UNIT, TICK_UNIT + 12_345, 5 << 40] {
            let instant = instant_of(ns);
            // Instants before the process's epoch may not exist on this clock: then the epoch.
            if ns >= TICK_UNIT || instant != epoch() {
                assert_eq!(ns_of(instant), ns);
            }
        }
    }

    #[test]
    fn now_and_the_nanoseconds_of_an_instant_agree() {
        let before = now();
        let at = ns_of(Instant::now());
        let after = now();
        assert!(before <= at && at <= after, "{before} {at} {after}");
        assert!(at >= TICK_UNIT, "no time is below one unit: {at}");
        let earlier = epoch().checked_sub(Duration::from_millis(1));
        if let Some(earlier) = earlier {
            assert_eq!(ns_of(earlier), TICK_UNIT - 1_000_000);
        }
    }
}
