//! Executor affinity: a task always resumes on its own executor, whoever completed its wait.
//!
//! A task bound to pool A (`schedule_on`) awaits a child bound to pool B, a timer, a value sent
//! by a plain `std::thread`, and a `JoinHandle` of pool B. After each await it prints the thread
//! it runs on: always one of pool A's, never the thread that woke it.
//!
//! Run it with `cargo run --release --example affinity`.

use coro::time::{sleep, timeout};
use coro::{ExecutorHandle, Task, ThreadPool, current_executor};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(5);

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

/// Prints where we are after `what`, and checks it is one of pool A's threads.
fn on_pool_a(what: &str) {
    let thread = thread_name();
    println!("  {what:<34} -> running on {thread}");
    assert!(thread.starts_with("pool-a-"), "left pool A after {what}");
}

/// Runs on pool A and awaits four things completed elsewhere; returns how many it checked.
#[coro::task]
async fn on_a(pool_a: ExecutorHandle, pool_b: ExecutorHandle) -> usize {
    on_pool_a("start");
    assert_eq!(current_executor(), Some(pool_a.clone()));

    // A child bound to pool B: it runs there, and we come back here.
    let child = Task::new(async { (thread_name(), current_executor()) })
        .named("child_on_b")
        .schedule_on(pool_b.clone());
    let (child_thread, child_executor) = child.await;
    assert!(child_thread.starts_with("pool-b-"));
    assert_eq!(child_executor, Some(pool_b.clone()));
    on_pool_a(&format!("child on {child_thread}"));

    // A timer: the timer wheel wakes us, pool A runs us.
    sleep(Duration::from_millis(5)).await.unwrap();
    on_pool_a("sleep(5 ms)");

    // A value completed by a thread that belongs to no executor.
    let (tx, rx) = futures::channel::oneshot::channel();
    let sender = std::thread::Builder::new()
        .name("plain-thread".into())
        .spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            tx.send(thread_name()).unwrap();
        })
        .unwrap();
    let sent_by = timeout(LIMIT, rx).await.expect("no value").unwrap();
    sender.join().unwrap();
    on_pool_a(&format!("value sent by {sent_by}"));

    // Another pool's JoinHandle.
    let handle = pool_b.spawn(async {
        sleep(Duration::from_millis(5)).await.unwrap();
        thread_name()
    });
    let finished_on = timeout(LIMIT, handle).await.expect("pool B hung").unwrap();
    on_pool_a(&format!("JoinHandle finished on {finished_on}"));

    assert_eq!(current_executor(), Some(pool_a));
    assert_ne!(current_executor(), Some(pool_b));
    4
}

#[coro::main(worker_threads = 2)]
async fn main() {
    let build = |name: &str| {
        let builder = ThreadPool::builder().worker_threads(2).thread_name(name);
        builder.build().expect("pool")
    };
    let (pool_a, pool_b) = (build("pool-a"), build("pool-b"));
    let (a, b) = (pool_a.handle(), pool_b.handle());
    let main_pool = current_executor().expect("main runs on its own pool");
    println!("main runs on {} (its own pool)", thread_name());
    assert!(main_pool != a && main_pool != b && a != b);

    let awaits = on_a(a.clone(), b).schedule_on(&pool_a);
    let awaits = timeout(LIMIT, awaits)
        .await
        .expect("the task on pool A hung");
    assert_eq!(awaits, 4);
    // Awaiting a task bound to pool A brought main back to its own pool too.
    println!("main resumes on {}", thread_name());
    assert!(thread_name().starts_with("coro-worker-"));
    assert_eq!(current_executor(), Some(main_pool));
    pool_a.shutdown();
    pool_b.shutdown();
}
