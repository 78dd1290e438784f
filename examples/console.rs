//! The live task console (coro-console) over a small workload: request handlers sharing a
//! cache behind a lock, a producer/consumer pipeline, timers, and (with `--plant`) a deadlock
//! and a stuck worker planted on purpose, to see what the console says about them.
//!
//! ```text
//! cargo run --example console -- [--addr 127.0.0.1:6669] [--secs 60] [--plant]
//! # then open http://127.0.0.1:6669/ , or curl /tasks.txt, /tasks.json, /metrics
//! ```
//! `.ci/browser` runs it and checks the page in a headless Chromium.

use coro::sync::Mutex;
use coro::time::sleep;
use coro::{Task, ThreadPool};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    addr: String,
    secs: u64,
    plant: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        addr: "127.0.0.1:6669".into(),
        secs: 60,
        plant: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--addr" => args.addr = it.next().ok_or("--addr needs host:port")?,
            "--secs" => {
                args.secs = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| (1..=3600).contains(s))
                    .ok_or("--secs needs a number of seconds from 1 to 3600")?;
            }
            "--plant" => args.plant = true,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

fn main() {
    let args = parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}\nusage: console [--addr HOST:PORT] [--secs N] [--plant]");
        std::process::exit(2);
    });
    let console = coro_console::spawn(&*args.addr).unwrap_or_else(|err| {
        eprintln!("console: cannot listen on {}: {err}", args.addr);
        std::process::exit(1);
    });
    println!("console on http://{}/", console.local_addr());
    let pool = ThreadPool::builder()
        .thread_name("app")
        .worker_threads(2)
        .stall_threshold(Duration::from_millis(100))
        .on_stall(|_| {})
        .build()
        .expect("the app's pool");
    let until = Instant::now() + Duration::from_secs(args.secs);
    let cache = Arc::new(Mutex::new(0u64));
    let mut handlers = Vec::new();
    for i in 0..4 {
        let cache = cache.clone();
        handlers.push(
            Task::new(async move {
                while Instant::now() < until {
                    let hits = {
                        let mut hits = cache.lock().await;
                        *hits += 1;
                        *hits
                    };
                    let pause = Duration::from_millis(20 + (hits % 7) * 10 + i);
                    sleep(pause).await.unwrap();
                }
            })
            .named(format!("handler-{i}"))
            .schedule_on(&pool)
            .start(),
        );
    }
    handlers.push(
        Task::new(async move {
            let (tx, rx) = coro::channel::bounded::<u64>(4);
            let consumer = coro::spawn(
                Task::new(async move {
                    let mut sum = 0;
                    while let Ok(v) = rx.recv().await {
                        sum += v;
                    }
                    sum
                })
                .named("pipeline-consumer"),
            );
            let mut n = 0;
            while Instant::now() < until {
                tx.send(n).await.unwrap();
                n += 1;
                sleep(Duration::from_millis(5)).await.unwrap();
            }
            drop(tx);
            consumer.await.unwrap();
        })
        .named("pipeline-producer")
        .schedule_on(&pool)
        .start(),
    );
    if args.plant {
        plant(&pool, until);
    }
    for handler in handlers {
        coro::block_wait(handler).unwrap();
    }
    drop(console);
    // The planted tasks never finish: shutting the pool down drops them.
    pool.shutdown();
}

/// A deadlock (two tasks taking two locks in opposite orders) and a poll that blocks its
/// worker for a while.
fn plant(pool: &ThreadPool, until: Instant) {
    let first = Arc::new(Mutex::new(()));
    let second = Arc::new(Mutex::new(()));
    let both = Arc::new(coro::sync::Barrier::new(2));
    for (name, a, b) in [
        ("transfer-a-to-b", first.clone(), second.clone()),
        ("transfer-b-to-a", second, first),
    ] {
        let both = both.clone();
        drop(
            Task::new(async move {
                let _a = a.lock().await;
                both.wait().await;
                let _b = b.lock().await;
            })
            .named(name)
            .schedule_on(pool)
            .start(),
        );
    }
    drop(
        Task::new(async move {
            // A bug planted on purpose: a blocking call inside a task.
            let left = until.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_secs(30)));
        })
        .named("blocking-report")
        .schedule_on(pool)
        .start(),
    );
}
