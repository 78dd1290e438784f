//! [`snapshot`]: every live task of every executor with its statistics, what it waits on and its
//! stack, every pool and worker with its counters, and the [`Warning`]s found in them.
//!
//! Rule: a snapshot stops nothing. It copies the engine's census (per-task headers under the
//! task lists' short shard locks, counters with relaxed loads), then builds everything else
//! (names, trees, the wait-for graph, verdicts) from the copies, holding no lock a worker needs.
//! Asking for one turns the engine's per-poll statistics on for a while
//! ([`coro_executor::trace::REQUEST_KEEPS_ON`]); counts are of what happened while they were on.

use super::dump::TaskDump;
use super::warnings::{Warning, find_warnings};
use coro_executor::trace::{TaskSnapshot, TaskState, WaitOn, census, request_stats};
use serde::{Serialize, Serializer};
use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

/// Every live task and pool at one moment, with the warnings found in them; from [`snapshot`].
/// Serialises (serde) to the console's JSON; displays as [`dump_all`](super::dump_all)'s tree
/// followed by the warnings.
///
/// ```
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let (tx, rx) = futures::channel::oneshot::channel::<()>();
/// let waiter = coro::Task::new(async move { rx.await.ok(); }).named("waiter").schedule_on(&pool).start();
/// std::thread::sleep(std::time::Duration::from_millis(20));
/// let snap = coro::trace::snapshot();
/// assert!(snap.tasks.iter().any(|t| t.name == "waiter"));
/// assert!(snap.to_string().contains(" waiter [suspended]"));
/// tx.send(()).unwrap();
/// coro::block_wait(waiter).unwrap();
/// ```
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// When it was taken (seconds since the Unix epoch in JSON).
    #[serde(serialize_with = "system_time")]
    pub taken_at: SystemTime,
    /// Every live pool.
    pub pools: Vec<PoolSnapshot>,
    /// Every live task, by id.
    pub tasks: Vec<TaskInfo>,
    /// What looks wrong.
    pub warnings: Vec<Warning>,
    #[serde(skip)]
    dump: TaskDump,
}

/// One pool in a [`Snapshot`].
///
/// ```
/// let pool = coro::ThreadPool::builder().thread_name("snap-doc").worker_threads(2).build().unwrap();
/// let snap = coro::trace::snapshot();
/// let mine = snap.pools.iter().find(|p| p.name == "snap-doc").unwrap();
/// assert_eq!(mine.workers.len(), 2);
/// drop(pool);
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct PoolSnapshot {
    /// The pool's thread name (unique among live pools: `#2`, `#3` ... for repeats).
    pub name: String,
    /// Its workers, by index.
    pub workers: Vec<WorkerSnapshot>,
    /// Tasks in its global queue.
    pub global_queue: usize,
    /// Its live tasks.
    pub tasks: usize,
    /// Sockets registered with its IO driver.
    pub io_sources: usize,
    /// Timers pending on its wheel.
    pub timers: usize,
    /// Blocking-pool threads alive.
    pub blocking_threads: usize,
    /// A poll longer than this is reported as [`Warning::LongPoll`].
    #[serde(serialize_with = "seconds")]
    pub long_poll_after: Duration,
}

/// One worker of a [`PoolSnapshot`].
///
/// ```
/// let pool = coro::ThreadPool::builder().thread_name("worker-doc").worker_threads(1).build().unwrap();
/// let snap = coro::trace::snapshot();
/// let worker = &snap.pools.iter().find(|p| p.name == "worker-doc").unwrap().workers[0];
/// assert_eq!(worker.thread, "worker-doc-0");
/// drop(pool);
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct WorkerSnapshot {
    /// Its thread's name.
    pub thread: String,
    /// `"running"` while it polls a task, else `"idle"` (searching, parked or polling the OS).
    pub state: &'static str,
    /// The task it polls, if statistics were on when the poll started.
    pub current_task: Option<u64>,
    /// Polls it ran.
    pub polls: u64,
    /// Times it went to sleep.
    pub parks: u64,
    /// Tasks it stole from other workers.
    pub steals: u64,
    /// Tasks in its local queue and next slot.
    pub queue: usize,
}

