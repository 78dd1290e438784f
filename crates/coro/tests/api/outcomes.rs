//! folly's outcome model: `Task::settle` (co_awaitTry),
//! `collect_all_settled!` (collectAllTry) and `collect_all_windowed_settled`
//! (collectAllTryWindowed): every child's outcome is kept, a panic is a value, and nothing is
//! leaked or left running.

use crate::support;

use coro::cancel::CancellationSource;
use coro::time::sleep;
use coro::{Task, ThreadPool, block_wait, collect_all_settled, collect_all_windowed_settled};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};
use support::{CountDrop, ms};

#[test]
fn settle_turns_a_panic_into_an_error_with_its_message() {
    let task = Task::new(async {
        if true {
            panic!("backend down: {}", 503);
        }
        1u32
    });
    let error = block_wait(task.settle()).unwrap_err();
    assert!(error.is_panic());
    assert_eq!(error.to_string(), "task panicked: backend down: 503");
}

#[test]
fn settle_gives_the_value_of_a_task_that_succeeds() {
    assert_eq!(
        block_wait(Task::new(async { 40 + 2 }).settle()).unwrap(),
        42
    );
}

#[test]
fn a_settled_panic_does_not_unwind_through_the_awaiter() {
    // Without settle, the awaiter would unwind here and never reach the line after.
    let reached = block_wait(Task::new(async {
        let outcome = Task::new(async { panic!("inner") as u32 }).settle().await;
        (outcome.is_err(), "after the await")
    }));
    assert_eq!(reached, (true, "after the await"));
}

#[test]
fn settle_is_lazy_and_keeps_the_tasks_frame() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let settled = Task::new(async move {
        r.fetch_add(1, SeqCst);
        coro::trace::current_stack()
            .frames()
            .iter()
            .map(|f| f.name().to_owned())
            .collect::<Vec<_>>()
    })
    .named("load_profile")
    .settle();
    std::thread::sleep(ms(10));
    assert_eq!(ran.load(SeqCst), 0, "settle started the task");
    let names = block_wait(settled).unwrap();
    assert_eq!(ran.load(SeqCst), 1);
    // One frame for the settled task, named as the task: settle adds no frame of its own.
    assert_eq!(names, ["load_profile"]);
}

#[test]
fn settle_keeps_the_tasks_own_cancellation_token() {
    let source = CancellationSource::new();
    source.request_cancellation();
    let seen = block_wait(
        Task::new(async { coro::current_cancellation_token().is_cancellation_requested() })
            .with_cancellation(source.token())
            .settle(),
    );
    assert!(seen.unwrap(), "the settled task lost its own token");
}

#[test]
fn dropping_an_unfinished_settled_task_drops_its_future() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = CountDrop(dropped.clone());
    let settled = Task::new(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
    })
    .settle();
    let pool = ThreadPool::new(1).unwrap();
    let handle = settled.schedule_on(&pool).start();
    std::thread::sleep(ms(20));
    handle.cancel();
    let start = Instant::now();
    while dropped.load(SeqCst) == 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(ms(1));
    }
    assert_eq!(
        dropped.load(SeqCst),
        1,
        "the future was leaked or dropped twice"
    );
}

#[test]
fn collect_all_settled_keeps_every_outcome_and_cancels_nobody() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let (g0, g1, g2) = (
        CountDrop(dropped.clone()),
        CountDrop(dropped.clone()),
        CountDrop(dropped.clone()),
    );
    let pool = ThreadPool::new(2).unwrap();
    let (a, b, c) = block_wait(
        Task::new(async move {
            collect_all_settled!(
                async move {
                    let _g = g0;
                    panic!("child 0 failed");
                    #[allow(unreachable_code)]
                    0u32
                },
                async move {
                    let _g = g1;
                    // A sibling's panic cancels nothing: this sleep runs to its end.
                    sleep(ms(30))
                        .await
                        .expect("a settled sibling was cancelled");
                    assert!(!coro::current_cancellation_token().is_cancellation_requested());
                    "slept"
                },
                async move {
                    let _g = g2;
                    Some(2u8)
                },
            )
            .await
        })
        .schedule_on(&pool),
    );
    assert!(a.unwrap_err().to_string().contains("child 0 failed"));
    assert_eq!(b.unwrap(), "slept");
    assert_eq!(c.unwrap(), Some(2));
    assert_eq!(dropped.load(SeqCst), 3, "every child dropped exactly once");
}

#[test]
fn dropping_a_settled_collect_drops_its_unfinished_children() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let (g0, g1) = (CountDrop(dropped.clone()), CountDrop(dropped.clone()));
    let pool = ThreadPool::new(2).unwrap();
    let handle = Task::new(async move {
        collect_all_settled!(
            async move {
                let _g = g0;
                std::future::pending::<()>().await
            },
            async move {
                let _g = g1;
                std::future::pending::<()>().await
            },
        )
        .await
    })
    .schedule_on(&pool)
    .start();
    std::thread::sleep(ms(20));
    handle.cancel();
    let start = Instant::now();
    while dropped.load(SeqCst) < 2 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(ms(1));
    }
    assert_eq!(dropped.load(SeqCst), 2, "an unfinished child was orphaned");
}

#[test]
fn windowed_settled_runs_every_item_within_the_window_and_reports_each_outcome() {
    let pool = ThreadPool::new(4).unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let high = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let children = (0..12u64).map(|i| {
        let (running, high) = (running.clone(), high.clone());
        let guard = CountDrop(dropped.clone());
        async move {
            let _guard = guard;
            let now = running.fetch_add(1, SeqCst) + 1;
            high.fetch_max(now, SeqCst);
            // Not cancelled by the failures: every sleep runs to its end.
            sleep(ms(2 + i % 3))
                .await
                .expect("a settled window cancelled a child");
            running.fetch_sub(1, SeqCst);
            assert!(i % 4 != 1, "item {i} fails");
            i
        }
    });
    let outcomes = block_wait(collect_all_windowed_settled(children, 3).schedule_on(&pool));
    assert_eq!(outcomes.len(), 12);
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Ok(value) => assert_eq!(*value, i as u64),
            Err(error) => {
                assert_eq!(i % 4, 1, "item {i} should have succeeded: {error}");
                assert!(error.to_string().contains(&format!("item {i} fails")));
            }
        }
    }
    assert_eq!(outcomes.iter().filter(|o| o.is_err()).count(), 3);
    assert!(high.load(SeqCst) <= 3, "the window was exceeded");
    assert_eq!(
        dropped.load(SeqCst),
        12,
        "every item ran and was dropped once"
    );
}

#[test]
fn windowed_settled_panics_on_a_zero_window_with_a_helpful_message() {
    let payload =
        std::panic::catch_unwind(|| collect_all_windowed_settled([async { 1 }], 0)).unwrap_err();
    let message = support::panic_message(&*payload);
    assert!(
        message.contains("collect_all_windowed_settled: max_in_flight is 0"),
        "{message}"
    );
}
