//! Timers: [`sleep()`], [`sleep_until`] and the [`Sleep`] future they return.
//!
//! Timers are executor-agnostic, and kept where they are polled: a [`Sleep`] polled on a worker
//! of a [`ThreadPool`](crate::ThreadPool) joins that pool's timer wheel, which the pool's parked
//! workers sleep on (one of them waits, in the OS poll or on its condvar, until the next
//! deadline; busy workers fire what is due as they go), so timers need no thread of their own
//! and their wake-ups land on the pool's workers. Polled anywhere else (a hand-written
//! executor, `block_on`), it joins the global wheel, which a thread named `coro-timer`, started
//! by the first timer that has to wait there, keeps.
//!
//! # Map of the module
//!
//! - `wheel.rs`: the hierarchical timing wheel, a pure data structure (6 levels x 64 slots,
//!   1 ms ticks, O(1) insert/cancel/reset, 32 bytes per entry). Its module docs give the
//!   placement and cascading invariants.
//! - `driver.rs`: the wheel of wakers behind a mutex; who sleeps until its next expiry (a
//!   pool's keeper worker, or the global `coro-timer` thread) and how an earlier registration
//!   wakes it; the lock-free "has it fired?" generation counters; and [`pending_timers`].
//! - `clock.rs`: the time every timer reads (the system clock, or a simulation's virtual one).
//! - `sleep.rs`: the [`Sleep`] future, [`sleep()`] and [`sleep_until`].
//!
//! Guarantees: a `Sleep` never completes before `Instant::now() >= deadline`, and normally
//! completes within a few milliseconds after it. A pending timer costs 40 bytes of driver memory
//! and no allocation of its own.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, Instant};
//! use coro_executor::time::{sleep, sleep_until};
//!
//! futures::executor::block_on(async {
//!     let start = Instant::now();
//!     sleep(Duration::from_millis(5)).await;
//!     sleep_until(start + Duration::from_millis(10)).await;
//!     assert!(start.elapsed() >= Duration::from_millis(10));
//! });
//! ```

mod clock;
mod driver;
mod sleep;
mod wheel;

// The pools' side of their timers; the models have no pool timers.
#[cfg(not(any(loom, shuttle)))]
pub(crate) use clock::set_virtual;
pub use driver::pending_timers;
#[cfg_attr(any(loom, shuttle), allow(unused_imports))]
pub(crate) use driver::{Driver, Keep, Kick, register_driver};
pub use sleep::{Sleep, sleep, sleep_until};

/// The time timers go by: `std::time::Instant::now()`, except on a thread that runs a
/// deterministic simulation ([`crate::sim`]), where it is the simulation's virtual clock.
///
/// ```
/// let before = std::time::Instant::now();
/// let now = coro_executor::time::now();
/// assert!(now >= before && now <= std::time::Instant::now());
/// ```
pub fn now() -> std::time::Instant {
    clock::now()
}
