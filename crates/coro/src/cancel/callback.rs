//! [`CancellationCallback`]: run code when a token is cancelled.

use super::CancellationToken;
use super::state::Registration;
use std::fmt;

/// Runs a closure once when its token is cancelled (folly's `CancellationCallback`).
///
/// The closure runs on the thread that requests cancellation, outside any internal lock, or at
/// once inside [`new`](Self::new) if the token is already cancelled. Dropping the callback
/// deregisters it; if the closure is running on another thread at that moment, the drop waits
/// for it to return, so after the drop the closure is guaranteed not to be running. A closure
/// may drop its own `CancellationCallback` without deadlocking.
///
/// ```
/// use coro::cancel::{CancellationCallback, CancellationSource};
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let source = CancellationSource::new();
/// let fired = Arc::new(AtomicBool::new(false));
/// let flag = fired.clone();
/// let _callback = CancellationCallback::new(&source.token(), move || flag.store(true, Ordering::SeqCst));
/// source.request_cancellation();
/// assert!(fired.load(Ordering::SeqCst));
/// ```
#[must_use = "dropping a CancellationCallback deregisters it at once"]
pub struct CancellationCallback {
    registration: Option<Registration>,
}

impl CancellationCallback {
    /// Registers `callback` on `token`, or runs it now if `token` is already cancelled. A
    /// token that can never be cancelled never runs it.
    ///
    /// ```
    /// use coro::cancel::{CancellationCallback, CancellationSource};
    ///
    /// let source = CancellationSource::new();
    /// source.request_cancellation();
    /// let mut ran = false;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let _cb = CancellationCallback::new(&source.token(), move || tx.send(()).unwrap());
    /// ran |= rx.try_recv().is_ok(); // ran inline, inside new
    /// assert!(ran);
    /// ```
    pub fn new(token: &CancellationToken, callback: impl FnOnce() + Send + 'static) -> Self {
        let registration = token
            .state
            .as_ref()
            .and_then(|state| state.register_callback(callback));
        CancellationCallback { registration }
    }
}

impl fmt::Debug for CancellationCallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancellationCallback")
            .field("registered", &self.registration.is_some())
            .finish()
    }
}
