//! Who is searching and who is parked: the bookkeeping behind "wake a worker only when it helps".
//!
//! One atomic word counts unparked workers and, among them, searching ones (workers looking for
//! work to steal). The pool's rules for waking and parking are decided here:
//! - at most half of the workers search at once ([`Idle::try_start_searching`]);
//! - a new task wakes a parked worker only if no worker is searching and some worker is parked
//!   ([`Idle::worker_to_notify`]); a searcher will find the task otherwise (and a push that finds
//!   one is what a lingering searcher earns: it counts itself in [`Idle::absorbed`]); a
//!   socket wait while nobody waits in the OS is not such work (a searcher cannot find its
//!   event in a queue), so it asks the searcher to look at the OS instead
//!   ([`Idle::io_wait_should_wake`]);
//! - the last searcher to stop searching reports it, so its caller wakes one more worker (it
//!   found work, and there may be more) or, when it is about to park, rescans every queue.
//!
//! The set of parked workers sits behind a mutex: parking and notifying are slow paths, and the
//! lock is what makes "decide to notify" and "pick a sleeper" one atomic step.

use super::linger::{Absorbed, LookAtIo};
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*, fence};

const SEARCHING_BITS: usize = 16;
const SEARCHING_MASK: usize = (1 << SEARCHING_BITS) - 1;
const UNPARKED_ONE: usize = 1 << SEARCHING_BITS;

pub(crate) struct Idle {
    /// `unparked << 16 | searching`.
    state: AtomicUsize,
    sleepers: Mutex<Sleepers>,
    num_workers: usize,
    /// High-water mark of simultaneous searchers, for metrics.
    max_searching: AtomicUsize,
    /// Pushes that found a searcher while a linger watched (`linger.rs`).
    absorbed: Absorbed,
    /// Socket waits that found a searcher ask it to look at the OS (`linger.rs`).
    look_at_io: LookAtIo,
}

struct Sleepers {
    /// Indices of parked workers, most recently parked last.
    parked: Vec<usize>,
    /// The pool's monitor sleeps until a worker is woken (`monitor.rs`).
    monitor_asleep: bool,
}

/// A parked worker to wake, chosen by [`Idle::worker_to_notify`].
pub(crate) struct Notify {
    pub(crate) worker: usize,
    /// The monitor slept while every worker was parked: wake it too.
    pub(crate) monitor: bool,
}

fn searching(state: usize) -> usize {
    state & SEARCHING_MASK
}

fn unparked(state: usize) -> usize {
    state >> SEARCHING_BITS
}

impl Idle {
    pub(crate) fn new(num_workers: usize) -> Idle {
        assert!(num_workers < SEARCHING_MASK, "too many workers");
        Idle {
            state: AtomicUsize::new(num_workers << SEARCHING_BITS),
            sleepers: Mutex::new(Sleepers {
                parked: Vec::with_capacity(num_workers),
                monitor_asleep: false,
            }),
            num_workers,
            max_searching: AtomicUsize::new(0),
            absorbed: Absorbed::default(),
            look_at_io: LookAtIo::default(),
        }
    }

