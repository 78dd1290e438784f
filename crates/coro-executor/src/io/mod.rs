//! IO readiness driven by the pool's own workers: no reactor thread.
//!
//! - `driver`: a pool's OS poller (`polling`: epoll, kqueue, event ports), waited on by an idle
//!   worker in place of sleeping, one at a time; a worker woken for new work interrupts it;
//! - `poller`: the OS poller a driver shares with its sources, through which they arm their
//!   interest;
//! - `source`: one registered fd's readiness per direction;
//! - `registration`: [`Registration`], the handle async socket types hold (`coro::net` builds
//!   on it), registered with the current pool's driver.
//!
//! Go's netpoller and tokio's IO driver do the same: the OS is polled by whoever would
//! otherwise sleep, so a readiness event reaches the worker that will run the woken task without
//! crossing threads first.

pub(crate) mod driver;
mod poller;
mod registration;
mod source;

pub use registration::Registration;
