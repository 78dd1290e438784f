//! `coro::sync::Latch` and `Barrier`.

use coro::sync::{Barrier, Latch};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};

fn poll_once<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn latch_opens_on_the_last_count_down_and_releases_every_waiter() {
    let latch = Latch::new(2);
    let mut a = pin!(latch.wait());
    let mut b = pin!(latch.wait());
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());
    latch.count_down();
    assert!(poll_once(a.as_mut()).is_pending());
    assert_eq!(latch.remaining(), 1);
    latch.count_down();
    assert!(poll_once(a.as_mut()).is_ready());
    assert!(poll_once(b.as_mut()).is_ready());
    assert!(latch.try_wait());
}

#[test]
fn latch_counted_down_too_often_panics_with_what_to_fix() {
    let latch = Latch::new(1);
    latch.count_down();
    let err = std::panic::catch_unwind(|| latch.count_down()).unwrap_err();
    let msg = err
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| err.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        msg.contains("called more times than the latch's count"),
        "{msg}"
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn latch_waits_for_spawned_tasks() {
    let latch = Arc::new(Latch::new(8));
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..8 {
        let (latch, done) = (latch.clone(), done.clone());
        drop(coro::spawn(async move {
            done.fetch_add(1, SeqCst);
            latch.count_down();
        }));
    }
    latch.wait().await;
    assert_eq!(done.load(SeqCst), 8);
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn barrier_is_reusable_with_one_leader_per_generation() {
    const TASKS: usize = 4;
    const ROUNDS: usize = 200;
    let barrier = Arc::new(Barrier::new(TASKS));
    let phase = Arc::new(AtomicUsize::new(0));
    let leaders = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (barrier, phase, leaders) = (barrier.clone(), phase.clone(), leaders.clone());
            coro::spawn(async move {
                for round in 0..ROUNDS {
                    // Nobody starts round r+1 before everyone finished round r.
                    assert!(phase.load(SeqCst) >= round * TASKS);
                    phase.fetch_add(1, SeqCst);
                    if barrier.wait().await.is_leader() {
                        leaders.fetch_add(1, SeqCst);
                    }
                    assert!(phase.load(SeqCst) >= (round + 1) * TASKS);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(leaders.load(SeqCst), ROUNDS);
}

#[test]
fn a_dropped_barrier_wait_takes_its_arrival_back() {
    let barrier = Barrier::new(2);
    {
        let mut gone = pin!(barrier.wait());
        assert!(poll_once(gone.as_mut()).is_pending());
    }
    let mut a = pin!(barrier.wait());
    assert!(
        poll_once(a.as_mut()).is_pending(),
        "the dropped wait no longer counts"
    );
    let mut b = pin!(barrier.wait());
    assert_eq!(
        poll_once(b.as_mut()).map(|r| r.is_leader()),
        Poll::Ready(true)
    );
    assert_eq!(
        poll_once(a.as_mut()).map(|r| r.is_leader()),
        Poll::Ready(false)
    );
}
