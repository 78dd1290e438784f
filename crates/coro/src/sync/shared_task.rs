//! [`SharedTask`]: a [`Task`] whose one run is awaited by many.
//!
//! The first poll of any clone spawns the computation on the current executor (as
//! [`coro::spawn`](crate::spawn) would), inside a frame named `shared` whose child is the task
//! itself. Its outcome (the value, or the panic's message) fulfils a [`SharedPromise`] that every
//! clone waits on, so each awaiter resumes on its own executor. The computation does not
//! inherit the first awaiter's cancellation token (cancelling one awaiter must not fail the
//! others); give it one with [`Task::with_cancellation`] before [`Task::shared`] if it should
//! have one. When the last clone goes away before the computation finished, the computation is
//! cancelled (dropped).

use super::{BrokenPromise, SharedFuture, SharedPromise};
use crate::Task;
use crate::cancel::CancellationToken;
use coro_executor::JoinHandle;
use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// What the computation ended with: its value, or the message of its panic.
type Outcome<T> = Result<T, Arc<str>>;

enum Start<T> {
    NotStarted(Task<T>, SharedPromise<Outcome<T>>),
    Running(JoinHandle<()>),
}

/// The state every clone shares; dropped with the last clone.
struct Shared<T> {
    start: Mutex<Option<Start<T>>>,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let start = self
            .start
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(Start::Running(handle)) = start {
            // Nobody is left to want the value: drop the computation if it still runs.
            handle.cancel();
        }
    }
}

/// A task run once and awaited by any number of clones (a memoised task; [`Task::shared`]).
///
/// The computation starts on the first poll of any clone, on that poller's executor, and runs
/// exactly once however many clones await it from however many threads. Each awaiter gets a
/// clone of the value and resumes on its own executor. If the computation panics, every
/// awaiter panics with the original message. Dropping every clone before the computation
/// finished drops it.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let runs = Arc::new(AtomicUsize::new(0));
/// let config = coro::Task::new({
///     let runs = runs.clone();
///     async move {
///         runs.fetch_add(1, Ordering::SeqCst);
///         "loaded".to_string()
///     }
/// })
/// .named("load_config")
/// .shared();
/// let (a, b) = coro::block_wait(async {
///     coro::collect_all!(config.clone(), config.clone()).await
/// });
/// assert_eq!((a.as_str(), b.as_str()), ("loaded", "loaded"));
/// assert_eq!(coro::block_wait(config), "loaded");
/// assert_eq!(runs.load(Ordering::SeqCst), 1);
/// ```
#[must_use = "a SharedTask does nothing until it is awaited"]
pub struct SharedTask<T> {
    shared: Arc<Shared<T>>,
    outcome: SharedFuture<Outcome<T>>,
    /// Whether this clone made sure the computation started (saves the lock on later polls).
    started: bool,
}

// `Task::shared` lives here, beside what it makes, so that the task layer does not depend on
// `sync` (which builds on tasks): the dependency goes one way, sync -> task.
impl<T: Send + 'static> Task<T> {
    /// Makes the task shareable: the returned [`SharedTask`] can be cloned and awaited from
    /// anywhere; the task runs once, on the first await, and every awaiter gets a clone of its
    /// value (a panic makes every awaiter panic with the same message).
    ///
    /// ```
    /// let answer = coro::Task::new(async { 42 }).shared();
    /// let again = answer.clone();
    /// assert_eq!(coro::block_wait(answer), 42);
    /// assert_eq!(coro::block_wait(again), 42);
    /// ```
    pub fn shared(self) -> SharedTask<T>
    where
        T: Clone + Sync,
    {
        SharedTask::new(self)
    }
}

impl<T: Clone + Send + Sync + 'static> SharedTask<T> {
    pub(crate) fn new(task: Task<T>) -> Self {
        let promise = SharedPromise::new();
        let outcome = promise.get_future();
        SharedTask {
            shared: Arc::new(Shared {
                start: Mutex::new(Some(Start::NotStarted(task, promise))),
            }),
            outcome,
            started: false,
        }
    }

    fn ensure_started(&mut self) {
        let mut start = self.shared.start.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Start::NotStarted(task, promise)) = start.take() {
            *start = Some(Start::Running(spawn_computation(task, promise)));
        } else {
            // Already running (or being torn down by the last clone, which is not us).
        }
        self.started = true;
    }
}

/// Spawns `task` on the current executor inside a `shared` frame; its outcome fulfils
/// `promise`. If the computation is dropped unfinished (its executor shut down), the promise
/// breaks and every awaiter learns it.
fn spawn_computation<T: Clone + Send + Sync + 'static>(
    mut task: Task<T>,
    promise: SharedPromise<Outcome<T>>,
) -> JoinHandle<()> {
    let location = task.frame().location();
    let run = async move {
        let outcome =
            poll_fn(
                |cx| match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut task).poll(cx))) {
                    Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
                    Ok(Poll::Pending) => Poll::Pending,
                    Err(payload) => Poll::Ready(Err(panic_message(&*payload))),
                },
            )
            .await;
        // Only this computation fulfils the promise, once.
        let _ = promise.set_value(outcome);
    };
    // The computation serves every awaiter: none's token is its token.
    let root = Task::with_frame(run, Cow::Borrowed("shared"), location)
        .with_cancellation(CancellationToken::none());
    crate::spawn(root)
}

fn panic_message(payload: &(dyn Any + Send)) -> Arc<str> {
    Arc::from(
        coro_executor::panic_message(payload)
            .unwrap_or("a coro SharedTask panicked with a payload that is not a string"),
    )
}

impl<T: Clone + Send + Sync + 'static> Future for SharedTask<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if !self.started {
            self.ensure_started();
        }
        match Pin::new(&mut self.outcome).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(Ok(value))) => Poll::Ready(value),
            Poll::Ready(Ok(Err(message))) => panic!("{message}"),
            Poll::Ready(Err(BrokenPromise)) => panic!(
                "a coro SharedTask's computation was dropped before it finished: the executor \
                 it was started on shut down (or the block_wait that started it returned)"
            ),
        }
    }
}

impl<T> Clone for SharedTask<T>
where
    T: Clone,
{
    fn clone(&self) -> Self {
        SharedTask {
            shared: self.shared.clone(),
            outcome: self.outcome.clone(),
            started: false,
        }
    }
}

impl<T> fmt::Debug for SharedTask<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedTask")
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}
