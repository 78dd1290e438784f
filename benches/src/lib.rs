//! Code shared by the benchmarks in `benches/` (see `README.md`): the async-executor runtime
//! that every comparison drives the same way, and the user-path runtime shim ([`Runtime`],
//! [`Spawner`]) through which `user_path` and `channel` run the same task code on coro, tokio
//! and async-executor. Run the benchmarks with
//! `cargo bench -p coro-benches --bench rt_multi_threaded` (or `--bench collect`,
//! `--bench task_chain`, `--bench user_path`, `--bench channel`). [`proto_task`] is a
//! hand-written raw task measured against async-task by `--bench task_alloc`, and nothing else.

#![deny(missing_docs)]

pub mod proto_task;

use futures::channel::oneshot;
use std::future::Future;
use std::thread;

/// With the `mimalloc` feature, every bench binary (and so every runtime in it) allocates with
/// mimalloc instead of the system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A leaked `async_executor::Executor` run by `workers` std threads, each
/// `futures_lite::future::block_on(ex.run(..))`, until dropped: async-executor's own
/// multi-threaded set-up, with the same thread count as the other runtimes.
///
/// ```no_run
/// let rt = coro_benches::AsyncExecutorRt::new(2);
/// let task = rt.ex.spawn(async { 1 + 1 });
/// assert_eq!(futures::executor::block_on(task), 2);
/// ```
pub struct AsyncExecutorRt {
    /// The executor. Leaked (one small allocation per runtime) so that tasks can hold a plain
    /// `&'static` to spawn with, as the other runtimes spawn through a thread-local.
    pub ex: &'static async_executor::Executor<'static>,
    /// Dropping a sender stops its thread's `ex.run(..)`.
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl AsyncExecutorRt {
    /// Starts `workers` threads running the executor.
    pub fn new(workers: usize) -> Self {
        let ex: &'static async_executor::Executor<'static> =
            Box::leak(Box::new(async_executor::Executor::new()));
        let mut stops = Vec::with_capacity(workers);
        let mut threads = Vec::with_capacity(workers);
        for index in 0..workers {
            let (stop, stopped) = oneshot::channel::<()>();
            let thread = thread::Builder::new()
                .name(format!("async-executor-{index}"))
                .spawn(move || {
                    futures_lite::future::block_on(ex.run(async {
                        let _ = stopped.await;
                    }))
                })
                .expect("async-executor thread");
            stops.push(stop);
            threads.push(thread);
        }
        AsyncExecutorRt { ex, stops, threads }
    }
}

impl Drop for AsyncExecutorRt {
    fn drop(&mut self) {
        self.stops.clear();
        for thread in self.threads.drain(..) {
            thread.join().expect("async-executor thread panicked");
        }
    }
}

/// Worker threads of every runtime in the comparisons.
pub const WORKERS: usize = 2;

// ---------------------------------------------------------------------------------------------
// The user path: each runtime through its ordinary public API (`user_path`, `channel`)

/// How a task already running on a runtime spawns more tasks, through the runtime's public API
/// (coro's Task layer, not its engine): a `Copy` value moved into the tasks themselves.
pub trait Spawner: Copy + Send + Sync + 'static {
    /// Spawns `fut` on the runtime this task runs on and lets it run on its own.
    fn spawn_detached<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static;

    /// Spawns `fut` on the runtime this task runs on; the returned future is its output
    /// (it panics if the task failed).
    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

/// A runtime under test, as the bench thread sees it.
pub trait Runtime {
    /// Spawning from inside this runtime's tasks.
    type Spawner: Spawner;

