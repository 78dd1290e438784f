//! Workloads whose instruction counts `benches/tracing_cost.py --instructions` compares between
//! the traced build and the `--cfg coro_untraced` one, under valgrind.
//!
//! Usage: `tracing_instructions SHAPE ROUNDS [pool]`. The rounds run one after another inside
//! one task, so that nothing waits between them and the count is the same from run to run:
//! what tracing adds per operation, without the scheduling noise that wall-clock ratios carry
//! on a 2-core machine.
//!
//! - With `pool`, that task runs on a one-worker `ThreadPool`, which is what the executor
//!   benches run on: every spawn and wake-up goes through the worker's run queue and next slot.
//!   The main thread only waits in `block_wait`, and the worker is never idle until the end.
//! - Without it, the task runs inside `coro::block_wait` on the calling thread: the same code
//!   above the executor, under `block_wait`'s own queue.
//!
//! | shape | one round | operations |
//! |---|---|---|
//! | `spawn` | `coro::spawn` 1,000 empty tasks, then await each handle | 1,000 spawns |
//! | `yield` | spawn 100 tasks that each `coro::yield_now()` 100 times, await them | 10,000 polls |
//! | `chain` | await a chain of 1,000 nested `Task`s that completes synchronously | 1,000 levels |
//! | `chain_suspending` | the same chain, its innermost level yields once | 1,000 levels |
//! | `engine_spawn` | `spawn`, as `spawn` does, on the executor itself (plain futures) | 1,000 spawns |
//! | `engine_yield` | `yield`, as `yield` does, on the executor itself (plain futures) | 10,000 polls |
//! | `boxed_chain` | `chain` with `Pin<Box<dyn Future>>` levels: the reference a Task level is measured against | 1,000 levels |
//! | `fanout` | spawn 1,000 tasks that each await one `SharedPromise`, fulfil it, await them (`user_path`'s `fanout_10k` in small: each task suspends once) | 1,000 tasks |
//!
//! With `CORO_STATS=1` in the environment, the run holds `collect_stats()` (the per-poll
//! statistics of an attached console on): with and without it, the counts tell what the
//! statistics cost per operation when on.
//!
//! The `engine_` shapes go through `ExecutorHandle::spawn`, without coro's Task layer: what
//! tracing costs the executor alone (task states and the current task; the task list is there
//! in both builds, as dumps and metrics need it).

use coro::Task;

/// Operations per round, by shape (the unit `tracing_cost.py` divides by).
const SHAPES: [(&str, u64); 8] = [
    ("spawn", 1_000),
    ("yield", 10_000),
    ("chain", 1_000),
    ("chain_suspending", 1_000),
    ("engine_spawn", 1_000),
    ("engine_yield", 10_000),
    ("boxed_chain", 1_000),
    ("fanout", 1_000),
];

/// `chain` with boxed futures for levels (what `user_path`'s `task_chain` runs on the peers).
fn boxed_chain(depth: u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = u32> + Send>> {
    Box::pin(async move {
        if depth == 0 {
            0
        } else {
            boxed_chain(depth - 1).await + 1
        }
    })
}

fn chain(depth: u32, suspend: bool) -> Task<u32> {
    Task::new(async move {
        if depth == 0 {
            if suspend {
                coro::yield_now().await;
            }
            0
        } else {
            chain(depth - 1, suspend).await + 1
        }
    })
}

async fn round(shape: &str) {
    match shape {
        "spawn" => {
            let handles: Vec<_> = (0..1_000).map(|_| coro::spawn(async {})).collect();
            for handle in handles {
                handle.await.expect("an empty task cannot fail");
            }
        }
        "yield" => {
            let handles: Vec<_> = (0..100)
                .map(|_| {
                    coro::spawn(async {
                        for _ in 0..100 {
                            coro::yield_now().await;
                        }
                    })
                })
                .collect();
            for handle in handles {
                handle.await.expect("a yielding task cannot fail");
            }
        }
        "engine_spawn" => {
            let executor = coro::current_executor().expect("inside block_wait");
            let handles: Vec<_> = (0..1_000).map(|_| executor.spawn(async {})).collect();
            for handle in handles {
                handle.await.expect("an empty task cannot fail");
            }
        }
        "engine_yield" => {
            let executor = coro::current_executor().expect("inside block_wait");
            let handles: Vec<_> = (0..100)
                .map(|_| {
                    executor.spawn(async {
                        for _ in 0..100 {
                            coro::executor::yield_now().await;
                        }
                    })
                })
                .collect();
            for handle in handles {
                handle.await.expect("a yielding task cannot fail");
            }
        }
        "fanout" => {
            let promise = coro::sync::SharedPromise::<u64>::new();
            let handles: Vec<_> = (0..1_000)
                .map(|_| {
                    let value = promise.get_future();
                    coro::spawn(async move { value.await.expect("fulfilled below") })
                })
                .collect();
            // Every waiter runs (and suspends) before the value is set: the worker polls them
            // while this task waits for the first.
            coro::yield_now().await;
            promise.set_value(1).expect("fulfilled once");
            let mut sum = 0;
            for handle in handles {
                sum += handle.await.expect("a waiter cannot fail");
            }
            assert_eq!(sum, 1_000);
        }
        "boxed_chain" => {
            assert_eq!(boxed_chain(999).await, 999);
        }
        "chain" | "chain_suspending" => {
            let levels = chain(999, shape == "chain_suspending").await;
            assert_eq!(levels, 999);
        }
        _ => unreachable!("checked in main"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = || -> ! {
        let names: Vec<_> = SHAPES.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "usage: tracing_instructions SHAPE ROUNDS [pool], SHAPE one of {}",
            names.join(", ")
        );
        std::process::exit(2)
    };
    let shape = args.next().unwrap_or_else(|| usage());
    if !SHAPES.iter().any(|(name, _)| *name == shape) {
        usage();
    }
    let rounds: u32 = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| usage());
    let on_pool = match args.next().as_deref() {
        None => false,
        Some("pool") => true,
        Some(_) => usage(),
    };
    let _stats = (std::env::var_os("CORO_STATS").as_deref() == Some("1".as_ref()))
        .then(coro::executor::trace::collect_stats);
    let task = Task::new(async move {
        for _ in 0..rounds {
            round(&shape).await;
        }
    });
    if on_pool {
        let pool = coro::ThreadPool::new(1).expect("a one-worker pool");
        coro::block_wait(task.schedule_on(&pool));
    } else {
        coro::block_wait(task);
    }
}
