//! Memory at scale: what an idle task costs, how long cancelling a million takes, and the peak
//! RSS of ten million spawns, for coro, tokio and smol (async-executor) side by side.
//!
//! ```sh
//! cargo run --release -p coro-benches --example memory            # the whole table
//! cargo run --release -p coro-benches --example memory -- SHAPE   # one row, e.g. coro-baton
//! ```
//!
//! Each row runs in a child process of its own, so that one runtime's peak does not hide
//! another's. A row reports:
//! - **future**: `size_of_val` of one task's future, each row's own (the `-event` rows of every
//!   runtime spawn one and the same future type, `event_idle`: compare those to see what each
//!   runtime keeps around a task);
//! - **bytes / idle task**: live heap bytes (a counting global allocator) with 1,000,000 tasks
//!   parked, minus before, divided by the count; the RSS growth per task beside it (it includes
//!   allocator overhead and the stacks of nothing: tasks have none);
//! - **cancel all**: from the request until every task's future has been dropped (counted by a
//!   guard in each): `JoinHandle::cancel` on each (tokio: `JoinHandle::abort`), and in the
//!   `coro-baton-token` row one `CancellationSource` whose token every task waits on through
//!   `cancellable`, as a coro service cancels a request's work;
//! - for the `spawn` rows, 10,000,000 empty tasks spawned from one task in batches of 10,000
//!   (each batch awaited), and the process's peak RSS (`VmHWM`).
//!
//! Every runtime has 2 workers. coro's idle tasks wait on a `Baton` or a one-hour
//! `coro::time::sleep`, spawned with `coro::spawn` (the Task layer: a frame, a trace cell, the
//! inherited context) or, in the rows ending in `-engine`, with the engine's
//! `coro::executor::spawn`; tokio's on a `Notify` or a one-hour `tokio::time::sleep`; smol's
//! (an `async_executor::Executor` run by 2 threads) on an `event_listener::Event`, what smol's
//! own primitives wait on, and the `coro-event` rows on the same future as smol's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counting only touches
// an atomic, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Relaxed);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const IDLE_TASKS: usize = 1_000_000;
const SPAWNS: usize = 10_000_000;
const BATCH: usize = 10_000;
const WORKERS: usize = 2;

/// A field of /proc/self/status, in bytes.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<usize>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// What a child prints on its one line of output: `key=value` pairs.
struct Row {
    shape: &'static str,
    /// `size_of_val` of one task's future (0 for the spawn rows).
    future_bytes: usize,
    bytes_per_task: f64,
    rss_per_task: f64,
    cancel: Duration,
    peak_rss: usize,
}

impl Row {
    fn print(&self) {
        println!(
            "ROW shape={} future={} bytes={:.1} rss={:.1} cancel_ms={:.1} peak_mb={:.1}",
            self.shape,
            self.future_bytes,
            self.bytes_per_task,
            self.rss_per_task,
            self.cancel.as_secs_f64() * 1e3,
            self.peak_rss as f64 / 1048576.0
        );
    }
}

