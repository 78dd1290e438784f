//! [`Snapshot`] and what it holds: every live task of every executor with its statistics, what
//! it waits on and its stack, every pool and worker with its counters, and the [`Warning`]s
//! found in them (taken by [`snapshot`](super::snapshot), in `take.rs`).
//!
//! Rule: a snapshot stops nothing. It copies the engine's census (per-task headers under the
//! task lists' short shard locks, counters with relaxed loads), then builds everything else
//! (names, trees, the wait-for graph, verdicts) from the copies, holding no lock a worker needs.
//! Asking for one turns the engine's per-poll statistics on for a while
//! ([`coro_executor::trace::REQUEST_KEEPS_ON`]); counts are of what happened while they were on.

use super::dump::TaskDump;
use super::warnings::{Warning, seconds};
use coro_executor::trace::TaskState;
use serde::{Serialize, Serializer};
use std::fmt;
use std::time::{Duration, SystemTime};

/// Every live task and pool at one moment, with the warnings found in them; from [`snapshot`](super::snapshot()).
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
    pub(super) dump: TaskDump,
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
/// // A task of a pool (`block_wait` polls a bare `Task` on the calling thread, outside any).
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let info = coro::block_wait(coro::Task::new(async {
///     let me = coro::executor::trace::current_task_id().unwrap();
///     coro::trace::snapshot().tasks.into_iter().find(|t| t.id == me).unwrap()
/// }).named("me").schedule_on(&pool));
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
    /// Time since it was spawned, for a task spawned while statistics were on. A task spawned
    /// before has no statistics until its first poll after they came on: zero until then,
    /// and from then on a lower bound, counted from the first snapshot that saw it.
    #[serde(serialize_with = "seconds")]
    pub age: Duration,
    /// Polls counted while statistics were on (for a task spawned before they came on, from
    /// its first poll after: it shows zero counters until then).
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

fn system_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    s.serialize_f64(since.as_secs_f64())
}

fn state<S: Serializer>(state: &TaskState, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(state)
}
