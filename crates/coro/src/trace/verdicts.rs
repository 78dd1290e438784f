//! The verdicts a snapshot draws from its copies ([`find_warnings`]): deadlocks (cycles of the
//! wait-for graph), long polls and starving tasks; what each proves is in `warnings.rs`.

use super::snapshot::{PoolSnapshot, TaskInfo, WaitTarget};
use super::warnings::{STARVING_AFTER, Warning};
use coro_executor::trace::{TaskSnapshot, TaskState};
use std::collections::HashMap;

/// The warnings of one snapshot: `engine` are the engine's copies with each task's pool
/// (an index into `pools`), `tasks` the same tasks as built for the snapshot, in the same
/// order.
pub(super) fn find_warnings(
    engine: &[(TaskSnapshot, Option<usize>)],
    tasks: &[TaskInfo],
    pools: &[PoolSnapshot],
) -> Vec<Warning> {
    let mut warnings = deadlocks(tasks);
    // Times recorded against the statistics' clock may be late by this much: never counted
    // against a task.
    let slack = coro_executor::trace::stats_clock_slack();
    for (task, pool) in engine {
        let Some(for_) = task.in_state_for().and_then(|d| d.checked_sub(slack)) else {
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