/// Waits until `done()` or panics after a minute.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} took over a minute"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Counts its drops: a task's future is dropped when it finishes or is cancelled.
struct CountDrop(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

/// The common end of an idle row: once all `IDLE_TASKS` tasks have parked, the heap and RSS
/// grown since `before` and `rss_before` (the handles' `Vec` excluded), then the time from
/// `cancel(handles)` until every task's future has been dropped.
fn idle_row<H>(
    shape: &'static str,
    future_bytes: usize,
    (before, rss_before): (isize, usize),
    parked: &std::sync::atomic::AtomicUsize,
    dropped: &std::sync::atomic::AtomicUsize,
    handles: Vec<H>,
    cancel: impl FnOnce(Vec<H>),
) -> Row {
    wait_until("parking the tasks", || parked.load(Relaxed) == IDLE_TASKS);
    std::thread::sleep(Duration::from_millis(200));
    let bytes = (LIVE_BYTES.load(Relaxed) - before) as f64 - (handles.capacity() * 8) as f64;
    let rss = status_bytes("VmRSS").saturating_sub(rss_before) as f64;
    let start = Instant::now();
    cancel(handles);
    wait_until("cancelling the tasks", || {
        dropped.load(Relaxed) == IDLE_TASKS
    });
    Row {
        shape,
        future_bytes,
        bytes_per_task: bytes / IDLE_TASKS as f64,
        rss_per_task: rss / IDLE_TASKS as f64,
        cancel: start.elapsed(),
        peak_rss: status_bytes("VmHWM"),
    }
}

/// What one idle task of a row may use; each row's future takes only what it waits on, so
/// that every row measures a future of its own size (`IdleArgs` is destructured, not captured).
struct IdleArgs {
    baton: Arc<coro::sync::Baton>,
    event: Arc<event_listener::Event>,
    parked: Arc<std::sync::atomic::AtomicUsize>,
    guard: CountDrop,
}

/// The idle future of the `-event` rows, one type for every runtime: it waits on an
/// `event_listener::Event` (what smol's own primitives wait on), so that those rows differ
/// only in what each runtime keeps around the same future.
async fn event_idle(
    event: Arc<event_listener::Event>,
    parked: Arc<std::sync::atomic::AtomicUsize>,
    guard: CountDrop,
) {
    let _guard = guard;
    let listener = event.listen();
    parked.fetch_add(1, Relaxed);
    listener.await;
}

fn coro_idle(shape: &'static str) -> Row {
    use coro::cancel::cancellable;
    match shape {
        "coro-timer" => coro_idle_row(shape, |IdleArgs { parked, guard, .. }| async move {
            let _guard = guard;
            parked.fetch_add(1, Relaxed);
            let _ = coro::time::sleep(Duration::from_secs(3600)).await;
        }),
        "coro-baton-token" => coro_idle_row(
            shape,
            |IdleArgs {
                 baton,
                 parked,
                 guard,
                 ..
             }| {
                async move {
                    let _guard = guard;
                    parked.fetch_add(1, Relaxed);
                    // Waits on the baton and on the token the task inherited.
                    let _ = cancellable(baton.wait()).await;
                }
            },
        ),
        "coro-event" | "coro-event-engine" => coro_idle_row(
            shape,
            |IdleArgs {
                 event,
                 parked,
                 guard,
                 ..
             }| { event_idle(event, parked, guard) },
        ),
        _ => coro_idle_row(
            shape,
            |IdleArgs {
                 baton,
                 parked,
                 guard,
                 ..
             }| async move {
                let _guard = guard;
                parked.fetch_add(1, Relaxed);
                baton.wait().await;
            },
        ),
    }
}

/// An idle row of coro: `IDLE_TASKS` tasks running the future `idle` makes, spawned with
/// `coro::spawn` (the Task layer: a frame, a trace cell, the inherited context) or, for a
/// shape ending in `-engine`, with the engine's `coro::executor::spawn`.
fn coro_idle_row<Fut>(shape: &'static str, idle: fn(IdleArgs) -> Fut) -> Row
where
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    use coro::cancel::CancellationSource;
    use std::sync::atomic::AtomicUsize;
    let pool = coro::ThreadPool::new(WORKERS).unwrap();
    let baton = Arc::new(coro::sync::Baton::new());
    let event = Arc::new(event_listener::Event::new());
    let source = CancellationSource::new();
    let parked = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let engine = shape.ends_with("-engine");
    let before = LIVE_BYTES.load(Relaxed);
    let rss_before = status_bytes("VmRSS");
    let (handles, future_bytes) = coro::block_wait(
        coro::Task::new({
            let (baton, event, parked, dropped) = (
                baton.clone(),
                event.clone(),
                parked.clone(),
                dropped.clone(),
            );
            async move {
                let mut handles = Vec::with_capacity(IDLE_TASKS);
                let mut future_bytes = 0;
                for _ in 0..IDLE_TASKS {
                    let future = idle(IdleArgs {
                        baton: baton.clone(),
                        event: event.clone(),
                        parked: parked.clone(),
                        guard: CountDrop(dropped.clone()),
                    });
                    future_bytes = std::mem::size_of_val(&future);
                    handles.push(if engine {
                        coro::executor::spawn(future)
                    } else {
                        coro::spawn(future)
                    });
                }
                (handles, future_bytes)
            }
        })
        .with_cancellation(source.token())
        .schedule_on(&pool),
    );
    idle_row(
        shape,
        future_bytes,
        (before, rss_before),
        &parked,
        &dropped,
        handles,
        |handles| {
            if shape == "coro-baton-token" {
                // The coro way: one token for the request's work.
                source.request_cancellation();
                drop(handles);
            } else {
                for handle in handles {
                    handle.cancel();
                }
            }
        },
    )
}

fn tokio_idle(shape: &'static str) -> Row {
    use std::sync::atomic::AtomicUsize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .enable_time()
        .build()
        .unwrap();
    let notify = Arc::new(tokio::sync::Notify::new());
    let parked = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let before = LIVE_BYTES.load(Relaxed);
    let rss_before = status_bytes("VmRSS");
    let timer = shape == "tokio-timer";
    let (handles, future_bytes) = rt.block_on({
        let (notify, parked, dropped) = (notify.clone(), parked.clone(), dropped.clone());
        async move {
            let mut handles = Vec::with_capacity(IDLE_TASKS);
            let mut future_bytes = 0;
            for _ in 0..IDLE_TASKS {
                let (notify, parked) = (notify.clone(), parked.clone());
                let guard = CountDrop(dropped.clone());
                let future = async move {
                    let _guard = guard;
                    parked.fetch_add(1, Relaxed);
                    if timer {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                    } else {
                        notify.notified().await;
                    }
                };
                future_bytes = std::mem::size_of_val(&future);
                handles.push(tokio::spawn(future));
            }
            (handles, future_bytes)
        }
    });
    idle_row(
        shape,
        future_bytes,
        (before, rss_before),
        &parked,
        &dropped,
        handles,
        |handles| {
            for handle in handles {
                handle.abort();
            }
        },
    )
}

fn smol_idle(shape: &'static str) -> Row {
    use std::sync::atomic::AtomicUsize;
    let rt = coro_benches::AsyncExecutorRt::new(WORKERS);
    let event = Arc::new(event_listener::Event::new());
    let parked = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let before = LIVE_BYTES.load(Relaxed);
    let rss_before = status_bytes("VmRSS");
    let ex = rt.ex;
    let (handles, future_bytes) = futures::executor::block_on(ex.spawn({
        let (event, parked, dropped) = (event.clone(), parked.clone(), dropped.clone());
        async move {
            let mut handles = Vec::with_capacity(IDLE_TASKS);
            let mut future_bytes = 0;
            for _ in 0..IDLE_TASKS {
                let future = event_idle(event.clone(), parked.clone(), CountDrop(dropped.clone()));
                future_bytes = std::mem::size_of_val(&future);
                handles.push(ex.spawn(future));
            }
            (handles, future_bytes)
        }
    }));
    idle_row(
        shape,
        future_bytes,
        (before, rss_before),
        &parked,
        &dropped,
        handles,
        // Dropping an async-executor task cancels it.
        drop,
    )
}

fn coro_spawns() -> Row {
    let pool = coro::ThreadPool::new(WORKERS).unwrap();
    coro::block_wait(
        coro::Task::new(async {
            let mut handles = Vec::with_capacity(BATCH);
            for _ in 0..SPAWNS / BATCH {
                handles.extend((0..BATCH).map(|_| coro::spawn(async {})));
                for handle in handles.drain(..) {
                    handle.await.unwrap();
                }
            }
        })
        .schedule_on(&pool),
    );
    spawn_row("coro-spawn")
}

fn tokio_spawns() -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .build()
        .unwrap();
    rt.block_on(async {
        let mut handles = Vec::with_capacity(BATCH);
        for _ in 0..SPAWNS / BATCH {
            handles.extend((0..BATCH).map(|_| tokio::spawn(async {})));
            for handle in handles.drain(..) {
                handle.await.unwrap();
            }
        }
    });
    spawn_row("tokio-spawn")
}

