//! The cost of a simulation step: polls per second of a simulated workload on one thread, and
//! so how many seeds a CI minute runs.
//!
//! The workload is the soak test's mix without sockets, on 2 logical workers: 64 requests, each
//! a small DAG (a shared dependency awaited by 3 children gathered with `collect_all!`), a
//! channel hop to a consumer task, a virtual-time sleep, and a few yields. One iteration is one
//! whole simulation of seed 1 (the same run every time, so its poll count, measured once before
//! the bench, is criterion's throughput: `sim/soak_mix` reports polls per second). Seeds per
//! minute is 60 s over the time per iteration.
//!
//! Run with `cargo bench -p coro-benches --bench sim`.

use coro::executor::sim::Simulation;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::time::Duration;

/// Requests per simulation.
const REQUESTS: u64 = 64;

/// One simulated run of the workload with `seed`: its task polls.
fn simulate(seed: u64) -> u64 {
    let mut sim = Simulation::new(seed, 2);
    let root = coro::Task::new(workload())
        .schedule_on(sim.handle())
        .start();
    sim.run_until(|| root.is_finished())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(root.is_finished());
    sim.polls()
}

async fn workload() -> u64 {
    let (tx, rx) = coro::channel::bounded::<u64>(8);
    let consumer = coro::spawn(async move {
        let mut sum = 0;
        while let Ok(value) = rx.recv().await {
            sum += value;
        }
        sum
    });
    let requests: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let tx = tx.clone();
            coro::spawn(async move {
                let dependency = coro::Task::new(async move {
                    coro::yield_now().await;
                    i
                })
                .shared();
                let (a, b, c) =
                    coro::collect_all!(dependency.clone(), dependency.clone(), async move {
                        coro::time::sleep(Duration::from_millis(i % 7))
                            .await
                            .unwrap();
                        1
                    })
                    .await;
                for _ in 0..3 {
                    coro::yield_now().await;
                }
                tx.send(a + b + c).await.unwrap();
            })
        })
        .collect();
    drop(tx);
    for request in requests {
        request.await.unwrap();
    }
    consumer.await.unwrap()
}

fn bench(c: &mut Criterion) {
    let polls = simulate(1);
    let mut group = c.benchmark_group("sim");
    group.throughput(Throughput::Elements(polls));
    group.bench_function("soak_mix", |b| b.iter(|| simulate(1)));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
