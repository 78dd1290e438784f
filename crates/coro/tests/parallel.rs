//! Work spawned from a task reaches an idle worker: CPU-bound children overlap on
//! a fresh pool, on a pool that sat idle, from `#[coro::test]`, and inside `collect_all!`; and
//! nothing queued behind a poll that blocks its worker waits for that poll (handoff).
//!
//! Every test is bounded: a child that never sees its sibling gives up after [`GIVE_UP`], and
//! the test then fails instead of hanging. Each shape is repeated, since a lost wake-up is a
//! race that one run may miss.

use coro::{Task, ThreadPool, block_wait};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// How long a CPU-bound child spins waiting to see its sibling running beside it. Far longer
/// than any wake-up takes, so a failure means the sibling never started.
const GIVE_UP: Duration = Duration::from_millis(500);

/// Two CPU-bound children that each spin until both are running at once (or [`GIVE_UP`]).
#[derive(Clone, Default)]
struct Pair {
    running: Arc<AtomicUsize>,
    /// How many children saw the other one running.
    overlapped: Arc<AtomicUsize>,
}

impl Pair {
    /// The body of one child: spins, on its worker, until it sees the other child running too.
    fn spin(&self) {
        self.running.fetch_add(1, SeqCst);
        let start = Instant::now();
        while start.elapsed() < GIVE_UP {
            if self.running.load(SeqCst) >= 2 {
                self.overlapped.fetch_add(1, SeqCst);
                break;
            }
            std::hint::spin_loop();
        }
        // Stay counted as running until the sibling had its chance to see us.
        while self.running.load(SeqCst) >= 2
            && self.overlapped.load(SeqCst) < 2
            && start.elapsed() < GIVE_UP
        {
            std::hint::spin_loop();
        }
    }

    fn overlapped(&self) -> bool {
        self.overlapped.load(SeqCst) == 2
    }
}

/// A task that spawns two CPU-bound children with `coro::spawn` and waits for both.
fn spawn_two(pair: &Pair) -> Task<()> {
    let pair = pair.clone();
    Task::new(async move {
        let (a, b) = (pair.clone(), pair.clone());
        let first = coro::spawn(async move { a.spin() });
        let second = coro::spawn(async move { b.spin() });
        first.await.unwrap();
        second.await.unwrap();
    })
}

/// Runs `shape` (which block-waits for two CPU-bound children of `pair`) on a fresh two-worker
/// pool `rounds` times, and checks each time that the children overlapped.
fn overlaps_on_fresh_pools(rounds: usize, what: &str, shape: impl Fn(&ThreadPool, &Pair)) {
    for round in 0..rounds {
        let pool = ThreadPool::new(2).unwrap();
        let pair = Pair::default();
        shape(&pool, &pair);
        assert!(pair.overlapped(), "round {round}: {what}");
    }
}

#[test]
fn two_cpu_bound_spawns_overlap_on_a_fresh_pool() {
    overlaps_on_fresh_pools(
        20,
        "the two spawned CPU-bound tasks ran one after the other",
        |pool, pair| block_wait(spawn_two(pair).schedule_on(pool)),
    );
}

/// The spawned task lands alone in the spawner's next slot, and the spawner stays busy: the
/// task must still reach the idle worker (before the fix, nobody was woken for it).
#[test]
fn a_task_spawned_into_the_next_slot_runs_beside_its_busy_spawner() {
    overlaps_on_fresh_pools(
        30,
        "the spawned task waited for its spawner's poll to end",
        |pool, pair| {
            let p = pair.clone();
            let parent = Task::new(async move {
                let child = p.clone();
                let handle = coro::spawn(async move { child.spin() });
                p.spin();
                handle.await.unwrap();
            });
            block_wait(parent.schedule_on(pool));
        },
    );
}

#[test]
fn two_cpu_bound_spawns_overlap_on_a_pool_that_sat_idle() {
    let pool = ThreadPool::new(2).unwrap();
    for round in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        let pair = Pair::default();
        block_wait(spawn_two(&pair).schedule_on(&pool));
        assert!(
            pair.overlapped(),
            "round {round}: after 100 ms idle, the two spawned tasks did not overlap"
        );
    }
}

#[test]
fn two_cpu_bound_spawns_overlap_on_a_fresh_pool_after_a_sleep() {
    // The worker that runs the parent has just woken from a timer, the other has parked.
    overlaps_on_fresh_pools(10, "no overlap after a sleep", |pool, pair| {
        let parent = spawn_two(pair);
        let after_sleep = Task::new(async move {
            coro::time::sleep(Duration::from_millis(2)).await.unwrap();
            parent.await
        });
        block_wait(after_sleep.schedule_on(pool));
    });
}

