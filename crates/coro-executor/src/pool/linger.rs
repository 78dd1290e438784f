//! The searcher's linger (Go's spinning threads): a searcher that found nothing searches again,
//! a bounded number of passes, before it parks, while another worker is awake to queue work.
//!
//! While a worker searches, tasks pushed elsewhere wake nobody: without the linger, a worker
//! whose tasks keep waking each other into its next slot (a channel ping-pong) woke the parked
//! worker about every 14 µs, paying a futex wake each time for a worker that found the task
//! already run and parked again. But every pass is CPU taken from the other threads of the
//! machine: in an IO-bound service sharing its cores with the database it talks to, a fixed
//! 50 µs linger was an eighth of all CPU samples and found almost nothing.
//!
//! So the linger follows what it pays. Each worker has a budget of passes: a linger that ran its
//! whole budget without finding work halves it (down to one pass), a linger that found work
//! doubles it (up to [`LINGER_PASSES`]). A pool whose lingers keep finding work lingers the
//! whole bound; one whose lingers do not costs about one pass per wake-up after a few parks.
//!
//! The linger is counted in passes, not time, so that the loom and shuttle models, which have
//! no clock, run it too (`loom_protocol.rs` runs the pool's own worker loop, linger included).

/// The most passes a linger makes. A pass is a search followed by [`LINGER_PAUSES`] pause
/// instructions: about 2 µs on the 2-core AMD EPYC the benches run on, so a whole linger lasts
/// about 50 µs there. In the models: two, enough to check the protocol with a linger that goes
/// round more than once, few enough to keep their state space small.
pub(super) const LINGER_PASSES: u32 = if cfg!(any(loom, shuttle)) { 2 } else { 24 };

/// Pause instructions after each pass: the passes read the other workers' queue ends and next
/// slots, lines their owners write on every wake-up.
#[cfg(not(any(loom, shuttle)))]
const LINGER_PAUSES: u32 = 32;

/// One worker's linger: the passes made since it last found work, and its budget.
#[derive(Debug)]
pub(super) struct Linger {
    /// Passes made in the linger under way (0: none is).
    passes: u32,
    /// The passes the next linger may make, between 1 and [`LINGER_PASSES`].
    budget: u32,
}

impl Linger {
    pub(super) fn new() -> Linger {
        Linger {
            passes: 0,
            budget: LINGER_PASSES,
        }
    }

    /// The worker found work: a linger under way paid, and the next may last longer.
    #[inline]
    pub(super) fn found_work(&mut self) {
        if self.passes != 0 {
            self.passes = 0;
            self.budget = (self.budget * 2).min(LINGER_PASSES);
        }
    }

    /// The linger ends without a verdict: the worker stopped searching, or nobody else is awake
    /// to queue work (parking is right then, whatever the linger would have found).
    pub(super) fn stop(&mut self) {
        self.passes = 0;
    }

    /// After a search that found nothing: true to search again (after [`pause`]), false to
    /// park. A linger that used up its budget halves it.
    pub(super) fn another_pass(&mut self) -> bool {
        if self.passes >= self.budget {
            self.passes = 0;
            self.budget = (self.budget / 2).max(1);
            return false;
        }
        self.passes += 1;
        true
    }

    /// The passes the next linger may make.
    #[cfg(all(test, not(any(loom, shuttle))))]
    fn budget(&self) -> u32 {
        self.budget
    }
}

/// The pause after a pass. In a model, none: the passes' own atomic operations are the
/// checker's switch points, and a yield there would hand the turn to the other threads after
/// every pass, so that a linger could end before they moved only by preempting them at each
/// pass, which a preemption bound of two leaves unexplored.
pub(super) fn pause() {
    #[cfg(not(any(loom, shuttle)))]
    for _ in 0..LINGER_PAUSES {
        std::hint::spin_loop();
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    /// Lingers until the budget runs out; returns the passes made.
    fn linger_in_vain(linger: &mut Linger) -> u32 {
        let mut passes = 0;
        while linger.another_pass() {
            passes += 1;
        }
        passes
    }

    #[test]
    fn a_fresh_worker_lingers_the_whole_bound() {
        assert_eq!(linger_in_vain(&mut Linger::new()), LINGER_PASSES);
    }

    #[test]
    fn lingers_that_find_nothing_shrink_to_one_pass() {
        let mut linger = Linger::new();
        let mut made = Vec::new();
        for _ in 0..8 {
            made.push(linger_in_vain(&mut linger));
        }
        assert_eq!(made, [24, 12, 6, 3, 1, 1, 1, 1]);
        assert_eq!(linger.budget(), 1);
    }

    #[test]
    fn lingers_that_find_work_grow_back_to_the_bound() {
        let mut linger = Linger::new();
        for _ in 0..6 {
            linger_in_vain(&mut linger);
        }
        assert_eq!(linger.budget(), 1);
        let mut budgets = Vec::new();
        for _ in 0..6 {
            assert!(linger.another_pass(), "a budget of one still makes a pass");
            linger.found_work();
            budgets.push(linger.budget());
        }
        assert_eq!(budgets, [2, 4, 8, 16, 24, 24]);
    }

    #[test]
    fn work_found_outside_a_linger_and_a_stopped_linger_change_nothing() {
        let mut linger = Linger::new();
        linger_in_vain(&mut linger);
        assert_eq!(linger.budget(), 12);
        linger.found_work();
        assert_eq!(linger.budget(), 12, "no linger was under way");
        assert!(linger.another_pass());
        linger.stop();
        linger.found_work();
        assert_eq!(linger.budget(), 12, "the stopped linger gave no verdict");
        assert_eq!(
            linger_in_vain(&mut linger),
            12,
            "a stopped linger starts over"
        );
    }
}
