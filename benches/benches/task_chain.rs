//! The cost of a `coro::Task` level: a chain of nested tasks that complete synchronously,
//! against the same chain of plain boxed futures (`Pin<Box<dyn Future + Send>>`), the cheapest
//! way to get a type-erased, recursive async call in Rust.
//!
//! Each iteration builds a chain `DEPTH` levels deep (each level awaits the next, then adds one)
//! and awaits it with `futures::executor::block_on`, so the time per iteration divided by
//! `DEPTH` is the cost per level: creating, polling and dropping one level, frame included.
//! `task_chain/coro_task_suspending` makes the innermost level yield once, so that every level
//! is polled twice and the suspension publishes the stack, as in a real wait.
//!
//! Run with `cargo bench -p coro-benches --bench task_chain`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::executor::block_on;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;

/// Levels in each chain.
const DEPTH: u64 = 1_000;

type BoxedFuture = Pin<Box<dyn Future<Output = u64> + Send>>;

fn boxed_chain(depth: u64) -> BoxedFuture {
    Box::pin(async move {
        if depth == 0 {
            black_box(0)
        } else {
            boxed_chain(depth - 1).await + 1
        }
    })
}

fn task_chain(depth: u64, suspend: bool) -> coro::Task<u64> {
    coro::Task::new(async move {
        if depth == 0 {
            if suspend {
                coro::yield_now().await;
            }
            black_box(0)
        } else {
            task_chain(depth - 1, suspend).await + 1
        }
    })
}

fn chains(c: &mut Criterion) {
    let mut group = c.benchmark_group("task_chain");
    group.throughput(Throughput::Elements(DEPTH));
    group.bench_function("boxed_future", |b| b.iter(|| block_on(boxed_chain(DEPTH))));
    group.bench_function("coro_task", |b| {
        b.iter(|| block_on(task_chain(DEPTH, false)))
    });
    group.bench_function("coro_task_suspending", |b| {
        b.iter(|| block_on(task_chain(DEPTH, true)))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(30)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = config();
    targets = chains
}
criterion_main!(benches);
