//! Timers: [`sleep()`], [`sleep_until`] and the [`Sleep`] future they return.
//!
//! Timers are executor-agnostic: a single global thread named `coro-timer`, started by the first
//! timer that has to wait, wakes them, so a [`Sleep`] works on the work-stealing pool, on a
//! hand-written single-threaded executor or under `block_on` alike.
//!
//! # Map of the module
//!
//! - `wheel.rs`: the hierarchical timing wheel, a pure data structure (6 levels x 64 slots,
//!   1 ms ticks, O(1) insert/cancel/reset, 32 bytes per entry). Its module docs give the
//!   placement and cascading invariants.
//! - `driver.rs`: the wheel of wakers behind a mutex, the `coro-timer` thread (sleeps until the
//!   next expiry; an earlier registration wakes it), the lock-free "has it fired?" generation
//!   counters, and [`pending_timers`].
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

mod driver;
mod sleep;
mod wheel;

pub use driver::pending_timers;
pub use sleep::{Sleep, sleep, sleep_until};
