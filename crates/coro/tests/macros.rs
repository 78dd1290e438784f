//! The entry-point macros: `#[coro::test]`, `#[coro::task]`, and misuse as compile
//! errors (trybuild cases in tests/ui; `select_*.rs` are `coro::select!`'s, whose behaviour is
//! tested in tests/api/select.rs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[coro::task]
async fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[coro::task]
async fn frame_name() -> String {
    coro::trace::current_stack().frames()[0].name().to_owned()
}

#[coro::task]
async fn set(flag: Arc<AtomicBool>) {
    flag.store(true, Ordering::SeqCst);
}

#[coro::test]
async fn test_runs_the_body_on_a_fresh_pool() {
    let name = std::thread::current().name().unwrap().to_owned();
    assert!(name.starts_with("coro-worker-"), "{name}");
    assert!(coro::current_executor().unwrap().is_thread_pool());
}

#[coro::test(worker_threads = 3)]
async fn test_honours_worker_threads() {
    let handles: Vec<_> = (0..300)
        .map(|_| {
            coro::spawn(async {
                let end = std::time::Instant::now() + std::time::Duration::from_micros(200);
                while std::time::Instant::now() < end {}
                std::thread::current().name().unwrap().to_owned()
            })
        })
        .collect();
    let mut names = std::collections::HashSet::new();
    for handle in handles {
        names.insert(handle.await.unwrap());
    }
    // On a loaded machine a 200 µs poll can outlast the handoff threshold in wall time, and a
    // handoff helper (`coro-worker-helper-N`) may then run some tasks: only workers count.
    names.retain(|n| !n.contains("-helper-"));
    let allowed = ["coro-worker-0", "coro-worker-1", "coro-worker-2"];
    assert!(
        names.iter().all(|n| allowed.contains(&n.as_str())),
        "{names:?}"
    );
    assert!(
        names.len() >= 2,
        "work never spread over the workers: {names:?}"
    );
}

#[coro::test]
#[should_panic(expected = "expected failure")]
async fn test_composes_with_should_panic() {
    panic!("expected failure");
}

#[coro::test]
async fn task_functions_are_lazy_named_tasks() {
    let flag = Arc::new(AtomicBool::new(false));
    let task = set(flag.clone());
    assert!(
        !flag.load(Ordering::SeqCst),
        "#[coro::task] ran its body before being awaited"
    );
    task.await;
    assert!(flag.load(Ordering::SeqCst));
    assert_eq!(add(2, 3).await, 5);
    assert_eq!(frame_name().await, "frame_name");
}

#[test]
fn task_arguments_are_captured_by_value_at_the_call() {
    let mut x = 1;
    let task = add(x, 1);
    x = 100;
    assert_eq!(coro::block_wait(task), 2);
    assert_eq!(x, 100);
}

#[test]
fn misuse_is_a_compile_error_naming_the_problem() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}

#[coro::test(timeout_ms = 5000)]
async fn a_test_within_its_timeout_passes() {
    coro::executor::time::sleep(std::time::Duration::from_millis(5)).await;
}

#[coro::test(timeout_ms = 50)]
#[should_panic(expected = "test timed out after 50 ms")]
async fn a_test_past_its_timeout_panics_saying_so() {
    coro::executor::time::sleep(std::time::Duration::from_secs(30)).await;
}

#[coro::test(timeout_ms = 50, worker_threads = 1)]
#[should_panic(expected = "test timed out after 50 ms")]
async fn a_test_stuck_in_a_busy_loop_still_times_out() {
    loop {
        std::hint::spin_loop();
    }
}
