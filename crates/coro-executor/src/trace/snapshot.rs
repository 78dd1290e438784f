//! [`TaskSnapshot`] and [`snapshot_tasks`]: copies of every live task, read at any time from any
//! thread without stopping anything.

use super::*;

/// A copy of what is known about one live task; from [`snapshot_tasks`].
///
/// ```
/// for task in coro_executor::trace::snapshot_tasks() {
///     println!("{} {} {}", task.id(), task.name(), task.state());
/// }
/// ```
#[derive(Clone, Debug)]
pub struct TaskSnapshot {
    pub(super) id: u64,
    pub(super) parent: Option<u64>,
    pub(super) state: TaskState,
    pub(super) name: Option<Cow<'static, str>>,
    pub(super) frames: Vec<Frame>,
}

impl TaskSnapshot {
    /// The task's id, unique for the life of the process.
    ///
    /// ```
    /// let ids: Vec<u64> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.id()).collect();
    /// # drop(ids);
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id of the task that spawned this one, if it was spawned from inside a task and
    /// carries a trace cell.
    ///
    /// ```
    /// let parents: Vec<Option<u64>> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.parent_id()).collect();
    /// # drop(parents);
    /// ```
    pub fn parent_id(&self) -> Option<u64> {
        self.parent.map(|parent| parent & !AWAITED_BY_PARENT)
    }

    /// Whether the parent awaits this task where it waits ([`TraceCell::awaited_by`]: a
    /// collect's child driven by a task of its own), so that its stack continues into the
    /// parent's.
    ///
    /// ```
    /// let awaited = coro_executor::trace::snapshot_tasks().iter().filter(|t| t.awaited_by_parent()).count();
    /// # drop(awaited);
    /// ```
    pub fn awaited_by_parent(&self) -> bool {
        self.parent
            .is_some_and(|parent| parent & AWAITED_BY_PARENT != 0)
    }

    /// Appends `frames` (outermost last) to this task's stack: for a dump that continues an
    /// awaited task's stack into its awaiter's. Not for general use.
    ///
    /// ```
    /// # for mut task in coro_executor::trace::snapshot_tasks() {
    /// task.continue_into(&[]);
    /// # }
    /// ```
    #[doc(hidden)]
    pub fn continue_into(&mut self, frames: &[Frame]) {
        self.frames.extend_from_slice(frames);
    }

    /// Running, scheduled or suspended.
    ///
    /// ```
    /// let states: Vec<_> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.state()).collect();
    /// # drop(states);
    /// ```
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// The task's name: its root frame's, or `<not started>` for a task never polled yet, or
    /// `<untraced>` for a future spawned without a trace cell.
    ///
    /// ```
    /// let names: Vec<String> = coro_executor::trace::snapshot_tasks().iter().map(|t| t.name().to_owned()).collect();
    /// # drop(names);
    /// ```
    pub fn name(&self) -> &str {
        match &self.name {
            Some(name) => name,
            None if self.state == TaskState::Scheduled && self.frames.is_empty() => "<not started>",
            None => "<untraced>",
        }
    }

    /// The stack where the task last suspended, innermost frame first (empty if it never did).
    ///
    /// ```
    /// let depth: usize = coro_executor::trace::snapshot_tasks().iter().map(|t| t.frames().len()).sum();
    /// # drop(depth);
    /// ```
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }
}

/// Every live task of every executor (pools, and any executor spawned on through an
/// [`ExecutorHandle`](crate::ExecutorHandle)), at one moment.
///
/// ```
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let stuck = pool.spawn(std::future::pending::<()>());
/// std::thread::sleep(std::time::Duration::from_millis(20));
/// assert!(!coro_executor::trace::snapshot_tasks().is_empty());
/// stuck.cancel();
/// ```
pub fn snapshot_tasks() -> Vec<TaskSnapshot> {
    let mut out = Vec::new();
    crate::task::registry::for_each_list(|list| {
        // SAFETY: `for_each_listed` keeps each task alive while its header is read.
        list.for_each_listed(|header| out.push(unsafe { snapshot_of(header) }))
    });
    out
}

/// Copies what a dump shows of the task whose header is `header`.
///
/// # Safety
/// The task is listed and cannot finish being unlisted meanwhile (inside
/// `TaskList::for_each_listed` or `with_listed`), so its future, which owns the attached
/// `TraceCell`, is not being dropped: the entry is removed before the future's fields are.
pub(crate) unsafe fn snapshot_of(header: &TaskHeader) -> TaskSnapshot {
    let cell = header.cell(Acquire);
    // SAFETY: a non-null `trace` points into this task's future, alive per the contract above.
    let (name, parent, frames) = match unsafe { cell.as_ref() } {
        Some(cell) => {
            // SAFETY: the root frame and the published box are alive as long as the cell
            // (inside the same future, or owned by the cell); `attach` set `root` before it
            // published the cell (Release, paired with the Acquire above).
            let root = unsafe { &*cell.root.load(Relaxed) };
            let published = cell.published.load(Acquire);
            // Nothing published yet (a task in its first poll, or never polled): its stack
            // is its root frame, as for a task suspended there.
            let frames = if published == ROOT_ONLY || published.is_null() {
                vec![root.clone()]
            } else {
                // SAFETY: any other non-null value is the cell's box (see `published`).
                unsafe { published.as_ref() }
                    .map_or_else(Vec::new, |p| p.frames.lock().unwrap().clone())
            };
            (
                Some(root.name.to_cow()),
                cell.parent.map(NonZeroU64::get),
                frames,
            )
        }
        None => (None, None, Vec::new()),
    };
    TaskSnapshot {
        id: header.id(),
        parent,
        state: header.state(),
        name,
        frames,
    }
}
