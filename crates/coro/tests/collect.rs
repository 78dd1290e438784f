//! Collect: collect_all_range, try_collect_all_range, collect_all_settled_range,
//! collect_all_windowed.

use coro::cancel::{CancellationSource, Cancelled};
use coro::time::{Elapsed, sleep, timeout};
use coro::{
    Task, ThreadPool, block_wait, collect_all_range, collect_all_settled_range,
    collect_all_windowed, try_collect_all_range,
};
use futures::FutureExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;
use support::{BoxFuture, CountDrop, SetOnDrop, ms, panic_message};

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

#[test]
fn results_are_in_input_order_while_children_finish_in_reverse() {
    const N: u64 = 6;
    let finished = Arc::new(Mutex::new(Vec::new()));
    let collect = collect_all_range((0..N).map(|i| {
        let finished = finished.clone();
        async move {
            sleep(ms(10 * (N - i))).await.unwrap();
            finished.lock().unwrap().push(i);
            i * 10
        }
    }));
    assert_eq!(
        block_wait(collect),
        (0..N).map(|i| i * 10).collect::<Vec<_>>()
    );
    assert_eq!(*finished.lock().unwrap(), (0..N).rev().collect::<Vec<_>>());
}

#[test]
fn empty_input_gives_empty_output() {
    assert!(block_wait(collect_all_range(Vec::<BoxFuture<u32>>::new())).is_empty());
    assert_eq!(
        block_wait(try_collect_all_range(
            Vec::<BoxFuture<Result<u32, ()>>>::new()
        )),
        Ok(vec![])
    );
    assert!(block_wait(collect_all_settled_range(Vec::<BoxFuture<u32>>::new())).is_empty());
    assert!(block_wait(collect_all_windowed(Vec::<BoxFuture<u32>>::new(), 2)).is_empty());
}

#[test]
fn collects_are_lazy() {
    let ran = Arc::new(AtomicUsize::new(0));
    let child = |ran: Arc<AtomicUsize>| async move {
        ran.fetch_add(1, SeqCst);
    };
    let all = collect_all_range((0..3).map(|_| child(ran.clone())));
    let tried = try_collect_all_range((0..3).map(|_| child(ran.clone()).map(Ok::<_, ()>)));
    let settled = collect_all_settled_range((0..3).map(|_| child(ran.clone())));
    let windowed = collect_all_windowed((0..3).map(|_| child(ran.clone())), 2);
    std::thread::sleep(ms(30));
    assert_eq!(ran.load(SeqCst), 0, "building a collect must run nothing");
    block_wait(all);
    assert_eq!(ran.load(SeqCst), 3);
    block_wait(tried).unwrap();
    block_wait(settled);
    block_wait(windowed);
    assert_eq!(ran.load(SeqCst), 12);
}

#[test]
fn children_run_in_parallel_on_a_thread_pool() {
    let pool = ThreadPool::new(2).unwrap();
    let busy = || async {
        let start = Instant::now();
        let mut spins = 0u64;
        while start.elapsed() < ms(100) {
            spins = std::hint::black_box(spins + 1);
        }
        std::thread::current().id()
    };
    let start = Instant::now();
    let threads = block_wait(collect_all_range([busy(), busy()]).schedule_on(&pool));
    let elapsed = start.elapsed();
    assert!(
        elapsed < ms(170),
        "took {elapsed:?}: the children did not run in parallel"
    );
    assert_ne!(threads[0], threads[1], "both children ran on one worker");
}

#[test]
fn children_get_the_callers_token_merged_with_the_collects() {
    let pool = ThreadPool::new(2).unwrap();
    let caller = CancellationSource::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let handle = Task::new(async move {
        let outer = coro::current_cancellation_token();
        collect_all_range([async move {
            let own = coro::current_cancellation_token();
            record
                .lock()
                .unwrap()
                .push(own != outer && own.can_be_cancelled());
            sleep(Duration::from_secs(60)).await
        }])
        .await
    })
    .with_cancellation(caller.token())
    .schedule_on(&pool)
    .start();
    std::thread::sleep(ms(20));
    let start = Instant::now();
    caller.request_cancellation();
    assert_eq!(block_wait(handle).unwrap(), vec![Err(Cancelled)]);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        *seen.lock().unwrap(),
        [true],
        "the child's token is not a merged one"
    );
}