    /// A runtime with `workers` worker threads.
    fn build(workers: usize) -> Self;
    /// The spawner to move into tasks.
    fn spawner(&self) -> Self::Spawner;
    /// Starts `root` on the runtime from the bench thread and lets it run on its own.
    fn start<F>(&self, root: F)
    where
        F: Future<Output = ()> + Send + 'static;
    /// Runs `root` as a task on the runtime's workers and blocks the calling thread until it
    /// is done, the way this runtime's users wait from synchronous code: `coro::block_wait` of
    /// a `Task` scheduled on the pool, tokio's `rt.block_on(rt.spawn(root))`,
    /// `futures_lite::future::block_on(ex.spawn(root))`. Panics if the task failed.
    fn block_on<F>(&self, root: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;
}

/// Runs `root` on `rt` and blocks the bench thread until its output arrives, through a
/// `futures` oneshot and `futures::executor::block_on`: the same wait for every runtime.
pub fn run<R, F>(rt: &R, root: F) -> F::Output
where
    R: Runtime,
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (output_tx, output_rx) = oneshot::channel();
    rt.start(async move {
        // The bench thread waits on the receiver, so the send cannot fail.
        let _ = output_tx.send(root.await);
    });
    futures::executor::block_on(output_rx).expect("the root task was dropped")
}

/// coro's spawn from inside a task: `coro::spawn`, the current executor's.
#[derive(Clone, Copy)]
pub struct CoroSpawner;

impl Spawner for CoroSpawner {
    fn spawn_detached<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::spawn(fut).detach();
    }

    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = coro::spawn(fut);
        async move { handle.await.expect("coro task failed") }
    }
}

/// `coro::ThreadPool`; the root is a `coro::Task` started on it with
/// `schedule_on(&pool).start()`.
impl Runtime for coro::ThreadPool {
    type Spawner = CoroSpawner;

    fn build(workers: usize) -> Self {
        coro::ThreadPool::new(workers).expect("coro thread pool")
    }

    fn spawner(&self) -> CoroSpawner {
        CoroSpawner
    }

    fn start<F>(&self, root: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        coro::Task::new(root).schedule_on(self).start().detach();
    }

    fn block_on<F>(&self, root: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        coro::block_wait(coro::Task::new(root).schedule_on(self))
    }
}

/// tokio's spawn from inside a task: `tokio::spawn`, the current runtime's.
#[derive(Clone, Copy)]
pub struct TokioSpawner;

impl Spawner for TokioSpawner {
    fn spawn_detached<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        tokio::spawn(fut);
    }

    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = tokio::spawn(fut);
        async move { handle.await.expect("tokio task failed") }
    }
}

/// tokio's multi-thread runtime; the root is started with `rt.spawn`.
impl Runtime for tokio::runtime::Runtime {
    type Spawner = TokioSpawner;

    fn build(workers: usize) -> Self {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .expect("tokio runtime")
    }

    fn spawner(&self) -> TokioSpawner {
        TokioSpawner
    }

    fn start<F>(&self, root: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.spawn(root);
    }

    fn block_on<F>(&self, root: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tokio::runtime::Runtime::block_on(self, self.spawn(root)).expect("tokio task failed")
    }
}

/// async-executor's spawn from inside a task, through the `&'static` executor.
#[derive(Clone, Copy)]
pub struct AsyncExecutorSpawner(&'static async_executor::Executor<'static>);

impl Spawner for AsyncExecutorSpawner {
    fn spawn_detached<F>(self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.0.spawn(fut).detach();
    }

    fn spawn<F>(self, fut: F) -> impl Future<Output = F::Output> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // An `async_executor::Task` is its output (a panic in it resumes in the awaiter).
        self.0.spawn(fut)
    }
}

/// An `async_executor::Executor` run by `workers` threads; the root is started with
/// `ex.spawn(..).detach()`.
impl Runtime for AsyncExecutorRt {
    type Spawner = AsyncExecutorSpawner;

    fn build(workers: usize) -> Self {
        AsyncExecutorRt::new(workers)
    }

    fn spawner(&self) -> AsyncExecutorSpawner {
        AsyncExecutorSpawner(self.ex)
    }

    fn start<F>(&self, root: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.ex.spawn(root).detach();
    }

    fn block_on<F>(&self, root: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        futures_lite::future::block_on(self.ex.spawn(root))
    }
}

/// Runs `bench` (one bench function of a group) with coro's per-poll statistics on, as they are
/// while a console is attached: the `coro_stats` rows beside `coro` in `user_path` and
/// `channel`. They go off again within a millisecond of `bench`'s return.
///
/// ```no_run
/// let stats_on = coro_benches::with_console_stats(coro::executor::trace::stats_enabled);
/// assert!(stats_on);
/// ```
pub fn with_console_stats<T>(bench: impl FnOnce() -> T) -> T {
    let _stats = coro::executor::trace::collect_stats();
    bench()
}
