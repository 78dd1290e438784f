//! Integration tests that observe each rule of the pool's scheduling policy through
//! `ThreadPool::metrics()`: the next slot (and its cap of 3 in a row while the queue waits), yields going to the back of
//! the queue, overflow of a full local queue to the global queue, the global queue checked first
//! every 61st tick, wake-ups from other threads not starved by a yield loop, the cap on searching
//! workers, parking when idle, a searcher's linger (kept while it absorbs wake-ups, backed off
//! when it absorbs none), and the `BuildError` for zero workers.
//!
//! Most tests use a single worker, where the order of events is fully determined by the policy.

use coro_executor::{ExecutorHandle, JoinHandle, PoolMetrics, ThreadPool, yield_now};
use futures::channel::{mpsc as fmpsc, oneshot};
use futures::executor::block_on;
use futures::{FutureExt, StreamExt};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

mod support;
use support::{TIMEOUT, wait, wait_until};

/// Awaits all `handles` on one helper thread; fails the test, naming `what`, if they hang.
fn wait_all<T: Send + 'static>(what: &str, handles: Vec<JoinHandle<T>>) -> Vec<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let results: Vec<T> = handles.into_iter().map(|h| block_on(h).unwrap()).collect();
        let _ = tx.send(results);
    });
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("hung: not every {what} resolved within {TIMEOUT:?}"))
}

/// A pool of one worker whose monitor never hands its queued work off: these tests hold the
/// worker in a poll and look at its queues, and after the default 10 ms (which a sanitizer
/// build's 1,000 spawns can take) a handoff would run that work on a helper thread.
fn one_worker() -> ThreadPool {
    ThreadPool::builder()
        .worker_threads(1)
        .handoff_after(Duration::from_secs(3600))
        .build()
        .unwrap()
}

/// Receives from `rx`, sending on `pending_tx` once `rx` has returned `Pending` (so that the task
/// is idle with its waker registered, and a send is a wake-up).
async fn recv_after_pending<T>(
    mut rx: oneshot::Receiver<T>,
    pending_tx: mpsc::Sender<()>,
) -> Result<T, oneshot::Canceled> {
    let mut pending_tx = Some(pending_tx);
    futures::future::poll_fn(move |cx| {
        let poll = rx.poll_unpin(cx);
        if poll.is_pending() {
            if let Some(tx) = pending_tx.take() {
                tx.send(()).unwrap();
            }
        }
        poll
    })
    .await
}

fn sum(m: &PoolMetrics, f: impl Fn(&coro_executor::WorkerMetrics) -> u64) -> u64 {
    m.workers.iter().map(f).sum()
}

// ---------------------------------------------------------------------------------------------
// The next slot

#[test]
fn task_spawned_by_a_running_task_runs_from_the_next_slot() {
    let pool = one_worker();
    let (child_tx, child_rx) = mpsc::channel();
    let parent = pool.spawn(async move {
        let here = ExecutorHandle::current_pool().unwrap();
        here.spawn(async move { child_tx.send(1).unwrap() })
            .detach();
    });
    wait("parent", parent).unwrap();
    assert_eq!(
        child_rx
            .recv_timeout(TIMEOUT)
            .expect("hung: the child never ran"),
        1
    );
    let m = pool.metrics();
    // The parent came from the global queue; the child, spawned from inside, from the next slot.
    assert_eq!(m.workers[0].next_slot_polls, 1, "{m:?}");
    assert_eq!(m.workers[0].polls, 2, "{m:?}");
}

#[test]
fn task_woken_by_a_running_task_runs_from_the_next_slot() {
    let pool = one_worker();
    let (tx, rx) = oneshot::channel::<u32>();
    let (pending_tx, pending_rx) = mpsc::channel();
    let woken = pool.spawn(async move { recv_after_pending(rx, pending_tx).await.unwrap() });
    pending_rx.recv_timeout(TIMEOUT).unwrap();
    let before = pool.metrics().workers[0].next_slot_polls;
    let waker = pool.spawn(async move { tx.send(5).unwrap() });
    wait("waker", waker).unwrap();
    assert_eq!(wait("woken", woken).unwrap(), 5);
    let after = pool.metrics().workers[0].next_slot_polls;
    assert_eq!(
        after,
        before + 1,
        "the woken task did not run from the next slot"
    );
}

