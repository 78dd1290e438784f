//! `coro::sim`: seeded scheduling on the real pool (same seed, same run; other seeds, other
//! interleavings), virtual time, failure reports that name the seed and replay it, the
//! determinism check, `spawn_blocking` as a step, and the test macro.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The text of a caught panic.
fn message(payload: Box<dyn std::any::Any + Send>) -> String {
    coro::executor::panic_message(payload.as_ref())
        .map(str::to_owned)
        .unwrap_or_default()
}

/// The full name of this file's test `name` in its test binary, as `--exact` wants it: the
/// module path below the binary's root, then the function's name.
fn test_name(name: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// The seed a failure report names.
fn reported_seed(report: &str) -> u64 {
    let at = report
        .find("CORO_SIM_SEED=")
        .unwrap_or_else(|| panic!("no seed in the report: {report}"))
        + "CORO_SIM_SEED=".len();
    let digits: String = report[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// Tasks, a channel, timers, yields and a select: what the log records is the order in which
/// those events happened, and the virtual time of each.
async fn mixed_workload() -> Vec<String> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = coro::time::Instant::now();
    let (tx, rx) = coro::channel::bounded::<u32>(2);
    let mut tasks = Vec::new();
    for producer in 0..4u32 {
        let (tx, log) = (tx.clone(), log.clone());
        tasks.push(coro::spawn(async move {
            for i in 0..3 {
                if (producer + i) % 2 == 0 {
                    coro::yield_now().await;
                }
                tx.send(producer * 10 + i).await.unwrap();
                log.lock()
                    .unwrap()
                    .push(format!("sent {}", producer * 10 + i));
            }
        }));
    }
    drop(tx);
    for sleeper in 0..3u64 {
        let log = log.clone();
        tasks.push(coro::spawn(async move {
            coro::time::sleep(Duration::from_millis(5 * (sleeper + 1)))
                .await
                .unwrap();
            log.lock()
                .unwrap()
                .push(format!("timer {sleeper} at {:?}", start.elapsed()));
        }));
    }
    let consumer = {
        let log = log.clone();
        coro::spawn(async move {
            while let Ok(value) = rx.recv().await {
                let got = coro::select! {
                    a = async { value } => format!("a{a}"),
                    b = async { value } => format!("b{b}"),
                };
                log.lock().unwrap().push(format!("received {got}"));
            }
        })
    };
    for task in tasks {
        task.await.unwrap();
    }
    consumer.await.unwrap();
    log.lock().unwrap().clone()
}

#[test]
fn the_same_seed_gives_the_same_event_log() {
    let run = |seed| {
        coro::sim::Builder::new()
            .seed(seed)
            .workers(3)
            .run(mixed_workload())
    };
    let first = run(5);
    assert_eq!(first.len(), 12 + 3 + 12);
    for _ in 0..3 {
        assert_eq!(run(5), first);
    }
}

#[test]
fn twenty_seeds_give_at_least_two_orders() {
    let orders: std::collections::BTreeSet<Vec<String>> = (0..20)
        .map(|seed| {
            coro::sim::Builder::new()
                .seed(seed)
                .workers(3)
                .run(mixed_workload())
        })
        .collect();
    assert!(orders.len() >= 2, "every seed ran the same order");
}

/// Two tasks each read a counter, yield, and write it back plus one: an update is lost when
/// the second reads between the first's read and write. The second starts a few yields later,
/// so a plain FIFO order (one worker, or the same choice every time) never loses one: only
/// another interleaving of the two workers does.
async fn lost_update() {
    let counter = Arc::new(Mutex::new(0u32));
    let add = |counter: Arc<Mutex<u32>>, delay: usize| async move {
        for _ in 0..delay {
            coro::yield_now().await;
        }
        let read = *counter.lock().unwrap();
        coro::yield_now().await;
        *counter.lock().unwrap() = read + 1;
    };
    let a = coro::spawn(add(counter.clone(), 0));
    let b = coro::spawn(add(counter.clone(), 2));
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(*counter.lock().unwrap(), 2, "lost an update");
}

#[test]
fn a_lost_update_is_found_within_100_seeds_and_its_seed_replays_it() {
    if std::env::var("CORO_SIM_SEED").is_ok() {
        return; // this test sets the variable for its child process itself
    }
    let failure = catch_unwind(|| coro::sim::run_seeds(0..100, lost_update))
        .expect_err("no seed of 100 found the lost update");
    let report = message(failure);
    assert!(report.contains("lost an update"), "{report}");
    assert!(report.contains("live task"), "{report}");
    let seed = reported_seed(&report);
    // The seed replays it, in code...
    let replay = catch_unwind(|| coro::sim::Builder::new().seed(seed).run(lost_update()));
    assert!(
        message(replay.expect_err("the seed did not replay the failure"))
            .contains("lost an update")
    );
    // ...and through the environment, in a fresh process running a range without that seed.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name("lost_update_under_the_seed_of_the_environment"),
        ])
        .args(["--ignored", "--nocapture", "--test-threads=1"])
        .env("CORO_SIM_SEED", seed.to_string())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(!child.status.success(), "the replay passed: {stderr}");
    assert!(
        stderr.contains(&format!("CORO_SIM_SEED={seed}")) && stderr.contains("lost an update"),
        "{stderr}"
    );
}

