//! The free functions of the task model: spawn, spawn_blocking, yield_now, current_executor,
//! current_cancellation_token.

use super::context::{self, with_context};
use super::lazy::{Framed, Task};
use super::root::{FramedRoot, spawn_root};
use crate::cancel::CancellationToken;
use crate::trace::root_trace::RootTrace;
use coro_executor::{ExecutorHandle, JoinHandle};
use std::any::TypeId;
use std::borrow::Cow;
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
        return spawn_root(executor, move || (RootTrace::new(), task));
    }
    // The future stays where it is until it is read into the task's allocation: each layer of
    // the spawn moves the closure below by value, and a closure that held the future would be
    // copied (a `memcpy` call for anything over 128 bytes) at each of them.
    let fut = ManuallyDrop::new(fut);
    let source: *const F = &*fut;
    // Made where it will live (see `spawn_root`); this runs before `spawn_root` returns, so the
    // context captured is still the caller's.
    spawn_root(executor, move || {
        // SAFETY: `spawn_root` calls this exactly once, on this thread, before it returns
        // (`ExecutorHandle::spawn_with`'s contract), while `fut` is alive in this frame; the
        // `ManuallyDrop` above means this read is the future's only owner from here on.
        let fut = unsafe { std::ptr::read(source) };
        let name = std::any::type_name::<F>();
        let mut body = Framed::new(fut, Cow::Borrowed(name), location);
        body.capture_context();
        (RootTrace::new(), FramedRoot(body))
    })
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
