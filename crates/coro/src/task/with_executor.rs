//! [`TaskWithExecutor`]: a task bound to an executor (folly's `scheduleOn`).

use super::lazy::Task;
use super::spawn_root::{RootBody, spawn_root};
use crate::trace::Frame;
use crate::trace::frame_chain::continue_into;
use crate::trace::root_trace::RootTrace;
use coro_executor::{ExecutorHandle, JoinError, JoinHandle};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A [`Task`] bound to an executor, from [`Task::schedule_on`].
///
/// Awaiting it costs two hops: the task runs on its executor, and the awaiter resumes on its
/// own executor when it finishes (folly's `co_viaIfAsync`). A panic in the task is resumed in
/// the awaiter. [`start`](Self::start) queues it at once instead and returns a [`JoinHandle`].
/// Dropping it while it runs cancels it: the awaiter owns it.
///
/// ```
/// let pool = coro::ThreadPool::new(2).unwrap();
/// let sum = coro::Task::new(async { (1..=10u32).sum::<u32>() }).schedule_on(&pool);
/// assert_eq!(coro::block_wait(sum), 55);
/// ```
#[must_use = "a TaskWithExecutor does nothing until it is awaited or started"]
pub struct TaskWithExecutor<T> {
    executor: ExecutorHandle,
    state: State<T>,
}

enum State<T> {
    NotStarted(Task<T>),
    Running(JoinHandle<T>),
    Done,
}

// `Task::schedule_on` is defined here, beside the type it makes, so that `lazy.rs` (the task)
// does not import this file, which is built on it.
impl<T: Send + 'static> Task<T> {
    /// Binds the task to `executor`: awaiting the result runs the task there and resumes the
    /// awaiter on its own executor; [`TaskWithExecutor::start`] runs it eagerly.
    ///
    /// ```
    /// let pool = coro::ThreadPool::new(1).unwrap();
    /// let on_pool = coro::Task::new(async { std::thread::current().name().map(str::to_owned) })
    ///     .schedule_on(&pool);
    /// let name = futures::executor::block_on(on_pool);
    /// assert_eq!(name.as_deref(), Some("coro-worker-0"));
    /// ```
    pub fn schedule_on(self, executor: impl Into<ExecutorHandle>) -> TaskWithExecutor<T> {
        TaskWithExecutor::new(self, executor.into())
    }
}

impl<T: Send + 'static> TaskWithExecutor<T> {
    pub(super) fn new(task: Task<T>, executor: ExecutorHandle) -> Self {
        TaskWithExecutor {
            executor,
            state: State::NotStarted(task),
        }
    }

    /// Queues the task on its executor now (eager), inheriting the caller's context, and
    /// returns a handle to its result. Dropping the handle lets the task run on, detached.
    /// Called on a task already polled, it returns a handle to the run that poll started.
    ///
    /// # Panics
    ///
    /// If the task was already polled to completion (its result went to that poll).
    ///
    /// ```
    /// let pool = coro::ThreadPool::new(1).unwrap();
    /// let handle = coro::Task::new(async { "ran" }).schedule_on(&pool).start();
    /// assert_eq!(coro::block_wait(handle).unwrap(), "ran");
    /// ```
    pub fn start(mut self) -> JoinHandle<T> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::NotStarted(task) => launch(&self.executor, task),
            State::Running(handle) => handle,
            State::Done => panic!(
                "TaskWithExecutor::start called on a task that was already awaited to \
                 completion: that await returned its result, so there is nothing left to start \
                 or join"
            ),
        }
    }

    /// The executor the task runs on.
    ///
    /// ```
    /// let pool = coro::ThreadPool::new(1).unwrap();
    /// let task = coro::Task::new(async {}).schedule_on(&pool);
    /// assert_eq!(task.executor(), &pool.handle());
    /// ```
    pub fn executor(&self) -> &ExecutorHandle {
        &self.executor
    }
}

fn launch<T: Send + 'static>(executor: &ExecutorHandle, mut task: Task<T>) -> JoinHandle<T> {
    task.capture_context();
    spawn_root(executor, RootTrace::new(), task)
}

/// [`launch`] for a task awaited where it is launched: its async stack continues into the
/// awaiter's frames, whichever executor each runs on (folly keeps the awaiter chain across
/// executors too).
fn launch_awaited<T: Send + 'static>(
    executor: &ExecutorHandle,
    mut task: Task<T>,
) -> JoinHandle<T> {
    task.capture_context();
    let awaiter: Box<[Frame]> = crate::trace::current_stack().frames().into();
    spawn_root(executor, RootTrace::new(), Continued { task, awaiter })
}

/// A task spawned for an awaiter on another executor, with that awaiter's frames (captured at
/// the await, innermost first) as the continuation of its stack.
struct Continued<T> {
    task: Task<T>,
    awaiter: Box<[Frame]>,
}

impl<T> RootBody for Continued<T> {
    fn root_frame(&self) -> &Frame {
        self.task.frame()
    }
}

impl<T> Future for Continued<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        // The frames live in this future, which outlives the guard.
        let _continued = (!this.awaiter.is_empty()).then(|| continue_into(&this.awaiter));
        Pin::new(&mut this.task).poll(cx)
    }
}

impl<T: Send + 'static> Future for TaskWithExecutor<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        if let State::NotStarted(_) = this.state {
            let State::NotStarted(task) = std::mem::replace(&mut this.state, State::Done) else {
                unreachable!()
            };
            this.state = State::Running(launch_awaited(&this.executor, task));
        }
        let State::Running(handle) = &mut this.state else {
            panic!("a TaskWithExecutor was polled after it completed");
        };
        let outcome = match Pin::new(handle).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(outcome) => outcome,
        };
        this.state = State::Done;
        match outcome {
            Ok(value) => Poll::Ready(value),
            Err(JoinError::Panicked(payload)) => std::panic::resume_unwind(payload),
            Err(JoinError::Cancelled) => panic!(
                "a task scheduled on {:?} was dropped before it finished: its executor shut down \
                 (or its `schedule` panicked) while the awaiter was waiting for it",
                this.executor
            ),
        }
    }
}

impl<T> Drop for TaskWithExecutor<T> {
    fn drop(&mut self) {
        if let State::Running(handle) = std::mem::replace(&mut self.state, State::Done) {
            // The awaiter gave up on it: structured concurrency says the child goes too.
            handle.cancel();
        }
    }
}

impl<T> fmt::Debug for TaskWithExecutor<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::NotStarted(_) => "not started",
            State::Running(_) => "running",
            State::Done => "done",
        };
        f.debug_struct("TaskWithExecutor")
            .field("executor", &self.executor)
            .field("state", &state)
            .finish()
    }
}
