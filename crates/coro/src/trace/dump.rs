//! [`dump_all`]: every live task of every executor, as a tree.

use coro_executor::trace::{TaskSnapshot, snapshot_tasks};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

/// A snapshot of every live task, from [`dump_all`]. Display prints a tree: each task with its
/// id, name and state and the frames where it waits, and under it the tasks it spawned that are
/// still alive (for example the children of a `collect_all`).
///
/// ```
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let (tx, rx) = futures::channel::oneshot::channel::<()>();
/// let waiter = coro::Task::new(async move { rx.await.ok(); }).named("waiter").schedule_on(&pool).start();
/// std::thread::sleep(std::time::Duration::from_millis(50));
/// let dump = coro::trace::dump_all();
/// assert!(dump.tasks().iter().any(|t| t.name() == "waiter"));
/// println!("{dump}");
/// tx.send(()).unwrap();
/// coro::block_wait(waiter).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TaskDump {
    tasks: Vec<TaskSnapshot>,
}

impl TaskDump {
    /// The tasks, in no particular order.
    ///
    /// ```
    /// let pool = coro::ThreadPool::new(1).unwrap();
    /// let dump = coro::block_wait(
    ///     coro::Task::new(async { coro::trace::dump_all() }).named("dumper").schedule_on(&pool),
    /// );
    /// let dumper = dump.tasks().iter().find(|t| t.name() == "dumper").unwrap();
    /// assert_eq!(dumper.state(), coro::trace::TaskState::Running);
    /// ```
    pub fn tasks(&self) -> &[TaskSnapshot] {
        &self.tasks
    }
}

/// Every live task of every executor: its id, name, state (running, scheduled, suspended) and
/// the async stack where it last suspended.
///
/// It works at any time from any thread without stopping the workers: each task publishes its
/// stack when it suspends, and the dump copies those under short per-task locks that are never
/// held while a task runs, so a task stuck in a long poll neither blocks the dump nor is read
/// half-written (it shows as running, with the stack of its last suspension).
///
/// ```
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let dump = coro::block_wait(
///     coro::Task::new(async { coro::trace::dump_all() }).named("request").schedule_on(&pool),
/// );
/// let text = dump.to_string();
/// // 1 live task
/// // └─ task 1 request [running]
/// //      at request (src/main.rs:4)
/// assert!(text.contains(" request [running]\n") && text.contains("  at request ("));
/// ```
pub fn dump_all() -> TaskDump {
    TaskDump::of(snapshot_tasks())
}

impl TaskDump {
    /// The dump of `tasks`: sorted by id, each awaited task's stack continued into its
    /// awaiter's.
    pub(crate) fn of(mut tasks: Vec<TaskSnapshot>) -> TaskDump {
        tasks.sort_by_key(TaskSnapshot::id);
        continue_awaited_stacks(&mut tasks);
        TaskDump { tasks }
    }
}

/// Continues the stack of each task that its parent awaits (a collect's child driven by a task
/// of its own, whether it suspended while the collect ran it inline or an idle worker took it)
/// into the parent's, so that each child reads its own frames, then the collect's, out to the
/// root. Parents first: a parent's stack is complete before its children copy it.
fn continue_awaited_stacks(tasks: &mut [TaskSnapshot]) {
    let index: HashMap<u64, usize> = tasks.iter().enumerate().map(|(i, t)| (t.id(), i)).collect();
    let mut done = vec![false; tasks.len()];
    for start in 0..tasks.len() {
        // The chain of awaited tasks from `start` up to the first not awaited (or done) one.
        let mut chain = Vec::new();
        let mut at = start;
        while !done[at] {
            done[at] = true;
            chain.push(at);
            match tasks[at]
                .parent_id()
                .filter(|_| tasks[at].awaited_by_parent())
                .and_then(|parent| index.get(&parent).copied())
            {
                Some(parent) => at = parent,
                None => break,
            }
        }
        // Outermost first, so that each copies a finished stack.
        for &child in chain.iter().rev() {
            let Some(parent) = tasks[child]
                .parent_id()
                .filter(|_| tasks[child].awaited_by_parent())
                .and_then(|parent| index.get(&parent).copied())
            else {
                continue;
            };
            let frames = tasks[parent].frames().to_vec();
            tasks[child].continue_into(&frames);
        }
    }
}

impl fmt::Display for TaskDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let live: HashSet<u64> = self.tasks.iter().map(TaskSnapshot::id).collect();
        let mut children: BTreeMap<u64, Vec<&TaskSnapshot>> = BTreeMap::new();
        let mut roots = Vec::new();
        for task in &self.tasks {
            match task.parent_id().filter(|p| live.contains(p)) {
                Some(parent) => children.entry(parent).or_default().push(task),
                None => roots.push(task),
            }
        }
        let count = self.tasks.len();
        writeln!(f, "{count} live task{}", if count == 1 { "" } else { "s" })?;
        let last = roots.len().saturating_sub(1);
        for (i, task) in roots.into_iter().enumerate() {
            write_task(f, task, &children, "", i == last)?;
        }
        Ok(())
    }
}

fn write_task(
    f: &mut fmt::Formatter<'_>,
    task: &TaskSnapshot,
    children: &BTreeMap<u64, Vec<&TaskSnapshot>>,
    prefix: &str,
    last: bool,
) -> fmt::Result {
    let (branch, indent) = if last {
        ("└─ ", "   ")
    } else {
        ("├─ ", "│  ")
    };
    writeln!(
        f,
        "{prefix}{branch}task {} {} [{}]",
        task.id(),
        task.name(),
        task.state()
    )?;
    let inner = format!("{prefix}{indent}");
    for frame in task.frames() {
        writeln!(f, "{inner}  at {frame}")?;
    }
    if let Some(kids) = children.get(&task.id()) {
        let last = kids.len() - 1;
        for (i, kid) in kids.iter().enumerate() {
            write_task(f, kid, children, &inner, i == last)?;
        }
    }
    Ok(())
}
