//! IO readiness driven by the pool's own workers: no reactor thread.
//!
//! - `driver`: a pool's OS poller (`mio`: epoll, kqueue), waited on by an idle
//!   worker in place of sleeping, one at a time; a worker woken for new work interrupts it;
//! - `poller`: the OS poller a driver shares with its sources, through which a waiting source
//!   gets a worker to poll;
//! - `source`: one registered fd (registered once, edge-triggered);
//! - `readiness`: a source's readiness word and waiters, and [`ReadyEvent`], with which an
//!   operation clears readiness it found gone;
//! - `registration`: [`Registration`], the handle async socket types hold (`coro::net` builds
//!   on it), registered with the current pool's driver.
//!
//! Go's netpoller and tokio's IO driver do the same: the OS is polled by whoever would
//! otherwise sleep, so a readiness event reaches the worker that will run the woken task without
//! crossing threads first.

// Under the model checkers only `readiness` and its models are built (see the crate root).
#[cfg(not(any(loom, shuttle)))]
pub(crate) mod driver;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_readiness;
#[cfg(not(any(loom, shuttle)))]
mod poller;
#[cfg(any(loom, shuttle))]
#[allow(dead_code)]
mod readiness;
#[cfg(not(any(loom, shuttle)))]
mod readiness;
#[cfg(not(any(loom, shuttle)))]
mod registration;
#[cfg(not(any(loom, shuttle)))]
mod source;

#[cfg(not(any(loom, shuttle)))]
pub use readiness::ReadyEvent;
#[cfg(not(any(loom, shuttle)))]
pub use registration::Registration;