fn spawn_row(shape: &'static str) -> Row {
    Row {
        shape,
        future_bytes: 0,
        bytes_per_task: f64::NAN,
        rss_per_task: f64::NAN,
        cancel: Duration::ZERO,
        peak_rss: status_bytes("VmHWM"),
    }
}

const SHAPES: [&str; 11] = [
    "coro-baton",
    "coro-baton-engine",
    "coro-baton-token",
    "tokio-notify",
    "coro-event",
    "coro-event-engine",
    "smol-event",
    "coro-timer",
    "tokio-timer",
    "coro-spawn",
    "tokio-spawn",
];

fn run_child(shape: &str) {
    let row = match shape {
        "coro-baton" => coro_idle("coro-baton"),
        "coro-baton-engine" => coro_idle("coro-baton-engine"),
        "coro-baton-token" => coro_idle("coro-baton-token"),
        "coro-event" => coro_idle("coro-event"),
        "coro-event-engine" => coro_idle("coro-event-engine"),
        "coro-timer" => coro_idle("coro-timer"),
        "tokio-notify" => tokio_idle("tokio-notify"),
        "tokio-timer" => tokio_idle("tokio-timer"),
        "smol-event" => smol_idle("smol-event"),
        "coro-spawn" => coro_spawns(),
        "tokio-spawn" => tokio_spawns(),
        other => panic!("unknown shape {other:?}: one of {SHAPES:?}"),
    };
    row.print();
}

fn main() {
    if let Some(shape) = std::env::args().nth(1) {
        return run_child(&shape);
    }
    let exe = std::env::current_exe().expect("the example's own path");
    println!(
        "| row | future | bytes / idle task (heap) | RSS / idle task | cancel all | peak RSS |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for shape in SHAPES {
        let out = std::process::Command::new(&exe)
            .arg(shape)
            .output()
            .expect("running a child");
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(line) = text.lines().find(|l| l.starts_with("ROW ")) else {
            eprintln!("{shape} failed: {}", String::from_utf8_lossy(&out.stderr));
            std::process::exit(1);
        };
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or("?")
                .to_owned()
        };
        let (bytes, rss, cancel) = (field("bytes"), field("rss"), field("cancel_ms"));
        if shape.ends_with("-spawn") {
            println!(
                "| {shape}: 10M empty spawns | | | | | {} MB |",
                field("peak_mb")
            );
        } else {
            println!(
                "| {shape}: 1M idle tasks | {} B | {bytes} B | {rss} B | {cancel} ms | {} MB |",
                field("future"),
                field("peak_mb")
            );
        }
    }
}
