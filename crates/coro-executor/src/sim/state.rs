//! The state of the deterministic simulation running on this thread: its seed, its random
//! stream and its log of decisions.
//!
//! Rule: inside a simulation every choice that is a race or a random draw in production (which
//! logical worker steps, steal victims, next-slot steals, `select!`'s start, user draws) takes
//! its value from [`draw`], and each draw and step is appended to the log, so that two runs of
//! one seed can be compared decision by decision. Outside a simulation nothing here is set and
//! every accessor answers "not simulated" after one thread-local read.

use super::decision::Decision;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ptr;

/// One simulation's state, owned by its driver and lent to this thread while it runs.
pub(crate) struct SimState {
    pub(crate) seed: u64,
    rng: RefCell<fastrand::Rng>,
    log: RefCell<Vec<Decision>>,
    /// Task ids are process-wide counters; the log names tasks by the order the simulation
    /// first ran them, which is the same in every run of a seed.
    ordinals: RefCell<HashMap<u64, u64>>,
    /// Whether decisions are kept in `log` (they always go into `fingerprint`).
    pub(crate) keep_log: Cell<bool>,
    /// Whether steps log the stacks of the tasks they run (for `check_determinism`'s report).
    pub(crate) log_stacks: bool,
    /// A hash of every decision so far: equal for two runs that took the same decisions.
    fingerprint: Cell<u64>,
}

coro_loom::thread_local_const! {
    /// The simulation running on this thread, if any.
    static CURRENT: Cell<*const SimState> = Cell::new(ptr::null());
}

impl SimState {
    pub(crate) fn new(seed: u64, log_stacks: bool) -> SimState {
        SimState {
            seed,
            rng: RefCell::new(fastrand::Rng::with_seed(seed)),
            log: RefCell::new(Vec::new()),
            ordinals: RefCell::new(HashMap::new()),
            keep_log: Cell::new(log_stacks),
            log_stacks,
            fingerprint: Cell::new(0xcbf2_9ce4_8422_2325),
        }
    }

    /// The next value of the seeded stream, logged as a draw for `what`.
    pub(crate) fn draw(&self, what: &'static str) -> u64 {
        let value = self.rng.borrow_mut().u64(..);
        self.record(Decision::Draw { what, value });
        value
    }

    /// A draw in `0..n` (`n > 0`), logged as one.
    pub(crate) fn below(&self, what: &'static str, n: usize) -> usize {
        let value = self.rng.borrow_mut().usize(..n);
        self.record(Decision::Draw {
            what,
            value: value as u64,
        });
        value
    }

    pub(crate) fn record(&self, decision: Decision) {
        self.fingerprint
            .set(decision.mix_into(self.fingerprint.get()));
        if self.keep_log.get() {
            self.log.borrow_mut().push(decision);
        }
    }

    pub(crate) fn fingerprint(&self) -> u64 {
        self.fingerprint.get()
    }

    /// The simulation's own name for the task with process-wide id `id`.
    pub(crate) fn ordinal(&self, id: u64) -> u64 {
        let mut ordinals = self.ordinals.borrow_mut();
        let next = ordinals.len() as u64;
        *ordinals.entry(id).or_insert(next)
    }

    pub(crate) fn take_log(&self) -> Vec<Decision> {
        std::mem::take(&mut self.log.borrow_mut())
    }
}

/// Makes `sim` this thread's simulation until the guard drops; it must outlive the guard.
pub(crate) fn enter(sim: &SimState) -> Entered {
    let previous = CURRENT.with(|c| c.replace(sim));
    assert!(
        previous.is_null(),
        "a coro simulation is already running on this thread: simulations do not nest"
    );
    Entered
}

/// Clears this thread's simulation when dropped (also on unwind).
pub(crate) struct Entered;

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// Runs `f` with this thread's simulation, if one runs here.
#[inline]
pub(crate) fn with<R>(f: impl FnOnce(&SimState) -> R) -> Option<R> {
    let sim = CURRENT.try_with(Cell::get).ok()?;
    // SAFETY: `CURRENT` is set only by `enter`, whose caller keeps the sim alive until the
    // guard clears it again; `f` runs within this call, on this thread.
    unsafe { sim.as_ref() }.map(f)
}

/// Whether a simulation runs on this thread: one thread-local read.
#[inline]
pub(crate) fn is_active() -> bool {
    CURRENT.try_with(|c| !c.get().is_null()).unwrap_or(false)
}

/// A seeded draw for `what` inside a simulation, `None` outside.
#[inline]
pub(crate) fn draw(what: &'static str) -> Option<u64> {
    with(|sim| sim.draw(what))
}