    /// If a parked worker should be woken for new work, marks it unparked and searching and
    /// returns its index (and whether the monitor sleeps, see `monitor_may_sleep`). The caller
    /// must unpark it (and the monitor).
    pub(crate) fn worker_to_notify(&self) -> Option<Notify> {
        // The caller has just made work visible. A SeqCst read-modify-write orders that store
        // before this read (a plain load could be satisfied early); it pairs with the SeqCst
        // decrement in `stop_searching`/`park`, so either the notifier sees no searcher or the
        // searcher's rescan sees the work.
        if !self.notify_should_wake() {
            return None;
        }
        let mut sleepers = self.sleepers.lock().unwrap();
        // One more unparked and searching worker: the one we wake starts as a searcher. A CAS,
        // not an add, so that a worker that started searching meanwhile cancels the wake-up and
        // the "at most half search" bound holds exactly.
        let mut state = self.state.load(SeqCst);
        loop {
            if searching(state) != 0 || unparked(state) >= self.num_workers {
                return None;
            }
            match self
                .state
                .compare_exchange(state, state + (UNPARKED_ONE | 1), SeqCst, SeqCst)
            {
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        self.note_searching(1);
        // Which sleeper wakes is a race between their parks in production; in a simulation it is
        // drawn from the seed.
        #[cfg(not(any(loom, shuttle)))]
        let worker = match sleepers.parked.len() {
            n @ 2.. => crate::sim::state::with(|c| c.below("worker to wake", n))
                .map(|at| sleepers.parked.remove(at))
                .or_else(|| sleepers.parked.pop()),
            _ => sleepers.parked.pop(),
        };
        #[cfg(any(loom, shuttle))]
        let worker = sleepers.parked.pop();
        debug_assert!(
            worker.is_some(),
            "fewer unparked than workers implies a sleeper"
        );
        let monitor = std::mem::take(&mut sleepers.monitor_asleep);
        worker.map(|worker| Notify { worker, monitor })
    }

    /// Whether the pool's monitor may sleep until a worker is woken: every worker is parked, so
    /// none can post an offer until one is woken, which happens only through
    /// [`worker_to_notify`](Self::worker_to_notify) and which then reports the monitor asleep.
    /// Decided under the sleepers' lock, as the wake-ups are, so no wake-up is missed.
    pub(crate) fn monitor_may_sleep(&self) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap();
        let all_parked = unparked(self.state.load(SeqCst)) == 0;
        sleepers.monitor_asleep = all_parked;
        all_parked
    }

    /// Whether new work should wake a parked worker: nobody searches (else the searcher finds
    /// it, and this push counts as absorbed) and some worker is parked. A snapshot after a
    /// fence that orders the caller's push before it; [`worker_to_notify`](Self::worker_to_notify)
    /// decides again under the lock.
    pub(crate) fn notify_should_wake(&self) -> bool {
        // Had that searcher parked instead, this push would have woken a worker.
        self.should_wake(|idle| idle.absorbed.note())
    }

    /// Whether a task that starts waiting on a socket while nobody waits in the OS should wake
    /// a parked worker to wait there: as [`notify_should_wake`](Self::notify_should_wake), but
    /// a searcher it finds is asked to look at the OS ([`LookAtIo`]) rather than credited with
    /// an absorbed push: the socket's event reaches no queue it searches, and counting the wait
    /// kept lingers spinning while the event sat in the OS (an HTTP client and its server on
    /// one pool lost 6% of their rate to it).
    pub(crate) fn io_wait_should_wake(&self) -> bool {
        self.should_wake(|idle| idle.look_at_io.ask())
    }

    /// Nobody searches and some worker is parked; `searcher_found` runs if somebody searches.
    #[inline(always)]
    fn should_wake(&self, searcher_found: impl FnOnce(&Idle)) -> bool {
        // A fence, not a read-modify-write: it orders the caller's push of work before this read
        // just as well (it pairs with the SeqCst read-modify-writes of searchers and parkers),
        // without taking the cache line exclusive on every spawn from every thread.
        fence(SeqCst);
        let state = self.state.load(SeqCst);
        if searching(state) != 0 {
            searcher_found(self);
            return false;
        }
        unparked(state) < self.num_workers
    }

    /// Tries to become a searcher; fails if half of the workers already are.
    pub(crate) fn try_start_searching(&self) -> bool {
        let mut state = self.state.load(SeqCst);
        loop {
            if 2 * searching(state) >= self.num_workers {
                return false;
            }
            match self
                .state
                .compare_exchange(state, state + 1, SeqCst, SeqCst)
            {
                Ok(_) => {
                    self.note_searching(searching(state) + 1);
                    return true;
                }
                Err(actual) => state = actual,
            }
        }
    }

    fn note_searching(&self, now: usize) {
        if now > self.max_searching.load(Relaxed) {
            self.max_searching.fetch_max(now, Relaxed);
        }
    }

    /// Stops searching (the worker found work). Returns true if it was the last searcher: the
    /// caller should then wake another worker, since more work may be waiting.
    pub(crate) fn stop_searching(&self) -> bool {
        let prev = self.state.fetch_sub(1, SeqCst);
        debug_assert!(searching(prev) > 0);
        searching(prev) == 1
    }

    /// Records that worker `index` parks. Returns true if the caller must rescan every queue
    /// before sleeping: it was the last searcher (a task may have been pushed while every
    /// notifier counted on a searcher to find it), or it is the last worker awake.
    ///
    /// A worker that will wait in the OS poll (`polling`) goes to the front of the sleepers, so
    /// that notifications wake the others first and the poll goes on.
    pub(crate) fn park(&self, index: usize, is_searching: bool, polling: bool) -> bool {
        let mut sleepers = self.sleepers.lock().unwrap();
        let dec = UNPARKED_ONE | is_searching as usize;
        let prev = self.state.fetch_sub(dec, SeqCst);
        if polling {
            sleepers.parked.insert(0, index);
        } else {
            sleepers.parked.push(index);
        }
        (is_searching && searching(prev) == 1) || unparked(prev) == 1
    }

    /// Parked worker `index` got the poll token after it counted itself parked
    /// (`Worker::park`'s second try): it moves to the front of the sleepers, as `park` puts a
    /// polling worker, so that notifications wake the others first and the poll goes on.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn now_polling(&self, index: usize) {
        let mut sleepers = self.sleepers.lock().unwrap();
        if let Some(at) = sleepers.parked.iter().position(|&i| i == index) {
            let worker = sleepers.parked.remove(at);
            sleepers.parked.insert(0, worker);
        }
    }

