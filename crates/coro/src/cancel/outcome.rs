//! [`CancelledOutcome`]: an operation's output that says whether it ended cancelled.

use super::Cancelled;

/// An output that can say whether the operation that produced it ended cancelled: how
/// [`timeout_no_discard`](crate::time::timeout_no_discard) tells an op stopped by its deadline (`Err(Elapsed)`) from one that
/// finished anyway (`Ok(output)`).
///
/// Implemented for [`Cancelled`](super::Cancelled) (always cancelled), for `Box<dyn Error + Send + Sync>`
/// (cancelled when it holds a [`Cancelled`](super::Cancelled)), and for `Result<T, E>` with `E: CancelledOutcome`
/// (cancelled when it is an `Err` that is). Implement it for your own error type, typically an
/// enum with a cancelled variant, to use `Result<T, YourError>` outputs. An op whose plain output
/// cannot report cancellation can be given one: `async { Ok::<_, Cancelled>(op.await) }`, which
/// [`timeout_no_discard`](crate::time::timeout_no_discard) never turns into `Elapsed`.
///
/// ```
/// use coro::cancel::Cancelled;
/// use coro::cancel::CancelledOutcome;
///
/// enum FetchError {
///     Cancelled,
///     NotFound,
/// }
///
/// impl From<Cancelled> for FetchError {
///     fn from(_: Cancelled) -> Self {
///         FetchError::Cancelled
///     }
/// }
///
/// impl CancelledOutcome for FetchError {
///     fn is_cancelled(&self) -> bool {
///         matches!(self, FetchError::Cancelled)
///     }
/// }
///
/// assert!(Err::<(), _>(FetchError::from(Cancelled)).is_cancelled());
/// assert!(!Err::<(), _>(FetchError::NotFound).is_cancelled());
/// assert!(!Ok::<_, Cancelled>(1).is_cancelled());
/// let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(Cancelled);
/// assert!(boxed.is_cancelled());
/// ```
pub trait CancelledOutcome {
    /// Whether this output means the operation stopped because it was cancelled.
    fn is_cancelled(&self) -> bool;
}

impl CancelledOutcome for Cancelled {
    fn is_cancelled(&self) -> bool {
        true
    }
}

impl CancelledOutcome for Box<dyn std::error::Error + Send + Sync> {
    fn is_cancelled(&self) -> bool {
        self.is::<Cancelled>()
    }
}

impl<T, E: CancelledOutcome> CancelledOutcome for Result<T, E> {
    fn is_cancelled(&self) -> bool {
        matches!(self, Err(e) if e.is_cancelled())
    }
}

/// An IO error is cancelled when it holds a [`Cancelled`](super::Cancelled): what `coro::net`'s
/// `accept` and `connect` return once the task's token fires.
///
/// ```
/// use coro::cancel::{Cancelled, CancelledOutcome};
///
/// assert!(std::io::Error::other(Cancelled).is_cancelled());
/// assert!(!std::io::Error::from(std::io::ErrorKind::TimedOut).is_cancelled());
/// ```
impl CancelledOutcome for std::io::Error {
    fn is_cancelled(&self) -> bool {
        self.get_ref().is_some_and(|inner| inner.is::<Cancelled>())
    }
}
