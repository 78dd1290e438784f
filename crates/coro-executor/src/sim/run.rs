//! [`Simulation`]: one seeded run of a pool of logical workers on the calling thread, and
//! [`SimError`], why a run stopped before its goal.
//!
//! Rule: the driver only alternates two moves: a step of a logical worker chosen from the seed
//! (`pool/sim.rs`), and, when no worker can step, the jump of the virtual clock to the next
//! timer deadline. Anything that could make two runs of a seed differ is either drawn from the
//! seed or reported as an error (a wake-up from another thread); a run that cannot finish (no
//! task can ever be woken, too many steps, too much virtual time) stops with an error instead
//! of hanging.

use super::decision::Decision;
use super::state::{self, Entered, SimState};
use super::watchdog::Progress;
use crate::executor::ExecutorHandle;
use crate::pool::sim::{SimPool, Step};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Steps a run may take before it is reported as a livelock, by default.
const DEFAULT_MAX_STEPS: u64 = 50_000_000;
/// Wall time one poll may take before the watchdog reports the run, by default.
const DEFAULT_POLL_LIMIT: Duration = Duration::from_secs(10);
/// Virtual time a run may span before it is reported as a timeout, by default.
const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A deterministic simulation: a pool of `workers` logical workers, run on this thread by
/// [`run_until`](Self::run_until), with every scheduling choice drawn from `seed` and a
/// virtual clock for its timers. While it exists, this thread's timers read its virtual clock
/// and [`is_simulated`](super::is_simulated) is true; it is not `Send`, being this thread's.
/// Dropping it shuts its pool down (every unfinished task is dropped, here).
///
/// ```
/// use coro_executor::sim::Simulation;
///
/// let mut sim = Simulation::new(9, 3);
/// let handle = sim.handle();
/// let sum = sim.handle().spawn(async move {
///     let parts: Vec<_> = (0..10u64).map(|i| handle.spawn(async move { i })).collect();
///     let mut sum = 0;
///     for part in parts {
///         sum += part.await.unwrap();
///     }
///     sum
/// });
/// sim.run_until(|| sum.is_finished()).unwrap();
/// assert_eq!(futures::executor::block_on(sum).unwrap(), 45);
/// ```
pub struct Simulation {
    // Field order is drop order: the pool shuts down inside the simulation (its tasks' drops
    // see the virtual clock), then the thread leaves it.
    pool: SimPool,
    _entered: Entered,
    sim: Box<SimState>,
    clock_before: Option<Option<Instant>>,
    start: Instant,
    steps: u64,
    max_steps: u64,
    time_limit: Duration,
    progress: Arc<Progress>,
    /// Not `Send`: the thread's current-simulation pointer and virtual clock point at this one.
    _on_this_thread: std::marker::PhantomData<*const ()>,
}