/// Run by the test above in a child process, with `CORO_SIM_SEED` set: the range holds no
/// failing seed, so it fails only by running the environment's.
#[test]
#[ignore = "run by a_lost_update_is_found_within_100_seeds_and_its_seed_replays_it"]
fn lost_update_under_the_seed_of_the_environment() {
    coro::sim::run_seeds(0..0, lost_update);
}

#[test]
fn an_hour_of_sleeps_by_1000_tasks_takes_under_a_second() {
    let wall = std::time::Instant::now();
    let virtual_elapsed = coro::sim::Builder::new().seed(1).workers(4).run(async {
        let start = coro::time::Instant::now();
        let sleepers: Vec<_> = (0..1000u64)
            .map(|i| {
                coro::spawn(async move {
                    // Staggered, so the clock jumps through many deadlines.
                    coro::time::sleep(Duration::from_millis(i)).await.unwrap();
                    for _ in 0..60 {
                        coro::time::sleep(Duration::from_secs(60)).await.unwrap();
                    }
                })
            })
            .collect();
        for sleeper in sleepers {
            sleeper.await.unwrap();
        }
        start.elapsed()
    });
    let wall = wall.elapsed();
    assert!(
        virtual_elapsed >= Duration::from_secs(3600),
        "{virtual_elapsed:?}"
    );
    assert!(wall < Duration::from_secs(1), "took {wall:?} of wall time");
}

#[test]
fn a_timeout_fires_in_virtual_time() {
    let outcome = coro::sim::Builder::new().seed(2).run(async {
        let slow = coro::time::sleep(Duration::from_secs(24 * 3600));
        coro::time::timeout(Duration::from_secs(30), slow).await
    });
    assert_eq!(outcome, Err(coro::time::Elapsed));
}

#[test]
fn the_determinism_check_catches_a_wake_from_an_outside_thread() {
    let failure = catch_unwind(|| {
        coro::sim::Builder::new()
            .seed(4)
            .check_determinism(true)
            .run_with(|| async {
                // A thread the test starts wakes a simulated task while the simulation runs
                // (another task keeps it busy until then): at a moment no seed decides.
                let woke = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let busy = {
                    let woke = woke.clone();
                    coro::spawn(async move {
                        while !woke.load(std::sync::atomic::Ordering::Acquire) {
                            coro::yield_now().await;
                        }
                    })
                };
                let mut started = false;
                std::future::poll_fn(|cx| {
                    if started {
                        return std::task::Poll::Ready(());
                    }
                    started = true;
                    let (waker, woke) = (cx.waker().clone(), woke.clone());
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(5));
                        waker.wake();
                        woke.store(true, std::sync::atomic::Ordering::Release);
                    });
                    std::task::Poll::Pending
                })
                .await;
                busy.await.unwrap();
            })
    });
    let report = message(failure.expect_err("the outside wake-up went unnoticed"));
    assert!(report.contains("outside the simulation"), "{report}");
    assert!(report.contains("CORO_SIM_SEED=4"), "{report}");
}

