//! A pool's own timers: a `Sleep` polled on a pool worker joins that pool's wheel, which the
//! pool's parked workers sleep on (no timer thread), and which busy workers and the monitor
//! fire. (What becomes of a pool's timer when the pool shuts down is in `timer.rs`.)
//!
//! Every test here runs its sleeps on pools only, so that the global `coro-timer` thread is
//! never started in this binary (the first test checks that).
#![cfg(not(any(loom, shuttle)))]

use coro_executor::ThreadPool;
use coro_executor::time::sleep;
use futures::executor::block_on;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The names of this process's threads.
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// Waits for `handle` with a bound, so that a lost timer fails the test instead of hanging it.
fn wait<T: Send + 'static>(what: &str, handle: coro_executor::JoinHandle<T>) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(block_on(handle));
    });
    rx.recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("{what}: still waiting after {LIMIT:?}"))
        .unwrap()
}

#[test]
fn many_timers_on_a_pool_fire_in_time_without_a_timer_thread() {
    let pool = ThreadPool::new(2).unwrap();
    let handles: Vec<_> = (0..1_000u64)
        .map(|i| {
            pool.spawn(async move {
                let wanted = ms(1 + i % 50);
                let start = Instant::now();
                sleep(wanted).await;
                (wanted, start.elapsed())
            })
        })
        .collect();
    for handle in handles {
        let (wanted, took) = wait("a sleep on the pool", handle);
        assert!(took >= wanted, "a sleep of {wanted:?} ended after {took:?}");
    }
    #[cfg(target_os = "linux")]
    {
        let names = thread_names();
        assert!(
            !names.iter().any(|n| n == "coro-timer"),
            "a pool's timers started the global timer thread: {names:?}"
        );
    }
}

#[test]
fn an_earlier_timer_wakes_the_worker_sleeping_until_a_later_one() {
    for workers in [1, 2] {
        let pool = ThreadPool::new(workers).unwrap();
        // A parked worker keeps the timers, sleeping until this one.
        let late = pool.spawn(sleep(Duration::from_secs(3600)));
        std::thread::sleep(ms(30));
        let early = pool.spawn(async {
            let start = Instant::now();
            sleep(ms(20)).await;
            start.elapsed()
        });
        let took = wait("the early sleep", early);
        assert!(
            took >= ms(20) && took < ms(1_000),
            "{workers} worker(s): a 20 ms sleep took {took:?} behind a one-hour one"
        );
        drop(late);
    }
}

#[test]
fn timers_fire_while_every_worker_is_busy() {
    let pool = ThreadPool::new(1).unwrap();
    // The only worker never idles: it yields for 400 ms (its global-queue ticks fire timers).
    let busy = pool.spawn(async {
        let start = Instant::now();
        while start.elapsed() < ms(400) {
            coro_executor::yield_now().await;
        }
    });
    let sleeper = pool.spawn(async {
        let start = Instant::now();
        sleep(ms(10)).await;
        start.elapsed()
    });
    let took = wait("a sleep beside a yielding task", sleeper);
    assert!(took < ms(300), "a 10 ms sleep took {took:?} on a busy pool");
    wait("the yielding task", busy);

    // The only worker stays in one poll for 400 ms: the monitor fires the timer and hands the
    // woken task to a helper.
    // The handle comes back as the output, to be awaited outside the blocked task.
    #[allow(clippy::async_yields_async)]
    let blocked = pool.spawn(async {
        std::thread::sleep(ms(50));
        let sleeper = coro_executor::spawn(async {
            let start = Instant::now();
            sleep(ms(10)).await;
            start.elapsed()
        });
        std::thread::sleep(ms(400));
        sleeper
    });
    let sleeper = wait("the blocking task", blocked);
    let took = wait("a sleep behind a blocking poll", sleeper);
    assert!(
        took >= ms(10) && took < ms(300),
        "a 10 ms sleep took {took:?} beside a poll blocking the only worker for 400 ms"
    );
}
