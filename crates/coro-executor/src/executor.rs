//! The [`Executor`] trait and [`ExecutorHandle`], the shared handle every spawn goes through.

use crate::pool::{Shared, ThreadPool};
use crate::task::{self, JoinHandle, Rooted, Runnable, TaskHeader, TaskRoot, drop_catching};
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// Something that can run tasks: the one method a type needs to host coro tasks.
///
/// Implement it for your own event loop and wrap it in an [`ExecutorHandle`]; everything in
/// coro that takes an executor takes a handle.
///
/// ```
/// use coro_executor::{Executor, ExecutorHandle, Runnable};
/// use std::sync::mpsc;
///
/// /// Runs tasks on whichever thread drains the channel.
/// struct ChannelExecutor(std::sync::Mutex<mpsc::Sender<Runnable>>);
///
/// impl Executor for ChannelExecutor {
///     fn schedule(&self, runnable: Runnable) {
///         // A closed channel drops the runnable, which cancels the task.
///         let _ = self.0.lock().unwrap().send(runnable);
///     }
/// }
///
/// let (tx, rx) = mpsc::channel();
/// let handle = ExecutorHandle::new(ChannelExecutor(std::sync::Mutex::new(tx)));
/// let join = handle.spawn(async { 1 + 1 });
/// rx.recv().unwrap().run();
/// assert_eq!(futures::executor::block_on(join).unwrap(), 2);
/// ```
pub trait Executor: Send + Sync + 'static {
    /// Runs `runnable` soon, on one of this executor's threads. Called from any thread, possibly
    /// from inside `runnable.run()` of another task; it must not block.
    ///
    /// A panic in it aborts nothing. When a task is spawned, it unwinds to the spawner (the task
    /// is dropped); when a woken task is requeued, it is caught where the waker was called (the
    /// panic hook reports it) and the task is dropped, unless this kept the runnable: its
    /// [`JoinHandle`] resolves `Err(JoinError::Cancelled)`.
    ///
    /// [`JoinHandle`]: crate::JoinHandle
    fn schedule(&self, runnable: Runnable);
}

/// A shared, cloneable handle to an executor (folly's `Executor::KeepAlive`).
///
/// It keeps the executor's state alive, not a shut-down [`ThreadPool`](crate::ThreadPool)'s
/// threads: spawning through the handle of a pool that has shut down drops the future at once
/// and its [`JoinHandle`] resolves `Err(JoinError::Cancelled)`. Two handles are equal when they
/// refer to the same executor.
///
/// ```
/// use coro_executor::{ExecutorHandle, ThreadPool};
///
/// let pool = ThreadPool::new(1).unwrap();
/// let handle = pool.handle();
/// assert_eq!(handle, ExecutorHandle::from(&pool));
/// let join = handle.spawn(async { "hi" });
/// assert_eq!(futures::executor::block_on(join).unwrap(), "hi");
/// ```
#[derive(Clone)]
pub struct ExecutorHandle {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    /// A coro thread pool: spawns take its fast path (next slot, local queue).
    Pool(Arc<Shared>),
    /// Any other executor, through its trait object.
    Dyn(Arc<dyn Executor>),
}

impl ExecutorHandle {
    /// Wraps an executor in a new handle. Clones of the result are equal to it; another
    /// `new` of another value is a different executor.
    ///
    /// ```
    /// use coro_executor::{ExecutorHandle, InlineExecutor};
    ///
    /// let inline = ExecutorHandle::new(InlineExecutor);
    /// let join = inline.spawn(async { 5 });
    /// assert!(join.is_finished()); // ran at once, on this thread
    /// ```
    pub fn new<E: Executor>(executor: E) -> Self {
        ExecutorHandle {
            kind: Kind::Dyn(Arc::new(executor)),
        }
    }

    /// Wraps an executor that is already shared; handles from the same `Arc` are equal.
    ///
    /// ```
    /// use coro_executor::{Executor, ExecutorHandle, InlineExecutor};
    /// use std::sync::Arc;
    ///
    /// let shared: Arc<dyn Executor> = Arc::new(InlineExecutor);
    /// assert_eq!(ExecutorHandle::from_arc(shared.clone()), ExecutorHandle::from_arc(shared));
    /// ```
    pub fn from_arc(executor: Arc<dyn Executor>) -> Self {
        ExecutorHandle {
            kind: Kind::Dyn(executor),
        }
    }

    pub(crate) fn from_pool(shared: Arc<Shared>) -> Self {
        ExecutorHandle {
            kind: Kind::Pool(shared),
        }
    }