#[test]
fn next_slot_is_capped_at_3_in_a_row_so_a_ping_pong_does_not_starve_the_queue() {
    const ROUNDS: usize = 1000;
    let pool = one_worker();
    let round = Arc::new(AtomicUsize::new(0));

    // R: idle until P wakes it in round 1; records the round it got to run in.
    let (r_tx, r_rx) = oneshot::channel::<()>();
    let (pending_tx, pending_rx) = mpsc::channel();
    let r_round = round.clone();
    let r = pool.spawn(async move {
        recv_after_pending(r_rx, pending_tx).await.unwrap();
        r_round.load(SeqCst)
    });
    pending_rx.recv_timeout(TIMEOUT).unwrap();

    // Q: echoes every number P sends.
    let (to_q, mut q_in) = fmpsc::unbounded::<usize>();
    let (to_p, mut p_in) = fmpsc::unbounded::<usize>();
    let (q_ready_tx, q_ready_rx) = mpsc::channel();
    let q = pool.spawn(async move {
        q_ready_tx.send(()).unwrap();
        while let Some(n) = q_in.next().await {
            to_p.unbounded_send(n).unwrap();
        }
    });
    q_ready_rx.recv_timeout(TIMEOUT).unwrap();
    // Q is idle once its first poll is over; on one worker, P cannot start before that.

    // P: ping-pongs with Q. In round 1 it wakes R first and then Q, so R is pushed out of the
    // next slot into the queue while P and Q keep waking each other into the next slot.
    let p_round = round.clone();
    let mut r_tx = Some(r_tx);
    let p = pool.spawn(async move {
        for n in 1..=ROUNDS {
            p_round.store(n, SeqCst);
            if let Some(tx) = r_tx.take() {
                tx.send(()).unwrap();
            }
            to_q.unbounded_send(n).unwrap();
            assert_eq!(p_in.next().await, Some(n));
        }
    });
    wait("P", p).unwrap();
    wait("Q", q).unwrap();
    let r_ran_in = wait("R", r).unwrap();
    // Each round is two next-slot polls (Q, then P). After at most 3 of them in a row the queue,
    // where R is alone, must be served: R runs by round 3, long before the ping-pong ends.
    assert!(
        r_ran_in <= 3,
        "R waited until round {r_ran_in} of {ROUNDS}: the next slot was used more than 3 times \
         in a row while the queue waited"
    );
    let m = pool.metrics();
    assert!(m.workers[0].next_slot_capped > 0, "{m:?}");
    // Far more next-slot polls than caps: the ping-pong mostly ran from the next slot.
    assert!(m.workers[0].next_slot_polls >= ROUNDS as u64, "{m:?}");
}

