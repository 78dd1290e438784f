//! Models of the worker parker (`park.rs`):
//! - `loom_parker_unpark_before_park`: a token saved by an earlier `unpark` (from another
//!   thread) makes `park` return at once;
//! - `loom_parker_unpark_races_park`: an `unpark` racing `park` always wakes it (otherwise
//!   loom reports a deadlock), and what the unparker wrote before is visible after `park`;
//! - `loom_parker_two_unparks_one_token`: two unparks leave one token: the second `park` sleeps
//!   until a third `unpark`;
//! - `loom_parker_two_unparkers`: two threads unparking at once wake the parker exactly as one;
//! - `loom_park_polling_unpark_is_never_lost`, `loom_park_polling_spurious_return_then_condvar_park`:
//!   the park-in-poll protocol: an unpark racing a worker on its way into the OS poll is never
//!   lost. The OS poll is a stand-in (`FakePoll`): a wait on a flag that `notify` sets, and that
//!   (like `polling`'s notification) stays set if it is set before the wait starts;
//! - `loom_a_poll_token_given_back_reaches_a_worker_that_parked_without_it`: the poll token's
//!   give-back (`OsPoller::need_waiter` after a poll that does not wait, against
//!   `Worker::park`'s second try after it counts itself parked): the worker either gets the
//!   token or is woken, with the pool's own `Idle` and `Parker` and a mutex for the token;
//! - `loom_a_searchers_look_at_the_os_leaves_no_worker_parked_without_the_token`: a lingering
//!   searcher's look at the OS (`drivers::look_at_io`), which gives nothing back, against a
//!   worker that parks while the look holds the token: the searcher then either parks (and
//!   takes the token) or finds work (and, the last searcher, wakes the parked worker).
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::idle::Idle;
use super::park::Parker;
use crate::loom::model;
use crate::loom::sync::atomic::{AtomicBool, Ordering::*, fence};
use crate::loom::sync::{Arc, Condvar, Mutex};
use crate::loom::thread;

#[test]
fn loom_parker_unpark_before_park() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let unparker = {
            let parker = parker.clone();
            thread::spawn(move || parker.unpark())
        };
        unparker.join().unwrap();
        // The token is saved: this returns at once (a lost token is a loom deadlock).
        parker.park();
    });
}

#[test]
fn loom_parker_unpark_races_park() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let flag = Arc::new(AtomicBool::new(false));
        let unparker = {
            let (parker, flag) = (parker.clone(), flag.clone());
            thread::spawn(move || {
                flag.store(true, Relaxed);
                parker.unpark();
            })
        };
        parker.park();
        // `park` does not return spuriously, and the unpark orders the unparker's writes first.
        assert!(flag.load(Relaxed), "park returned before unpark");
        unparker.join().unwrap();
    });
}

#[test]
fn loom_parker_two_unparks_one_token() {
    model(|| {
        let parker = Arc::new(Parker::new());
        parker.unpark();
        parker.unpark();
        parker.park();
        let flag = Arc::new(AtomicBool::new(false));
        let unparker = {
            let (parker, flag) = (parker.clone(), flag.clone());
            thread::spawn(move || {
                flag.store(true, Relaxed);
                parker.unpark();
            })
        };
        // Only one token was saved: this park has to wait for the third unpark.
        parker.park();
        assert!(flag.load(Relaxed), "two unparks left two tokens");
        unparker.join().unwrap();
    });
}

#[test]
fn loom_parker_two_unparkers() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let unparkers: Vec<_> = (0..2)
            .map(|_| {
                let parker = parker.clone();
                thread::spawn(move || parker.unpark())
            })
            .collect();
        parker.park();
        for unparker in unparkers {
            unparker.join().unwrap();
        }
        // However the two overlapped, the parker is consistent afterwards: the second unpark
        // either merged with the first or left one token, never a panic or a stuck state.
        parker.unpark();
        parker.park();
    });
}

/// The OS poll: `wait` blocks until `notify`, or returns at once if a notification (or an
/// IO event, `events`) is pending, consuming it.
#[derive(Default)]
struct FakePoll {
    pending: Mutex<bool>,
    condvar: Condvar,
}

impl FakePoll {
    fn wait(&self) {
        let mut pending = self.pending.lock().unwrap();
        while !*pending {
            pending = self.condvar.wait(pending).unwrap();
        }
        *pending = false;
    }

    fn notify(&self) {
        *self.pending.lock().unwrap() = true;
        self.condvar.notify_one();
    }
}

#[test]
fn loom_park_polling_unpark_is_never_lost() {
    model(|| {
        let parker = Arc::new(Parker::new());
        let poll = Arc::new(FakePoll::default());
        let worker = {
            let (parker, poll) = (parker.clone(), poll.clone());
            thread::spawn(move || parker.park_polling(|| poll.wait()))
        };
        parker.unpark_with(|| poll.notify());
        worker.join().unwrap();
    });
}

