//! Deterministic simulation on the real pool: the engine under `coro::sim`.
//!
//! A [`Simulation`] runs a pool of `n` logical workers on the calling thread: the pool's own
//! run queues, next slots, global queue, stealing and idle bookkeeping, stepped one worker
//! tick at a time in an order drawn from a seed; its timers read a virtual clock that jumps to
//! the next deadline when every task is idle. The same seed gives the same run, decision for
//! decision. `coro::sim` builds the user-facing API (seeds from the environment, failure
//! reports, the determinism check, the test macro) on it.
//!
//! # Map of the module
//!
//! - `state.rs`: the thread's running simulation: its seeded stream and decision log;
//! - `decision.rs`: [`Decision`], an entry of that log;
//! - `random.rs`: [`random_u64`], [`buggify`], [`is_simulated`];
//! - `run.rs`: [`Simulation`], the driver, and [`SimError`], why a run stopped;
//! - `watchdog.rs`: the thread that reports a simulation stuck in one poll;
//! - the stepping itself is in `pool/sim.rs` (it needs the pool's insides).
//!
//! ```
//! use coro_executor::sim::Simulation;
//! use std::time::Duration;
//!
//! let mut sim = Simulation::new(42, 2);
//! let task = sim.handle().spawn(async {
//!     coro_executor::time::sleep(Duration::from_secs(3600)).await;
//!     "an hour later"
//! });
//! let wall = std::time::Instant::now();
//! sim.run_until(|| task.is_finished()).unwrap();
//! assert!(sim.elapsed() >= Duration::from_secs(3600));
//! assert!(wall.elapsed() < Duration::from_secs(5));
//! ```

#[cfg(not(any(loom, shuttle)))]
pub(crate) mod decision;
#[cfg(not(any(loom, shuttle)))]
mod random;
#[cfg(not(any(loom, shuttle)))]
mod run;
#[cfg(not(any(loom, shuttle)))]
pub(crate) mod state;
#[cfg(not(any(loom, shuttle)))]
mod watchdog;

#[cfg(not(any(loom, shuttle)))]
pub use decision::Decision;
#[cfg(not(any(loom, shuttle)))]
pub use random::{buggify, is_simulated, random_u64};
#[cfg(not(any(loom, shuttle)))]
pub use run::{SimError, Simulation};
