//! `task_alloc`: async-task's raw task (what coro's engine allocates every task with) against
//! the hand-written prototype of `coro_benches::proto_task`, on the parts of a task's life that
//! async-task does for the engine: allocation, scheduling through the schedule function, runs,
//! wakes, the join handle, freeing. No executor: each shape drives the runnables itself.
//!
//! Rule: like with like. Both sides spawn the same futures with the same metadata size as coro's
//! `TaskHeader` (48 bytes) and a zero-sized schedule function (with async-task through
//! `WithInfo`, as the engine's), and are driven by the same generic code; only the task
//! implementation differs. Function ids `async_task` and `proto`:
//! - `task_alloc/spawn_run_join_local`: one thread spawns `TASKS` tasks (each increments a
//!   counter and returns its index), scheduling each through its schedule function onto a
//!   thread-local `VecDeque`; runs them all; then polls every handle to its output.
//! - `task_alloc/spawn_run_detach_local`: the same with each handle detached at once (as
//!   `spawn_many_local`'s tasks are).
//! - `task_alloc/wake_run`: one task awaits a yield-once future (`wake_by_ref`, then `Pending`)
//!   `WAKES` times, driven by a loop that pops its runnable and runs it.
//! - `task_alloc/spawn_two_threads`: the bench thread spawns `TASKS` detached tasks onto a
//!   `ConcurrentQueue`; a second thread runs them (and so frees them), so that the state word
//!   and the allocation cross cores as in coro's pool.
//!
//! Before the rows it prints the bytes each side allocates per spawn for the same futures,
//! measured by a counting global allocator (not under the `mimalloc` feature, which brings its
//! own). Run with `cargo bench -p coro-benches --bench task_alloc`.

use async_task::{Builder, WithInfo};
use concurrent_queue::ConcurrentQueue;
use coro_benches::proto_task;
use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::task::{Context, Poll, Waker};
use std::thread::{self, LocalKey};

/// Tasks spawned per iteration by the spawn shapes (`spawn_many_local`'s count).
const TASKS: usize = 10_000;
/// Wake-ups per iteration of `wake_run`.
const WAKES: usize = 10_000;

/// The size of coro's task header, the engine's async-task metadata.
#[derive(Default)]
struct Meta(#[allow(dead_code)] [u64; 6]);

const _: () = assert!(std::mem::size_of::<Meta>() == 48);

/// Counted by every task of the bench: written by one thread at a time (the one running the
/// tasks), read by the bench thread to know when the other thread is done.
static RAN: AtomicUsize = AtomicUsize::new(0);

/// The bench's task body: increments `RAN` (a single writer: load and store) and returns `i`.
async fn count(i: usize) -> usize {
    RAN.store(RAN.load(Relaxed) + 1, Release);
    i
}

/// A future that wakes its task and is pending once, then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The body of `wake_run`'s task.
async fn yield_many() -> usize {
    for _ in 0..WAKES {
        YieldOnce(false).await;
    }
    WAKES
}

/// One raw-task implementation, as the shapes drive it.
trait Raw: Sized + 'static {
    const NAME: &'static str;
    type Runnable: Send + 'static;
    type Handle<T: Send + 'static>: Send;

    /// Spawns `future` with the 48-byte metadata and `schedule` as the schedule function.
    fn spawn<F, S>(future: F, schedule: S) -> (Self::Runnable, Self::Handle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        S: Fn(Self::Runnable) + Send + Sync + 'static;
    /// This side's thread-local queue.
    fn local() -> &'static LocalKey<RefCell<VecDeque<Self::Runnable>>>;
    /// This side's queue between threads.
    fn shared() -> &'static ConcurrentQueue<Self::Runnable>;
    fn schedule(runnable: Self::Runnable);
    fn run(runnable: Self::Runnable) -> bool;
    fn detach<T: Send + 'static>(handle: Self::Handle<T>);
    /// Polls a handle; `Some` with the output once ready.
    fn poll_join<T: Send + 'static>(
        handle: &mut Self::Handle<T>,
        cx: &mut Context<'_>,
    ) -> Option<T>;

    /// Spawns `future` with a zero-sized schedule function that queues onto this thread's
    /// local queue.
    fn spawn_local<F>(future: F) -> (Self::Runnable, Self::Handle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Self::spawn(future, |r| {
            Self::local().with(|q| q.borrow_mut().push_back(r))
        })
    }

    /// Spawns `future` with a zero-sized schedule function that queues onto the shared queue.
    fn spawn_shared<F>(future: F) -> (Self::Runnable, Self::Handle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Self::spawn(future, |r| {
            assert!(Self::shared().push(r).is_ok(), "unbounded")
        })
    }

    fn pop_local() -> Option<Self::Runnable> {
        Self::local().with(|q| q.borrow_mut().pop_front())
    }

    fn pop_shared() -> Option<Self::Runnable> {
        Self::shared().pop().ok()
    }
}