#[test]
fn loom_park_polling_spurious_return_then_condvar_park() {
    model(|| {
        // As the worker's park loop: it waits (in the poll, or on the condvar when another
        // thread has the poll) until a notifier has chosen it and unparked it. The first
        // poll returns at once (IO events), so the worker goes round again: the one unpark
        // must end its wait wherever it lands.
        let parker = Arc::new(Parker::new());
        let poll = Arc::new(FakePoll::default());
        let chosen = Arc::new(AtomicBool::new(false));
        poll.notify();
        let worker = {
            let (parker, poll, chosen) = (parker.clone(), poll.clone(), chosen.clone());
            thread::spawn(move || {
                let mut round = 0;
                while !chosen.load(SeqCst) {
                    if round == 0 {
                        parker.park_polling(|| poll.wait());
                    } else {
                        parker.park();
                    }
                    round += 1;
                }
            })
        };
        chosen.store(true, SeqCst);
        parker.unpark_with(|| poll.notify());
        worker.join().unwrap();
    });
}

/// Tries for the poll token, an atomic word as std's futex mutex uses it: a try-lock is an
/// acquiring compare-exchange (the holder unlocks with a releasing swap).
fn try_lock(token: &AtomicBool) -> bool {
    token
        .compare_exchange(false, true, Acquire, Relaxed)
        .is_ok()
}

/// Worker `index` parks as `Worker::park` does when the token may be taken: tries for it,
/// counts itself parked, fences and tries again (`drivers::retry_poll_io`). True if it got it;
/// false if it must sleep without it.
fn park_for_the_token(idle: &Idle, index: usize, token: &AtomicBool) -> bool {
    if try_lock(token) {
        return true;
    }
    idle.park(index, false, false);
    fence(SeqCst);
    try_lock(token)
}

/// Worker 0 parks while a poll that does not wait (worker 1's look on its global-queue tick, or
/// the monitor's) holds the poll token. Worker 0 counts itself parked, fences and tries for the
/// token again (`Worker::park`, `drivers::retry_poll_io`); the poll unlocks the token and
/// then asks the idle state whether a worker is parked (`OsPoller::need_waiter`'s kick:
/// `Idle::io_wait_should_wake`, which fences first, then `worker_to_notify`). Either the worker
/// holds the token (it would wait in the OS) or it is woken: a worker left asleep without the
/// token, with nobody waiting in the OS, is a deadlock here.
#[test]
fn loom_a_poll_token_given_back_reaches_a_worker_that_parked_without_it() {
    model(|| {
        let idle = Arc::new(Idle::new(2));
        // Held by the poll that does not wait.
        let token = Arc::new(AtomicBool::new(true));
        let parker = Arc::new(Parker::new());
        let worker = {
            let (idle, token, parker) = (idle.clone(), token.clone(), parker.clone());
            thread::spawn(move || {
                if !park_for_the_token(&idle, 0, &token) {
                    parker.park();
                }
            })
        };
        token.swap(false, Release);
        if idle.io_wait_should_wake() {
            if let Some(notify) = idle.worker_to_notify() {
                assert_eq!(notify.worker, 0, "only worker 0 sleeps");
                parker.unpark();
            }
        }
        worker.join().unwrap();
    });
}

/// Worker 0, a lingering searcher, holds the poll token for its look at the OS
/// (`drivers::look_at_io`) while worker 1 parks, fails to get the token twice and sleeps. The
/// look unlocks the token and gives nothing back (no kick). Then worker 0 either parks too
/// (`parks`), and so tries for the token itself, or finds work, stops searching and, the last
/// searcher, wakes a parked worker (`Worker::run_task`), which takes the token on its way back
/// to sleep. Two workers asleep without the token, with nobody waiting in the OS, is the
/// failure: an assertion when worker 0 parks without it, a loom deadlock when worker 0 runs
/// tasks and worker 1 is never woken. (When worker 0 parks holding the token, an event it
/// waits for in the OS would wake worker 1; the model's last `unpark` stands in for it.)
#[test]
fn loom_a_searchers_look_at_the_os_leaves_no_worker_parked_without_the_token() {
    for parks in [false, true] {
        model(move || {
            let idle = Arc::new(Idle::new(2));
            assert!(idle.try_start_searching());
            // Held by worker 0's look.
            let token = Arc::new(AtomicBool::new(true));
            let parker = Arc::new(Parker::new());
            // Worker 1: whether it got the token before sleeping, and after being woken.
            let worker = {
                let (idle, token, parker) = (idle.clone(), token.clone(), parker.clone());
                thread::spawn(move || {
                    if park_for_the_token(&idle, 1, &token) {
                        return (true, false);
                    }
                    parker.park();
                    (false, try_lock(&token))
                })
            };
            // The look ends.
            token.swap(false, Release);
            if parks {
                let mut holds = try_lock(&token);
                idle.park(0, true, holds);
                if !holds {
                    fence(SeqCst);
                    holds = try_lock(&token);
                }
                parker.unpark();
                let (before_sleep, _) = worker.join().unwrap();
                assert!(
                    holds || before_sleep,
                    "both workers parked and neither holds the token"
                );
            } else {
                if idle.stop_searching() {
                    if let Some(notify) = idle.worker_to_notify() {
                        assert_eq!(notify.worker, 1, "only worker 1 sleeps");
                        parker.unpark();
                    }
                }
                let (before_sleep, after_wake) = worker.join().unwrap();
                assert!(
                    before_sleep || after_wake,
                    "worker 0 runs tasks and worker 1 sleeps without the token"
                );
            }
        });
    }
}