#[test]
fn the_first_panic_in_time_cancels_the_siblings_and_is_resumed_after_all_finished() {
    let pool = ThreadPool::new(2).unwrap();
    let child0_done = Arc::new(AtomicBool::new(false));
    let done = child0_done.clone();
    let children = (0..3).map(move |i| {
        let guard = SetOnDrop(done.clone());
        async move {
            let _guard = guard;
            match i {
                0 => {
                    let _ = sleep(Duration::from_secs(60)).await;
                }
                1 => {
                    // 50 ms would do, but printing child 2's panic (with a backtrace, under
                    // RUST_BACKTRACE) can take longer than that; cancellation cuts this short.
                    let _ = sleep(ms(1000)).await;
                    panic!("child 1");
                }
                _ => {
                    sleep(ms(10)).await.unwrap();
                    panic!("child 2");
                }
            }
        }
    });
    let flag = child0_done.clone();
    let start = Instant::now();
    let (outcome, done_when_resumed) = block_wait(
        Task::new(async move {
            let outcome = AssertUnwindSafe(collect_all_range(children))
                .catch_unwind()
                .await;
            (outcome, flag.load(SeqCst))
        })
        .schedule_on(&pool),
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(panic_message(&*outcome.unwrap_err()), "child 2");
    assert!(
        done_when_resumed,
        "the panic was resumed before child 0 finished"
    );
}

#[test]
fn try_returns_the_first_err_in_time_after_cancelling_and_awaiting_the_siblings() {
    let pool = ThreadPool::new(2).unwrap();
    let child0_done = Arc::new(AtomicBool::new(false));
    let done = child0_done.clone();
    let children = (0..3).map(move |i| {
        let guard = SetOnDrop(done.clone());
        async move {
            let _guard = guard;
            match i {
                0 => sleep(Duration::from_secs(60))
                    .await
                    .map(|()| 0)
                    .map_err(|_| "zero cancelled"),
                1 => {
                    let _ = sleep(ms(40)).await;
                    Err("one")
                }
                _ => {
                    sleep(ms(10)).await.unwrap();
                    Err("two")
                }
            }
        }
    });
    let flag = child0_done.clone();
    let start = Instant::now();
    let (outcome, done_when_returned) = block_wait(
        Task::new(async move {
            let outcome = try_collect_all_range(children).await;
            (outcome, flag.load(SeqCst))
        })
        .schedule_on(&pool),
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert_eq!(outcome, Err("two"));
    assert!(done_when_returned, "returned before child 0 finished");
}

#[test]
fn try_resumes_a_panic_that_came_first_and_collects_oks_in_order() {
    let oks = try_collect_all_range((0..4u32).map(|i| async move {
        sleep(ms(u64::from(4 - i) * 5)).await.unwrap();
        Ok::<_, String>(i)
    }));
    assert_eq!(block_wait(oks), Ok(vec![0, 1, 2, 3]));

    let children: Vec<BoxFuture<Result<u32, &str>>> = vec![
        Box::pin(async {
            // Cancelled once the panic is recorded: well before this sleep would end.
            let _ = sleep(ms(1000)).await;
            Err("late err")
        }),
        Box::pin(async { panic!("early panic") }),
    ];
    let payload = catch_unwind(AssertUnwindSafe(|| {
        block_wait(try_collect_all_range(children))
    }))
    .unwrap_err();
    assert_eq!(panic_message(&*payload), "early panic");
}

#[test]
fn settled_never_cancels_and_reports_each_outcome() {
    let children: Vec<BoxFuture<u32>> = vec![
        Box::pin(async { panic!("child 0 failed") }),
        Box::pin(async {
            sleep(ms(30))
                .await
                .expect("a settled sibling was cancelled");
            assert!(!coro::current_cancellation_token().is_cancellation_requested());
            1
        }),
        Box::pin(async { 2 }),
    ];
    let outcomes = block_wait(collect_all_settled_range(children));
    assert_eq!(outcomes.len(), 3);
    let mut outcomes = outcomes.into_iter();
    let first = outcomes.next().unwrap().unwrap_err();
    assert_eq!(
        panic_message(&*first.try_into_panic().unwrap()),
        "child 0 failed"
    );
    assert_eq!(outcomes.next().unwrap().unwrap(), 1);
    assert_eq!(outcomes.next().unwrap().unwrap(), 2);
}

#[test]
fn windowed_never_runs_more_than_max_in_flight_at_once() {
    let pool = ThreadPool::new(4).unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let high = Arc::new(AtomicUsize::new(0));
    let children = (0..20u64).map(|i| {
        let (running, high) = (running.clone(), high.clone());
        async move {
            let now = running.fetch_add(1, SeqCst) + 1;
            high.fetch_max(now, SeqCst);
            sleep(ms(2 + i % 3)).await.unwrap();
            running.fetch_sub(1, SeqCst);
            i
        }
    });
    let out = block_wait(collect_all_windowed(children, 3).schedule_on(&pool));
    assert_eq!(out, (0..20).collect::<Vec<_>>());
    assert_eq!(
        high.load(SeqCst),
        3,
        "the window was exceeded or never filled"
    );
}

#[test]
fn windowed_panics_on_a_zero_window_with_a_helpful_message() {
    let payload = catch_unwind(|| collect_all_windowed([async { 1 }], 0)).unwrap_err();
    let message = panic_message(&*payload);
    assert!(message.contains("max_in_flight is 0"), "{message}");
    assert!(message.contains("pass at least 1"), "{message}");
}

#[test]
fn windowed_starts_nothing_more_after_a_failure() {
    let started = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let children = (0..10).map(|i| {
        let started = started.clone();
        let guard = CountDrop(dropped.clone());
        async move {
            let _guard = guard;
            started.fetch_add(1, SeqCst);
            if i == 0 {
                panic!("item 0 failed");
            }
            sleep(Duration::from_secs(60)).await.unwrap_or(());
        }
    });
    let payload = catch_unwind(AssertUnwindSafe(|| {
        block_wait(collect_all_windowed(children, 2))
    }))
    .unwrap_err();
    assert_eq!(panic_message(&*payload), "item 0 failed");
    assert_eq!(
        started.load(SeqCst),
        2,
        "items were started after the failure"
    );
    assert_eq!(dropped.load(SeqCst), 10, "unstarted items must be dropped");
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
fn dropping_a_collect_drops_its_unfinished_children() {
    no_orphans(|c| Box::pin(collect_all_range(c).map(drop)));
    no_orphans(|c| {
        Box::pin(try_collect_all_range(c.into_iter().map(|f| f.map(Ok::<_, ()>))).map(drop))
    });
    no_orphans(|c| Box::pin(collect_all_settled_range(c).map(drop)));
    no_orphans(|c| Box::pin(collect_all_windowed(c, 8).map(drop)));
}

#[test]
fn collect_all_macro_gives_a_tuple_in_argument_order_lazily() {
    let ran = Arc::new(AtomicUsize::new(0));
    let (r1, r2) = (ran.clone(), ran.clone());
    let collect = coro::collect_all!(
        async move {
            sleep(ms(30)).await.unwrap();
            r1.fetch_add(1, SeqCst);
            7u8
        },
        Task::new(async move {
            r2.fetch_add(1, SeqCst);
            "fast"
        }),
        async { vec![1, 2] },
    );
    std::thread::sleep(ms(20));
    assert_eq!(
        ran.load(SeqCst),
        0,
        "building collect_all! must run nothing"
    );
    assert_eq!(block_wait(collect), (7, "fast", vec![1, 2]));
    assert_eq!(ran.load(SeqCst), 2);
}

#[test]
fn collect_all_macro_runs_children_in_parallel() {
    let pool = ThreadPool::new(2).unwrap();
    let busy = || async {
        let start = Instant::now();
        while start.elapsed() < ms(100) {
            std::hint::spin_loop();
        }
        std::thread::current().id()
    };
    let start = Instant::now();
    let (a, b) = block_wait(coro::collect_all!(busy(), busy()).schedule_on(&pool));
    assert!(start.elapsed() < ms(170), "took {:?}", start.elapsed());
    assert_ne!(a, b);
}

#[test]
fn collect_all_macro_resumes_the_first_panic_in_time_after_all_finished() {
    let pool = ThreadPool::new(2).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(done.clone());
    let flag = done.clone();
    let start = Instant::now();
    let (outcome, done_when_resumed) = block_wait(
        Task::new(async move {
            let collect = coro::collect_all!(
                async move {
                    let _guard = guard;
                    sleep(Duration::from_secs(60)).await
                },
                async {
                    // Far behind "early" even when the machine stalls a worker (ThreadSanitizer
                    // on 2 busy cores once held "early"'s 10 ms timer for about a second).
                    let _ = sleep(ms(3000)).await;
                    panic!("late")
                },
                async {
                    sleep(ms(10)).await.unwrap();
                    panic!("early")
                },
            );
            let outcome = AssertUnwindSafe(collect).catch_unwind().await.map(drop);
            (outcome, flag.load(SeqCst))
        })
        .schedule_on(&pool),
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(panic_message(&*outcome.unwrap_err()), "early");
    assert!(done_when_resumed);
}

#[test]
fn try_collect_all_macro_returns_oks_or_the_first_err_in_time() {
    let ok = coro::try_collect_all!(async { Ok::<_, &str>(1u32) }, async {
        Ok(String::from("b"))
    });
    assert_eq!(block_wait(ok), Ok((1, String::from("b"))));

    let start = Instant::now();
    let failed = coro::try_collect_all!(
        async {
            sleep(Duration::from_secs(60))
                .await
                .map_err(|_| "cancelled")?;
            Ok(1u32)
        },
        async {
            let _ = sleep(ms(1000)).await;
            Err::<bool, _>("late")
        },
        async {
            sleep(ms(10)).await.unwrap();
            Err::<(), _>("early")
        },
    );
    assert_eq!(block_wait(failed), Err("early"));
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn dropping_a_collect_all_macro_drops_its_unfinished_children() {
    no_orphans(|mut c| {
        let (a, b) = (c.pop().unwrap(), c.pop().unwrap());
        Box::pin(coro::collect_all!(a, b, c.pop().unwrap(), c.pop().unwrap()).map(drop))
    });
    no_orphans(|mut c| {
        let mut next = move || c.pop().unwrap().map(Ok::<_, ()>);
        Box::pin(coro::try_collect_all!(next(), next(), next(), next()).map(drop))
    });
}

/// Children run inline until they first suspend: a collect of ready children finishes inside
/// its parent's first poll, with no executor round trip per child, and only the children that
/// suspend become tasks of their own.
#[test]
fn ready_children_run_inline_within_the_parents_poll() {
    let manual = coro::executor::ManualExecutor::new();
    let handle = Task::new(async {
        let values = collect_all_range((0..5u32).map(|i| async move { i * 2 })).await;
        let (a, b) = coro::collect_all!(async { 1 }, async { "two" }).await;
        let settled = coro::collect_all_settled_range([async { 7 }]).await;
        (values, a, b, settled.into_iter().next().unwrap().unwrap())
    })
    .schedule_on(manual.handle())
    .start();
    assert!(manual.run_one(), "the parent was queued");
    assert!(
        handle.is_finished(),
        "the collects suspended their parent: their ready children were not run inline"
    );
    let (values, a, b, settled) = block_wait(handle).unwrap();
    assert_eq!((values, a, b, settled), (vec![0, 2, 4, 6, 8], 1, "two", 7));

    // A child that suspends continues as a task of its own on the executor.
    let manual = coro::executor::ManualExecutor::new();
    let gate = Arc::new(coro::sync::Baton::new());
    let handle = Task::new({
        let gate = gate.clone();
        async move {
            let waits = collect_all_range((0..2u32).map(|i| {
                let gate = gate.clone();
                async move {
                    if i == 1 {
                        gate.wait().await;
                    }
                    i
                }
            }));
            waits.await
        }
    })
    .schedule_on(manual.handle())
    .start();
    manual.run_until_idle();
    assert!(!handle.is_finished(), "child 1 waits on the gate");
    gate.post();
    manual.run_until_idle();
    assert!(handle.is_finished());
    assert_eq!(block_wait(handle).unwrap(), [0, 1]);
}

#[test]
fn a_collects_token_is_its_own_even_when_sources_are_recycled() {
    // Collects on one thread reuse a source nothing observed; one a child kept, or one that
    // was cancelled, must never come back.
    let kept = block_wait(collect_all_range([async {
        coro::current_cancellation_token()
    }]));
    let kept = kept.into_iter().next().unwrap();
    let failing: BoxFuture<()> = Box::pin(async {
        if std::hint::black_box(true) {
            panic!("fails");
        }
    });
    let failed = catch_unwind(AssertUnwindSafe(|| {
        block_wait(collect_all_range([failing]))
    }));
    assert!(failed.is_err());
    assert!(
        !kept.is_cancellation_requested(),
        "a later collect's failure cancelled a token an earlier collect's child kept"
    );
    for _ in 0..3 {
        let fresh = block_wait(collect_all_range([async {
            let token = coro::current_cancellation_token();
            (token.is_cancellation_requested(), token)
        }]));
        let (requested, token) = fresh.into_iter().next().unwrap();
        assert!(
            !requested,
            "a collect started with its token already cancelled"
        );
        assert_ne!(token, kept, "two collects shared one source");
    }
}
