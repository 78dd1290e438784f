//! Loom models of the timer driver (loom-only: it runs on loom's simulated clock). A child
//! module of `driver.rs`, to reach its private state.

use super::*;
use crate::loom::sync::atomic::AtomicBool;
use crate::loom::thread;
use std::sync::Arc;
use std::task::Wake;

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Simulated time: the clock stands at `now`; a wait for a target at or before
/// `times_out_by` stands for a `wait_timeout` that expires in time on its own, any other wait
/// only ends with a notification (loom's `wait_timeout` never times out anyway).
struct ModelClock {
    now: u64,
    times_out_by: u64,
}

impl Clock for ModelClock {
    fn now_tick(&self, _: &Driver) -> u64 {
        self.now
    }
    fn wait<'a>(
        &self,
        driver: &'a Driver,
        guard: MutexGuard<'a, Inner>,
        target: u64,
    ) -> MutexGuard<'a, Inner> {
        if target <= self.times_out_by {
            guard
        } else {
            driver.cond.wait(guard).unwrap()
        }
    }
}

/// The driver loop of the model: park until the computed target is tick 5 or earlier, i.e.
/// until a real `wait_timeout` would end in time for the early timer by itself.
fn park_until_target_reaches(driver: &Driver, tick: u64) {
    let clock = ModelClock {
        now: 0,
        times_out_by: tick,
    };
    while driver.park(&clock) > tick {}
}

/// The driver parks on a late deadline while another thread registers an earlier one. If
/// the registration could slip between the driver computing its target and waiting, the
/// driver would block forever (a loom deadlock) instead of reaching the early timer.
#[test]
fn loom_earlier_registration_wakes_parked_driver() {
    loom::model(|| {
        let driver = Driver::new_manual();
        let late = driver.register(1000, Waker::noop().clone()).unwrap();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let registrant = thread::spawn(move || driver.register(5, waker).unwrap());
        park_until_target_reaches(driver, 5);
        let mut buf = Vec::new();
        assert_eq!(driver.fire_due(5, &mut buf), 1);
        assert!(flag.0.load(Ordering::SeqCst));
        let early = registrant.join().unwrap();
        assert!(early.has_fired());
        assert!(!late.has_fired());
        assert_eq!(driver.pending(), 1);
    });
}

/// A pool's driver: worker 0 keeps the timers, sleeping (on a parker, as a worker does)
/// until its target tick, while another thread registers an earlier timer. If the
/// registration could slip between the keeper computing its target and sleeping, the keeper
/// would sleep forever on the late target (a loom deadlock) instead of coming back for the
/// early timer. The keeper's wake-up goes through the pool's kick, which unparks it.
#[test]
fn loom_earlier_registration_wakes_the_pools_keeper() {
    loom::model(|| {
        let parker = Arc::new(crate::pool::park::Parker::new());
        let kicked = parker.clone();
        let driver: &'static Driver = Box::leak(Box::new(Driver::for_pool(Box::new(
            // One worker: the keeper and "any parked worker" are the same.
            move |_kick| kicked.unpark(),
        ))));
        let clock = ModelClock {
            now: 0,
            times_out_by: 5,
        };
        // A late timer first (its kick leaves a token: the first sleep may end at once).
        driver.register(1000, Waker::noop().clone()).unwrap();
        let registrant = thread::spawn(move || driver.register(5, Waker::noop().clone()));
        loop {
            let target = driver
                .keep_at(0, &clock)
                .expect("worker 0 keeps the timers");
            if target <= clock.times_out_by {
                // A timed sleep until `target` would end in time for the early timer.
                break;
            }
            parker.park();
            driver.leave(0);
        }
        let early = registrant.join().unwrap().unwrap();
        let mut buf = Vec::new();
        assert_eq!(driver.fire_due(5, &mut buf), 1);
        assert!(early.has_fired());
    });
}

/// Two registrations race with the parked driver: a later one (which lowers `sleep_until`
/// and notifies) must not make the driver miss the notification of the earliest one.
#[test]
fn loom_two_registrations_race_parked_driver() {
    loom::model(|| {
        let driver = Driver::new_manual();
        driver.register(1000, Waker::noop().clone()).unwrap();
        let middle = thread::spawn(move || driver.register(700, Waker::noop().clone()).unwrap());
        let early = thread::spawn(move || driver.register(5, Waker::noop().clone()).unwrap());
        park_until_target_reaches(driver, 5);
        let mut buf = Vec::new();
        assert_eq!(driver.fire_due(5, &mut buf), 1);
        assert!(early.join().unwrap().has_fired());
        assert!(!middle.join().unwrap().has_fired());
        assert_eq!(driver.pending(), 2);
    });
}
