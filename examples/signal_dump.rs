//! Go-style task dumps: `kill -QUIT <pid>` (or Ctrl-\ in a terminal) prints every live task to
//! stderr, and the service keeps running.
//!
//! Two requests are stuck: each `handle_request` awaits, under `collect_all!`, a
//! `wait_for_config` that waits for a `Baton` nobody posts yet. Once they are parked the program
//! installs `coro::trace::dump_on_signal`, prints `ready`, and serves stdin: each line `ping` is
//! answered `pong N` by a task on the pool, which shows the workers still run after a dump. When
//! stdin is closed (Ctrl-D), or after 20 s, it posts the config, the requests finish, and it
//! exits.
//!
//! Run it with `cargo run --example signal_dump`, then from another terminal
//! `kill -QUIT <pid>` (the pid is on stderr). `examples/tests/signal_dump.rs` drives it so.

use coro::sync::Baton;
use coro::time::sleep;
use coro::trace::TaskState;
use std::io::{self, BufRead, Write};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long the program serves at most, if stdin stays open.
const RUN_FOR: Duration = Duration::from_secs(20);

#[coro::task]
async fn load_profile(user: u32) -> String {
    sleep(Duration::from_millis(1)).await.unwrap();
    format!("user{user}")
}

#[coro::task]
async fn wait_for_config(config: Arc<Baton>) -> &'static str {
    config.wait().await; // stuck here until main posts the config
    "config v1"
}

#[coro::task]
async fn handle_request(user: u32, config: Arc<Baton>) -> String {
    let (profile, config) =
        coro::collect_all!(load_profile(user), wait_for_config(config.clone())).await;
    format!("{profile} served with {config}")
}

#[coro::task]
async fn answer_ping(n: u64) -> String {
    format!("pong {n}")
}

/// Waits (at most 10 s) until `n` tasks are suspended in `wait_for_config`.
fn wait_until_parked(n: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let dump = coro::trace::dump_all();
        let parked = dump
            .tasks()
            .iter()
            .filter(|task| {
                task.state() == TaskState::Suspended
                    && task.frames().first().map(|f| f.name()) == Some("wait_for_config")
            })
            .count();
        if parked == n {
            return;
        }
        assert!(Instant::now() < until, "the requests never parked:\n{dump}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn main() -> io::Result<()> {
    coro::trace::install_panic_hook();
    let pool = coro::ThreadPool::new(2).expect("a pool of 2 workers");
    let config = Arc::new(Baton::new());
    let requests: Vec<_> = (1..=2)
        .map(|user| {
            handle_request(user, config.clone())
                .schedule_on(&pool)
                .start()
        })
        .collect();
    wait_until_parked(requests.len());

    // Kept until main returns: each SIGQUIT meanwhile writes the tasks to stderr.
    let dump = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL)?;
    eprintln!(
        "signal_dump: pid {}: `kill -{} {}` dumps the tasks",
        std::process::id(),
        dump.signal(),
        std::process::id()
    );
    let mut stdout = io::stdout();
    writeln!(stdout, "ready")?;
    stdout.flush()?;

    // Stdin is read on its own thread, so main can also stop when RUN_FOR has passed.
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + RUN_FOR;
    let mut pings = 0;
    loop {
        match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.trim() == "ping" => {
                pings += 1;
                let answer = coro::block_wait(answer_ping(pings).schedule_on(&pool));
                writeln!(stdout, "{answer}")?;
                stdout.flush()?;
            }
            Ok(_) => {}
            Err(RecvTimeoutError::Disconnected) => break, // stdin closed
            Err(RecvTimeoutError::Timeout) => break,
        }
    }

    config.post();
    for request in requests {
        let answer = coro::block_wait(request).expect("the request");
        writeln!(stdout, "{answer}")?;
    }
    drop(dump);
    Ok(())
}
