//! [`oneshot`](fn@super::oneshot): one value, from one task to another.
//!
//! A short mutex around the value, the receiver's waker and who is gone; the waker is woken and
//! an undelivered value dropped only after the mutex is released.

use super::error::{RecvError, TryRecvError};
use coro_loom::sync::{Arc, Mutex, MutexGuard};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

struct Inner<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// The sender sent, or was dropped: nothing more will come.
    sender_done: bool,
    receiver_gone: bool,
}

impl<T> Inner<T> {
    /// The state; user code (a waker's `clone`) runs under the lock only before anything is
    /// changed, so a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The sender is done (with or without a value): wakes the receiver.
    fn finish_sending(&self, value: Option<T>) -> Result<(), Option<T>> {
        let waker = {
            let mut state = self.lock();
            if state.sender_done {
                return Ok(());
            }
            state.sender_done = true;
            if state.receiver_gone {
                return Err(value);
            }
            state.value = value;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

pub(super) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            value: None,
            waker: None,
            sender_done: false,
            receiver_gone: false,
        }),
    });
    (
        Sender {
            inner: inner.clone(),
        },
        Receiver { inner },
    )
}

/// Sends the one value of a [`oneshot`](fn@super::oneshot) channel. Dropping it unsent makes the
/// receiver resolve to `Err(RecvError)`.
///
/// ```
/// let (tx, rx) = coro::channel::oneshot::<u8>();
/// drop(tx);
/// assert_eq!(coro::block_wait(rx), Err(coro::channel::RecvError));
/// ```
pub struct Sender<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Sender<T> {
    /// Sends `value`; `Err(value)` if the receiver is gone.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::oneshot();
    /// assert_eq!(tx.send(1), Ok(()));
    /// assert_eq!(coro::block_wait(rx), Ok(1));
    ///
    /// let (tx, rx) = coro::channel::oneshot();
    /// drop(rx);
    /// assert_eq!(tx.send(2), Err(2));
    /// ```
    pub fn send(self, value: T) -> Result<(), T> {
        self.inner
            .finish_sending(Some(value))
            .map_err(|value| value.expect("a oneshot value was lost"))
    }

    /// Whether the receiver is gone (a send would fail).
    ///
    /// ```
    /// let (tx, rx) = coro::channel::oneshot::<()>();
    /// assert!(!tx.is_closed());
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.lock().receiver_gone
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // A no-op after `send`.
        let _ = self.inner.finish_sending(None);
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Sender")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Receives the one value of a [`oneshot`](fn@super::oneshot) channel: a future of
/// `Result<T, RecvError>` (`Err` if the sender was dropped without sending). Dropping it drops
/// a value that was sent and not received.
///
/// ```
/// # coro::block_wait(async {
/// let (tx, rx) = coro::channel::oneshot();
/// coro::spawn(async move { tx.send("done").unwrap() });
/// assert_eq!(rx.await, Ok("done"));
/// # });
/// ```
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Receiver<T> {
    /// Takes the value if it was sent: `Empty` if not yet, `Closed` if it never will be (or was
    /// already taken).
    ///
    /// ```
    /// use coro::channel::TryRecvError;
    ///
    /// let (tx, rx) = coro::channel::oneshot();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.send(3).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(3));
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut state = self.inner.lock();
        match state.value.take() {
            Some(value) => Ok(value),
            None if state.sender_done => Err(TryRecvError::Closed),
            None => Err(TryRecvError::Empty),
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.inner.lock();
        if let Some(value) = state.value.take() {
            return Poll::Ready(Ok(value));
        }
        if state.sender_done {
            return Poll::Ready(Err(RecvError));
        }
        match &mut state.waker {
            Some(old) if old.will_wake(cx.waker()) => {}
            other => *other = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (value, waker) = {
            let mut state = self.inner.lock();
            state.receiver_gone = true;
            (state.value.take(), state.waker.take())
        };
        drop((value, waker));
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("oneshot::Receiver").finish_non_exhaustive()
    }
}
