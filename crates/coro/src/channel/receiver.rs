//! [`Receiver`], its [`RecvFuture`] and its `Stream` implementation.

use super::chan::{Chan, RecvAttempt};
use super::error::{RecvError, TryRecvError};
use super::receive_slot::ReceiveSlot;
use crate::sync::waiters::Key;
use coro_loom::sync::Arc;
use futures_core::Stream;
use pin_project::{pin_project, pinned_drop};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The receiving side of a channel made by [`bounded`](super::bounded) or
/// [`unbounded`](super::unbounded). Clone it for more consumers (each value goes to exactly
/// one of them, the longest waiting first); the channel closes when the last clone is dropped
/// (or on [`close`](Receiver::close)). As a [`Stream`] it yields values until the channel is
/// closed and drained.
///
/// ```
/// use futures::StreamExt;
///
/// # coro::block_wait(async {
/// let (tx, rx) = coro::channel::bounded(2);
/// coro::spawn(async move {
///     for i in 0..5 {
///         tx.send(i).await.unwrap();
///     }
/// });
/// assert_eq!(rx.collect::<Vec<_>>().await, [0, 1, 2, 3, 4]);
/// # });
/// ```
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
    /// The stream's receive waiting in the channel, if `poll_next` returned `Pending`.
    waiting: Option<Key>,
    /// The stream's slot: boxed, so that it stays put while the receiver moves; made at the
    /// stream's first wait and reused.
    slot: Option<Box<ReceiveSlot<T>>>,
}

impl<T> Receiver<T> {
    pub(super) fn new(chan: Arc<Chan<T>>) -> Self {
        Receiver {
            chan,
            waiting: None,
            slot: None,
        }
    }

    /// Receives a value, waiting while the channel is empty. `Err(RecvError)` once the channel
    /// is closed and everything sent before the close has been received.
    ///
    /// Cancel-safe: a receive dropped after a value was handed to it gives the value back (to
    /// the next waiting receiver, or to the front of the channel), so no value is lost.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let (tx, rx) = coro::channel::bounded(0); // rendezvous
    /// let sender = coro::spawn(async move { tx.send("ping").await });
    /// assert_eq!(rx.recv().await, Ok("ping"));
    /// assert_eq!(sender.await.unwrap(), Ok(()));
    /// assert_eq!(rx.recv().await, Err(coro::channel::RecvError)); // the sender is gone
    /// # });
    /// ```
    pub fn recv(&self) -> RecvFuture<'_, T> {
        RecvFuture {
            chan: &self.chan,
            key: None,
            done: false,
            slot: ReceiveSlot::new(),
            traced: None,
        }
    }

    /// Receives a value if one is buffered. On a rendezvous channel a value passes only from a
    /// send to a receive that waits for it (so that a send dropped before it completed never
    /// sent), and `try_recv` finds nothing there but values given back by cancelled receives:
    /// use [`recv`](Receiver::recv).
    ///
    /// ```
    /// use coro::channel::TryRecvError;
    ///
    /// let (tx, rx) = coro::channel::unbounded();
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    /// tx.try_send(7).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(7));
    /// drop(tx);
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        match self.chan.start_recv(None, None) {
            RecvAttempt::Received(value) => Ok(value),
            RecvAttempt::Empty => Err(TryRecvError::Empty),
            RecvAttempt::Closed => Err(TryRecvError::Closed),
            RecvAttempt::Queued(_) => unreachable!("a receive without a waker was queued"),
        }
    }

    /// Closes the channel: true for the call that closed it, false if it was already closed.
    /// Senders fail from then on (waiting ones get their values back); what was sent before can
    /// still be received.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::bounded(4);
    /// tx.try_send(1).unwrap();
    /// assert!(rx.close());
    /// assert!(tx.try_send(2).is_err());
    /// assert_eq!(rx.try_recv(), Ok(1));
    /// ```
    pub fn close(&self) -> bool {
        self.chan.close()
    }

    /// Whether the channel is closed.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::unbounded::<u8>();
    /// drop(tx);
    /// assert!(rx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// How many values are buffered.
    ///
    /// ```
    /// let (tx, rx) = coro::channel::unbounded();
    /// tx.try_send(1).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.len()
    }

    /// Whether nothing is buffered.
    ///
    /// ```
    /// let (_tx, rx) = coro::channel::unbounded::<u8>();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's capacity: `None` for an unbounded channel, `Some(0)` for a rendezvous one.
    ///
    /// ```
    /// assert_eq!(coro::channel::bounded::<u8>(3).1.capacity(), Some(3));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.chan.capacity()
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.add_receiver();
        Receiver::new(self.chan.clone())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if let (Some(key), Some(slot)) = (self.waiting.take(), &self.slot) {
            drop(self.chan.abandon_recv(key, slot));
        }
        self.chan.drop_receiver();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// One step of a receive: takes a value, or queues (`*key` set) with `slot` and waits for