thread_local! {
    static LOCAL_ASYNC_TASK: RefCell<VecDeque<async_task::Runnable<Meta>>> =
        RefCell::new(VecDeque::with_capacity(TASKS));
    static LOCAL_PROTO: RefCell<VecDeque<proto_task::Runnable<Meta>>> =
        RefCell::new(VecDeque::with_capacity(TASKS));
}

static SHARED_ASYNC_TASK: ConcurrentQueue<async_task::Runnable<Meta>> =
    ConcurrentQueue::unbounded();
static SHARED_PROTO: ConcurrentQueue<proto_task::Runnable<Meta>> = ConcurrentQueue::unbounded();

/// The methods whose calls both sides spell alike (their types' methods share names), and the
/// queues.
macro_rules! same_calls {
    ($local:ident, $shared:ident) => {
        fn local() -> &'static LocalKey<RefCell<VecDeque<Self::Runnable>>> {
            &$local
        }

        fn shared() -> &'static ConcurrentQueue<Self::Runnable> {
            &$shared
        }

        fn schedule(runnable: Self::Runnable) {
            runnable.schedule()
        }

        fn run(runnable: Self::Runnable) -> bool {
            runnable.run()
        }

        fn detach<T: Send + 'static>(handle: Self::Handle<T>) {
            handle.detach()
        }
    };
}

/// async-task 4.7, built as coro's engine builds its tasks (`Builder::metadata`, `WithInfo`).
struct AsyncTask;

impl Raw for AsyncTask {
    const NAME: &'static str = "async_task";
    type Runnable = async_task::Runnable<Meta>;
    type Handle<T: Send + 'static> = async_task::Task<T, Meta>;

    fn spawn<F, S>(future: F, schedule: S) -> (Self::Runnable, Self::Handle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        S: Fn(Self::Runnable) + Send + Sync + 'static,
    {
        Builder::new()
            .metadata(Meta::default())
            .spawn(move |_| future, WithInfo(move |r, _| schedule(r)))
    }

    same_calls!(LOCAL_ASYNC_TASK, SHARED_ASYNC_TASK);

    fn poll_join<T: Send + 'static>(
        handle: &mut Self::Handle<T>,
        cx: &mut Context<'_>,
    ) -> Option<T> {
        match Pin::new(handle).poll(cx) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        }
    }
}

/// The prototype.
struct Proto;

impl Raw for Proto {
    const NAME: &'static str = "proto";
    type Runnable = proto_task::Runnable<Meta>;
    type Handle<T: Send + 'static> = proto_task::JoinHandle<T, Meta>;

    fn spawn<F, S>(future: F, schedule: S) -> (Self::Runnable, Self::Handle<F::Output>)
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
        S: Fn(Self::Runnable) + Send + Sync + 'static,
    {
        proto_task::spawn(future, move |r, _| schedule(r), Meta::default())
    }

    same_calls!(LOCAL_PROTO, SHARED_PROTO);

    fn poll_join<T: Send + 'static>(
        handle: &mut Self::Handle<T>,
        cx: &mut Context<'_>,
    ) -> Option<T> {
        match Pin::new(handle).poll(cx) {
            Poll::Ready(output) => Some(output.expect("the task was not cancelled")),
            Poll::Pending => None,
        }
    }
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Runs every runnable on this thread's queue; returns how many runs there were.
fn run_local<R: Raw>() -> usize {
    let mut runs = 0;
    while let Some(runnable) = R::pop_local() {
        R::run(runnable);
        runs += 1;
    }
    runs
}

fn spawn_run_join_local<R: Raw>(group: &mut Group<'_>) {
    let mut handles = Vec::with_capacity(TASKS);
    let mut cx = Context::from_waker(Waker::noop());
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            for i in 0..TASKS {
                let (runnable, handle) = R::spawn_local(count(i));
                R::schedule(runnable);
                handles.push(handle);
            }
            assert_eq!(run_local::<R>(), TASKS);
            let mut sum = 0;
            for mut handle in handles.drain(..) {
                sum += R::poll_join(&mut handle, &mut cx).expect("every task ran");
            }
            black_box(sum)
        })
    });
}

fn spawn_run_detach_local<R: Raw>(group: &mut Group<'_>) {
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            for i in 0..TASKS {
                let (runnable, handle) = R::spawn_local(count(i));
                R::detach(handle);
                R::schedule(runnable);
            }
            black_box(run_local::<R>())
        })
    });
}

fn wake_run<R: Raw>(group: &mut Group<'_>) {
    let mut cx = Context::from_waker(Waker::noop());
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            let (runnable, mut handle) = R::spawn_local(yield_many());
            R::schedule(runnable);
            assert_eq!(run_local::<R>(), WAKES + 1);
            R::poll_join(&mut handle, &mut cx).expect("the task finished")
        })
    });
}