/// `#[coro::test]` builds a fresh pool per test and runs the body on it: the first round runs
/// on the fresh pool, the others on one that just ran the previous round.
#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn two_cpu_bound_spawns_overlap_from_coro_test() {
    for round in 0..10 {
        let pair = Pair::default();
        spawn_two(&pair).await;
        assert!(
            pair.overlapped(),
            "round {round}: the two spawned tasks did not overlap"
        );
    }
}

#[test]
fn two_cpu_bound_collect_children_overlap() {
    overlaps_on_fresh_pools(
        20,
        "the two collect_all! children ran one after the other",
        |pool, pair| {
            let (a, b) = (pair.clone(), pair.clone());
            let parent = Task::new(async move {
                coro::collect_all!(async move { a.spin() }, async move { b.spin() }).await;
            });
            block_wait(parent.schedule_on(pool));
        },
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn two_cpu_bound_collect_children_overlap_from_coro_test() {
    for round in 0..10 {
        let pair = Pair::default();
        let (a, b) = (pair.clone(), pair.clone());
        coro::collect_all!(async move { a.spin() }, async move { b.spin() }).await;
        assert!(
            pair.overlapped(),
            "round {round}: collect_all! children did not overlap"
        );
    }
}

/// Ten tasks queued behind a poll that blocks its worker (nine in its local queue, the last
/// in its next slot) all run well before that poll ends: on the other worker, or on a helper
/// when the other worker is busy too.
fn queued_behind_a_blocking_poll(other_worker_busy: bool) {
    for round in 0..5 {
        let pool = ThreadPool::new(2).unwrap();
        let finished_at = Arc::new(std::sync::Mutex::new(Vec::new()));
        let busy = other_worker_busy.then(|| {
            // Keeps the other worker in one long poll of its own.
            let started = Arc::new(AtomicUsize::new(0));
            let s = started.clone();
            let handle = pool.spawn(async move {
                s.store(1, SeqCst);
                std::thread::sleep(Duration::from_millis(300));
            });
            while started.load(SeqCst) == 0 {
                std::thread::yield_now();
            }
            handle
        });
        let start = Instant::now();
        let f = finished_at.clone();
        let blocker = pool.spawn(async move {
            for _ in 0..10 {
                let f = f.clone();
                // From a worker: the last lands in the next slot, the others in the queue.
                coro::spawn(async move { f.lock().unwrap().push(start.elapsed()) }).detach();
            }
            // Blocks this worker; its queue must not wait for it.
            std::thread::sleep(Duration::from_millis(200));
        });
        block_wait(blocker).unwrap();
        let finished = finished_at.lock().unwrap().clone();
        assert_eq!(
            finished.len(),
            10,
            "round {round}: not every queued task ran"
        );
        let latest = finished.iter().max().copied().unwrap();
        assert!(
            latest < Duration::from_millis(50),
            "round {round}: the queued tasks waited {latest:?} behind a blocking poll"
        );
        if let Some(busy) = busy {
            block_wait(busy).unwrap();
            assert!(
                pool.metrics().helpers_started >= 1,
                "round {round}: with every worker busy, a helper should have run the tasks"
            );
        }
    }
}

#[test]
fn tasks_queued_behind_a_blocking_poll_run_on_the_other_worker() {
    queued_behind_a_blocking_poll(false);
}

#[test]
fn tasks_queued_behind_a_blocking_poll_run_on_a_helper_when_every_worker_is_busy() {
    queued_behind_a_blocking_poll(true);
}

/// A task alone in the next slot of a worker that then blocks is not stranded there.
#[test]
fn a_next_slot_task_behind_a_blocking_poll_runs_elsewhere() {
    for round in 0..10 {
        let pool = ThreadPool::new(2).unwrap();
        let start = Instant::now();
        // The blocker hands back the quick task's handle, to await from here.
        #[allow(clippy::async_yields_async)]
        let blocker = pool.spawn(async move {
            let quick = coro::spawn(async move { start.elapsed() });
            std::thread::sleep(Duration::from_millis(100));
            quick
        });
        let ran_after = block_wait(block_wait(blocker).unwrap()).unwrap();
        assert!(
            ran_after < Duration::from_millis(50),
            "round {round}: the next-slot task waited {ran_after:?} for the blocking poll"
        );
    }
}