/// one. `slot` stays at its address while `*key` is set.
fn poll_recv<T>(
    chan: &Chan<T>,
    key: &mut Option<Key>,
    slot: &ReceiveSlot<T>,
    cx: &mut Context<'_>,
) -> Poll<Option<T>> {
    if let Some(queued) = *key {
        let polled = chan.poll_recv_grant(queued, slot, cx.waker());
        if polled.is_ready() {
            *key = None;
        }
        return polled;
    }
    match chan.start_recv(Some(slot), Some(cx.waker())) {
        RecvAttempt::Received(value) => Poll::Ready(Some(value)),
        RecvAttempt::Closed => Poll::Ready(None),
        RecvAttempt::Queued(queued) => {
            *key = Some(queued);
            Poll::Pending
        }
        RecvAttempt::Empty => unreachable!("a receive with a waker was not queued"),
    }
}

impl<T> Stream for Receiver<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        let slot = this
            .slot
            .get_or_insert_with(|| Box::new(ReceiveSlot::new()));
        poll_recv(&this.chan, &mut this.waiting, slot, cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len(), None)
    }
}

/// The future returned by [`Receiver::recv`].
///
/// ```
/// let (tx, rx) = coro::channel::unbounded();
/// tx.try_send(5).unwrap();
/// let recv: coro::channel::RecvFuture<'_, i32> = rx.recv();
/// assert_eq!(coro::block_wait(recv), Ok(5));
/// ```
#[must_use = "futures do nothing unless awaited"]
#[pin_project(PinnedDrop)]
pub struct RecvFuture<'a, T> {
    chan: &'a Chan<T>,
    /// Set while queued in the channel.
    key: Option<Key>,
    done: bool,
    /// Where a sender leaves the value while this receive waits: pinned, since the channel's
    /// queue points at it.
    #[pin]
    slot: ReceiveSlot<T>,
    /// While queued: the waiting task's registration, for task snapshots.
    traced: Option<coro_executor::trace::WaitRegistration>,
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        assert!(
            !*this.done,
            "a coro::channel receive future was polled after it completed"
        );
        let polled = poll_recv(this.chan, this.key, this.slot.as_ref().get_ref(), cx);
        if polled.is_ready() {
            *this.done = true;
            *this.traced = None;
        } else if this.traced.is_none() {
            *this.traced = Some(this.chan.wait());
        }
        polled.map(|value| value.ok_or(RecvError))
    }
}

#[pinned_drop]
impl<T> PinnedDrop for RecvFuture<'_, T> {
    fn drop(self: Pin<&mut Self>) {
        let this = self.project();
        if let Some(key) = this.key.take() {
            // A value handed to this receive goes back into the channel; one that cannot (no
            // receiver is left) is dropped here, outside the channel's lock.
            drop(this.chan.abandon_recv(key, this.slot.as_ref().get_ref()));
        }
    }
}

impl<T> fmt::Debug for RecvFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvFuture")
            .field("queued", &self.key.is_some())
            .finish_non_exhaustive()
    }
}
