//! Cooperative cancellation: sources request it, tokens observe it, callbacks react.
//!
//! - `state`: the shared flag and reaction list, and the run-outside-the-lock protocol;
//! - `token`: [`CancellationSource`], [`CancellationToken`] and `merge`;
//! - `callback`: [`CancellationCallback`];
//! - `cancelled`: the [`CancellationToken::cancelled`] future;
//! - `cancellable`: [`cancellable`] and [`safe_point`], which use the current task's token;
//! - `detach`: [`detach_on_cancel`], which stops waiting on cancellation and lets the
//!   operation finish on its own;
//! - `outcome`: [`CancelledOutcome`], an output that says whether its operation ended
//!   cancelled (what `time::timeout_no_discard` needs).

mod callback;
mod cancellable;
mod cancelled;
mod detach;
mod outcome;
mod state;
mod token;

#[cfg(all(test, loom))]
mod loom_cancel;

pub use callback::CancellationCallback;
pub use cancellable::{Cancellable, cancellable, safe_point};
pub use cancelled::WaitForCancellation;
pub use detach::{DetachOnCancel, detach_on_cancel};
pub use outcome::CancelledOutcome;
pub use token::{CancellationSource, CancellationToken};

use std::fmt;

/// The error of an operation stopped by cancellation.
///
/// ```
/// let err = coro::cancel::Cancelled;
/// assert_eq!(err.to_string(), "operation cancelled");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation cancelled")
    }
}

impl std::error::Error for Cancelled {}