#[test]
fn the_determinism_check_names_the_first_differing_decision() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // State outside the seed that outlives a run (a global counter, as a cache or an id
    // generator would be) decides how often the task yields: the two runs of the check differ.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let failure = catch_unwind(|| {
        coro::sim::Builder::new()
            .seed(6)
            .check_determinism(true)
            .run_with(|| async {
                for _ in 0..RUNS.fetch_add(1, Ordering::Relaxed) {
                    coro::yield_now().await;
                }
            })
    });
    let report = message(failure.expect_err("two differently yielding runs compared equal"));
    assert!(report.contains("not deterministic"), "{report}");
    assert!(report.contains("First difference, decision #"), "{report}");
    assert!(
        report.contains("polled task #0"),
        "the shared decisions: {report}"
    );
}

#[test]
fn a_deadlock_fails_with_the_seed_and_the_stacks() {
    let failure = catch_unwind(|| {
        coro::sim::Builder::new().seed(8).run(async {
            let (_tx, rx) = coro::channel::bounded::<()>(1);
            coro::Task::new(async move { rx.recv().await })
                .named("waits forever")
                .await
        })
    });
    let report = message(failure.expect_err("the deadlock went unnoticed"));
    assert!(report.contains("deadlock"), "{report}");
    assert!(report.contains("CORO_SIM_SEED=8"), "{report}");
    assert!(report.contains("waits forever"), "{report}");
}

#[test]
fn a_task_that_yields_forever_is_reported() {
    let failure = catch_unwind(AssertUnwindSafe(|| {
        coro::sim::Builder::new()
            .seed(9)
            .max_steps(100_000)
            .run(async {
                coro::spawn(async {
                    loop {
                        coro::yield_now().await;
                    }
                })
                .await
                .unwrap();
            })
    }));
    let report = message(failure.expect_err("the livelock went unnoticed"));
    assert!(report.contains("scheduling steps"), "{report}");
    assert!(report.contains("CORO_SIM_SEED=9"), "{report}");
}

#[test]
fn a_poll_that_never_returns_is_reported_with_the_seed_and_the_stacks() {
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &test_name("stuck_in_one_poll"),
            "--ignored",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(
        !child.status.success(),
        "the stuck poll went unnoticed: {stderr}"
    );
    assert!(stderr.contains("never yields"), "{stderr}");
    assert!(stderr.contains("CORO_SIM_SEED=12"), "{stderr}");
    assert!(stderr.contains("spins [running]"), "{stderr}");
}

/// Run by the test above in a child process: a task loops without `.await`, which the
/// watchdog reports (aborting this process).
#[test]
#[ignore = "run by a_poll_that_never_returns_is_reported_with_the_seed_and_the_stacks"]
fn stuck_in_one_poll() {
    coro::sim::Builder::new()
        .seed(12)
        .poll_limit(Duration::from_millis(200))
        .run(async {
            coro::Task::new(async {
                let spins = std::sync::atomic::AtomicU64::new(0);
                loop {
                    spins.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    std::hint::spin_loop();
                }
            })
            .named("spins")
            .schedule_on(coro::current_executor().unwrap())
            .await
        });
}

#[test]
fn spawn_blocking_runs_as_a_step_on_the_simulation_thread() {
    let here = std::thread::current().id();
    let ran_on = coro::sim::Builder::new().seed(3).run(async {
        coro::spawn_blocking(|| std::thread::current().id())
            .await
            .unwrap()
    });
    assert_eq!(ran_on, here);
}

#[test]
fn buggify_and_random_u64_follow_the_seed() {
    let draws = |seed| {
        coro::sim::Builder::new().seed(seed).run(async {
            let faults: Vec<bool> = (0..64).map(|_| coro::sim::buggify(0.5)).collect();
            (faults, coro::sim::random_u64())
        })
    };
    assert_eq!(draws(10), draws(10));
    assert_ne!(draws(10), draws(11));
    assert!(!coro::sim::buggify(1.0));
    assert!(!coro::sim::is_simulated());
}

#[coro::test(sim)]
async fn the_test_macro_runs_a_simulation() {
    assert!(coro::sim::is_simulated());
    let start = coro::time::Instant::now();
    coro::time::sleep(Duration::from_secs(600)).await.unwrap();
    assert!(start.elapsed() >= Duration::from_secs(600));
}

#[coro::test(sim, seed = 0, worker_threads = 3)]
async fn the_test_macro_takes_a_seed() {
    assert!(coro::sim::is_simulated());
}

#[coro::test(sim, seeds = 0..10)]
async fn the_test_macro_takes_a_range_of_seeds() {
    let a = coro::spawn(async { 1 });
    assert_eq!(a.await.unwrap(), 1);
}
