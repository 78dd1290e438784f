//! What the console costs the service it looks at (`README.md`, "The console"):
//!
//! - `console/snapshot_10k`: one `coro::trace::snapshot()` of a process with 10,000 live tasks
//!   (suspended on a channel each, on a 2-worker pool), as each refresh of the console page
//!   takes it. Target: well under 50 ms.
//! - `console/ping_pong`: a ping-pong of 1,000 round trips over `coro::channel::bounded(1)`
//!   between two tasks, beside the same 10,000 idle tasks, with the statistics on: `alone`;
//!   `beside_snapshots` while a std thread takes a snapshot every 100 ms (ten times the page's
//!   refresh rate; target: at most 10% of the rate lost); and `beside_back_to_back`, snapshots
//!   without a pause (a diagnostic: on 2 cores that thread takes a whole core from the pool).
//!
//! Run with `cargo bench -p coro-benches --bench console`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// Idle tasks alive during every bench of this file.
const IDLE_TASKS: usize = 10_000;
/// How often `beside_snapshots` takes one: ten times as often as the console page refreshes.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);
/// Round trips per ping-pong iteration.
const ROUND_TRIPS: u64 = 1_000;

/// A 2-worker pool with [`IDLE_TASKS`] tasks parked on a channel; they end when the returned
/// sender drops.
fn pool_with_idle_tasks() -> (coro::ThreadPool, coro::channel::Sender<()>) {
    let pool = coro::ThreadPool::new(2).unwrap();
    let (tx, rx) = coro::channel::unbounded::<()>();
    for _ in 0..IDLE_TASKS {
        let rx = rx.clone();
        drop(
            coro::Task::new(async move {
                let _ = rx.recv().await;
            })
            .named("idle")
            .schedule_on(&pool)
            .start(),
        );
    }
    // Every idle task has started and is parked on the channel.
    while coro::trace::snapshot()
        .tasks
        .iter()
        .filter(|t| t.name == "idle" && t.state == coro::trace::TaskState::Suspended)
        .count()
        < IDLE_TASKS
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    (pool, tx)
}

fn snapshot_10k(c: &mut Criterion) {
    let (pool, stop) = pool_with_idle_tasks();
    let mut group = c.benchmark_group("console");
    group.bench_function("snapshot_10k", |b| {
        b.iter(|| {
            let snap = coro::trace::snapshot();
            assert!(snap.tasks.len() >= IDLE_TASKS);
            black_box(snap)
        })
    });
    group.finish();
    drop(stop);
    pool.shutdown();
}

/// One iteration: [`ROUND_TRIPS`] round trips between two tasks of `pool`.
fn ping_pong_once(pool: &coro::ThreadPool) {
    let done = coro::block_wait(
        coro::Task::new(async {
            let (ping, pinged) = coro::channel::bounded::<u64>(1);
            let (pong, ponged) = coro::channel::bounded::<u64>(1);
            let echo = coro::spawn(coro::Task::new(async move {
                while let Ok(v) = pinged.recv().await {
                    pong.send(v + 1).await.unwrap();
                }
            }));
            let mut sum = 0;
            for i in 0..ROUND_TRIPS {
                ping.send(i).await.unwrap();
                sum += ponged.recv().await.unwrap();
            }
            drop(ping);
            echo.await.unwrap();
            sum
        })
        .schedule_on(pool),
    );
    assert_eq!(done, ROUND_TRIPS * (ROUND_TRIPS + 1) / 2);
}

fn ping_pong(c: &mut Criterion) {
    // Both rows with the statistics on, as while a console is attached: what differs is only
    // the snapshots.
    let _stats = coro::executor::trace::collect_stats();
    let (pool, stop) = pool_with_idle_tasks();
    let mut group = c.benchmark_group("console/ping_pong");
    group.throughput(Throughput::Elements(ROUND_TRIPS));
    group.bench_function("alone", |b| b.iter(|| ping_pong_once(&pool)));
    for (name, pause) in [
        ("beside_snapshots", Some(SNAPSHOT_EVERY)),
        ("beside_back_to_back", None),
    ] {
        let looking = Arc::new(AtomicBool::new(true));
        let looker = {
            let looking = looking.clone();
            std::thread::spawn(move || {
                let mut taken = 0u64;
                while looking.load(Relaxed) {
                    black_box(coro::trace::snapshot());
                    taken += 1;
                    if let Some(pause) = pause {
                        std::thread::sleep(pause);
                    }
                }
                taken
            })
        };
        group.bench_function(name, |b| b.iter(|| ping_pong_once(&pool)));
        looking.store(false, Relaxed);
        let taken = looker.join().unwrap();
        eprintln!("console/ping_pong/{name}: {taken} snapshots taken beside the ping-pong");
    }
    group.finish();
    drop(stop);
    pool.shutdown();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = console;
    config = config();
    targets = snapshot_10k, ping_pong
}
criterion_main!(console);
