//! [`Sender`] and its [`SendFuture`].

use super::chan::{Chan, SendAttempt};
use super::error::{SendError, TrySendError};
use crate::sync::waiters::Key;
use coro_loom::sync::Arc;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The sending side of a channel made by [`bounded`](super::bounded) or
/// [`unbounded`](super::unbounded). Clone it for more producers; the channel closes when the
/// last clone is dropped (or on [`close`](Sender::close)).
///
/// ```
/// let (tx, rx) = coro::channel::unbounded();
/// let tx2 = tx.clone();
/// tx.try_send(1).unwrap();
/// tx2.try_send(2).unwrap();
/// drop((tx, tx2));
/// assert_eq!(rx.try_recv(), Ok(1));
/// assert_eq!(rx.try_recv(), Ok(2));
/// assert_eq!(rx.try_recv(), Err(coro::channel::TryRecvError::Closed));
/// ```
pub struct Sender<T> {
    pub(super) chan: Arc<Chan<T>>,
}

impl<T> Sender<T> {
    /// Sends `value`, waiting while the channel is full (on a rendezvous channel, until a
    /// receiver takes it). Fails, giving the value back, if the channel is closed.
    ///
    /// Cancel-safe: the value enters the channel only in the poll that returns `Ready(Ok(()))`.
    /// A send dropped before that (by `select!`, a timeout,
    /// [`cancellable`](crate::cancel::cancellable)) did not send, and its value is dropped with
    /// it; a place it had been granted goes to the next waiting send.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let (tx, rx) = coro::channel::bounded(1);
    /// tx.send(1).await.unwrap();
    /// let second = coro::spawn({
    ///     let tx = tx.clone();
    ///     async move { tx.send(2).await } // waits for room
    /// });
    /// assert_eq!(rx.recv().await, Ok(1));
    /// assert_eq!(second.await.unwrap(), Ok(()));
    /// assert_eq!(rx.recv().await, Ok(2));
    /// rx.close();
    /// assert_eq!(tx.send(3).await.unwrap_err().into_inner(), 3);
    /// # });
    /// ```
    pub fn send(&self, value: T) -> SendFuture<'_, T> {
        SendFuture {
            chan: &self.chan,
            value: Some(value),
            key: None,
            traced: None,
        }
    }

    /// Sends `value` if that can be done without waiting: `Full(value)` if there is no room
    /// (on a rendezvous channel: no receiver waiting), `Closed(value)` if the channel is closed.
    ///
    /// ```
    /// use coro::channel::TrySendError;
    ///
    /// let (tx, rx) = coro::channel::bounded(1);
    /// assert_eq!(tx.try_send('a'), Ok(()));
    /// assert_eq!(tx.try_send('b'), Err(TrySendError::Full('b')));
    /// drop(rx);
    /// assert_eq!(tx.try_send('c'), Err(TrySendError::Closed('c')));
    /// ```
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut value = Some(value);
        let attempt = self.chan.start_send(&mut value, None);
        let unsent = || value.expect("an unsent coro::channel value went missing");
        match attempt {
            SendAttempt::Sent => Ok(()),
            SendAttempt::Full => Err(TrySendError::Full(unsent())),
            SendAttempt::Closed => Err(TrySendError::Closed(unsent())),
            SendAttempt::Queued(_) => unreachable!("a send without a waker was queued"),
        }
    }

    /// Closes the channel: true for the call that closed it, false if it was already closed.
    /// Waiting senders get their values back; receivers drain what was sent before.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::unbounded();
    /// tx.try_send(1).unwrap();
    /// assert!(tx.close());
    /// assert!(!tx.close());
    /// assert_eq!(rx.try_recv(), Ok(1));
    /// assert_eq!(rx.try_recv(), Err(coro::channel::TryRecvError::Closed));
    /// ```
    pub fn close(&self) -> bool {
        self.chan.close()
    }

    /// Whether the channel is closed.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::bounded::<u8>(4);
    /// assert!(!tx.is_closed());
    /// drop(rx);
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// How many values are buffered (sends still waiting for room are not counted).
    ///
    /// ```
    /// let (tx, _rx) = coro::channel::bounded(4);
    /// tx.try_send(()).unwrap();
    /// tx.try_send(()).unwrap();
    /// assert_eq!(tx.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether nothing is buffered.
    ///
    /// ```
    /// let (tx, _rx) = coro::channel::unbounded::<u8>();
    /// assert!(tx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's capacity: `None` for an unbounded channel, `Some(0)` for a rendezvous one.
    ///
    /// ```
    /// assert_eq!(coro::channel::bounded::<u8>(8).0.capacity(), Some(8));
    /// assert_eq!(coro::channel::bounded::<u8>(0).0.capacity(), Some(0));
    /// assert_eq!(coro::channel::unbounded::<u8>().0.capacity(), None);
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.chan.capacity()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The future returned by [`Sender::send`].
///
/// ```
/// let (tx, rx) = coro::channel::unbounded();
/// let send: coro::channel::SendFuture<'_, &str> = tx.send("hi");
/// assert_eq!(coro::block_wait(send), Ok(()));
/// assert_eq!(rx.try_recv(), Ok("hi"));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct SendFuture<'a, T> {
    chan: &'a Chan<T>,
    /// The value, until it is in the channel.
    value: Option<T>,
    /// Set while queued.
    key: Option<Key>,
    /// While queued: the waiting task's registration, for task snapshots.
    traced: Option<coro_executor::trace::WaitRegistration>,
}

// The future never pins anything: the value and the key are moved freely.
impl<T> Unpin for SendFuture<'_, T> {}

impl<T> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let sent = match &mut this.key {
            Some(key) => match this.chan.poll_send_grant(key, &mut this.value, cx.waker()) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(sent) => {
                    this.key = None;
                    this.traced = None;
                    sent
                }
            },
            None => {
                assert!(
                    this.value.is_some(),
                    "a coro::channel send future was polled after it completed"
                );
                match this.chan.start_send(&mut this.value, Some(cx.waker())) {
                    SendAttempt::Sent => Ok(()),
                    SendAttempt::Closed => Err(()),
                    SendAttempt::Queued(key) => {
                        this.key = Some(key);
                        this.traced = Some(this.chan.wait());
                        return Poll::Pending;
                    }
                    SendAttempt::Full => unreachable!("a send with a waker was not queued"),
                }
            }
        };
        Poll::Ready(sent.map_err(|()| {
            SendError(
                this.value
                    .take()
                    .expect("an unsent coro::channel value went missing"),
            )
        }))
    }
}

impl<T> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.chan.abandon_send(key);
        }
    }
}

impl<T> fmt::Debug for SendFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendFuture")
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}