/// The cap serves the queue: with nothing queued, a ping-pong keeps running from the next slot
/// instead of passing through the queue every fourth poll (a push and a pop for nothing).
#[test]
fn next_slot_is_not_capped_while_the_queue_is_empty() {
    const ROUNDS: usize = 1000;
    let pool = one_worker();
    let (to_q, mut q_in) = fmpsc::unbounded::<usize>();
    let (to_p, mut p_in) = fmpsc::unbounded::<usize>();
    let q = pool.spawn(async move {
        while let Some(n) = q_in.next().await {
            to_p.unbounded_send(n).unwrap();
        }
    });
    let p = pool.spawn(async move {
        for n in 1..=ROUNDS {
            to_q.unbounded_send(n).unwrap();
            assert_eq!(p_in.next().await, Some(n));
        }
    });
    wait("P", p).unwrap();
    wait("Q", q).unwrap();
    let m = pool.metrics();
    assert_eq!(
        m.workers[0].next_slot_capped, 0,
        "the next slot was capped with nothing queued: {m:?}"
    );
    // Every round is two next-slot polls (Q woken by P, P woken by Q).
    assert!(
        m.workers[0].next_slot_polls >= 2 * ROUNDS as u64 - 2,
        "{m:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Yields

#[test]
fn yield_goes_to_the_back_of_the_queue() {
    const K: usize = 100;
    let pool = one_worker();
    let a_yields = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(Mutex::new(Vec::new()));
    let (a_yields2, order2) = (a_yields.clone(), order.clone());
    let parent = pool.spawn(async move {
        let here = ExecutorHandle::current_pool().unwrap();
        let (y, o) = (a_yields2.clone(), order2.clone());
        let a = here.spawn(async move {
            for _ in 0..K {
                y.fetch_add(1, SeqCst);
                yield_now().await;
            }
            o.lock().unwrap().push(("A done", y.load(SeqCst)));
        });
        let mut others = Vec::new();
        for name in ["B", "C"] {
            let (y, o) = (a_yields2.clone(), order2.clone());
            others.push(here.spawn(async move {
                o.lock().unwrap().push((name, y.load(SeqCst)));
            }));
        }
        // Spawned last, it takes the next slot and runs first, leaving A, B, C in the queue.
        let (y, o) = (a_yields2.clone(), order2.clone());
        others.push(here.spawn(async move {
            o.lock().unwrap().push(("D", y.load(SeqCst)));
        }));
        (a, others)
    });
    let (a, others) = wait("parent", parent).unwrap();
    wait("A", a).unwrap();
    for other in others {
        wait("B, C or D", other).unwrap();
    }
    // A yielded once and went behind B and C, which ran before A's second poll.
    assert_eq!(
        *order.lock().unwrap(),
        [("D", 0), ("B", 1), ("C", 1), ("A done", K)]
    );
    let m = pool.metrics();
    assert!(m.workers[0].yielded_to_back >= K as u64, "{m:?}");
}

// ---------------------------------------------------------------------------------------------
// Overflow

#[test]
fn full_local_queue_overflows_to_the_global_queue() {
    const N: usize = 1000;
    let pool = one_worker();
    let done = Arc::new(AtomicUsize::new(0));
    let (spawned_tx, spawned_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let d = done.clone();
    let parent = pool.spawn(async move {
        let here = ExecutorHandle::current_pool().unwrap();
        for _ in 0..N {
            let d = d.clone();
            here.spawn(async move {
                d.fetch_add(1, SeqCst);
            })
            .detach();
        }
        spawned_tx.send(()).unwrap();
        // Hold the only worker while the test looks at the queues.
        release_rx.recv_timeout(TIMEOUT).unwrap();
    });
    spawned_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: the spawning task never finished spawning");
    let m = pool.metrics();
    let done_before_release = done.load(SeqCst);
    release_tx.send(()).unwrap();
    assert!(m.workers[0].overflows >= 1, "{m:?}");
    assert!(m.global_queue_depth > 0, "{m:?}");
    assert!(m.workers[0].local_queue_depth <= 257, "{m:?}");
    assert_eq!(
        m.global_queue_depth + m.workers[0].local_queue_depth,
        N,
        "{m:?}"
    );
    assert_eq!(
        done_before_release, 0,
        "a task ran while the only worker was held"
    );

    wait("spawning task", parent).unwrap();
    wait_until("not every spawned task ran", || done.load(SeqCst) == N);
    wait_until("live_tasks never returned to 0", || {
        pool.metrics().live_tasks == 0
    });
    let m = pool.metrics();
    assert!(m.workers[0].global_polls > 1, "{m:?}");
    assert_eq!(m.global_queue_depth, 0);
}

// ---------------------------------------------------------------------------------------------
// Fairness towards the global queue and remote wake-ups

/// Spawns, from inside the single worker, two tasks that yield until `stop` is set, so that the
/// worker's local queue is never empty; returns once both are running.
fn start_two_yield_loops(pool: &ThreadPool, stop: &Arc<AtomicBool>) -> Vec<JoinHandle<usize>> {
    let (started_tx, started_rx) = mpsc::channel();
    let stop = stop.clone();
    let parent = pool.spawn(async move {
        let here = ExecutorHandle::current_pool().unwrap();
        (0..2)
            .map(|_| {
                let (stop, started_tx) = (stop.clone(), started_tx.clone());
                here.spawn(async move {
                    started_tx.send(()).unwrap();
                    let mut yields = 0;
                    while !stop.load(SeqCst) {
                        yield_now().await;
                        yields += 1;
                    }
                    yields
                })
            })
            .collect()
    });
    let loops = wait("parent of the yield loops", parent).unwrap();
    for _ in 0..2 {
        started_rx.recv_timeout(TIMEOUT).unwrap();
    }
    loops
}

#[test]
fn global_queue_is_served_every_61st_tick_despite_busy_local_queue() {
    let pool = one_worker();
    let stop = Arc::new(AtomicBool::new(false));
    let loops = start_two_yield_loops(&pool, &stop);
    let before = pool.metrics().workers[0].global_first_polls;

    // From outside the pool: this goes to the global queue, and the local queue is never empty.
    let s = stop.clone();
    let outsider = pool.spawn(async move { s.store(true, SeqCst) });
    wait("task in the global queue", outsider)
        .expect("the global queue was starved by the yielding tasks");
    for l in loops {
        wait("yield loop", l).unwrap();
    }
    let m = pool.metrics();
    assert!(m.workers[0].global_first_polls > before, "{m:?}");
}

#[test]
fn yield_loop_does_not_starve_a_task_woken_from_another_thread() {
    let pool = one_worker();
    let stop = Arc::new(AtomicBool::new(false));
    let loops = start_two_yield_loops(&pool, &stop);

    let (tx, rx) = oneshot::channel::<u32>();
    let (pending_tx, pending_rx) = mpsc::channel();
    let s = stop.clone();
    let woken = pool.spawn(async move {
        let v = recv_after_pending(rx, pending_tx).await.unwrap();
        s.store(true, SeqCst);
        v
    });
    pending_rx
        .recv_timeout(TIMEOUT)
        .expect("hung: the waiting task was never polled");
    // An "I/O" completion on another thread.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        tx.send(99).unwrap();
    });
    assert_eq!(
        wait("task woken from another thread", woken)
            .expect("the woken task was starved by the yield loop"),
        99
    );
    for l in loops {
        assert!(wait("yield loop", l).unwrap() > 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Searching and parking

fn burst_and_idle(workers: usize, max_searching: usize) {
    let pool = ThreadPool::new(workers).unwrap();
    // Every worker starts with nothing to do and parks.
    wait_until("the workers never parked at start", || {
        sum(&pool.metrics(), |w| w.parks) >= workers as u64
    });
    let parks_before = sum(&pool.metrics(), |w| w.parks);

    let counter = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..20 {
        // Bursts from outside (global queue) and from inside (a local queue to steal from).
        for _ in 0..200 {
            let c = counter.clone();
            handles.push(pool.spawn(async move {
                c.fetch_add(1, SeqCst);
            }));
        }
        let c = counter.clone();
        handles.push(pool.spawn(async move {
            let here = ExecutorHandle::current_pool().unwrap();
            let children: Vec<_> = (0..100)
                .map(|_| {
                    let c = c.clone();
                    here.spawn(async move {
                        c.fetch_add(1, SeqCst);
                        yield_now().await;
                    })
                })
                .collect();
            for child in children {
                child.await.unwrap();
            }
            c.fetch_add(1, SeqCst);
        }));
        std::thread::sleep(Duration::from_millis(2));
    }
    wait_all("burst task", handles);
    assert_eq!(counter.load(SeqCst), 20 * (200 + 100 + 1));

    let m = pool.metrics();
    assert!(
        m.max_searching_workers <= max_searching,
        "{} of {workers} workers searched at once: {m:?}",
        m.max_searching_workers
    );
    assert!(m.max_searching_workers >= 1, "nobody ever searched: {m:?}");
    // Idle again: the workers park.
    wait_until("the workers did not park again after the burst", || {
        let m = pool.metrics();
        sum(&m, |w| w.parks) > parks_before && m.searching_workers == 0
    });
}

#[test]
fn at_most_half_of_the_workers_search_at_once() {
    burst_and_idle(4, 2);
    burst_and_idle(2, 1);
}

/// A worker that found nothing keeps searching for a while (its linger, `pool/linger.rs`) while
/// another worker runs, instead of parking at once: two tasks that wake each other into the
/// next slot of one worker then do not wake the other worker (a futex wake) for most hand-offs.
/// Without the linger the other worker was woken, found the task already run, and parked again
/// about every 14 µs of the ping-pong. The linger never finds work here (the busy worker runs
/// its next slot itself); what keeps it going is the pushes it absorbs, each of which finds it
/// searching and so wakes nobody.
#[test]
fn a_searcher_lingers_while_another_worker_ping_pongs_instead_of_parking_at_once() {
    const ROUNDS: usize = 50_000;
    let pool = ThreadPool::new(2).unwrap();
    wait_until("the workers never parked at start", || {
        sum(&pool.metrics(), |w| w.parks) >= 2
    });
    let parks_before = sum(&pool.metrics(), |w| w.parks);
    let root = pool.spawn(async move {
        let (to_q, mut q_in) = fmpsc::unbounded::<usize>();
        let (to_p, mut p_in) = fmpsc::unbounded::<usize>();
        let here = ExecutorHandle::current_pool().unwrap();
        let q = here.spawn(async move {
            while let Some(n) = q_in.next().await {
                to_p.unbounded_send(n).unwrap();
            }
        });
        for n in 1..=ROUNDS {
            to_q.unbounded_send(n).unwrap();
            assert_eq!(p_in.next().await, Some(n));
        }
        drop(to_q);
        q.await.unwrap();
    });
    wait("the ping-pong", root).unwrap();
    let m = pool.metrics();
    let parks = sum(&m, |w| w.parks) - parks_before;
    // A rate, so a bound with room: about 1 park per 20 µs of the ping-pong with the linger,
    // 1 per 1,000 round trips or fewer here; without it, 1 per 14 µs (1 per 25 round trips).
    assert!(
        parks * 50 < ROUNDS as u64,
        "{parks} parks during {ROUNDS} round trips: the idle worker was woken and parked again \
         for a ping-pong that never needed it: {m:?}"
    );
}

/// The other side of the linger (`pool/linger.rs`): a searcher whose lingers absorb no push and
/// find no work backs off to one pass per linger and then parks. One worker stays inside a poll
/// for the whole test (so the other always sees someone awake, the condition to linger), and
/// tasks are spawned from outside one at a time, each awaited and then a pause longer than any
/// linger: each wakes the other worker, which runs it, lingers in vain and parks. With a fixed
/// 50 µs linger each of those wake-ups cost about 15-50 passes of spinning.
#[test]
fn a_searcher_whose_lingers_absorb_nothing_backs_off_to_one_pass_before_parking() {
    const WARM_UP: usize = 50;
    const WAKE_UPS: usize = 300;
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .handoff_after(Duration::from_secs(3600))
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (held_tx, held_rx) = mpsc::channel();
    let holder = pool.spawn({
        let stop = stop.clone();
        async move {
            held_tx.send(()).unwrap();
            while !stop.load(SeqCst) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    });
    held_rx.recv_timeout(TIMEOUT).unwrap();
    let one_task = |pool: &ThreadPool| {
        wait("a lone task", pool.spawn(async {})).unwrap();
        // Longer than a whole linger even in a sanitizer build: the next spawn comes when the
        // other worker has parked, not while it lingers (it would find it, and that pays).
        std::thread::sleep(Duration::from_millis(1));
    };
    for _ in 0..WARM_UP {
        one_task(&pool);
    }
    let before = pool.metrics();
    for _ in 0..WAKE_UPS {
        one_task(&pool);
    }
    let after = pool.metrics();
    stop.store(true, SeqCst);
    wait("the holder", holder).unwrap();
    let parks = sum(&after, |w| w.parks) - sum(&before, |w| w.parks);
    let passes = sum(&after, |w| w.linger_passes) - sum(&before, |w| w.linger_passes);
    assert!(
        parks as usize >= WAKE_UPS / 2,
        "only {parks} parks for {WAKE_UPS} lone tasks: the free worker was not woken for each, \
         so this is not the workload the test means: {after:?}"
    );
    // One pass per linger once backed off; a stray absorbed push may double the next one.
    assert!(
        passes <= 2 * parks,
        "{passes} linger passes before {parks} parks: lingers that absorbed nothing did not back \
         off: {after:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration errors

fn assert_explains_zero_workers(message: &str) {
    assert!(message.contains("at least 1"), "{message}");
    assert!(
        message.contains("positive") || message.contains("builder"),
        "the message does not say how to fix it: {message}"
    );
}

#[test]
fn zero_workers_is_a_build_error_that_says_what_to_do() {
    let err = ThreadPool::new(0).unwrap_err();
    assert_explains_zero_workers(&err.to_string());
    assert!(!format!("{err:?}").is_empty());
    let _: &dyn std::error::Error = &err;

    let err = ThreadPool::builder().worker_threads(0).build().unwrap_err();
    assert_explains_zero_workers(&err.to_string());
}
