//! Code shared by the benchmarks in `benches/` (see `README.md`): the async-executor runtime
//! that every comparison drives the same way. Run the benchmarks with
//! `cargo bench -p coro-benches --bench rt_multi_threaded` (or `--bench collect`,
//! `--bench task_chain`).

#![deny(missing_docs)]

use futures::channel::oneshot;
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
