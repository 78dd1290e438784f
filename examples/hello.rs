//! A first look at coro: a request handler as a small DAG of tasks.
//!
//! Run it with `cargo run --release --example hello`.

use coro::Task;
use coro::executor::time::sleep;
use std::time::{Duration, Instant};

/// A stand-in for a backend call: waits `ms` milliseconds, then answers.
#[coro::task]
async fn backend(name: &'static str, ms: u64) -> String {
    sleep(Duration::from_millis(ms)).await;
    format!("{name} ({ms} ms)")
}

/// The feed needs the friends list first: a dependency inside the DAG.
#[coro::task]
async fn feed() -> String {
    let friends = backend("friends", 20).await;
    let posts = backend("posts", 15).await;
    format!("feed from {friends} and {posts}")
}

#[coro::task]
async fn handle_request(user: u32) -> Vec<String> {
    // Profile and feed run in parallel on the pool; the handler waits for both.
    let profile = coro::spawn(backend("profile", 30));
    let feed = coro::spawn(feed());
    let mut parts = vec![format!("user {user}")];
    parts.push(profile.await.expect("profile"));
    parts.push(feed.await.expect("feed"));
    // Show where the handler is: the chain of tasks awaiting one another.
    println!("inside the handler:\n{}", coro::trace::current_stack());
    parts
}

#[coro::main(worker_threads = 2)]
async fn main() {
    let started = Instant::now();
    let parts = handle_request(7).await;
    println!("{}", parts.join("\n"));
    // profile (30 ms) runs beside friends + posts (35 ms): about 35 ms, not 65.
    println!("answered in {:?}", started.elapsed());
    let checksum = Task::new(async { coro::spawn_blocking(|| (1..=1000u64).sum::<u64>()).await })
        .named("checksum")
        .await
        .expect("checksum");
    println!("checksum {checksum}");
}
