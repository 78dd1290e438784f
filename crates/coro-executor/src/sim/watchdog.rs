//! The simulations' watchdog: a thread that notices a simulation stuck in one poll (a task that
//! never yields: a loop without `.await`, or a blocking call) and reports it instead of letting
//! the run hang.
//!
//! Rule: a simulation runs on one thread, so a poll that never returns stops it for good and
//! nothing on that thread can report it. The watchdog, one thread for the process (started by
//! the first simulation), looks at every running simulation's step counter; one that has not
//! moved for the simulation's poll limit of wall time, while inside `run_until`, gets its
//! report (seed, live tasks with their async stacks) printed, and the process aborts, since the
//! stuck thread can be neither resumed nor unwound from outside.

use crate::pool::sim::dump_tasks;
use crate::task::TaskList;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// How often the watchdog looks.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// What the watchdog sees of one simulation.
pub(crate) struct Progress {
    /// Steps taken and clock jumps made; moved by the simulation's thread after each.
    pub(crate) moves: AtomicU64,
    /// Whether the simulation is inside `run_until` (outside it, standing still is fine).
    pub(crate) running: AtomicBool,
    /// The wall time one step may take, in milliseconds.
    pub(crate) limit_ms: AtomicU64,
    seed: u64,
    tasks: Arc<TaskList>,
}

impl Progress {
    pub(crate) fn new(seed: u64, tasks: Arc<TaskList>, limit: Duration) -> Arc<Progress> {
        let progress = Arc::new(Progress {
            moves: AtomicU64::new(0),
            running: AtomicBool::new(false),
            limit_ms: AtomicU64::new(limit.as_millis() as u64),
            seed,
            tasks,
        });
        watch(&progress);
        progress
    }
}

/// The simulations being watched.
static WATCHED: Mutex<Vec<Weak<Progress>>> = Mutex::new(Vec::new());

/// Adds `progress` to what the watchdog looks at, starting the watchdog on first use.
fn watch(progress: &Arc<Progress>) {
    static STARTED: OnceLock<()> = OnceLock::new();
    {
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        watched.retain(|weak| weak.strong_count() > 0);
        watched.push(Arc::downgrade(progress));
    }
    STARTED.get_or_init(|| {
        // Without the thread a stuck poll hangs, as it would without a watchdog: the run is
        // otherwise unaffected, so a failure to start it is not worth failing the run for.
        let _ = std::thread::Builder::new()
            .name(String::from("coro-sim-watchdog"))
            .spawn(run);
    });
}

fn run() {
    // Per simulation (by address): the step count last seen and since when it stands still.
    let mut seen: Vec<(usize, u64, Instant)> = Vec::new();
    loop {
        std::thread::sleep(LOOK_EVERY);
        let watched: Vec<Arc<Progress>> = WATCHED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let now = Instant::now();
        seen.retain(|(key, ..)| watched.iter().any(|p| Arc::as_ptr(p) as usize == *key));
        for progress in &watched {
            let key = Arc::as_ptr(progress) as usize;
            let steps = progress.moves.load(Relaxed);
            let running = progress.running.load(Relaxed);
            match seen.iter_mut().find(|(k, ..)| *k == key) {
                Some(entry) if entry.1 == steps && running => {
                    let limit = Duration::from_millis(progress.limit_ms.load(Relaxed));
                    if now.duration_since(entry.2) >= limit {
                        report(progress, limit);
                    }
                }
                Some(entry) => *entry = (key, steps, now),
                None => seen.push((key, steps, now)),
            }
        }
    }
}

/// Prints the report of a simulation stuck in one poll and aborts the process.
fn report(progress: &Progress, limit: Duration) -> ! {
    use std::io::Write;
    let seed = progress.seed;
    // Written to the process's stderr directly: a test harness that captures the output of
    // the thread that started the watchdog would lose it at the abort.
    let _ = writeln!(
        std::io::stderr().lock(),
        "coro::sim: the simulation failed: a task has been in one poll for over {limit:?} of \
         wall time: it never yields (a loop without .await, or a blocking call such as \
         std::thread::sleep, a lock held by another thread, or block_wait)\n\
         seed {seed}, after {} steps and clock jumps; replay it with CORO_SIM_SEED={seed}\n{}\n\
         (the simulation's thread cannot be resumed or unwound from outside: aborting)",
        progress.moves.load(Relaxed),
        dump_tasks(&progress.tasks, &|id| id),
    );
    std::process::abort()
}
