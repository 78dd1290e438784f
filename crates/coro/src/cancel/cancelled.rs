//! The future returned by [`CancellationToken::cancelled`].

use super::CancellationToken;
use super::state::{Key, Reaction};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

// `CancellationToken::cancelled` is defined here, beside the future it makes, so that
// `token.rs` does not import this file, which is built on it.
impl CancellationToken {
    /// Completes when cancellation is requested (never, for a token that cannot be cancelled).
    ///
    /// ```
    /// use coro::cancel::CancellationSource;
    ///
    /// let source = CancellationSource::new();
    /// let token = source.token();
    /// std::thread::spawn(move || source.request_cancellation());
    /// futures::executor::block_on(token.cancelled());
    /// assert!(token.is_cancellation_requested());
    /// ```
    pub fn cancelled(&self) -> WaitForCancellation {
        WaitForCancellation::new(self.clone())
    }
}

/// Completes when its token is cancelled; from [`CancellationToken::cancelled`].
///
/// Cancel-safe: dropping it removes its registration.
///
/// ```
/// use futures::FutureExt;
///
/// let source = coro::cancel::CancellationSource::new();
/// let mut wait = source.token().cancelled();
/// assert_eq!((&mut wait).now_or_never(), None); // not cancelled yet
/// source.request_cancellation();
/// assert_eq!(wait.now_or_never(), Some(()));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct WaitForCancellation {
    token: CancellationToken,
    key: Option<Key>,
}

impl WaitForCancellation {
    pub(super) fn new(token: CancellationToken) -> Self {
        WaitForCancellation { token, key: None }
    }
}

impl Future for WaitForCancellation {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let Some(state) = &this.token.state else {
            return Poll::Pending;
        };
        if state.is_cancellation_requested() {
            return Poll::Ready(());
        }
        match this.key {
            Some(key) => {
                if !state.update_waker(key, cx.waker()) {
                    // Taken by `request`, which is waking it: cancellation is under way.
                    return Poll::Ready(());
                }
            }
            None => match state.register(Reaction::Wake(cx.waker().clone())) {
                Ok(key) => this.key = Some(key),
                Err(_) => return Poll::Ready(()),
            },
        }
        Poll::Pending
    }
}

impl Drop for WaitForCancellation {
    fn drop(&mut self) {
        if let (Some(state), Some(key)) = (&self.token.state, self.key) {
            state.deregister(key);
        }
    }
}

impl fmt::Debug for WaitForCancellation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitForCancellation")
            .field("token", &self.token)
            .finish()
    }
}