/// One live task in a [`Snapshot`].
///
/// ```
/// let info = coro::block_wait(coro::Task::new(async {
///     let me = coro::executor::trace::current_task_id().unwrap();
///     coro::trace::snapshot().tasks.into_iter().find(|t| t.id == me).unwrap()
/// }).named("me"));
/// assert_eq!((info.name.as_str(), info.state), ("me", coro::trace::TaskState::Running));
/// assert!(info.location.contains(".rs:"));
/// ```
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TaskInfo {
    /// Its id, unique for the life of the process.
    pub id: u64,
    /// Its name (`Task::named`, or the type of its future).
    pub name: String,
    /// Where it was created: `file:line`.
    pub location: String,
    /// The task that started it (spawn, collect, scope, schedule_on), if any.
    pub parent: Option<u64>,
    /// The pool it belongs to (`None`: another executor).
    pub pool: Option<String>,
    /// Running, scheduled or suspended.
    #[serde(serialize_with = "state")]
    pub state: TaskState,
    /// Time since it was spawned (since the first snapshot that saw it, for a task spawned
    /// while statistics were off).
    #[serde(serialize_with = "seconds")]
    pub age: Duration,
    /// Polls counted.
    pub polls: u64,
    /// Time inside polls, summed.
    #[serde(serialize_with = "seconds")]
    pub busy: Duration,
    /// Time spent queued (woken, not yet polled), summed.
    #[serde(serialize_with = "seconds")]
    pub scheduled: Duration,
    /// Wake-ups counted.
    pub wakes: u64,
    /// What a suspended task waits for, where coro knows it.
    pub waiting_on: Option<WaitTarget>,
    /// Its async stack, innermost first: `name (file:line)`.
    pub frames: Vec<String>,
}

/// What a suspended task waits on, in [`TaskInfo::waiting_on`].
///
/// ```
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let child = pool.spawn(std::future::pending::<()>());
/// let child_id = coro::trace::snapshot().tasks.iter().map(|t| t.id).max().unwrap();
/// let parent = coro::Task::new(async move { child.await.ok(); }).named("joiner").schedule_on(&pool).start();
/// std::thread::sleep(std::time::Duration::from_millis(20));
/// let snap = coro::trace::snapshot();
/// let joiner = snap.tasks.iter().find(|t| t.name == "joiner").unwrap();
/// assert!(matches!(joiner.waiting_on, Some(coro::trace::WaitTarget::Task(_))));
/// # let _ = child_id;
/// parent.cancel();
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum WaitTarget {
    /// A task's end: a `JoinHandle`, a `Task` await on another task, a collect child.
    Task(u64),
    /// A lock and the tasks that hold it.
    Lock {
        /// The lock's id.
        id: u64,
        /// `Mutex`, `SharedMutexFair` or `Semaphore`.
        kind: &'static str,
        /// Tasks holding it, where known.
        holders: Vec<u64>,
    },
    /// A channel.
    Channel {
        /// The channel's id.
        id: u64,
    },
    /// A timer.
    Timer {
        /// Time left until it fires (zero once due).
        #[serde(serialize_with = "seconds")]
        deadline_in: Duration,
    },
    /// A socket's readiness.
    Io {
        /// The socket's file descriptor.
        fd: i32,
    },
    /// A promise's value.
    Promise {
        /// The promise's id.
        id: u64,
    },
    /// Several things at once, or something coro does not name.
    Other,
}

impl WaitTarget {
    fn from_engine(on: WaitOn, now: Instant) -> WaitTarget {
        match on {
            WaitOn::Task(id) => WaitTarget::Task(id),
            // Holders known only in part are left out: no edge is drawn from such a wait.
            WaitOn::Lock { id, kind } => WaitTarget::Lock {
                id,
                kind: kind.name(),
                holders: crate::sync::holders_of(id).unwrap_or_default(),
            },
            WaitOn::Channel(id) => WaitTarget::Channel { id },
            WaitOn::Timer(deadline) => WaitTarget::Timer {
                deadline_in: deadline.saturating_duration_since(now),
            },
            WaitOn::Io(fd) => WaitTarget::Io { fd },
            WaitOn::Promise(id) => WaitTarget::Promise { id },
            WaitOn::Other => WaitTarget::Other,
        }
    }
}

