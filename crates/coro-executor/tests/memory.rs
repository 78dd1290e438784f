//! Memory cost of idle tasks on a `ThreadPool`, measured with a counting `#[global_allocator]`
//! (its own test binary, so nothing else allocates through it): 10,000 tasks that have been polled
//! once and wait on a channel must cost at most 128 bytes each on top of their future, and shutting
//! the pool down must give all of it back (no leak).
//!
//! Test threads of one binary run concurrently, so the whole measurement is one `#[test]`.

use coro_executor::{JoinError, JoinHandle, ThreadPool};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// Passes every request to `System`, counting the bytes allocated and freed.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static FREED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counters
// have no effect on the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            ALLOCATED.fetch_add(layout.size(), Relaxed);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            ALLOCATED.fetch_add(layout.size(), Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        FREED.fetch_add(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            FREED.fetch_add(layout.size(), Relaxed);
            ALLOCATED.fetch_add(new_size, Relaxed);
        }
        new
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated and not yet freed.
fn live_bytes() -> isize {
    ALLOCATED.load(SeqCst) as isize - FREED.load(SeqCst) as isize
}

const TIMEOUT: Duration = Duration::from_secs(10);
const TASKS: usize = 10_000;

/// The future of every measured task: a 64-byte payload kept across an await on a channel.
async fn idle_task(rx: oneshot::Receiver<()>, polled: Arc<AtomicUsize>) -> u8 {
    let payload = [7u8; 64];
    polled.fetch_add(1, SeqCst);
    let _ = rx.await;
    std::hint::black_box(&payload)[63]
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "hung: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn idle_tasks_cost_at_most_128_bytes_over_their_future_and_are_all_freed_at_shutdown() {
    let start = live_bytes();

    let pool = ThreadPool::new(2).unwrap();
    // Warm up: workers started and parked, lazily allocated pool state in place.
    wait_until("the workers never parked", || {
        pool.metrics().workers.iter().map(|w| w.parks).sum::<u64>() >= 2
    });
    for _ in 0..3 {
        let warm: Vec<_> = (0..100).map(|i| pool.spawn(async move { i })).collect();
        wait_until("the warm-up tasks never finished", || {
            warm.iter().all(JoinHandle::is_finished)
        });
        for h in warm {
            block_on(h).unwrap();
        }
    }

    // Everything the measurement needs but the tasks themselves, allocated up front.
    let polled = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::with_capacity(TASKS);
    let mut receivers = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let (tx, rx) = oneshot::channel::<()>();
        senders.push(tx);
        receivers.push(rx);
    }
    let mut handles: Vec<JoinHandle<u8>> = Vec::with_capacity(TASKS);
    let future_size = {
        let (_tx, rx) = oneshot::channel();
        std::mem::size_of_val(&idle_task(rx, polled.clone()))
    };

    let before = live_bytes();
    for rx in receivers.drain(..) {
        handles.push(pool.spawn(idle_task(rx, polled.clone())));
    }
    wait_until("not every task was polled", || polled.load(SeqCst) == TASKS);
    wait_until("the global queue did not drain", || {
        pool.metrics().global_queue_depth == 0
    });
    let after = live_bytes();
    assert_eq!(pool.metrics().live_tasks, TASKS);

    let per_task = (after - before) as f64 / TASKS as f64;
    let budget = 128 + future_size;
    println!(
        "idle task: {per_task:.1} bytes allocated per task (future: {future_size} bytes; \
         overhead {:.1} bytes; budget {budget})",
        per_task - future_size as f64
    );
    assert!(
        per_task <= budget as f64,
        "an idle task costs {per_task:.1} bytes, more than 128 + its {future_size}-byte future"
    );

    pool.shutdown();
    for handle in handles.drain(..) {
        assert!(
            handle.is_finished(),
            "shutdown returned with a task still alive"
        );
        assert!(matches!(block_on(handle), Err(JoinError::Cancelled)));
    }
    drop((handles, senders, receivers, polled));

    let leaked = live_bytes() - start;
    println!("after shutdown: {leaked} bytes still allocated since the start");
    assert!(
        leaked.abs() < 16 * 1024,
        "{leaked} bytes were not freed by shutdown (10,000 tasks were alive)"
    );
}