    /// A parked worker woke by itself (its OS poll returned IO events, and it is about to wake
    /// their tasks): takes it off the sleepers as awake and not searching. Returns `None` if a
    /// notifier had already chosen it (it then counts as searching, see `unpark_confirmed`),
    /// else whether the monitor sleeps and must be woken (as `worker_to_notify` reports).
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn unpark_self(&self, index: usize) -> Option<bool> {
        let mut sleepers = self.sleepers.lock().unwrap();
        let at = sleepers.parked.iter().position(|&i| i == index)?;
        sleepers.parked.remove(at);
        self.state.fetch_add(UNPARKED_ONE, SeqCst);
        Some(std::mem::take(&mut sleepers.monitor_asleep))
    }

    /// After a wake-up: returns true if worker `index` was really chosen (it is no longer in the
    /// sleeper list), false on a spurious wake-up.
    pub(crate) fn unpark_confirmed(&self, index: usize) -> bool {
        !self.sleepers.lock().unwrap().parked.contains(&index)
    }

    /// Current number of searching workers.
    pub(crate) fn num_searching(&self) -> usize {
        searching(self.state.load(SeqCst))
    }

    /// Whether a worker other than the caller (who is unparked) is unparked: one that may
    /// still queue work for a searcher to take. A snapshot, for a heuristic.
    pub(crate) fn others_unparked(&self) -> bool {
        unparked(self.state.load(Relaxed)) > 1
    }

    /// The pushes absorbed by searchers, which lingers watch (`linger.rs`).
    pub(super) fn absorbed(&self) -> &Absorbed {
        &self.absorbed
    }

    /// Whether a socket wait asked a searcher to look at the OS since the last look; takes the
    /// request.
    pub(super) fn take_look_at_io(&self) -> bool {
        self.look_at_io.take()
    }

    /// The most workers ever seen searching at once.
    pub(crate) fn max_searching(&self) -> usize {
        self.max_searching.load(Relaxed)
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    /// Worker 1 parked, worker 0 searching, and a linger watching the absorbed count.
    fn one_searching_one_parked() -> Idle {
        let idle = Idle::new(2);
        idle.park(1, false, false);
        assert!(idle.try_start_searching());
        idle.absorbed.watch();
        idle
    }

    #[test]
    fn a_socket_wait_that_finds_a_searcher_asks_it_to_look_and_is_not_absorbed() {
        let idle = one_searching_one_parked();
        assert!(!idle.io_wait_should_wake(), "the searcher answers for it");
        assert!(idle.take_look_at_io(), "the searcher is asked to look");
        assert_eq!(idle.absorbed.watch(), 0, "no push was absorbed");
    }

    #[test]
    fn a_push_that_finds_a_searcher_is_absorbed_and_asks_for_no_look() {
        let idle = one_searching_one_parked();
        assert!(!idle.notify_should_wake());
        assert!(!idle.take_look_at_io());
        assert_eq!(idle.absorbed.watch(), 1);
    }

    #[test]
    fn a_socket_wait_with_nobody_searching_wakes_a_parked_worker() {
        let idle = one_searching_one_parked();
        assert!(idle.stop_searching(), "the only searcher stopped");
        assert!(idle.io_wait_should_wake());
        assert!(!idle.take_look_at_io(), "nobody to look");
    }
}
