//! Collect: collect_any, try_collect_any, collect_any_no_discard and
//! collect_all_unordered.

use coro::cancel::CancellationToken;
use coro::time::{Elapsed, sleep, timeout};
use coro::{
    Task, ThreadPool, block_wait, collect_all_unordered, collect_any, collect_any_no_discard,
    try_collect_any,
};
use futures::{FutureExt, StreamExt};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{BoxFuture, CountDrop, SetOnDrop, ms, panic_message};

fn flags(n: usize) -> Vec<Arc<AtomicBool>> {
    (0..n).map(|_| Arc::new(AtomicBool::new(false))).collect()
}

fn all_set(flags: &[Arc<AtomicBool>]) -> Vec<bool> {
    flags.iter().map(|f| f.load(SeqCst)).collect()
}

/// Waits up to 5 s for `cond`.
fn eventually(cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(ms(1));
    }
    cond()
}

/// A sleep that ignores cancellation: it runs under a token that is never cancelled.
async fn uncancellable_sleep(duration: Duration) {
    Task::new(sleep(duration))
        .with_cancellation(CancellationToken::none())
        .await
        .unwrap();
}

#[test]
fn collect_any_returns_the_fastest_after_cancelling_and_awaiting_the_rest() {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = flags(3);
    let cancelled = Arc::new(AtomicUsize::new(0));
    let children = [100u64, 10, 60_000]
        .into_iter()
        .zip(&dropped)
        .map(|(n, flag)| {
            let guard = SetOnDrop(flag.clone());
            let cancelled = cancelled.clone();
            async move {
                let _guard = guard;
                if sleep(ms(n)).await.is_err() {
                    cancelled.fetch_add(1, SeqCst);
                }
                n
            }
        });
    let collect = collect_any(children);
    let observed = dropped.clone();
    let start = Instant::now();
    let (winner, dropped_when_returned) = block_wait(
        Task::new(async move {
            let winner = collect.await;
            (winner, all_set(&observed))
        })
        .schedule_on(&pool),
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(winner, (1, 10));
    assert_eq!(
        dropped_when_returned, [true; 3],
        "collect_any returned before every child was awaited"
    );
    assert_eq!(
        cancelled.load(SeqCst),
        2,
        "the slower children were not cancelled"
    );
}

#[test]
fn collect_any_is_lazy() {
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let collect = collect_any([async move {
        flag.store(true, SeqCst);
        7
    }]);
    std::thread::sleep(ms(20));
    assert!(
        !started.load(SeqCst),
        "a child ran before the collect was awaited"
    );
    assert_eq!(block_wait(collect), (0, 7));
    assert!(started.load(SeqCst));
}

#[test]
fn collect_any_resumes_the_first_finishers_panic_after_awaiting_the_rest() {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = flags(3);
    let children = (0..3u64).zip(dropped.clone()).map(|(i, flag)| {
        let guard = SetOnDrop(flag);
        async move {
            let _guard = guard;
            match i {
                0 => {
                    let _ = sleep(ms(60_000)).await;
                }
                1 => {
                    sleep(ms(10)).await.unwrap();
                    panic!("child 1");
                }
                _ => {
                    let _ = sleep(ms(100)).await;
                }
            }
            i
        }
    });
    let observed = dropped.clone();
    let start = Instant::now();
    let (outcome, dropped_when_resumed) = block_wait(
        Task::new(async move {
            let outcome = AssertUnwindSafe(collect_any(children)).catch_unwind().await;
            (outcome, all_set(&observed))
        })
        .schedule_on(&pool),
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(panic_message(&*outcome.unwrap_err()), "child 1");
    assert_eq!(dropped_when_resumed, [true; 3]);
}

#[test]
fn empty_input_panics_at_the_call_with_a_helpful_message() {
    let message = |f: fn()| panic_message(&*catch_unwind(f).unwrap_err());
    let any = message(|| drop(collect_any(Vec::<BoxFuture<u32>>::new())));
    assert!(
        any.starts_with("collect_any: the input is empty") && any.contains("pass at least one"),
        "{any}"
    );
    let try_any = message(|| drop(try_collect_any(Vec::<BoxFuture<Result<u32, ()>>>::new())));
    assert!(
        try_any.starts_with("try_collect_any: the input is empty"),
        "{try_any}"
    );
    let no_discard = message(|| drop(collect_any_no_discard(Vec::<BoxFuture<u32>>::new())));
    assert!(
        no_discard.starts_with("collect_any_no_discard: the input is empty"),
        "{no_discard}"
    );
}

#[test]
fn try_collect_any_first_ok_wins_over_an_earlier_err() {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = flags(3);
    let children = (0..3u64).zip(dropped.clone()).map(|(i, flag)| {
        let guard = SetOnDrop(flag);
        async move {
            let _guard = guard;
            match i {
                0 => Err(format!("child {i} failed")),
                1 => {
                    sleep(ms(20)).await.unwrap();
                    Ok(i)
                }
                _ => {
                    sleep(ms(60_000)).await.map_err(|e| e.to_string())?;
                    Ok(i)
                }
            }
        }
    });
    let observed = dropped.clone();
    let start = Instant::now();
    let (outcome, dropped_when_returned) = block_wait(
        Task::new(async move {
            let outcome = try_collect_any(children).await;
            (outcome, all_set(&observed))
        })
        .schedule_on(&pool),
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(outcome, Ok((1, 1)));
    assert_eq!(dropped_when_returned, [true; 3]);
}

#[test]
fn try_collect_any_returns_the_last_err_in_time_if_all_fail() {
    // Child 1 fails first, child 2 is last in input order, child 0 fails last in time.
    let children = [80u64, 5, 40].map(|n| async move {
        sleep(ms(n)).await.unwrap();
        Err::<(), _>(n)
    });
    assert_eq!(block_wait(try_collect_any(children)), Err(80));
}

#[test]
fn try_collect_any_resumes_a_panic_that_finishes_first() {
    let children = (0..3u64).map(|i| async move {
        match i {
            0 => {
                sleep(ms(10)).await.unwrap();
                panic!("child 0");
            }
            1 => {
                let _ = sleep(ms(200)).await;
                Ok::<_, ()>(i)
            }
            _ => {
                sleep(ms(60_000)).await.map_err(|_| ())?;
                Ok(i)
            }
        }
    });
    let start = Instant::now();
    let outcome = block_wait(AssertUnwindSafe(try_collect_any(children)).catch_unwind());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(panic_message(&*outcome.unwrap_err()), "child 0");
}

#[test]
fn collect_any_no_discard_returns_one_outcome_per_input_in_order() {
    let pool = ThreadPool::new(2).unwrap();
    let children = (0..4u64).map(|i| -> BoxFuture<Option<u64>> {
        Box::pin(async move {
            match i {
                // Cancelled: its sleep returns Err(Cancelled), so it returns None.
                0 => sleep(ms(60_000)).await.ok().map(|()| i),
                // The first finisher.
                1 => {
                    sleep(ms(10)).await.unwrap();
                    Some(i)
                }
                // Ignores cancellation and completes anyway.
                2 => {
                    uncancellable_sleep(ms(50)).await;
                    Some(i)
                }
                // Panics after the first finisher: kept, in its own place.
                _ => {
                    uncancellable_sleep(ms(30)).await;
                    panic!("child 3");
                }
            }
        })
    });
    let start = Instant::now();
    let outcomes = block_wait(Task::new(collect_any_no_discard(children)).schedule_on(&pool));
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(outcomes.len(), 4, "one entry per input");
    let values: Vec<_> = outcomes[..3]
        .iter()
        .map(|o| {
            *o.as_ref()
                .expect("every child produced something")
                .as_ref()
                .unwrap()
        })
        .collect();
    assert_eq!(values, [None, Some(1), Some(2)]);
    let error = outcomes[3].as_ref().unwrap().as_ref().unwrap_err();
    assert!(
        error.is_panic() && error.to_string().contains("child 3"),
        "{error}"
    );
}

#[test]
fn collect_any_no_discard_keeps_the_first_finishers_panic_in_its_place() {
    // Before, the first finisher's panic was resumed and every other outcome lost.
    let children = (0..2u64).map(|i| async move {
        if i == 0 {
            panic!("child 0");
        }
        let _ = sleep(ms(60_000)).await;
        i
    });
    let start = Instant::now();
    let outcomes = block_wait(collect_any_no_discard(children));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the sibling was not cancelled"
    );
    let error = outcomes[0].as_ref().unwrap().as_ref().unwrap_err();
    assert_eq!(error.to_string(), "task panicked: child 0");
    assert_eq!(*outcomes[1].as_ref().unwrap().as_ref().unwrap(), 1);
}

#[test]
fn unordered_yields_in_completion_order() {
    let pool = ThreadPool::new(2).unwrap();
    let mut stream = collect_all_unordered([120u64, 10, 60, 0].into_iter().enumerate().map(
        |(i, n)| async move {
            sleep(ms(n)).await.unwrap();
            i
        },
    ));
    let order = block_wait(
        Task::new(async move {
            let mut order = Vec::new();
            while let Some(i) = stream.next().await {
                order.push(i);
            }
            order
        })
        .schedule_on(&pool),
    );
    assert_eq!(order, [3, 1, 2, 0]);
}

#[test]
fn unordered_is_lazy() {
    let started = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let make = || {
        collect_all_unordered((0..3u32).map(|i| {
            let started = started.clone();
            let guard = CountDrop(dropped.clone());
            async move {
                let _guard = guard;
                started.fetch_add(1, SeqCst);
                i
            }
        }))
    };
    // Never polled: nothing starts, and dropping it drops the unstarted children.
    drop(make());
    assert_eq!(started.load(SeqCst), 0);
    assert_eq!(dropped.load(SeqCst), 3);

    let stream = make();
    std::thread::sleep(ms(20));
    assert_eq!(started.load(SeqCst), 0, "a child ran before the first poll");
    let mut values = block_wait(stream.collect::<Vec<_>>());
    values.sort_unstable();
    assert_eq!(values, [0, 1, 2]);
    assert_eq!(started.load(SeqCst), 3);
}

#[test]
fn dropping_unordered_mid_way_drops_the_remaining_children() {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let children = (0..4u32).map(|i| -> BoxFuture<u32> {
        if i == 0 {
            return Box::pin(async move { i });
        }
        let guard = CountDrop(dropped.clone());
        Box::pin(async move {
            let _guard = guard;
            // Ignores cancellation: only dropping it ends it.
            std::future::pending::<u32>().await
        })
    });
    let mut stream = collect_all_unordered(children);
    let first = block_wait(
        Task::new(async move {
            let first = stream.next().await;
            drop(stream);
            first
        })
        .schedule_on(&pool),
    );
    assert_eq!(first, Some(0));
    assert!(
        eventually(|| dropped.load(SeqCst) == 3),
        "only {} of 3 children were dropped: orphans",
        dropped.load(SeqCst)
    );
}

#[test]
fn unordered_yields_every_finished_output_before_resuming_a_panic_then_ends() {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = flags(3);
    let children = (0..3u64).zip(dropped.clone()).map(|(i, flag)| {
        let guard = SetOnDrop(flag);
        async move {
            let _guard = guard;
            match i {
                // Cancelled by child 1's panic; still returns its output, which is kept.
                0 => {
                    let _ = sleep(ms(60_000)).await;
                }
                1 => {
                    sleep(ms(20)).await.unwrap();
                    panic!("child 1");
                }
                // Finishes before the failure.
                _ => {}
            }
            i
        }
    });
    let mut stream = collect_all_unordered(children);
    let observed = dropped.clone();
    let start = Instant::now();
    let (first, second, outcome, dropped_when_resumed, after) = block_wait(
        Task::new(async move {
            let first = stream.next().await;
            let second = stream.next().await;
            let outcome = AssertUnwindSafe(stream.next()).catch_unwind().await;
            let dropped_when_resumed = all_set(&observed);
            let after = stream.next().await;
            (first, second, outcome, dropped_when_resumed, after)
        })
        .schedule_on(&pool),
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(first, Some(2), "the output finished before the failure");
    assert_eq!(
        second,
        Some(0),
        "the cancelled sibling's output, not dropped"
    );
    assert_eq!(panic_message(&*outcome.unwrap_err()), "child 1");
    assert_eq!(dropped_when_resumed, [true; 3]);
    assert_eq!(after, None);
}

fn no_orphans(make: impl FnOnce(Vec<BoxFuture<()>>) -> BoxFuture<()>) {
    let pool = ThreadPool::new(2).unwrap();
    let dropped = Arc::new(AtomicUsize::new(0));
    let children: Vec<BoxFuture<()>> = (0..4)
        .map(|_| {
            let guard = CountDrop(dropped.clone());
            Box::pin(async move {
                let _guard = guard;
                // Ignores cancellation: only dropping it ends it.
                std::future::pending::<()>().await
            }) as BoxFuture<()>
        })
        .collect();
    let collect = make(children);
    let outcome = block_wait(Task::new(timeout(ms(10), collect)).schedule_on(&pool));
    assert_eq!(outcome, Err(Elapsed));
    assert!(
        eventually(|| dropped.load(SeqCst) == 4),
        "only {} of 4 children were dropped: orphans",
        dropped.load(SeqCst)
    );
}

#[test]
fn dropping_a_collect_any_drops_its_unfinished_children() {
    no_orphans(|c| Box::pin(collect_any(c).map(drop)));
    no_orphans(|c| Box::pin(try_collect_any(c.into_iter().map(|f| f.map(Ok::<_, ()>))).map(drop)));
    no_orphans(|c| Box::pin(collect_any_no_discard(c).map(drop)));
}

#[test]
fn collect_any_children_get_a_cancellable_merged_token() {
    let source = coro::cancel::CancellationSource::new();
    let outer = source.token();
    let seen = Arc::new(Mutex::new(None));
    let seen2 = seen.clone();
    let collect = collect_any([async move {
        *seen2.lock().unwrap() = Some(coro::current_cancellation_token());
    }]);
    block_wait(Task::new(collect).with_cancellation(outer.clone()));
    let token = seen.lock().unwrap().take().unwrap();
    assert!(token.can_be_cancelled());
    assert_ne!(
        token, outer,
        "the child's token is not merged with the collect's own"
    );
}
