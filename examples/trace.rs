//! Async stack traces: finding where a DAG of tasks is stuck, and where a panic came from.
//!
//! A request handler awaits two children under `collect_all!`; one waits for a `Baton` that
//! nobody posts. `coro::trace::dump_all()` shows every live task as a tree, with the frames
//! where each waits, without stopping anything. Then a panic deep in nested named tasks: the
//! panic hook prints its async stack on stderr, and the `JoinHandle` reports the panic. Last,
//! a child awaited on another pool shows its awaiter's frames after its own, and a task that
//! blocks its worker is named by the pool's stall report.
//!
//! Run it with `cargo run --release --example trace`.

use coro::JoinError;
use coro::sync::Baton;
use coro::time::{sleep, timeout};
use coro::trace::TaskState;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(5);

#[coro::task]
async fn fetch_profile() -> u32 {
    sleep(Duration::from_millis(1)).await.unwrap();
    1
}

#[coro::task]
async fn wait_for_config(ready: Arc<Baton>) -> u32 {
    ready.wait().await; // stuck here until somebody posts
    2
}

#[coro::task]
async fn handle_request(ready: Arc<Baton>) -> u32 {
    let (profile, config) = coro::collect_all!(fetch_profile(), wait_for_config(ready)).await;
    profile + config
}

#[coro::task]
async fn parse_config() -> u32 {
    panic!("bad config line 3");
}

#[coro::task]
async fn load_settings() -> u32 {
    parse_config().await
}

#[coro::task]
async fn startup() -> u32 {
    load_settings().await
}

#[coro::task]
async fn render_on_other_pool() -> coro::trace::AsyncStack {
    coro::trace::current_stack()
}

/// Awaits `render_on_other_pool` on `pool`, from a named task of its own.
#[coro::task]
async fn render_on(pool: coro::ExecutorHandle) -> String {
    render_on_other_pool().schedule_on(pool).await.to_string()
}

#[coro::task]
async fn compress_report() -> usize {
    // Blocks its worker for 150 ms without yielding: a stall.
    std::thread::sleep(Duration::from_millis(150));
    42
}

#[coro::main(worker_threads = 2)]
async fn main() {
    // 1. A stuck DAG, and a dump taken while it is stuck.
    let ready = Arc::new(Baton::new());
    let request = coro::spawn(handle_request(ready.clone()));
    let started = Instant::now();
    let dump = loop {
        // Stuck: fetch_profile is done, and the handler's collect waits for the config.
        let dump = coro::trace::dump_all();
        let tasks = dump.tasks();
        let stuck = tasks.iter().any(|task| {
            task.frames().first().map(|f| f.name()) == Some("wait_for_config")
                && task.state() == TaskState::Suspended
        });
        if stuck && tasks.len() == 3 {
            break dump; // main, the handler, and the handler's stuck child
        }
        let waited = started.elapsed();
        assert!(waited < LIMIT, "the handler never got stuck:\n{dump}");
        sleep(Duration::from_millis(1)).await.unwrap();
    };
    println!("while stuck, dump_all() shows:\n{dump}");
    assert!(!request.is_finished());
    ready.post();
    let answer = timeout(LIMIT, request).await.expect("still stuck").unwrap();
    println!("after post(): handle_request returned {answer}\n");
    assert_eq!(answer, 3);

    // 2. A panic inside nested named tasks. `#[coro::main]` already installed the hook;
    // installing it again has no further effect. stderr shows the panic and its async stack.
    coro::trace::install_panic_hook();
    let outcome = timeout(LIMIT, coro::spawn(startup())).await.expect("hung");
    let Err(JoinError::Panicked(payload)) = outcome else {
        panic!("startup should have panicked, got {outcome:?}");
    };
    let message = payload.downcast_ref::<&str>().copied().unwrap_or("?");
    println!("the JoinHandle reports the panic: {message:?} (its async stack is on stderr)");
    assert_eq!(message, "bad config line 3");

    // 3. A chain across executors: a child scheduled on another pool shows its own frames,
    // then its awaiter's, whichever executor each runs on.
    let other = coro::ThreadPool::builder()
        .worker_threads(1)
        .thread_name("other")
        .build()
        .unwrap();
    let stack = render_on(other.handle()).await;
    println!("a child on another pool, awaited from here, sees:\n{stack}");
    assert!(stack.contains("at render_on_other_pool (") && stack.contains("at main ("));

    // 4. A poll that blocks its worker, on a pool whose stall reports are on: the hook gets the
    // task's name and frame, how long the poll has run and where (the default hook prints the
    // same line on stderr).
    let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = reports.clone();
    let watched = coro::ThreadPool::builder()
        .worker_threads(2)
        .thread_name("watched")
        .stall_threshold(Duration::from_millis(50))
        .on_stall(move |report: &coro::executor::StallReport| {
            log.lock().unwrap().push(report.to_string());
        })
        .build()
        .unwrap();
    let size = compress_report().schedule_on(&watched).await;
    let reports = reports.lock().unwrap();
    println!("stall report: {}", reports.join("\n"));
    assert_eq!(size, 42);
    assert_eq!(reports.len(), 1, "one report for the one stalled poll");
    assert!(reports[0].contains("`compress_report`") && reports[0].contains("trace.rs:"));
}