/// Every live task of every executor, every pool and worker, and the warnings found in them,
/// without stopping anything; turns per-poll statistics on for
/// [`REQUEST_KEEPS_ON`](coro_executor::trace::REQUEST_KEEPS_ON) (so a second snapshot counts
/// what happened since the first).
///
/// ```
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let snap = coro::block_wait(
///     coro::Task::new(async { coro::trace::snapshot() }).named("looker").schedule_on(&pool),
/// );
/// let looker = snap.tasks.iter().find(|t| t.name == "looker").unwrap();
/// assert_eq!(looker.pool.as_deref(), Some("coro-worker"));
/// assert!(snap.warnings.is_empty());
/// ```
pub fn snapshot() -> Snapshot {
    request_stats();
    let taken_at = SystemTime::now();
    let now = Instant::now();
    let (pools, others) = census();
    let mut names: Vec<String> = Vec::with_capacity(pools.len());
    let mut pool_out = Vec::with_capacity(pools.len());
    let mut engine_tasks: Vec<(TaskSnapshot, Option<usize>)> = Vec::new();
    for (index, pool) in pools.into_iter().enumerate() {
        let base = if pool.name.is_empty() {
            "pool".to_owned()
        } else {
            pool.name.clone()
        };
        let repeats = names
            .iter()
            .filter(|n| n.split('#').next() == Some(&*base))
            .count();
        let name = if repeats == 0 {
            base.clone()
        } else {
            format!("{base}#{}", repeats + 1)
        };
        names.push(name.clone());
        let workers = pool
            .metrics
            .workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let current = pool
                    .tasks
                    .iter()
                    .find(|t| t.state() == TaskState::Running && t.worker() == Some(i))
                    .map(TaskSnapshot::id);
                WorkerSnapshot {
                    thread: format!("{base}-{i}"),
                    state: if current.is_some() { "running" } else { "idle" },
                    current_task: current,
                    polls: w.polls,
                    parks: w.parks,
                    steals: w.stolen_tasks,
                    queue: w.local_queue_depth,
                }
            })
            .collect();
        pool_out.push(PoolSnapshot {
            name,
            workers,
            global_queue: pool.metrics.global_queue_depth,
            tasks: pool.tasks.len(),
            io_sources: pool.io_sources,
            timers: pool.timers,
            blocking_threads: pool.metrics.blocking_threads,
            long_poll_after: pool.long_poll_after,
        });
        engine_tasks.extend(pool.tasks.into_iter().map(|t| (t, Some(index))));
    }
    engine_tasks.extend(others.into_iter().map(|t| (t, None)));
    engine_tasks.sort_by_key(|(t, _)| t.id());
    let mut tasks: Vec<TaskInfo> = engine_tasks
        .iter()
        .map(|(t, pool)| TaskInfo {
            id: t.id(),
            name: t.name().to_owned(),
            location: t
                .frames()
                .last()
                .map(|f| format!("{}:{}", f.location().file(), f.location().line()))
                .unwrap_or_default(),
            parent: t.parent_id(),
            pool: pool.map(|p| pool_out[p].name.clone()),
            state: t.state(),
            age: t.age(),
            polls: t.polls(),
            busy: t.busy(),
            scheduled: t.scheduled(),
            wakes: t.wakes(),
            waiting_on: t
                .waiting_on()
                .filter(|_| t.state() != TaskState::Running)
                .map(|on| WaitTarget::from_engine(on, now)),
            frames: Vec::new(),
        })
        .collect();
    let mut warnings = find_warnings(&engine_tasks, &tasks, &pool_out);
    if warnings
        .iter()
        .any(|w| matches!(w, Warning::Deadlock { .. }))
    {
        confirm_deadlocks(&mut warnings, &engine_tasks);
    }
    let dump = TaskDump::of(engine_tasks.into_iter().map(|(t, _)| t).collect());
    for (info, task) in tasks.iter_mut().zip(dump.tasks()) {
        info.frames = task.frames().iter().map(ToString::to_string).collect();
    }
    Snapshot {
        taken_at,
        pools: pool_out,
        tasks,
        warnings,
        dump,
    }
}

/// Keeps only the deadlocks whose tasks a second look finds unchanged: still suspended on the
/// same wait, not polled or woken since the first look. (The first look read each task at a
/// slightly different moment; a cycle that a second look confirms was standing all along.)
fn confirm_deadlocks(warnings: &mut Vec<Warning>, first: &[(TaskSnapshot, Option<usize>)]) {
    let (pools, others) = census();
    let again: HashMap<u64, TaskSnapshot> = pools
        .into_iter()
        .flat_map(|p| p.tasks)
        .chain(others)
        .map(|t| (t.id(), t))
        .collect();
    let before: HashMap<u64, &TaskSnapshot> = first.iter().map(|(t, _)| (t.id(), t)).collect();
    let unchanged = |id: &u64| match (before.get(id), again.get(id)) {
        (Some(a), Some(b)) => {
            b.state() == TaskState::Suspended
                && a.waiting_on() == b.waiting_on()
                && a.polls() == b.polls()
                && a.wakes() == b.wakes()
        }
        _ => false,
    };
    warnings.retain(|w| match w {
        Warning::Deadlock { tasks } => tasks.iter().all(unchanged),
        _ => true,
    });
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = self.warnings.len();
        writeln!(f, "{count} warning{}", if count == 1 { "" } else { "s" })?;
        for warning in &self.warnings {
            writeln!(f, "  {warning}")?;
        }
        write!(f, "{}", self.dump)
    }
}

/// A duration as seconds (a float), the unit of the console's JSON and of Prometheus.
pub(super) fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn system_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    s.serialize_f64(since.as_secs_f64())
}

fn state<S: Serializer>(state: &TaskState, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(state)
}