/// A thread that runs what the shared queue holds while `active`, and parks otherwise.
struct Runner {
    active: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Runner {
    fn start<R: Raw>() -> Self {
        let active = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (a, s) = (active.clone(), stop.clone());
        let thread = thread::Builder::new()
            .name("task-alloc-runner".into())
            .spawn(move || {
                while !s.load(Acquire) {
                    if let Some(runnable) = R::pop_shared() {
                        R::run(runnable);
                    } else if a.load(Acquire) {
                        std::hint::spin_loop();
                    } else {
                        thread::park();
                    }
                }
            })
            .expect("runner thread");
        Runner {
            active,
            stop,
            thread: Some(thread),
        }
    }

    fn activate(&self, on: bool) {
        self.active.store(on, Release);
        if on {
            self.thread.as_ref().expect("running").thread().unpark();
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.stop.store(true, Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            thread.join().expect("runner thread panicked");
        }
    }
}

fn spawn_two_threads<R: Raw>(group: &mut Group<'_>) {
    let runner = Runner::start::<R>();
    group.bench_function(R::NAME, |b| {
        b.iter(|| {
            runner.activate(true);
            let start = RAN.load(Acquire);
            for i in 0..TASKS {
                let (runnable, handle) = R::spawn_shared(count(i));
                R::detach(handle);
                R::schedule(runnable);
            }
            while RAN.load(Acquire) != start + TASKS {
                std::hint::spin_loop();
            }
            runner.activate(false);
        })
    });
    drop(runner);
}

/// Counts the bytes allocated while `RECORDING` is set; the system allocator does the rest.
#[cfg(not(feature = "mimalloc"))]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::atomic::{AtomicBool, AtomicUsize};

    pub struct Counting;

    pub static RECORDING: AtomicBool = AtomicBool::new(false);
    pub static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
    pub static BYTES: AtomicUsize = AtomicUsize::new(0);

    // SAFETY: every call is passed on unchanged to the system allocator, which meets the
    // `GlobalAlloc` contract; the counters only read the layout.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if RECORDING.load(Relaxed) {
                ALLOCATIONS.fetch_add(1, Relaxed);
                BYTES.fetch_add(layout.size(), Relaxed);
            }
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, passed on (`ptr` came from `System.alloc`).
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    /// Allocations and bytes made by `f` on this thread (no other thread allocates meanwhile:
    /// called before any bench thread starts).
    pub fn measure<R>(f: impl FnOnce() -> R) -> (usize, usize, R) {
        ALLOCATIONS.store(0, Relaxed);
        BYTES.store(0, Relaxed);
        RECORDING.store(true, Relaxed);
        let result = f();
        RECORDING.store(false, Relaxed);
        (ALLOCATIONS.load(Relaxed), BYTES.load(Relaxed), result)
    }
}

#[cfg(not(feature = "mimalloc"))]
#[global_allocator]
static GLOBAL: counting::Counting = counting::Counting;

/// Prints what one spawn of each bench future allocates on each side.
fn print_allocation_sizes() {
    #[cfg(not(feature = "mimalloc"))]
    {
        fn line<R: Raw, F>(what: &str, make: impl Fn() -> F)
        where
            F: Future + Send + 'static,
            F::Output: Send + 'static,
        {
            let (allocations, bytes, task) = counting::measure(|| R::spawn_local(make()));
            drop(task);
            eprintln!(
                "task_alloc: {:>10} spawn of {what}: {allocations} allocation(s), {bytes} bytes",
                R::NAME
            );
        }
        line::<AsyncTask, _>("count(i)", || count(0));
        line::<Proto, _>("count(i)", || count(0));
        line::<AsyncTask, _>("yield_many()", yield_many);
        line::<Proto, _>("yield_many()", yield_many);
    }
    #[cfg(feature = "mimalloc")]
    eprintln!("task_alloc: allocation sizes are measured without the mimalloc feature only");
}

fn task_alloc(c: &mut Criterion) {
    print_allocation_sizes();
    let mut group = c.benchmark_group("task_alloc/spawn_run_join_local");
    spawn_run_join_local::<AsyncTask>(&mut group);
    spawn_run_join_local::<Proto>(&mut group);
    group.finish();

    let mut group = c.benchmark_group("task_alloc/spawn_run_detach_local");
    spawn_run_detach_local::<AsyncTask>(&mut group);
    spawn_run_detach_local::<Proto>(&mut group);
    group.finish();

    let mut group = c.benchmark_group("task_alloc/wake_run");
    wake_run::<AsyncTask>(&mut group);
    wake_run::<Proto>(&mut group);
    group.finish();

    let mut group = c.benchmark_group("task_alloc/spawn_two_threads");
    spawn_two_threads::<AsyncTask>(&mut group);
    spawn_two_threads::<Proto>(&mut group);
    group.finish();
}

criterion_group!(benches, task_alloc);
criterion_main!(benches);
