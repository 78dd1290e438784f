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
//! - `LostWake` is never raised: async-task keeps a task's waker count inside its own header,
//!   where coro cannot read it, so "no waker of it is held anywhere" cannot be proven (see the
//!   variant's doc for what it would take).

use super::snapshot::{PoolSnapshot, TaskInfo, WaitTarget, seconds};
use coro_executor::trace::{TaskSnapshot, TaskState};
use serde::Serialize;
use std::collections::HashMap;
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
    /// proving it needs the count of the task's wakers alive, which async-task keeps in its
    /// task header's state word (references beyond the engine's own: the task list's waker
    /// and the `JoinHandle`) with no API to read it; with such an accessor (or wakers coro
    /// wraps and counts), a suspended task whose count shows no waker besides the engine's
    /// is proven lost.
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

/// The warnings of one snapshot: `engine` are the engine's copies with each task's pool
/// (an index into `pools`), `tasks` the same tasks as built for the snapshot, in the same
/// order.
pub(super) fn find_warnings(
    engine: &[(TaskSnapshot, Option<usize>)],
    tasks: &[TaskInfo],
    pools: &[PoolSnapshot],
) -> Vec<Warning> {
    let mut warnings = deadlocks(tasks);
    for (task, pool) in engine {
        let Some(for_) = task.in_state_for() else {
            continue;
        };
        match task.state() {
            TaskState::Running => {
                if let Some(pool) = pool.map(|p| &pools[p])
                    && for_ > pool.long_poll_after
                {
                    warnings.push(Warning::LongPoll {
                        task: task.id(),
                        running_for: for_,
                    });
                }
            }
            TaskState::Scheduled if for_ > STARVING_AFTER => warnings.push(Warning::Starving {
                task: task.id(),
                queued_for: for_,
            }),
            _ => {}
        }
    }
    warnings
}

/// Every deadlock among `tasks`: the cycles (strongly connected components) of the tasks that
/// provably wait for good, each named from its smallest id in wait order.
///
/// A task waits on the tasks that can end its wait: the task it joins, or every holder of the
/// lock it waits for (all known, none of them itself). It waits for good if every one of
/// those waits for good too: the greatest such set is found by starting from every task with
/// a proven wait and dropping, until none is left to drop, each one waiting on a task outside
/// the set (one that is running, queued, or waits on something else). A lock with another
/// holder that still runs (a semaphore's permits) is not a deadlock, as that holder may
/// release it.
fn deadlocks(tasks: &[TaskInfo]) -> Vec<Warning> {
    let live: HashMap<u64, &TaskInfo> = tasks.iter().map(|t| (t.id, t)).collect();
    let waits_on = |task: &TaskInfo| -> Vec<u64> {
        if task.state != TaskState::Suspended {
            return Vec::new();
        }
        let mut to = match &task.waiting_on {
            Some(WaitTarget::Task(id)) => vec![*id],
            Some(WaitTarget::Lock { holders, .. }) => holders.clone(),
            _ => Vec::new(),
        };
        to.retain(|id| *id != task.id);
        if to.iter().any(|id| !live.contains_key(id)) {
            // Waits on something that is gone or not a task coro lists: not provable.
            return Vec::new();
        }
        to
    };
    let mut edges: HashMap<u64, Vec<u64>> = tasks
        .iter()
        .map(|t| (t.id, waits_on(t)))
        .filter(|(_, to)| !to.is_empty())
        .collect();
    loop {
        let outside: Vec<u64> = edges
            .iter()
            .filter(|(_, to)| to.iter().any(|t| !edges.contains_key(t)))
            .map(|(&id, _)| id)
            .collect();
        if outside.is_empty() {
            break;
        }
        for id in outside {
            edges.remove(&id);
        }
    }
    // Strongly connected components (iterative Tarjan); each one with an edge is a deadlock:
    // every task of it waits on tasks of it only through proven edges.
    let mut index = HashMap::new();
    let mut low = HashMap::new();
    let mut on_stack = HashMap::new();
    let mut stack = Vec::new();
    let mut next = 0usize;
    let mut found = Vec::new();
    let mut roots: Vec<u64> = edges.keys().copied().collect();
    roots.sort_unstable();
    for root in roots {
        if index.contains_key(&root) {
            continue;
        }
        let mut work: Vec<(u64, usize)> = vec![(root, 0)];
        while let Some(&mut (node, ref mut child)) = work.last_mut() {
            if *child == 0 && !index.contains_key(&node) {
                index.insert(node, next);
                low.insert(node, next);
                next += 1;
                stack.push(node);
                on_stack.insert(node, true);
            }
            let succ = edges.get(&node).map_or(&[][..], Vec::as_slice);
            if *child < succ.len() {
                let to = succ[*child];
                *child += 1;
                if !index.contains_key(&to) {
                    work.push((to, 0));
                } else if on_stack.get(&to) == Some(&true) {
                    let l = low[&node].min(index[&to]);
                    low.insert(node, l);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                let l = low[&parent].min(low[&node]);
                low.insert(parent, l);
            }
            if low[&node] == index[&node] {
                let mut component = Vec::new();
                while let Some(top) = stack.pop() {
                    on_stack.insert(top, false);
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    found.push(cycle_order(&component, &edges));
                }
            }
        }
    }
    found
}

/// The tasks of a strongly connected component in wait order: from its smallest id, each
/// followed by one it waits on (in the component), as far as that goes without repeating.
fn cycle_order(component: &[u64], edges: &HashMap<u64, Vec<u64>>) -> Warning {
    let mut order = vec![*component.iter().min().expect("a component has a task")];
    loop {
        let at = *order.last().expect("not empty");
        let next = edges[&at]
            .iter()
            .copied()
            .find(|t| component.contains(t) && !order.contains(t));
        match next {
            Some(next) => order.push(next),
            None => break,
        }
    }
    // The rest of a component larger than its first cycle, so every task is named.
    for task in component {
        if !order.contains(task) {
            order.push(*task);
        }
    }
    Warning::Deadlock { tasks: order }
}
