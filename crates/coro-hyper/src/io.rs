//! [`CoroIo`]: the adapter between `futures_io`'s IO traits and hyper's.

use pin_project::pin_project;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// The most bytes one read offers a `futures_io` reader. `futures_io` reads into initialised
/// memory and hyper hands over uninitialised buffers, so what is offered is zeroed first: the cap
/// keeps a read that brings a few bytes from zeroing a large spare capacity. hyper only offers
/// more than a few KiB after reads that filled what it offered, so the zeroing stays in
/// proportion to the bytes read.
const MAX_READ: usize = 64 * 1024;

/// Adapts IO between `futures_io` and hyper, both ways (hyper-util's `TokioIo`, for
/// `futures_io`).
///
/// - For `T:` [`futures_io::AsyncRead`] / [`AsyncWrite`](futures_io::AsyncWrite) (a
///   [`coro::net::TcpStream`], a `UnixStream`, an async-io socket), `CoroIo<T>` is hyper's
///   [`Read`](hyper::rt::Read) / [`Write`](hyper::rt::Write): what hyper's client and server
///   connections take.
/// - For `T:` hyper's `Read` / `Write` (such as [`hyper::upgrade::Upgraded`]), `CoroIo<T>` is
///   `futures_io`'s `AsyncRead` / `AsyncWrite`, for the `futures` IO extension traits.
///
/// `T` need not be `Unpin`: the adapter pins it in place.
///
/// ```
/// use coro_hyper::CoroIo;
/// use futures::AsyncReadExt;
///
/// // Both ways: a futures_io reader seen as hyper's Read, seen again as futures_io's.
/// let inner: &[u8] = b"hello";
/// let mut io = CoroIo::new(CoroIo::new(inner));
/// let mut got = String::new();
/// futures::executor::block_on(io.read_to_string(&mut got)).unwrap();
/// assert_eq!(got, "hello");
/// ```
#[pin_project]
#[derive(Debug, Default, Clone)]
pub struct CoroIo<T> {
    #[pin]
    inner: T,
}

impl<T> CoroIo<T> {
    /// Wraps `inner`.
    ///
    /// ```
    /// let io = coro_hyper::CoroIo::new(std::io::empty());
    /// # let _ = io;
    /// ```
    pub fn new(inner: T) -> Self {
        CoroIo { inner }
    }

    /// The wrapped IO object.
    ///
    /// ```
    /// let io = coro_hyper::CoroIo::new(7);
    /// assert_eq!(*io.get_ref(), 7);
    /// ```
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped IO object, mutably.
    ///
    /// ```
    /// let mut io = coro_hyper::CoroIo::new(7);
    /// *io.get_mut() += 1;
    /// assert_eq!(io.into_inner(), 8);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// Unwraps the IO object.
    ///
    /// ```
    /// let io = coro_hyper::CoroIo::new(String::from("socket"));
    /// assert_eq!(io.into_inner(), "socket");
    /// ```
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: futures_io::AsyncRead> hyper::rt::Read for CoroIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let len = buf.remaining().min(MAX_READ);
        let dst = buf.initialize_unfilled_to(len);
        let n = ready!(self.project().inner.poll_read(cx, dst))?;
        assert!(
            n <= len,
            "a futures_io::AsyncRead reported reading {n} bytes into a buffer of {len}"
        );
        // SAFETY: the first `len` unfilled bytes were initialised above, and `n <= len`.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<T: futures_io::AsyncWrite> hyper::rt::Write for CoroIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_close(cx)
    }

    // `is_write_vectored` stays `false`: `futures_io` cannot say whether a writer has real
    // vectored writes (its default writes the first buffer only), so hyper flattens a response
    // into one buffer, which costs a copy and never a second syscall. For a writer known to
    // have them (coro::net's streams do), turn on `http1().writev(true)` through
    // `Serve::configure`.
}

impl<T: hyper::rt::Read> futures_io::AsyncRead for CoroIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let mut read = hyper::rt::ReadBuf::new(buf);
        ready!(self.project().inner.poll_read(cx, read.unfilled()))?;
        Poll::Ready(Ok(read.filled().len()))
    }
}

impl<T: hyper::rt::Write> futures_io::AsyncWrite for CoroIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().inner.poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}