/// Why [`Simulation::run_until`] stopped before its goal.
///
/// ```
/// use coro_executor::sim::{SimError, Simulation};
///
/// let mut sim = Simulation::new(1, 2);
/// let stuck = sim.handle().spawn(std::future::pending::<()>());
/// assert_eq!(sim.run_until(|| stuck.is_finished()), Err(SimError::Deadlock));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// Every task waits, and no timer is pending: nothing inside the simulation can wake them.
    Deadlock,
    /// The run took more steps than its limit: tasks keep waking each other without reaching
    /// the goal (a livelock, or a task that yields forever).
    StepLimit(u64),
    /// The virtual clock passed the run's time limit.
    TimeLimit(Duration),
    /// A task was woken from a thread outside the simulation (the description says which).
    OutsideWake(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Deadlock => f.write_str(
                "deadlock: every task waits and no timer is pending, so nothing inside the \
                 simulation can wake them (a lost wake-up, or a wait for something outside it)",
            ),
            SimError::StepLimit(steps) => write!(
                f,
                "no end after {steps} scheduling steps: tasks keep running without reaching \
                 the goal (a livelock, or a task that yields forever); raise the limit if the \
                 workload is really that long"
            ),
            SimError::TimeLimit(limit) => write!(
                f,
                "timeout in virtual time: the simulated clock passed the limit of {limit:?}"
            ),
            SimError::OutsideWake(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for SimError {}

impl Simulation {
    /// A simulation of `workers` logical workers whose choices come from `seed`, entered on
    /// this thread. Panics if one already runs here (they do not nest) or `workers` is 0.
    ///
    /// ```
    /// let sim = coro_executor::sim::Simulation::new(0, 2);
    /// assert_eq!(sim.seed(), 0);
    /// assert!(coro_executor::sim::is_simulated());
    /// drop(sim);
    /// assert!(!coro_executor::sim::is_simulated());
    /// ```
    pub fn new(seed: u64, workers: usize) -> Simulation {
        Simulation::with_stacks(seed, workers, false)
    }

    /// As [`new`](Self::new); with `log_stacks`, every decision is kept (see
    /// [`take_log`](Self::take_log)) and each poll's entry carries the task's async stack.
    ///
    /// ```
    /// use coro_executor::sim::{Decision, Simulation};
    ///
    /// let mut sim = Simulation::with_stacks(4, 1, true);
    /// let task = sim.handle().spawn(async {});
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// assert!(sim.take_log().iter().any(|d| matches!(d, Decision::Ran { stack: Some(_), .. })));
    /// ```
    pub fn with_stacks(seed: u64, workers: usize, log_stacks: bool) -> Simulation {
        let sim = Box::new(SimState::new(seed, log_stacks));
        let entered = state::enter(&sim);
        // Virtual time starts at the real now, so that instants taken before the simulation
        // (and `std::time::Instant` arithmetic) stay meaningful.
        let start = Instant::now();
        let clock_before = Some(crate::time::set_virtual(Some(start)));
        let pool = SimPool::new(workers, start);
        let progress = Progress::new(seed, pool.tasks(), DEFAULT_POLL_LIMIT);
        Simulation {
            pool,
            _entered: entered,
            sim,
            clock_before,
            start,
            steps: 0,
            max_steps: DEFAULT_MAX_STEPS,
            time_limit: DEFAULT_TIME_LIMIT,
            progress,
            _on_this_thread: std::marker::PhantomData,
        }
    }

    /// The seed.
    ///
    /// ```
    /// assert_eq!(coro_executor::sim::Simulation::new(77, 1).seed(), 77);
    /// ```
    pub fn seed(&self) -> u64 {
        self.sim.seed
    }

    /// A handle that spawns onto the simulation's pool (from this thread).
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 2);
    /// let task = sim.handle().spawn(async { 6 * 7 });
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// assert_eq!(futures::executor::block_on(task).unwrap(), 42);
    /// ```
    pub fn handle(&self) -> ExecutorHandle {
        self.pool.handle()
    }

    /// Limits how many steps [`run_until`](Self::run_until) takes before it stops with
    /// [`SimError::StepLimit`] (default: 50 million).
    ///
    /// ```
    /// use coro_executor::sim::{SimError, Simulation};
    ///
    /// let mut sim = Simulation::new(1, 1);
    /// sim.set_max_steps(100);
    /// let spinner = sim.handle().spawn(async {
    ///     loop {
    ///         coro_executor::yield_now().await;
    ///     }
    /// });
    /// assert_eq!(sim.run_until(|| spinner.is_finished()), Err(SimError::StepLimit(100)));
    /// ```
    pub fn set_max_steps(&mut self, steps: u64) {
        self.max_steps = steps;
    }

    /// Limits the virtual time a run may span before it stops with [`SimError::TimeLimit`]
    /// (default: ten years).
    ///
    /// ```
    /// use coro_executor::sim::{SimError, Simulation};
    /// use std::time::Duration;
    ///
    /// let mut sim = Simulation::new(1, 1);
    /// sim.set_time_limit(Duration::from_secs(60));
    /// let slow = sim.handle().spawn(coro_executor::time::sleep(Duration::from_secs(3600)));
    /// let stopped = sim.run_until(|| slow.is_finished());
    /// assert!(matches!(stopped, Err(SimError::TimeLimit(_))));
    /// ```
    pub fn set_time_limit(&mut self, limit: Duration) {
        self.time_limit = limit;
    }

    /// How much wall time one poll may take (default 10 s) before the run is reported as
    /// stuck in a task that never yields: a watchdog thread then prints the seed and the live
    /// tasks' stacks and aborts the process (a stuck thread cannot be unwound from outside).
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 1);
    /// sim.set_poll_limit(std::time::Duration::from_secs(60));
    /// let task = sim.handle().spawn(async {});
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// ```
    pub fn set_poll_limit(&mut self, limit: Duration) {
        self.progress
            .limit_ms
            .store(limit.as_millis().max(1) as u64, Relaxed);
    }

    /// Runs the simulation until `done()` returns true (checked before every step), or until
    /// it cannot go on (see [`SimError`]).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    ///
    /// let mut sim = coro_executor::sim::Simulation::new(3, 2);
    /// let flag = Arc::new(AtomicBool::new(false));
    /// let set = flag.clone();
    /// sim.handle().spawn(async move { set.store(true, Ordering::Relaxed) }).detach();
    /// sim.run_until(|| flag.load(Ordering::Relaxed)).unwrap();
    /// ```
    pub fn run_until(&mut self, done: impl FnMut() -> bool) -> Result<(), SimError> {
        /// Tells the watchdog the run stopped (also on unwind).
        struct Stopped<'a>(&'a Progress);
        impl Drop for Stopped<'_> {
            fn drop(&mut self) {
                self.0.running.store(false, Relaxed);
            }
        }
        self.progress.running.store(true, Relaxed);
        let progress = self.progress.clone();
        let _stopped = Stopped(&progress);
        self.drive(done)
    }

    fn drive(&mut self, mut done: impl FnMut() -> bool) -> Result<(), SimError> {
        loop {
            if let Some(what) = self.pool.outside_wake() {
                return Err(SimError::OutsideWake(what.to_owned()));
            }
            if done() {
                return Ok(());
            }
            match self.pool.step(&self.sim) {
                Step::Stepped => {
                    self.steps += 1;
                    self.progress.moves.fetch_add(1, Relaxed);
                    if self.steps >= self.max_steps {
                        return Err(SimError::StepLimit(self.steps));
                    }
                }
                Step::AllIdle => {
                    let at = self.pool.advance(&self.sim).ok_or(SimError::Deadlock)?;
                    // A jump of the clock is progress too, for the watchdog.
                    self.progress.moves.fetch_add(1, Relaxed);
                    if at > self.time_limit {
                        return Err(SimError::TimeLimit(self.time_limit));
                    }
                }
            }
        }
    }

    /// The virtual time since the simulation started.
    ///
    /// ```
    /// let sim = coro_executor::sim::Simulation::new(1, 1);
    /// assert_eq!(sim.elapsed(), std::time::Duration::ZERO);
    /// ```
    pub fn elapsed(&self) -> Duration {
        crate::time::now().saturating_duration_since(self.start)
    }

    /// Steps taken so far (worker ticks and wake-ups).
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 1);
    /// let task = sim.handle().spawn(async {});
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// assert!(sim.steps() >= 1);
    /// ```
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Task polls so far, over every logical worker.
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 2);
    /// let task = sim.handle().spawn(async { coro_executor::yield_now().await });
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// assert_eq!(sim.polls(), 2);
    /// ```
    pub fn polls(&self) -> u64 {
        self.pool.polls()
    }

    /// A hash of every decision so far: two runs that took the same decisions have the same
    /// fingerprint.
    ///
    /// ```
    /// use coro_executor::sim::Simulation;
    ///
    /// let run = |seed| {
    ///     let mut sim = Simulation::new(seed, 2);
    ///     let task = sim.handle().spawn(async {});
    ///     sim.run_until(|| task.is_finished()).unwrap();
    ///     sim.fingerprint()
    /// };
    /// assert_eq!(run(8), run(8));
    /// ```
    pub fn fingerprint(&self) -> u64 {
        self.sim.fingerprint()
    }

    /// Keeps (or stops keeping) every decision from now on, for [`take_log`](Self::take_log).
    /// Off by default, unless built [`with_stacks`](Self::with_stacks): a long run takes
    /// millions of decisions.
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 1);
    /// sim.keep_log(true);
    /// let task = sim.handle().spawn(async {});
    /// sim.run_until(|| task.is_finished()).unwrap();
    /// assert!(!sim.take_log().is_empty());
    /// ```
    pub fn keep_log(&mut self, keep: bool) {
        self.sim.keep_log.set(keep);
    }

    /// The decisions kept so far, in order (see [`keep_log`](Self::keep_log)); the log is
    /// emptied.
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 1);
    /// assert!(sim.take_log().is_empty());
    /// ```
    pub fn take_log(&mut self) -> Vec<Decision> {
        self.sim.take_log()
    }

    /// The simulation's live tasks with their async stacks, as text: what a failure report
    /// shows.
    ///
    /// ```
    /// let mut sim = coro_executor::sim::Simulation::new(1, 1);
    /// let stuck = sim.handle().spawn(std::future::pending::<()>());
    /// let _ = sim.run_until(|| stuck.is_finished());
    /// assert!(sim.dump().starts_with("1 live task(s)"));
    /// ```
    pub fn dump(&self) -> String {
        self.pool.dump(&self.sim)
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.pool.shutdown();
        if let Some(before) = self.clock_before.take() {
            crate::time::set_virtual(before);
        }
    }
}

impl fmt::Debug for Simulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed())
            .field("steps", &self.steps)
            .field("elapsed", &self.elapsed())
            .finish()
    }
}
