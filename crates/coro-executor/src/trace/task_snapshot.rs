//! [`TaskSnapshot`] and [`snapshot_tasks`]: copies of every live task, read at any time from any
//! thread without stopping anything.

use super::stats::StatsCopy;
use super::*;
use std::time::Duration;

/// A copy of what is known about one live task; from [`snapshot_tasks`].
///
/// ```
/// use coro_executor::trace::{TaskState, current_task_id, snapshot_tasks};
///
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let me = futures::executor::block_on(pool.spawn(async {
///     let id = current_task_id().unwrap();
///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
/// }))
/// .unwrap();
/// // Read while it ran; spawned without a trace cell, so it has no name of its own.
/// assert_eq!((me.state(), me.name()), (TaskState::Running, "<untraced>"));
/// ```
#[derive(Clone, Debug)]
pub struct TaskSnapshot {
    pub(super) id: u64,
    pub(super) parent: Option<u64>,
    pub(super) state: TaskState,
    pub(super) name: Option<Cow<'static, str>>,
    pub(super) frames: Vec<Frame>,
    pub(super) stats: StatsCopy,
    pub(super) waiting_on: Option<WaitOn>,
}

impl TaskSnapshot {
    /// The task's id, unique for the life of the process.
    ///
    /// ```
    /// use coro_executor::trace::{current_task_id, snapshot_tasks};
    ///
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let (me, ids) = futures::executor::block_on(pool.spawn(async {
    ///     let ids: Vec<u64> = snapshot_tasks().iter().map(|t| t.id()).collect();
    ///     (current_task_id().unwrap(), ids)
    /// }))
    /// .unwrap();
    /// assert_eq!(ids.iter().filter(|&&id| id == me).count(), 1);
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The id of the task that spawned this one, if it was spawned from inside a task and
    /// carries a trace cell.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, TaskSnapshot, TraceCell};
    /// # use coro_executor::trace::{attach, current_task_id, snapshot_tasks};
    /// # fn snapshot_with(cell: TraceCell) -> TaskSnapshot {
    /// #     let traced = Box::new((cell, Frame::new("task", std::panic::Location::caller())));
    /// #     let ex = coro_executor::ManualExecutor::new();
    /// #     let join = ex.handle().spawn(std::future::poll_fn(move |_| {
    /// #         // SAFETY: the closure owns the box until the future is dropped; it never moves.
    /// #         unsafe { attach(&traced.0, &traced.1) };
    /// #         let me = current_task_id();
    /// #         let task = snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap();
    /// #         std::task::Poll::Ready(task)
    /// #     }));
    /// #     ex.run_until_idle();
    /// #     futures::executor::block_on(join).unwrap()
    /// # }
    /// // `snapshot_with` runs a task that attaches the cell, and returns the task's snapshot.
    /// assert_eq!(snapshot_with(TraceCell::with_parent(Some(7))).parent_id(), Some(7));
    /// // Made outside any task: no parent.
    /// assert_eq!(snapshot_with(TraceCell::new()).parent_id(), None);
    /// ```
    pub fn parent_id(&self) -> Option<u64> {
        self.parent.map(|parent| parent & !AWAITED_BY_PARENT)
    }

    /// Whether the parent awaits this task where it waits ([`TraceCell::awaited_by`]: a
    /// collect's child driven by a task of its own), so that its stack continues into the
    /// parent's.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, TaskSnapshot, TraceCell};
    /// # use coro_executor::trace::{attach, current_task_id, snapshot_tasks};
    /// # fn snapshot_with(cell: TraceCell) -> TaskSnapshot {
    /// #     let traced = Box::new((cell, Frame::new("task", std::panic::Location::caller())));
    /// #     let ex = coro_executor::ManualExecutor::new();
    /// #     let join = ex.handle().spawn(std::future::poll_fn(move |_| {
    /// #         // SAFETY: the closure owns the box until the future is dropped; it never moves.
    /// #         unsafe { attach(&traced.0, &traced.1) };
    /// #         let me = current_task_id();
    /// #         let task = snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap();
    /// #         std::task::Poll::Ready(task)
    /// #     }));
    /// #     ex.run_until_idle();
    /// #     futures::executor::block_on(join).unwrap()
    /// # }
    /// // `snapshot_with` runs a task that attaches the cell, and returns the task's snapshot.
    /// assert!(snapshot_with(TraceCell::awaited_by(Some(7))).awaited_by_parent());
    /// assert!(!snapshot_with(TraceCell::with_parent(Some(7))).awaited_by_parent());
    /// ```
    pub fn awaited_by_parent(&self) -> bool {
        self.parent
            .is_some_and(|parent| parent & AWAITED_BY_PARENT != 0)
    }

    /// Appends `frames` (outermost last) to this task's stack: for a dump that continues an
    /// awaited task's stack into its awaiter's. Not for general use.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, TaskSnapshot, TraceCell};
    /// # use coro_executor::trace::{attach, current_task_id, snapshot_tasks};
    /// # fn snapshot_with(cell: TraceCell) -> TaskSnapshot {
    /// #     let traced = Box::new((cell, Frame::new("task", std::panic::Location::caller())));
    /// #     let ex = coro_executor::ManualExecutor::new();
    /// #     let join = ex.handle().spawn(std::future::poll_fn(move |_| {
    /// #         // SAFETY: the closure owns the box until the future is dropped; it never moves.
    /// #         unsafe { attach(&traced.0, &traced.1) };
    /// #         let me = current_task_id();
    /// #         let task = snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap();
    /// #         std::task::Poll::Ready(task)
    /// #     }));
    /// #     ex.run_until_idle();
    /// #     futures::executor::block_on(join).unwrap()
    /// # }
    /// // `snapshot_with` runs a task that attaches the cell, and returns the task's snapshot.
    /// let mut task = snapshot_with(TraceCell::new()); // its stack: its root frame, "task"
    /// let awaiter = Frame::new("awaiter", std::panic::Location::caller());
    /// task.continue_into(std::slice::from_ref(&awaiter));
    /// let names: Vec<&str> = task.frames().iter().map(Frame::name).collect();
    /// assert_eq!(names, ["task", "awaiter"]);
    /// ```
    #[doc(hidden)]
    pub fn continue_into(&mut self, frames: &[Frame]) {
        self.frames.extend_from_slice(frames);
    }

    /// Running, scheduled or suspended.
    ///
    /// ```
    /// use coro_executor::trace::{Frame, TaskState, attach_owned, snapshot_tasks};
    ///
    /// let ex = coro_executor::ManualExecutor::new();
    /// let join = ex.handle().spawn(async {
    ///     attach_owned(&Frame::new("sleeper", std::panic::Location::caller()));
    ///     std::future::pending::<()>().await
    /// });
    /// ex.run_until_idle(); // polled once: it waits for a wake-up that never comes
    /// let sleeper = snapshot_tasks().into_iter().find(|t| t.name() == "sleeper").unwrap();
    /// assert_eq!(sleeper.state(), TaskState::Suspended);
    /// join.cancel();
    /// ```
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// The task's name: its root frame's, or `<not started>` for a task never polled yet, or
    /// `<untraced>` for a future spawned without a trace cell.
    ///
    /// ```
    /// use coro_executor::trace::{Frame, attach_owned, current_task_id, snapshot_tasks};
    ///
    /// // The name of the task calling it, from a snapshot.
    /// let own_name = || {
    ///     let me = current_task_id();
    ///     snapshot_tasks().into_iter().find(|t| Some(t.id()) == me).unwrap().name().to_owned()
    /// };
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let untraced = pool.spawn(async move { own_name() });
    /// let named = pool.spawn(async move {
    ///     attach_owned(&Frame::new("loader", std::panic::Location::caller()));
    ///     own_name()
    /// });
    /// assert_eq!(futures::executor::block_on(untraced).unwrap(), "<untraced>");
    /// assert_eq!(futures::executor::block_on(named).unwrap(), "loader");
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
    /// use coro_executor::trace::{Frame, attach_owned, snapshot_tasks};
    ///
    /// let ex = coro_executor::ManualExecutor::new();
    /// let join = ex.handle().spawn(async {
    ///     attach_owned(&Frame::new("waiter", std::panic::Location::caller()));
    ///     std::future::pending::<()>().await
    /// });
    /// ex.run_until_idle();
    /// let waiter = snapshot_tasks().into_iter().find(|t| t.name() == "waiter").unwrap();
    /// // It waits in its root frame, with nothing inside it.
    /// let names: Vec<&str> = waiter.frames().iter().map(Frame::name).collect();
    /// assert_eq!(names, ["waiter"]);
    /// join.cancel();
    /// ```
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// How long ago the task was spawned; counted from the first snapshot that saw it if it
    /// was spawned while statistics were off (a lower bound then).
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// assert!(me.age() < std::time::Duration::from_secs(60));
    /// ```
    pub fn age(&self) -> Duration {
        self.stats.age
    }

    /// Polls started while statistics were on ([`request_stats`](super::request_stats)), a
    /// running task's current poll included.
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     coro_executor::yield_now().await;
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// // The first poll ended; the second is running.
    /// assert_eq!(me.polls(), 2);
    /// ```
    pub fn polls(&self) -> u64 {
        self.stats.polls
    }

    /// Time spent inside polls, summed over the polls counted: the ticks of a millisecond clock
    /// each poll spans, an unbiased estimate over many polls (one short poll counts 0 or 1 ms).
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     std::thread::sleep(std::time::Duration::from_millis(20));
    ///     coro_executor::yield_now().await;
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// // Measured against a clock that ticks every millisecond: about 20 ms.
    /// assert!(me.busy() >= std::time::Duration::from_millis(10));
    /// ```
    pub fn busy(&self) -> Duration {
        self.stats.busy
    }

    /// Time spent queued (woken, not yet polled), summed over what was counted.
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// assert!(me.scheduled() < std::time::Duration::from_secs(60));
    /// ```
    pub fn scheduled(&self) -> Duration {
        self.stats.queued
    }

    /// Wake-ups counted (schedules after a poll): every counted poll but the task's first
    /// followed one, and a task queued again waits on one more.
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     coro_executor::yield_now().await;
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// assert_eq!(me.wakes(), 1);
    /// ```
    pub fn wakes(&self) -> u64 {
        self.stats.wakes
    }

    /// How long the task has been in its [`state`](Self::state), if statistics were on when
    /// it entered it: for a running task the current poll's length, for a scheduled one how
    /// long it has been queued.
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     coro_executor::yield_now().await;
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// assert!(me.in_state_for().unwrap() >= std::time::Duration::from_millis(5));
    /// ```
    pub fn in_state_for(&self) -> Option<Duration> {
        self.stats.in_state_for
    }

    /// The worker of its pool that last started polling it, if statistics were on then.
    ///
    /// ```
    /// # use coro_executor::trace::{current_task_id, snapshot_tasks};
    /// coro_executor::trace::request_stats();
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let me = futures::executor::block_on(pool.spawn(async {
    ///     coro_executor::yield_now().await;
    ///     let id = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == id).unwrap()
    /// }))
    /// .unwrap();
    /// assert_eq!(me.worker(), Some(0));
    /// ```
    pub fn worker(&self) -> Option<usize> {
        self.stats.worker
    }

    /// What the task waits on, as the primitive it waits in registered it
    /// ([`wait_on`](super::wait_on)).
    ///
    /// ```
    /// use coro_executor::trace::{WaitOn, current_task_id, snapshot_tasks, wait_on};
    ///
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let seen = futures::executor::block_on(pool.spawn(async {
    ///     let _waiting = wait_on(WaitOn::Promise(9));
    ///     let me = current_task_id().unwrap();
    ///     snapshot_tasks().into_iter().find(|t| t.id() == me).unwrap().waiting_on()
    /// }))
    /// .unwrap();
    /// assert_eq!(seen, Some(WaitOn::Promise(9)));
    /// ```
    pub fn waiting_on(&self) -> Option<WaitOn> {
        self.waiting_on
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
    crate::task::registry::for_each_list(|list| out.extend(snapshot_list(list)));
    out
}

/// Copies every task of `list`, each under its shard's lock only while it is read.
pub(crate) fn snapshot_list(list: &crate::task::TaskList) -> Vec<TaskSnapshot> {
    let mut out = Vec::new();
    let now = super::stats::now();
    // SAFETY: `for_each_listed` keeps each task alive while its header is read.
    list.for_each_listed(|header| out.push(unsafe { snapshot_at(header, now) }));
    out
}

/// Copies what a dump shows of the task whose header is `header`.
///
/// # Safety
/// The task is listed and cannot finish being unlisted meanwhile (inside
/// `TaskList::for_each_listed` or `with_listed`), so its future, which owns the attached
/// `TraceCell`, is not being dropped: the entry is removed before the future's fields are.
pub(crate) unsafe fn snapshot_of(header: &TaskHeader) -> TaskSnapshot {
    // SAFETY: the caller's contract is this one's.
    unsafe { snapshot_at(header, super::stats::now()) }
}

/// [`snapshot_of`] with the time of the snapshot (a [`stats::now`](super::stats::now) value).
///
/// # Safety
/// As for [`snapshot_of`].
unsafe fn snapshot_at(header: &TaskHeader, now: u64) -> TaskSnapshot {
    // The state before the stack: a task seen suspended shows the stack of that suspension or
    // a later one (the state's Acquire pairs with the poll end's Release). Read the other way
    // round, a task caught in its first poll showed its root frame alone as a suspended stack.
    let state = header.state();
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
        state,
        name,
        frames,
        // No block: not suspended since statistics came on (zero counters; its time in its
        // state from its mark, if it has one).
        stats: header.stats().map_or_else(
            || {
                let last = header.last.load(Relaxed);
                StatsCopy::of_mark(last, now, state == TaskState::Scheduled)
            },
            |stats| stats.read(now, state == TaskState::Scheduled),
        ),
        waiting_on: super::wait::read_slot(header),
    }
}
