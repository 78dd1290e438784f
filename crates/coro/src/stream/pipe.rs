//! [`pipe`]: a stream fed from synchronous code (folly's `AsyncPipe`).

use crate::channel::{self, Receiver, Sender};
use futures_core::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A stream and the writer that feeds it: [`PipeWriter::write`] never waits (the pipe is
/// unbounded), so callbacks and synchronous code can produce values for an async consumer. The
/// stream ends once the writer is closed or dropped and everything written has been read.
///
/// ```
/// use futures::StreamExt;
///
/// let (writer, stream) = coro::stream::pipe();
/// std::thread::spawn(move || {
///     for i in 0..3 {
///         writer.write(i).unwrap();
///     }
///     // dropping the writer ends the stream
/// });
/// let got: Vec<i32> = coro::block_wait(stream.collect());
/// assert_eq!(got, [0, 1, 2]);
/// ```
pub fn pipe<T>() -> (PipeWriter<T>, PipeStream<T>) {
    let (tx, rx) = channel::unbounded();
    (PipeWriter { tx }, PipeStream { rx })
}

/// The writing end of a [`pipe`]. Dropping it ends the stream after what was written.
///
/// ```
/// let (writer, stream) = coro::stream::pipe::<u8>();
/// assert!(!writer.is_closed());
/// drop(stream);
/// assert!(writer.is_closed());
/// ```
pub struct PipeWriter<T> {
    tx: Sender<T>,
}

impl<T> PipeWriter<T> {
    /// Writes `value` for the stream to yield; `Err(value)` if the stream is gone.
    ///
    /// ```
    /// let (writer, stream) = coro::stream::pipe();
    /// assert_eq!(writer.write('a'), Ok(()));
    /// drop(stream);
    /// assert_eq!(writer.write('b'), Err('b'));
    /// ```
    pub fn write(&self, value: T) -> Result<(), T> {
        self.tx.try_send(value).map_err(|err| err.into_inner())
    }

    /// Ends the stream after what was written (as dropping the writer does).
    ///
    /// ```
    /// use futures::StreamExt;
    ///
    /// let (writer, stream) = coro::stream::pipe();
    /// writer.write(1).unwrap();
    /// writer.close();
    /// assert_eq!(coro::block_wait(stream.collect::<Vec<_>>()), [1]);
    /// ```
    pub fn close(self) {
        self.tx.close();
    }

    /// Whether the stream is gone (writes would fail).
    ///
    /// ```
    /// let (writer, _stream) = coro::stream::pipe::<()>();
    /// assert!(!writer.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

impl<T> fmt::Debug for PipeWriter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeWriter")
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// The reading end of a [`pipe`]: a `Stream` of what was written. Dropping it makes further
/// writes fail and drops what was written and not read.
///
/// ```
/// use futures::StreamExt;
///
/// let (writer, mut stream) = coro::stream::pipe();
/// writer.write("x").unwrap();
/// assert_eq!(coro::block_wait(stream.next()), Some("x"));
/// ```
pub struct PipeStream<T> {
    rx: Receiver<T>,
}

impl<T> Stream for PipeStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.rx).poll_next(cx)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.rx.size_hint()
    }
}

impl<T> fmt::Debug for PipeStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeStream")
            .field("buffered", &self.rx.len())
            .finish()
    }
}
