//! [`block_wait`]: wait for async work from synchronous code (folly's `blockingWait`).

use super::context::enter_executor;
use concurrent_queue::ConcurrentQueue;
use coro_executor::{Executor, ExecutorHandle, Runnable};
use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

/// Runs `f` to completion and returns its output, blocking the calling thread.
///
/// - A [`TaskWithExecutor`](crate::TaskWithExecutor) runs on its executor while this thread
///   waits.
/// - A [`Task`](crate::Task) or any other future is driven on this thread, which becomes its
///   executor for the duration: [`current_executor`](crate::current_executor) inside is this
///   thread's, and tasks it [`spawn`](crate::spawn)s run here too. Those still unfinished when
///   `f` completes are dropped (their handles resolve `Err(JoinError::Cancelled)`).
///
/// A panic inside `f` is resumed here.
///
/// # Panics
///
/// Called on a worker thread of a [`ThreadPool`](crate::ThreadPool), it panics at once: the
/// worker would sleep while the work it waits for (or tasks queued behind it) may need that very
/// worker, which can deadlock the pool. Use `.await` there instead.
///
/// ```
/// let doubled = coro::block_wait(async {
///     let child = coro::spawn(async { 21 });
///     child.await.unwrap() * 2
/// });
/// assert_eq!(doubled, 42);
/// ```
#[track_caller]
pub fn block_wait<F: IntoFuture>(f: F) -> F::Output {
    if let Some(pool) = ExecutorHandle::current_pool() {
        panic!(
            "coro::block_wait was called on a worker thread of {pool:?}. Blocking a worker while \
             the awaited work (or a task queued behind it) may need that worker can deadlock the \
             pool, so it is refused. Use `.await` inside tasks; call block_wait only from \
             threads that are not pool workers (main, tests, spawn_blocking closures)."
        );
    }
    let local = Arc::new(LocalLoop {
        queue: ConcurrentQueue::unbounded(),
        thread: std::thread::current(),
    });
    let handle = ExecutorHandle::from_arc(local.clone());
    // Whatever happens (completion or a panic), tasks left on this thread are dropped, and later
    // wake-ups of them drop them as well, so none outlives the loop half-run.
    let _close = CloseOnExit(&local);
    let _executor = enter_executor(&handle);
    let main = Arc::new(MainWaker {
        woken: AtomicBool::new(true),
        thread: std::thread::current(),
    });
    let waker = Waker::from(main.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(f.into_future());
    loop {
        if main.woken.swap(false, Ordering::AcqRel) {
            if let Poll::Ready(output) = fut.as_mut().poll(&mut cx) {
                return output;
            }
        }
        let mut ran = false;
        while let Ok(runnable) = local.queue.pop() {
            runnable.run();
            ran = true;
            if main.woken.load(Ordering::Acquire) {
                break;
            }
        }
        if !ran && !main.woken.load(Ordering::Acquire) {
            // A wake-up between the checks above and this park leaves the thread's token set,
            // so park returns at once: no lost wake-up. Spurious returns just loop.
            std::thread::park();
        }
    }
}

/// The executor of a thread inside `block_wait`: a queue drained by that thread.
struct LocalLoop {
    queue: ConcurrentQueue<Runnable>,
    thread: Thread,
}

impl Executor for LocalLoop {
    fn schedule(&self, runnable: Runnable) {
        match self.queue.push(runnable) {
            Ok(()) => self.thread.unpark(),
            // The block_wait has returned: the task is dropped, exactly once.
            Err(closed) => drop(closed.into_inner()),
        }
    }
}

struct CloseOnExit<'a>(&'a LocalLoop);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        self.0.queue.close();
        while let Ok(runnable) = self.0.queue.pop() {
            drop(runnable);
        }
    }
}

struct MainWaker {
    woken: AtomicBool,
    thread: Thread,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}
