//! A first look at coro: fan work out over a thread pool and gather the results.
//!
//! Run it with `cargo run --release --example hello`.

use std::time::Instant;

/// A stand-in for a backend call: some CPU work whose size depends on the input.
fn work(name: &str, rounds: u64) -> String {
    let mut x = rounds;
    for i in 0..rounds * 100_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    format!("{name}: {rounds} rounds, digest {:016x}", x)
}

fn main() {
    let pool = coro::ThreadPool::new(2).expect("a 2-worker pool");
    let started = Instant::now();
    let root = pool.spawn(async {
        // Three independent calls run concurrently, in parallel on the pool's workers.
        let calls: Vec<_> = [("profile", 30), ("friends", 20), ("feed", 40)]
            .into_iter()
            .map(|(name, rounds)| coro::spawn(async move { work(name, rounds) }))
            .collect();
        let mut lines = Vec::new();
        for call in calls {
            lines.push(call.await.expect("a call panicked"));
        }
        // Blocking work goes to the blocking pool, not a worker.
        let checksum = coro::spawn_blocking(|| (1..=1000u64).sum::<u64>())
            .await
            .expect("checksum");
        (lines, checksum)
    });
    let (lines, checksum) = futures::executor::block_on(root).expect("root task");
    for line in lines {
        println!("{line}");
    }
    println!("checksum {checksum}; all done in {:?}", started.elapsed());
    let metrics = pool.metrics();
    println!(
        "polls per worker: {:?}; tasks stolen: {}",
        metrics.workers.iter().map(|w| w.polls).collect::<Vec<_>>(),
        metrics.total_stolen()
    );
}