    /// Spawns `fut` on this executor and returns a handle to its result. The task starts at once
    /// (it is scheduled now); a panic inside it is caught and reported by the handle.
    ///
    /// ```
    /// use coro_executor::ThreadPool;
    ///
    /// let pool = ThreadPool::new(2).unwrap();
    /// let joins: Vec<_> = (0..4).map(|i| pool.handle().spawn(async move { i * 2 })).collect();
    /// let sum: i32 = joins.into_iter().map(|j| futures::executor::block_on(j).unwrap()).sum();
    /// assert_eq!(sum, 12);
    /// ```
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_made(move || fut)
    }

    /// Spawns the future at `future` with `root` beside it in the task: every poll of the task
    /// is `root.poll_root(future)`. For a layer above that keeps per-task state of its own
    /// (coro's Task layer: the executor, trace cell, frame and context of a root task): it
    /// builds that state, and the engine allocates the task with both inside, lists and
    /// queues it, without calling back into the layer. The future is read in place into the
    /// task's allocation rather than moved there through the spawn's layers, each of which
    /// copies a future over 128 bytes with a `memcpy` call.
    ///
    /// # Safety
    ///
    /// `future` points at a live `F` that the caller owns and hands over to the task: it must
    /// neither use nor drop it again (keep it in a [`ManuallyDrop`](std::mem::ManuallyDrop)).
    /// It is read before this returns, also when this panics.
    ///
    /// ```
    /// use std::mem::ManuallyDrop;
    ///
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let table = ManuallyDrop::new(async { [7u64; 64].iter().sum::<u64>() });
    /// // SAFETY: `table` is read into the task, and never used or dropped here again.
    /// let join = unsafe { pool.handle().spawn_root((), &*table) };
    /// assert_eq!(futures::executor::block_on(join).unwrap(), 448);
    /// ```
    #[doc(hidden)]
    // Inlined, with `spawn_made`: the root is moved, not copied through each layer.
    #[inline(always)]
    pub unsafe fn spawn_root<R, F>(&self, root: R, future: *const F) -> JoinHandle<F::Output>
    where
        R: TaskRoot<F>,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // SAFETY: the caller's contract; `spawn_made` calls this once, before it returns.
        self.spawn_made(move || unsafe { Rooted::read(root, future) })
    }

    /// Spawns the future `make` (the engine's own closure) makes in place in the task.
    #[inline(always)]
    fn spawn_made<M, F>(&self, make: M) -> JoinHandle<F::Output>
    where
        M: FnOnce() -> F,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.kind {
            Kind::Pool(shared) => shared.spawn_placed(make, crate::pool::Placement::Next),
            Kind::Dyn(executor) => {
                let schedule = {
                    let executor = executor.clone();
                    move |runnable: Runnable| {
                        runnable.metadata().mark_scheduled();
                        // A user's `schedule` may panic. This runs inside wakers, some called
                        // under async-task's abort-on-panic guard (a `JoinHandle`'s awaiter is
                        // woken there), and unwinding out of a waker's wake leaks its reference
                        // to the task: so the panic stops here. The runnable went with it
                        // (dropped, the task is cancelled and its handle resolves `Cancelled`),
                        // unless the executor kept it; the panic hook has reported the panic.
                        let scheduled =
                            catch_unwind(AssertUnwindSafe(|| executor.schedule(runnable)));
                        if let Err(payload) = scheduled {
                            drop_catching(payload);
                        }
                    }
                };
                let (runnable, task) = task::build(TaskHeader::new(), make, schedule);
                let header = std::ptr::NonNull::from(runnable.metadata());
                let listed = task::registry::others().insert(task::shard_hint(), header, None);
                assert!(
                    listed.is_ok(),
                    "the list of other executors' tasks is never closed"
                );
                // The first schedule goes to the executor directly, not through the function
                // above: a panic in it reaches the spawner (the task, whose runnable went with
                // the panic, is cancelled as `task` is dropped on the way out).
                executor.schedule(runnable);
                JoinHandle::new(task)
            }
        }
    }

    /// Spawns `fut` to run *beside* the caller: on a [`ThreadPool`](crate::ThreadPool) worker,
    /// the task goes to the back of the worker's queue, where an idle worker (woken for it if
    /// none is searching) can steal it, instead of the worker's next slot (run next by the
    /// spawning worker itself, and stolen only as a last resort). Use it for work that should
    /// run in parallel with a spawner that keeps its worker busy. Elsewhere it is
    /// [`spawn`](Self::spawn).
    ///
    /// ```
    /// use coro_executor::ThreadPool;
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = ThreadPool::new(2).unwrap();
    /// let handle = pool.handle();
    /// let both = pool.spawn(async move {
    ///     // Helper work the other worker picks up while this one stays busy.
    ///     let helper = handle.spawn_stealable(async { std::thread::current().id() });
    ///     let start = Instant::now();
    ///     while !helper.is_finished() && start.elapsed() < Duration::from_secs(5) {}
    ///     (std::thread::current().id(), helper.await.unwrap())
    /// });
    /// let (spawner, helper) = futures::executor::block_on(both).unwrap();
    /// assert_ne!(spawner, helper);
    /// ```
    pub fn spawn_stealable<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.kind {
            Kind::Pool(shared) => {
                shared.spawn_placed(move || fut, crate::pool::Placement::Stealable)
            }
            Kind::Dyn(_) => self.spawn(fut),
        }
    }

    /// The pool whose worker thread the caller is on, if any.
    ///
    /// ```
    /// use coro_executor::{ExecutorHandle, ThreadPool};
    ///
    /// assert!(ExecutorHandle::current_pool().is_none());
    /// let pool = ThreadPool::new(1).unwrap();
    /// let inside = futures::executor::block_on(pool.spawn(async { ExecutorHandle::current_pool() }));
    /// assert_eq!(inside.unwrap(), Some(pool.handle()));
    /// ```
    pub fn current_pool() -> Option<ExecutorHandle> {
        crate::pool::current_shared().map(ExecutorHandle::from_pool)
    }

    /// Runs `f` with the handle of the pool whose worker thread the caller is on, if any: what
    /// [`current_pool`](Self::current_pool) returns, lent rather than cloned. Spawning through
    /// the lent handle spares the pool's shared reference count two atomic updates per spawn.
    ///
    /// ```
    /// use coro_executor::{ExecutorHandle, ThreadPool};
    ///
    /// assert!(ExecutorHandle::with_current_pool(|pool| pool.is_none()));
    /// let pool = ThreadPool::new(1).unwrap();
    /// let inside = pool.spawn(async {
    ///     ExecutorHandle::with_current_pool(|pool| pool.unwrap().spawn(async { 7 }))
    /// });
    /// let answer = futures::executor::block_on(async { inside.await.unwrap().await.unwrap() });
    /// assert_eq!(answer, 7);
    /// ```
    pub fn with_current_pool<R>(f: impl FnOnce(Option<&ExecutorHandle>) -> R) -> R {
        crate::pool::with_current_shared(|shared| match shared {
            Some(shared) => {
                // A handle that borrows the worker's reference to its pool instead of taking one
                // of its own: a clone and its drop are two read-modify-writes on a cache line
                // every worker shares, on every spawn from inside the pool.
                // SAFETY: `from_raw` of the worker's own pointer, uncounted: the handle is never
                // dropped (`ManuallyDrop`, also when `f` unwinds), so it never releases that
                // reference; the worker's `Arc` outlives `f`, which runs inside the worker's
                // frame on this thread; and a clone `f` makes is counted as usual.
                let pool = unsafe { Arc::from_raw(Arc::as_ptr(shared)) };
                let handle = std::mem::ManuallyDrop::new(ExecutorHandle::from_pool(pool));
                f(Some(&handle))
            }
            None => f(None),
        })
    }

    /// Whether this handle refers to a coro [`ThreadPool`](crate::ThreadPool).
    ///
    /// ```
    /// use coro_executor::{ExecutorHandle, InlineExecutor, ThreadPool};
    ///
    /// assert!(ThreadPool::new(1).unwrap().handle().is_thread_pool());
    /// assert!(!ExecutorHandle::new(InlineExecutor).is_thread_pool());
    /// ```
    pub fn is_thread_pool(&self) -> bool {
        matches!(self.kind, Kind::Pool(_))
    }

    fn addr(&self) -> *const () {
        match &self.kind {
            Kind::Pool(shared) => Arc::as_ptr(shared).cast(),
            Kind::Dyn(executor) => Arc::as_ptr(executor).cast(),
        }
    }
}

impl PartialEq for ExecutorHandle {
    fn eq(&self, other: &Self) -> bool {
        self.addr() == other.addr()
    }
}

impl Eq for ExecutorHandle {}

impl std::hash::Hash for ExecutorHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.addr().hash(state);
    }
}

impl fmt::Debug for ExecutorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Pool(_) => "ThreadPool",
            Kind::Dyn(_) => "dyn Executor",
        };
        write!(f, "ExecutorHandle({kind} @ {:p})", self.addr())
    }
}

// A pool's handle is made here, not in `pool/`, so that the pool does not import this file,
// which is built on it.
impl ThreadPool {
    /// A handle to this pool, for spawning from anywhere and for `schedule_on`.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::new(1).unwrap();
    /// let handle = pool.handle();
    /// assert_eq!(futures::executor::block_on(handle.spawn(async { 1 })).unwrap(), 1);
    /// ```
    pub fn handle(&self) -> ExecutorHandle {
        ExecutorHandle::from_pool(self.shared.clone())
    }
}

impl From<&ThreadPool> for ExecutorHandle {
    fn from(pool: &ThreadPool) -> Self {
        pool.handle()
    }
}
