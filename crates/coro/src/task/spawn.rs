//! The free functions of the task model: spawn, spawn_blocking, yield_now, current_executor,
//! current_cancellation_token.

use super::context::{self, with_context};
use super::lazy::Task;
use super::spawn_root::{spawn_framed, spawn_root};
use crate::cancel::CancellationToken;
use crate::trace::root_trace::RootTrace;
use coro_executor::{ExecutorHandle, JoinHandle};
use std::any::TypeId;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::Location;

/// Spawns `fut` as a new task on the current executor (the pool whose worker this is, the
/// thread driving a [`block_wait`](crate::block_wait), the executor of the running task), or on
/// the default pool outside any. The task inherits the caller's cancellation token and
/// task-locals, and is named after its future's type in traces.
///
/// ```
/// let handle = coro::spawn(async { 40 + 2 });
/// assert_eq!(coro::block_wait(handle).unwrap(), 42);
/// ```
#[track_caller]
pub fn spawn<F>(fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // Taken here: `#[track_caller]` does not reach through the closure below.
    let location = Location::caller();
    context::with_current_executor(|executor| match executor {
        Some(executor) => spawn_on(executor, fut, location),
        None => spawn_on(&coro_executor::default_pool().handle(), fut, location),
    })
}

/// [`spawn`] on `executor`; `location` is the caller's.
fn spawn_on<F>(
    executor: &ExecutorHandle,
    fut: F,
    location: &'static Location<'static>,
) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // A `Task` already has its frame: spawn it as the root itself rather than wrapping it in a
    // second frame named after its type. (The type test stands in for specialisation and
    // folds away at compile time.)
    if TypeId::of::<F>() == TypeId::of::<Task<F::Output>>() {
        // SAFETY: `F` is `Task<F::Output>` (same `TypeId`), so this is a move of `fut` under
        // its own type; `ManuallyDrop` keeps the original from being dropped as well.
        let mut task: Task<F::Output> =
            unsafe { std::mem::transmute_copy(&ManuallyDrop::new(fut)) };
        task.capture_context();
        return spawn_root(executor, RootTrace::new(), task);
    }
    spawn_framed(executor, fut, std::any::type_name::<F>(), location)
}

/// Runs blocking `f` on the blocking threads of the current pool (or of the default pool), so
/// that it does not hold up a worker.
///
/// ```
/// let handle = coro::spawn_blocking(|| std::thread::current().name().unwrap().to_owned());
/// assert!(coro::block_wait(handle).unwrap().contains("blocking"));
/// ```
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    coro_executor::spawn_blocking(f)
}

/// Lets other tasks run: the current task goes to the back of its executor's queue and resumes
/// after them (folly's `co_reschedule_on_current_executor`).
///
/// ```
/// coro::block_wait(async {
///     let other = coro::spawn(async {});
///     coro::yield_now().await; // `other`, queued before, runs first
///     assert!(other.is_finished());
/// });
/// ```
pub async fn yield_now() {
    coro_executor::yield_now().await
}

/// The executor the current task runs on (folly's `co_current_executor`): `None` outside tasks
/// and executors.
///
/// ```
/// assert!(coro::current_executor().is_none());
/// let pool = coro::ThreadPool::new(1).unwrap();
/// let seen = coro::block_wait(coro::Task::new(async { coro::current_executor() }).schedule_on(&pool));
/// assert_eq!(seen, Some(pool.handle()));
/// ```
pub fn current_executor() -> Option<ExecutorHandle> {
    context::current_executor()
}

/// The cancellation token of the current task (folly's `co_current_cancellation_token`):
/// [`CancellationToken::none`] outside tasks or when none was set.
///
/// ```
/// use coro::cancel::CancellationSource;
///
/// let source = CancellationSource::new();
/// let task = coro::Task::new(async { coro::current_cancellation_token() })
///     .with_cancellation(source.token());
/// assert_eq!(coro::block_wait(task), source.token());
/// ```
pub fn current_cancellation_token() -> CancellationToken {
    with_context(|ctx| ctx.map(|c| c.token.clone()).unwrap_or_default())
}
