//! Integration tests of offers (`offer_while`) and the monitor that wakes a parked worker for
//! one that stays posted: a busy worker's offer is taken by an idle worker, nothing is posted
//! where nobody could take it, offers nest, a panicking `take` leaves the worker serving, an
//! offer with no work left is not taken, and the monitor thread ends with its pool.

use coro_executor::{Offer, ThreadPool, offer_while};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use crate::support::{TIMEOUT, wait, wait_until};

/// An offer of one job; records the thread of every `take` and whether one got the job.
#[derive(Default)]
struct OneJob {
    taken: AtomicBool,
    takes: AtomicUsize,
    taker: Mutex<Option<ThreadId>>,
    /// `take` panics instead (after counting the call).
    panics: bool,
}

impl OneJob {
    fn claim(&self) -> bool {
        !self.taken.swap(true, SeqCst)
    }
}

impl Offer for OneJob {
    fn has_work(&self) -> bool {
        !self.taken.load(SeqCst)
    }

    fn take(self: Arc<Self>) {
        self.takes.fetch_add(1, SeqCst);
        assert!(!self.panics, "a take that panics");
        if self.claim() {
            *self.taker.lock().unwrap() = Some(std::thread::current().id());
        }
    }
}

/// Spins on this worker, with `offer` posted, until `done` holds or `TIMEOUT` passes.
fn busy_offering(offer: &Arc<OneJob>, done: impl Fn(&OneJob) -> bool) {
    offer_while(offer, || {
        let start = Instant::now();
        while !done(offer) && start.elapsed() < TIMEOUT {
            std::hint::spin_loop();
        }
    });
}

#[test]
fn an_idle_worker_takes_the_offer_of_a_busy_one() {
    let pool = ThreadPool::new(2).unwrap();
    let offer = Arc::new(OneJob::default());
    let posted = offer.clone();
    let busy = pool.spawn(async move {
        busy_offering(&posted, |o| o.taken.load(SeqCst));
        std::thread::current().id()
    });
    let poster = wait("the busy task", busy).unwrap();
    assert!(offer.taken.load(SeqCst), "no idle worker took the offer");
    let taker = offer
        .taker
        .lock()
        .unwrap()
        .expect("the taker recorded itself");
    assert_ne!(taker, poster, "the offer was taken by its own busy worker");
    let m = pool.metrics();
    assert!(m.workers.iter().map(|w| w.offers_taken).sum::<u64>() >= 1);
}

#[test]
fn nothing_is_offered_on_a_pool_of_one_worker_or_outside_a_pool() {
    let offer = Arc::new(OneJob::default());
    assert_eq!(offer_while(&offer, || 5), 5, "f runs outside a pool");
    let pool = ThreadPool::new(1).unwrap();
    let posted = offer.clone();
    let ran = pool.spawn(async move {
        // Long enough for a monitor (there is none) to have noticed.
        offer_while(&posted, || std::thread::sleep(Duration::from_millis(20)));
        true
    });
    assert!(wait("the offering task", ran).unwrap());
    assert_eq!(
        offer.takes.load(SeqCst),
        0,
        "a one-worker pool took an offer"
    );
    assert_eq!(Arc::strong_count(&offer), 1, "the pool kept a reference");
}

#[test]
fn an_inner_offer_hides_the_outer_one_until_it_is_revoked() {
    let pool = ThreadPool::new(2).unwrap();
    let outer = Arc::new(OneJob::default());
    let inner = Arc::new(OneJob::default());
    let (o, i) = (outer.clone(), inner.clone());
    let nested = pool.spawn(async move {
        offer_while(&o, || {
            // While the inner offer is posted, the idle worker takes it, never the outer.
            busy_offering(&i, |j| j.taken.load(SeqCst));
            let outer_taken_meanwhile = o.taken.load(SeqCst);
            // Back to the outer offer: it is posted again and gets taken.
            let start = Instant::now();
            while !o.taken.load(SeqCst) && start.elapsed() < TIMEOUT {
                std::hint::spin_loop();
            }
            outer_taken_meanwhile
        })
    });
    let outer_taken_meanwhile = wait("the nested offers", nested).unwrap();
    assert!(inner.taken.load(SeqCst), "the inner offer was not taken");
    assert!(
        !outer_taken_meanwhile,
        "the outer offer was visible under the inner one"
    );
    assert!(
        outer.taken.load(SeqCst),
        "the outer offer was not posted again"
    );
    wait_until("the offers' references released", || {
        Arc::strong_count(&outer) == 1 && Arc::strong_count(&inner) == 1
    });
}

#[test]
fn a_panicking_take_leaves_the_worker_serving() {
    let pool = ThreadPool::new(2).unwrap();
    let offer = Arc::new(OneJob {
        panics: true,
        ..OneJob::default()
    });
    let posted = offer.clone();
    let busy = pool.spawn(async move {
        busy_offering(&posted, |o| o.takes.load(SeqCst) > 0);
    });
    wait("the busy task", busy).unwrap();
    assert!(
        offer.takes.load(SeqCst) > 0,
        "nobody tried to take the offer"
    );
    // Both workers still run tasks: two tasks that each wait for the other to start.
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let started = started.clone();
            pool.spawn(async move {
                started.fetch_add(1, SeqCst);
                let start = Instant::now();
                while started.load(SeqCst) < 2 && start.elapsed() < TIMEOUT {
                    std::hint::spin_loop();
                }
                started.load(SeqCst)
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(wait("a task after the panic", handle).unwrap(), 2);
    }
}

#[test]
fn an_offer_without_work_is_not_taken() {
    let pool = ThreadPool::new(2).unwrap();
    let offer = Arc::new(OneJob::default());
    assert!(offer.claim(), "the job is done before it is offered");
    let posted = offer.clone();
    let busy = pool.spawn(async move {
        // Several monitor periods (at most 1 ms each, once it has backed off).
        offer_while(&posted, || std::thread::sleep(Duration::from_millis(30)));
    });
    wait("the busy task", busy).unwrap();
    assert_eq!(
        offer.takes.load(SeqCst),
        0,
        "an offer without work was taken"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_monitor_thread_ends_with_its_pool() {
    // Thread names in `comm` are cut to 15 bytes: keep the pool's short.
    let name = "ofr-monitor";
    let monitors = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim() == name)
            .count()
    };
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("ofr")
        .build()
        .unwrap();
    // A thread names itself once it runs.
    wait_until("the monitor thread of a pool of two workers", || {
        monitors() == 1
    });
    drop(pool);
    // Joined means the thread has run to its end; the kernel may list it in `/proc` for a moment
    // longer (it signals the join before it reaps the thread), so allow a short wait.
    let deadline = Instant::now() + Duration::from_secs(1);
    while monitors() != 0 {
        assert!(
            Instant::now() < deadline,
            "dropping the pool did not end its monitor thread"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // A pool of one worker has no one to take an offer, but its monitor still hands work held
    // up behind a long poll to a helper: it has one too, and it ends with the pool as well.
    let single = ThreadPool::builder()
        .worker_threads(1)
        .thread_name("ofr")
        .build()
        .unwrap();
    wait_until("the monitor thread of a pool of one worker", || {
        monitors() == 1
    });
    drop(single);
    let deadline = Instant::now() + Duration::from_secs(1);
    while monitors() != 0 {
        assert!(
            Instant::now() < deadline,
            "dropping the one-worker pool did not end its monitor thread"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
