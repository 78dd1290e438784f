//! Stall reports: a poll that runs past a threshold is named, once, through a user hook
//! (tokio's unstable long-poll detection and tokio-console's warning, built in).
//!
//! Off unless [`ThreadPoolBuilder::stall_threshold`](crate::ThreadPoolBuilder::stall_threshold)
//! is set; then each worker publishes the header of the task it is polling (two relaxed stores
//! per poll, skipped entirely when off), and the monitor, which already watches every worker's
//! poll counter for handoff, reports a counter that stays put past the threshold while a task
//! is being polled. The report reads the task through the pool's task list, whose visit
//! protocol keeps the task alive while it is read, so a task that finishes meanwhile is simply
//! not reported.

use crate::trace::{Frame, TaskSnapshot};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What is called for each stall: on the pool's monitor thread, so it should be quick (the
/// monitor also hands off work held up behind long polls).
pub(crate) type StallHook = Arc<dyn Fn(&StallReport) + Send + Sync>;

/// A stall-detection setting of a pool: the threshold and the hook.
#[derive(Clone)]
pub(crate) struct StallConfig {
    pub(crate) threshold: Duration,
    pub(crate) hook: StallHook,
}

impl fmt::Debug for StallConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StallConfig")
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

/// The default hook: one line on stderr per stall.
pub(crate) fn default_hook() -> StallHook {
    Arc::new(|report: &StallReport| eprintln!("{report}"))
}

/// One poll that ran past the pool's stall threshold, as the hook given to
/// [`ThreadPoolBuilder::on_stall`](crate::ThreadPoolBuilder::on_stall) sees it.
///
/// The stack is where the task last suspended, as task dumps show it (a running task's live
/// stack is on its worker's own call stack, out of reach of other threads): for a task stuck in
/// its first poll, only its root frame. `Display` gives the default hook's one line.
///
/// ```
/// use coro_executor::{StallReport, ThreadPool};
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// let seen: Arc<Mutex<Vec<String>>> = Arc::default();
/// let log = seen.clone();
/// let pool = ThreadPool::builder()
///     .worker_threads(2)
///     .stall_threshold(Duration::from_millis(20))
///     .on_stall(move |report: &StallReport| {
///         log.lock().unwrap().push(format!("{} on worker {}", report.task_id(), report.worker()));
///     })
///     .build()
///     .unwrap();
/// let blocking = pool.spawn(async { std::thread::sleep(Duration::from_millis(200)) });
/// futures::executor::block_on(blocking).unwrap();
/// assert_eq!(seen.lock().unwrap().len(), 1, "one report per stall");
/// ```
#[derive(Clone, Debug)]
pub struct StallReport {
    pub(super) task: TaskSnapshot,
    pub(super) elapsed: Duration,
    pub(super) worker: usize,
    pub(super) thread: Option<String>,
}

impl StallReport {
    /// The stalled task's id (as in task dumps).
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, load) = stall();
    /// assert_eq!(report.task_id(), load);
    /// ```
    pub fn task_id(&self) -> u64 {
        self.task.id()
    }

    /// The stalled task's name (its root frame's), or `<untraced>` for a task spawned without
    /// a trace cell.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, _) = stall();
    /// assert_eq!(report.task_name(), "load");
    /// ```
    pub fn task_name(&self) -> &str {
        self.task.name()
    }

    /// The task's async stack where it last suspended, innermost frame first (see the type's
    /// docs); empty for an untraced task.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, _) = stall();
    /// // Stuck in its first poll: only its root frame.
    /// let names: Vec<&str> = report.stack().iter().map(|frame| frame.name()).collect();
    /// assert_eq!(names, ["load"]);
    /// ```
    pub fn stack(&self) -> &[Frame] {
        self.task.frames()
    }

    /// How long the poll had run when it was reported: at least the threshold, measured by the
    /// monitor to within its look period.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, _) = stall();
    /// assert!(report.elapsed() >= Duration::from_millis(20));
    /// ```
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// The index of the worker running the poll; indices from the pool's worker count up are
    /// its handoff helpers.
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, _) = stall();
    /// assert_eq!(report.worker(), 0);
    /// ```
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// The name of the thread running the poll (`{thread_name}-{index}` for a worker).
    ///
    /// ```
    /// # use coro_executor::trace::{Frame, attach_owned, current_task_id};
    /// # use std::time::Duration;
    /// # fn stall() -> (coro_executor::StallReport, u64) {
    /// #     let (tx, rx) = std::sync::mpsc::channel();
    /// #     let pool = coro_executor::ThreadPool::builder()
    /// #         .worker_threads(1)
    /// #         .stall_threshold(Duration::from_millis(20))
    /// #         .on_stall(move |report| tx.send(report.clone()).unwrap())
    /// #         .build()
    /// #         .unwrap();
    /// #     let load = pool.spawn(async {
    /// #         attach_owned(&Frame::new("load", std::panic::Location::caller()));
    /// #         std::thread::sleep(Duration::from_millis(200));
    /// #         current_task_id().unwrap()
    /// #     });
    /// #     let id = futures::executor::block_on(load).unwrap();
    /// #     (rx.recv_timeout(Duration::from_secs(5)).unwrap(), id)
    /// # }
    /// // `stall()` runs a task named `load` whose poll blocks its pool's only worker
    /// // (`coro-worker-0`) for 200 ms, past a threshold of 20 ms: its report, and the task's id.
    /// let (report, _) = stall();
    /// assert_eq!(report.thread_name(), Some("coro-worker-0"));
    /// ```
    pub fn thread_name(&self) -> Option<&str> {
        self.thread.as_deref()
    }
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "coro: task {} `{}` has run {} ms in one poll on {}",
            self.task_id(),
            self.task_name(),
            self.elapsed.as_millis(),
            self.thread.as_deref().unwrap_or("a worker"),
        )?;
        for (i, frame) in self.stack().iter().enumerate() {
            f.write_str(if i == 0 { "; async stack: " } else { " <- " })?;
            write!(f, "{frame}")?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::ThreadPool;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Off (the default), a worker publishes nothing per poll: the only cost left is the check
    /// of the setting. On, the running task is published for the length of its poll.
    #[test]
    fn the_running_task_is_published_only_when_stall_reports_are_on() {
        for on in [false, true] {
            let mut builder = ThreadPool::builder().worker_threads(1);
            if on {
                builder = builder.stall_threshold(Duration::from_secs(60));
            }
            let pool = builder.build().unwrap();
            let (inside_tx, inside_rx) = mpsc::channel();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            let task = pool.spawn(async move {
                inside_tx.send(()).unwrap();
                go_rx.recv().unwrap();
            });
            inside_rx.recv().unwrap();
            let published = !pool.shared.remotes[0].running_task().is_null();
            go_tx.send(()).unwrap();
            futures::executor::block_on(task).unwrap();
            assert_eq!(published, on, "stall reports on: {on}");
            // The handle resolves inside the poll, just before the worker clears the slot.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !pool.shared.remotes[0].running_task().is_null() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "not cleared after the poll"
                );
                std::thread::yield_now();
            }
        }
    }
}
