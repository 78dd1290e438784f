//! Loom models of `Sleep` against its timer driver (loom-only: the driver runs on loom's
//! simulated clock). A child module of `sleep.rs`, to reach its private registration API.

use super::*;
use crate::loom::sync::atomic::{AtomicBool, Ordering};
use crate::loom::thread;
use std::sync::Arc;
use std::task::{Wake, Waker};

struct Flag(AtomicBool);
impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}
fn flag() -> (Arc<Flag>, Waker) {
    let flag = Arc::new(Flag(AtomicBool::new(false)));
    (flag.clone(), Waker::from(flag))
}
fn poll(sleep: &mut Sleep, waker: &Waker) -> Poll<()> {
    Pin::new(sleep).poll(&mut Context::from_waker(waker))
}

/// A registered `Sleep` (real-clock deadline an hour away, so only the simulated driver can
/// fire it), its driver, and the tick at which the driver fires it.
fn registered(waker: &Waker) -> (&'static Driver, Sleep, u64) {
    let driver = Driver::new_manual();
    let deadline = Instant::now() + Duration::from_secs(3600);
    let mut sleep = Sleep::new_in(driver, deadline);
    assert!(poll(&mut sleep, waker).is_pending());
    (driver, sleep, driver.tick_for(deadline))
}

/// The driver fires while the task re-polls with a new waker: if the poll says `Pending`,
/// the new waker must be the one woken (a wake-up delivered to the old waker would be lost).
#[test]
fn loom_fire_races_repoll_with_new_waker() {
    loom::model(|| {
        let (old_flag, old) = flag();
        let (new_flag, new) = flag();
        let (driver, mut sleep, tick) = registered(&old);
        let firer = thread::spawn(move || driver.fire_due(tick, &mut Vec::new()));
        let result = poll(&mut sleep, &new);
        assert_eq!(firer.join().unwrap(), 1);
        if result.is_pending() {
            assert!(new_flag.0.load(Ordering::SeqCst), "latest waker not woken");
        } else {
            assert!(old_flag.0.load(Ordering::SeqCst) || new_flag.0.load(Ordering::SeqCst));
        }
        assert!(sleep.is_elapsed());
        assert!(poll(&mut sleep, &new).is_ready());
        assert_eq!(driver.pending(), 0);
    });
}

/// The driver fires while the `Sleep` is dropped: the entry is freed exactly once (a double
/// free would corrupt the wheel or panic on a dead key), and the slot is reusable.
#[test]
fn loom_fire_races_drop() {
    loom::model(|| {
        let (woken, waker) = flag();
        let (driver, sleep, tick) = registered(&waker);
        let firer = thread::spawn(move || driver.fire_due(tick, &mut Vec::new()));
        drop(sleep);
        let fired = firer.join().unwrap();
        assert_eq!(fired == 1, woken.0.load(Ordering::SeqCst));
        assert_eq!(driver.pending(), 0);
        // The freed entry is reused cleanly.
        let (_, waker2) = flag();
        let mut again = Sleep::new_in(driver, Instant::now() + Duration::from_secs(7200));
        assert!(poll(&mut again, &waker2).is_pending());
        assert_eq!(driver.pending(), 1);
        drop(again);
        assert_eq!(driver.pending(), 0);
    });
}

/// The driver fires at the old deadline while the task moves the deadline later: either the
/// fire wins (the reset re-arms lazily) or the reset wins (nothing fires); never both, and
/// the wheel count matches.
#[test]
fn loom_fire_races_reset_later() {
    loom::model(|| {
        let (woken, waker) = flag();
        let (driver, mut sleep, tick) = registered(&waker);
        let firer = thread::spawn(move || driver.fire_due(tick, &mut Vec::new()));
        sleep.reset(sleep.deadline() + Duration::from_secs(60));
        let fired = firer.join().unwrap();
        assert_eq!(fired == 1, woken.0.load(Ordering::SeqCst));
        assert!(!sleep.is_elapsed());
        if fired == 1 {
            assert_eq!(driver.pending(), 0);
            assert!(
                poll(&mut sleep, &waker).is_pending(),
                "re-registers at the new deadline"
            );
        }
        assert_eq!(driver.pending(), 1);
        drop(sleep);
        assert_eq!(driver.pending(), 0);
    });
}
