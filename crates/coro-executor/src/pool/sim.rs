//! A simulation's pool: the real pool (its shared state, run queues, next slots, global queue,
//! idle bookkeeping, stealing) with `n` logical workers that one thread steps in an order drawn
//! from the seed, instead of `n` threads.
//!
//! Rule: no second scheduler. A step is one tick of a [`Worker`](super::worker::Worker) (it
//! runs a task, takes an offer, or finds nothing and parks), or the wake-up of a parked one
//! whose parker holds a token; which worker steps is the only choice made here, and it is drawn
//! from the seed among the workers that could run (awake, or woken). When none could, every
//! task is idle: the driver moves the virtual clock to the next timer deadline and fires it.
//! There is no monitor thread (a poll cannot outlast a step, so nothing is handed off or
//! reported as stalled), no helper and no blocking thread (`spawn_blocking` becomes a task).

use super::helper_threads::Helpers;
use super::queue;
use super::shared::{Options, Remote, Shared};
use super::worker::{SimWorker, Tick};
use crate::blocking::BlockingPool;
use crate::executor::ExecutorHandle;
use crate::sim::decision::Decision;
use crate::sim::state::SimState;
use crate::task::TaskList;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What [`SimPool::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A logical worker took a step.
    Stepped,
    /// Every worker sleeps without a wake-up: every task waits (on a timer, or on nothing).
    AllIdle,
}

/// The pool of one simulation run, stepped by its driver on the current thread.
pub(crate) struct SimPool {
    shared: Arc<Shared>,
    workers: Vec<SimWorker>,
    /// Which logical workers are parked (stepped only once their parker holds a token).
    asleep: Vec<bool>,
    /// Virtual time zero.
    start: Instant,
    /// Reusable buffer of the workers that may step.
    ready: Vec<usize>,
}

impl SimPool {
    /// A pool of `workers` logical workers. Call it with the simulation's state entered: the
    /// workers' victim choices are seeded from it.
    pub(crate) fn new(workers: usize, start: Instant) -> SimPool {
        assert!(
            (1..=65_534).contains(&workers),
            "a simulation needs between 1 and 65534 logical workers, but {workers} were asked for"
        );
        let (locals, remotes): (Vec<_>, Vec<_>) = (0..workers)
            .map(|_| {
                let (local, steal) = queue::local();
                (local, Remote::new(steal))
            })
            .unzip();
        let shared = Arc::new(Shared::with_spares(
            remotes.into_boxed_slice(),
            workers,
            Helpers::new(workers, Vec::new(), String::new()),
            BlockingPool::new(String::from("coro-sim-blocking"), 1, Duration::ZERO),
            Options {
                handoff_after: Duration::MAX,
                stall: None,
                thread_name: String::new(),
                sim_thread: Some(std::thread::current().id()),
            },
        ));
        crate::task::registry::register(&shared.tasks);
        let workers = locals
            .into_iter()
            .enumerate()
            .map(|(index, local)| SimWorker::new(shared.clone(), index, local))
            .collect::<Vec<_>>();
        let asleep = vec![false; workers.len()];
        SimPool {
            shared,
            workers,
            asleep,
            start,
            ready: Vec::new(),
        }
    }

    /// A handle that spawns onto this pool (from its thread).
    pub(crate) fn handle(&self) -> ExecutorHandle {
        ExecutorHandle::from_pool(self.shared.clone())
    }

    /// Takes one step: a logical worker, drawn from the seed among those that can move, ticks
    /// or wakes.
    pub(crate) fn step(&mut self, sim: &SimState) -> Step {
        self.ready.clear();
        for (index, worker) in self.workers.iter().enumerate() {
            if !self.asleep[index] || worker.is_notified() {
                self.ready.push(index);
            }
        }
        let index = match self.ready.len() {
            0 => return Step::AllIdle,
            1 => self.ready[0],
            n => self.ready[sim.below("worker to step", n)],
        };
        let worker = &self.workers[index];
        if self.asleep[index] {
            let awake = worker.enter(|worker| worker.sim_wake());
            self.asleep[index] = !awake;
            let what = if awake { "woke" } else { "stayed asleep" };
            sim.record(Decision::Idle {
                worker: index,
                what,
            });
            return Step::Stepped;
        }
        let tick = worker.enter(|worker| {
            worker.tick(|task| {
                let header = task.metadata();
                let stack = sim.log_stacks.then(|| {
                    // SAFETY: the task is listed and stays alive: we hold its runnable, so
                    // its future is neither completed nor dropped until it runs.
                    let snapshot = unsafe { crate::trace::snapshot_of(header) };
                    let mut text = format!("{} [{}]", snapshot.name(), snapshot.state());
                    for frame in snapshot.frames() {
                        let _ = write!(text, "\n  at {frame}");
                    }
                    text
                });
                sim.record(Decision::Ran {
                    worker: index,
                    task: sim.ordinal(header.id()),
                    stack,
                });
            })
        });
        match tick {
            Tick::Ran => {}
            Tick::TookOffer => sim.record(Decision::Idle {
                worker: index,
                what: "took an offer",
            }),
            Tick::Nothing => {
                worker.enter(|worker| worker.sim_park());
                self.asleep[index] = true;
                sim.record(Decision::Idle {
                    worker: index,
                    what: "parked",
                });
            }
        }
        Step::Stepped
    }

    /// With every task idle: moves the virtual clock to the earliest timer deadline and fires
    /// what is due then. Returns the new virtual time since the start, or `None` if no timer
    /// is pending (nothing will ever wake the idle tasks from inside the simulation).
    pub(crate) fn advance(&self, sim: &SimState) -> Option<Duration> {
        let timers = self.shared.timers()?;
        let deadline = timers.next_deadline()?;
        let now = crate::time::now();
        if deadline > now {
            crate::time::set_virtual(Some(deadline));
        }
        let to = crate::time::now().saturating_duration_since(self.start);
        sim.record(Decision::Advance { to });
        timers.fire_due_now();
        Some(to)
    }

    /// Task polls so far, over every logical worker.
    pub(crate) fn polls(&self) -> u64 {
        self.shared
            .remotes
            .iter()
            .map(|r| r.counters.polls.get())
            .sum()
    }

    /// The first wake-up from a thread outside the simulation, described, if there was one.
    pub(crate) fn outside_wake(&self) -> Option<&str> {
        self.shared.outside_wake.get().map(String::as_str)
    }

    /// The live tasks of this pool with their async stacks, one block per task, in the order
    /// the simulation first ran them.
    pub(crate) fn dump(&self, sim: &SimState) -> String {
        dump_tasks(&self.shared.tasks, &|id| sim.ordinal(id))
    }

    /// The pool's task list, for the watchdog (which dumps it from its own thread).
    pub(crate) fn tasks(&self) -> Arc<TaskList> {
        self.shared.tasks.clone()
    }

    /// Shuts the pool down as `ThreadPool`'s drop does: every unfinished task is dropped
    /// exactly once, here (its handle resolves `Cancelled`).
    pub(crate) fn shutdown(&mut self) {
        if !self.shared.begin_shutdown() {
            return;
        }
        for worker in &self.workers {
            worker.drain();
        }
        self.shared.finish_shutdown(true);
    }
}

impl Drop for SimPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The live tasks of `list` with their async stacks, one block per task, sorted by the names
/// `number` gives their ids. Safe from any thread (as task dumps are).
pub(crate) fn dump_tasks(list: &TaskList, number: &dyn Fn(u64) -> u64) -> String {
    let mut tasks = Vec::new();
    list.for_each_listed(|header| {
        // SAFETY: `for_each_listed` keeps each task alive while its header is read.
        let snapshot = unsafe { crate::trace::snapshot_of(header) };
        tasks.push((number(header.id()), snapshot));
    });
    tasks.sort_by_key(|(number, _)| *number);
    let mut text = format!("{} live task(s)", tasks.len());
    for (number, snapshot) in tasks {
        let _ = write!(
            text,
            "\n- task #{number} {} [{}]",
            snapshot.name(),
            snapshot.state()
        );
        for frame in snapshot.frames() {
            let _ = write!(text, "\n    at {frame}");
        }
    }
    text
}
