//! Awaiting OS signals (Unix), as `tokio::signal`: [`ctrl_c`] for SIGINT, and
//! [`unix::signal`] for any signal a handler may catch.
//!
//! Rule: a delivery reaches a waiting task through the pool's IO driver, never through a thread
//! of its own. Each [`unix::Signal`] owns a non-blocking socket pair: signal-hook's handler
//! writes a byte to one end, and the other end is registered with the IO driver of the pool the
//! `Signal` was created on (the default pool's outside any pool), whose idle workers poll the OS
//! for it. So every delivery after a `Signal` is created is seen at least once by it, whoever
//! else listens to the same signal, and awaiting signals starts no thread beyond the pool's own.
//!
//! # The default action is gone for good
//!
//! Creating the first `Signal` (or calling [`ctrl_c`]) for a signal installs a process-wide
//! handler for it, which stays for the rest of the process, also after every `Signal` is
//! dropped: from then on the signal's default action (SIGINT and SIGTERM end the process) no
//! longer happens. A program that listens for SIGINT must exit by itself when it wants to. This
//! is how `tokio::signal` behaves too.
//!
//! ```
//! use coro::signal::unix::{SignalKind, signal};
//!
//! # coro::block_wait(async {
//! let mut terminate = signal(SignalKind::terminate())?;
//! signal_hook::low_level::raise(signal_hook::consts::SIGTERM)?; // as `kill -TERM <pid>` does
//! assert_eq!(terminate.recv().await, Some(()));
//! # std::io::Result::Ok(())
//! # }).unwrap();
//! ```
//!
//! Layout: this file ([`ctrl_c`]) and `unix` ([`unix::SignalKind`], [`unix::Signal`],
//! [`unix::signal`]).

pub mod unix;

use std::future::Future;
use std::io;

/// Completes with `Ok(())` at the first SIGINT (Ctrl-C in a terminal, `kill -INT <pid>`)
/// delivered after this call.
///
/// The handler is registered when `ctrl_c()` is called, not when the future is first polled, so a
/// SIGINT that arrives in between is not missed. Registering installs a handler for SIGINT for
/// the rest of the process: Ctrl-C no longer ends the process by itself (see the
/// [module docs](self)).
///
/// # Errors
///
/// The error of [`unix::signal`] if the handler cannot be registered, and an error saying so if
/// the pool whose IO driver waits for the signal shuts down first.
///
/// ```
/// # coro::block_wait(async {
/// let interrupted = coro::signal::ctrl_c(); // registered here
/// signal_hook::low_level::raise(signal_hook::consts::SIGINT)?; // as Ctrl-C does
/// interrupted.await?;
/// # std::io::Result::Ok(())
/// # }).unwrap();
/// ```
///
/// A service stops on it (the repository's `examples/service.rs` drains its requests first):
///
/// ```no_run
/// #[coro::main]
/// async fn main() -> std::io::Result<()> {
///     // ... start serving ...
///     coro::signal::ctrl_c().await?;
///     println!("interrupted: shutting down");
///     Ok(())
/// }
/// ```
pub fn ctrl_c() -> impl Future<Output = io::Result<()>> + Send + 'static {
    let interrupt = unix::signal(unix::SignalKind::interrupt());
    async move {
        match interrupt?.recv().await {
            Some(()) => Ok(()),
            None => Err(io::Error::other(
                "coro::signal::ctrl_c: the pool whose IO driver waited for SIGINT shut down \
                 before SIGINT came",
            )),
        }
    }
}
