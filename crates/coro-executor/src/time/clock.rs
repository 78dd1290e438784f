//! The clock every timer reads: the monotonic system clock, or, on a thread running a
//! deterministic simulation, that simulation's virtual clock.
//!
//! Rule: timers (`Sleep`, the drivers' ticks) read the time only through [`now`]. The virtual
//! clock is a plain thread-local `Instant` that only the simulation's driver moves (to the next
//! timer deadline, when every simulated task is idle), so outside a simulation reading it costs
//! one predictable branch on a thread-local.

use std::cell::Cell;
use std::time::Instant;

coro_loom::thread_local_const! {
    /// The virtual time of the simulation running on this thread, if one is.
    static VIRTUAL: Cell<Option<Instant>> = Cell::new(None);
}

/// The current time: the simulation's virtual clock on a simulation's thread, else
/// `Instant::now()`.
#[inline]
pub(crate) fn now() -> Instant {
    VIRTUAL
        .try_with(Cell::get)
        .ok()
        .flatten()
        .unwrap_or_else(Instant::now)
}

/// Sets (or, with `None`, removes) this thread's virtual clock; returns the previous setting.
/// Only a simulation sets it, and the models build none.
#[cfg(not(any(loom, shuttle)))]
pub(crate) fn set_virtual(now: Option<Instant>) -> Option<Instant> {
    VIRTUAL.with(|clock| clock.replace(now))
}
