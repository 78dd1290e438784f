//! The channel errors. Each one that carries an unsent value gives it back with `into_inner`.

use std::error::Error;
use std::fmt;

/// [`Sender::send`](super::Sender::send) on a closed channel: the value, given back.
///
/// ```
/// let (tx, rx) = coro::channel::unbounded();
/// drop(rx);
/// let err = coro::block_wait(tx.send(String::from("lost?"))).unwrap_err();
/// assert_eq!(err.to_string(), "sending on a closed channel");
/// assert_eq!(err.into_inner(), "lost?");
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SendError<T>(pub T);

impl<T> SendError<T> {
    /// The value that was not sent.
    ///
    /// ```
    /// assert_eq!(coro::channel::SendError(3).into_inner(), 3);
    /// ```
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed channel")
    }
}

impl<T> Error for SendError<T> {}

/// Why [`Sender::try_send`](super::Sender::try_send) did not send: the value, given back.
///
/// ```
/// use coro::channel::TrySendError;
///
/// let (tx, _rx) = coro::channel::bounded(0);
/// let err = tx.try_send(1).unwrap_err(); // nobody is waiting to receive
/// assert!(err.is_full());
/// assert_eq!(err.to_string(), "sending on a full channel");
/// assert_eq!(err.into_inner(), 1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TrySendError<T> {
    /// No room (on a rendezvous channel: no receiver waiting).
    Full(T),
    /// The channel is closed.
    Closed(T),
}

impl<T> TrySendError<T> {
    /// The value that was not sent.
    ///
    /// ```
    /// assert_eq!(coro::channel::TrySendError::Closed('x').into_inner(), 'x');
    /// ```
    pub fn into_inner(self) -> T {
        match self {
            TrySendError::Full(value) | TrySendError::Closed(value) => value,
        }
    }

    /// Whether the channel was full.
    ///
    /// ```
    /// assert!(coro::channel::TrySendError::Full(()).is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the channel was closed.
    ///
    /// ```
    /// assert!(coro::channel::TrySendError::Closed(()).is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        matches!(self, TrySendError::Closed(_))
    }
}

impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Closed(_) => f.write_str("sending on a closed channel"),
        }
    }
}

impl<T> Error for TrySendError<T> {}

impl<T> From<SendError<T>> for TrySendError<T> {
    fn from(err: SendError<T>) -> Self {
        TrySendError::Closed(err.0)
    }
}

/// [`Receiver::recv`](super::Receiver::recv) on a closed channel with nothing left in it.
///
/// ```
/// let (tx, rx) = coro::channel::unbounded::<u8>();
/// drop(tx);
/// let err = coro::block_wait(rx.recv()).unwrap_err();
/// assert_eq!(err, coro::channel::RecvError);
/// assert_eq!(err.to_string(), "receiving on a closed and empty channel");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on a closed and empty channel")
    }
}

impl Error for RecvError {}

/// Why [`Receiver::try_recv`](super::Receiver::try_recv) got nothing.
///
/// ```
/// use coro::channel::TryRecvError;
///
/// let (tx, rx) = coro::channel::bounded::<u8>(1);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// drop(tx);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
/// assert_eq!(TryRecvError::Closed.to_string(), "receiving on a closed and empty channel");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TryRecvError {
    /// Nothing to receive right now.
    Empty,
    /// The channel is closed and drained.
    Closed,
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Closed => f.write_str("receiving on a closed and empty channel"),
        }
    }
}

impl Error for TryRecvError {}

impl From<RecvError> for TryRecvError {
    fn from(_: RecvError) -> Self {
        TryRecvError::Closed
    }
}
