//! Fan-out: one value, or one computation, shared by many waiters.
//!
//! - a `SharedPromise` fulfilled once wakes every waiter: tasks on this pool and one on a
//!   second pool;
//! - a `SharedTask` (`Task::shared()`) runs once, however many tasks await it;
//! - a promise dropped without a value resolves its futures to `Err(BrokenPromise)`.
//!
//! Run it with `cargo run --release --example fanout`.

use coro::sync::{BrokenPromise, SharedPromise};
use coro::time::{sleep, timeout};
use coro::{Task, ThreadPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Every wait below is bounded: a hang becomes a panic that says what hung.
const LIMIT: Duration = Duration::from_secs(5);

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_string()
}

#[coro::main(worker_threads = 2)]
async fn main() {
    // 1. One promise, many waiters: eight tasks here, one on another pool.
    let promise = SharedPromise::new();
    let local: Vec<_> = (0..8)
        .map(|_| {
            let config = promise.get_future();
            coro::spawn(async move { (thread_name(), config.await) })
        })
        .collect();
    let other_pool = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("other-pool")
        .build()
        .expect("second pool");
    let config = promise.get_future();
    let remote = Task::new(async move { (thread_name(), config.await) })
        .named("remote_waiter")
        .schedule_on(&other_pool)
        .start();
    println!("{} futures wait for the promise", promise.pending());
    assert_eq!(promise.pending(), 9);

    promise.set_value("config v1".to_string()).unwrap();
    assert!(promise.set_value("config v2".to_string()).is_err()); // fulfilled once only
    for (i, waiter) in local.into_iter().chain([remote]).enumerate() {
        let (thread, value) = timeout(LIMIT, waiter).await.expect("waiter hung").unwrap();
        println!("  {thread:<14} got {:?}", value.as_deref());
        assert_eq!(value.as_deref(), Ok("config v1"));
        let expected_pool = if i < 8 { "coro-worker-" } else { "other-pool-" };
        assert!(
            thread.starts_with(expected_pool),
            "waiter {i} ran on {thread}"
        );
    }

    // 2. One computation, many awaiters: the first await starts it, the rest share its result.
    let runs = Arc::new(AtomicUsize::new(0));
    let profile = Task::new({
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            sleep(Duration::from_millis(20)).await.unwrap(); // a slow backend call
            "profile of ada".to_string()
        }
    })
    .named("load_profile")
    .shared();
    let awaiters: Vec<_> = (0..10).map(|_| coro::spawn(profile.clone())).collect();
    for awaiter in awaiters {
        let value = timeout(LIMIT, awaiter)
            .await
            .expect("awaiter hung")
            .unwrap();
        assert_eq!(value, "profile of ada");
    }
    let (a, b) = coro::collect_all!(profile.clone(), profile.clone()).await;
    assert_eq!(
        (a.as_str(), b.as_str()),
        ("profile of ada", "profile of ada")
    );
    println!(
        "12 awaiters of the shared task; it ran {} time(s)",
        runs.load(Ordering::SeqCst)
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // 3. A promise dropped without a value: every future learns it.
    let promise = SharedPromise::<u32>::new();
    let waiter = coro::spawn(promise.get_future());
    let late = promise.get_future();
    drop(promise);
    let outcome = timeout(LIMIT, waiter).await.expect("waiter hung").unwrap();
    println!("dropped promise: {outcome:?} ({})", BrokenPromise);
    assert_eq!(outcome, Err(BrokenPromise));
    assert_eq!(late.await, Err(BrokenPromise));

    other_pool.shutdown();
}
