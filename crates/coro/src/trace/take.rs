//! [`snapshot`]: takes a [`Snapshot`] from the engine's census without stopping anything, and
//! confirms the deadlocks it finds with a second look.
//!
//! Rule: a snapshot stops nothing. It copies the engine's census (per-task headers under the
//! task lists' short shard locks, counters with relaxed loads), then builds everything else
//! (names, trees, the wait-for graph, verdicts) from the copies, holding no lock a worker needs.
//! Asking for one turns the engine's per-poll statistics on for a while
//! ([`coro_executor::trace::REQUEST_KEEPS_ON`]); counts are of what happened while they were on.

use super::dump::TaskDump;
use super::snapshot::{PoolSnapshot, Snapshot, TaskInfo, WaitTarget, WorkerSnapshot};
use super::verdicts::find_warnings;
use super::warnings::Warning;
use coro_executor::trace::{TaskSnapshot, TaskState, WaitOn, census, request_stats};
use std::collections::HashMap;
use std::time::{Instant, SystemTime};

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
                .map(|on| target_of(on, now)),
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

/// A registered wait as a snapshot shows it.
fn target_of(on: WaitOn, now: Instant) -> WaitTarget {
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
