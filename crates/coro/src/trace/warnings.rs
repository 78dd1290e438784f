//! [`Warning`]: the verdicts a [`snapshot`](super::snapshot) draws from its copies: deadlocks
//! (cycles in the wait-for graph), long polls and starving tasks.
//!
//! Rule: a warning is raised only on what the copies prove, never on a guess:
//! - `Deadlock`: a cycle of tasks, each suspended (not running, not queued) and registered as
//!   waiting on exactly one thing (a task's end, or a lock whose holders are all known), where
//!   every task that could end each wait waits for good too (see `deadlocks`). The snapshot
//!   then reads the cycle's tasks again and keeps it only if none of them was polled or woken
//!   in between, so that a cycle made of reads at different moments is not reported. What it
//!   cannot see: a task that also waits on something coro does not register (a foreign future
//!   in the same `select!` as a lock), and a lock guard moved to another task (attributed to
//!   the task that acquired it).
//! - `LongPoll`: a task whose current poll started, while statistics were on, longer ago than
//!   its pool's long-poll threshold (the stall threshold, else the handoff threshold).
//! - `Starving`: a task queued, while statistics were on, for more than [`STARVING_AFTER`].
//!
//! Both measure from a time recorded against the statistics' millisecond clock, which may run
//! late; its recent lateness is subtracted first, so a late tick never makes a task look stuck.
//! - `LostWake` is never raised: async-task keeps a task's waker count inside its own header,
//!   where coro cannot read it, so "no waker of it is held anywhere" cannot be proven (see the
//!   variant's doc for what it would take).

use serde::{Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A task queued for longer than this, without being polled, is [`Warning::Starving`].
pub const STARVING_AFTER: Duration = Duration::from_millis(100);

/// Something a [`Snapshot`](super::Snapshot) proves wrong.
///
/// ```
/// let w = coro::trace::Warning::Deadlock { tasks: vec![3, 4] };
/// assert_eq!(w.to_string(), "deadlock: tasks 3 -> 4 -> 3 wait on one another");
/// assert_eq!(w.kind(), "deadlock");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Warning {
    /// A cycle in the wait-for graph (lock holders, task awaits): every task of the cycle, in
    /// wait order (each waits on the next, the last on the first).
    Deadlock {
        /// The tasks of the cycle.
        tasks: Vec<u64>,
    },
    /// A suspended task, in no queue, that no waker can wake any more. Never raised today:
    /// proving it needs the task's reference count, which async-task (4.7) keeps in the state
    /// word of its own task header (one reference per `Waker` and per `Runnable`; the
    /// `JoinHandle`'s `Task` is a flag, not a reference) and exposes no way to read, and its
    /// header is not `repr(C)`, so coro cannot read the word either. With one atomic read of
    /// that word (an accessor given a task's `Waker`, such as the one each pool task's entry
    /// in the task list keeps), "not SCHEDULED, not RUNNING, not COMPLETED or CLOSED, and one
    /// reference (the list's own waker)" is a proof: with no `Runnable` and no other waker,
    /// nothing can make one. Counting wakers in coro instead (a waker vtable of coro's around
    /// async-task's) would need the inner vtable's address in every task's header, 8 bytes the
    /// memory budget has no room for, and an atomic add on every waker clone and drop.
    LostWake {
        /// The task.
        task: u64,
    },
    /// A poll running past its pool's long-poll threshold, still running.
    LongPoll {
        /// The task.
        task: u64,
        /// How long the poll has run.
        #[serde(serialize_with = "seconds")]
        running_for: Duration,
    },
    /// A task scheduled but not polled for more than [`STARVING_AFTER`].
    Starving {
        /// The task.
        task: u64,
        /// How long it has been queued.
        #[serde(serialize_with = "seconds")]
        queued_for: Duration,
    },
}

impl Warning {
    /// The kind, in lower case: `deadlock`, `lost_wake`, `long_poll`, `starving` (the label of
    /// the console's per-kind metric).
    ///
    /// ```
    /// let w = coro::trace::Warning::Starving { task: 1, queued_for: std::time::Duration::from_secs(1) };
    /// assert_eq!(w.kind(), "starving");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Warning::Deadlock { .. } => "deadlock",
            Warning::LostWake { .. } => "lost_wake",
            Warning::LongPoll { .. } => "long_poll",
            Warning::Starving { .. } => "starving",
        }
    }

    /// The tasks it is about.
    ///
    /// ```
    /// let w = coro::trace::Warning::LostWake { task: 5 };
    /// assert_eq!(w.tasks(), vec![5]);
    /// ```
    pub fn tasks(&self) -> Vec<u64> {
        match self {
            Warning::Deadlock { tasks } => tasks.clone(),
            Warning::LostWake { task }
            | Warning::LongPoll { task, .. }
            | Warning::Starving { task, .. } => vec![*task],
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::Deadlock { tasks } => {
                write!(f, "deadlock: tasks ")?;
                for task in tasks {
                    write!(f, "{task} -> ")?;
                }
                write!(
                    f,
                    "{} wait on one another",
                    tasks.first().copied().unwrap_or(0)
                )
            }
            Warning::LostWake { task } => write!(f, "lost wake: task {task} can never be woken"),
            Warning::LongPoll { task, running_for } => {
                write!(
                    f,
                    "long poll: task {task} has been in one poll for {running_for:?}"
                )
            }
            Warning::Starving { task, queued_for } => {
                write!(
                    f,
                    "starving: task {task} has been queued for {queued_for:?}"
                )
            }
        }
    }
}

/// A duration as seconds (a float), the unit of the console's JSON and of Prometheus.
pub(super) fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}
