//! [`CoroIo`]: the adapter between `futures_io`'s IO traits and hyper's.

use pin_project::pin_project;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// The most bytes one read offers a `futures_io` reader.
const MAX_READ: usize = 64 * 1024;

thread_local! {
    /// Where reads land before they are copied into hyper's buffer. `futures_io` reads into
    /// initialised memory and hyper hands over uninitialised buffers (a fresh `ReadBuf` for
    /// every read), so reading in place would zero what is offered at every poll, even one
    /// that brings a few bytes or none (up to 64 KiB of `memset` for a 100-byte request: 6-7%
    /// of the service example's CPU under wrk). This buffer is zeroed once per thread, and a
    /// read costs a copy of the bytes it brought.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; MAX_READ].into_boxed_slice());
}

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
    /// let io = coro_hyper::CoroIo::new(&b"hello"[..]);
    /// assert_eq!(io.into_inner(), b"hello");
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
        let inner = self.project().inner;
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => {
                let n = ready!(inner.poll_read(cx, &mut scratch[..len]))?;
                check_read(n, len);
                buf.put_slice(&scratch[..n]);
                Poll::Ready(Ok(()))
            }
            // A read nested in another on this thread (an adapter over an adapter): in place.
            Err(_) => {
                let dst = buf.initialize_unfilled_to(len);
                let n = ready!(inner.poll_read(cx, dst))?;
                check_read(n, len);
                // SAFETY: the first `len` unfilled bytes were initialised above, and `n <= len`.
                unsafe { buf.advance(n) };
                Poll::Ready(Ok(()))
            }
        })
    }
}

/// A reader must not claim more bytes than it was offered.
fn check_read(n: usize, len: usize) {
    assert!(
        n <= len,
        "a futures_io::AsyncRead reported reading {n} bytes into a buffer of {len}"
    );
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
    // into one buffer, which costs a copy and never a second syscall. `serve` and the client's
    // connector do not go through this adapter for plain TCP: they use coro's stream directly,
    // with vectored writes and reads into hyper's buffer in place.
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

#[cfg(test)]
mod tests {
    use super::CoroIo;
    use futures::AsyncReadExt;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Reads everything `io` has through hyper's `Read`, `chunk` bytes of buffer at a time.
    fn read_all_through_hyper(mut io: impl hyper::rt::Read + Unpin, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let mut storage = vec![std::mem::MaybeUninit::<u8>::uninit(); chunk];
            let mut buf = hyper::rt::ReadBuf::uninit(&mut storage);
            let polled = Pin::new(&mut io).poll_read(
                &mut Context::from_waker(std::task::Waker::noop()),
                buf.unfilled(),
            );
            assert!(
                matches!(polled, Poll::Ready(Ok(()))),
                "a slice reader waits"
            );
            if buf.filled().is_empty() {
                return out;
            }
            out.extend_from_slice(buf.filled());
        }
    }

    #[test]
    fn reads_arrive_whole_and_in_order_through_the_scratch_buffer() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for chunk in [1, 7, 4096, 70_000] {
            let got = read_all_through_hyper(CoroIo::new(&data[..]), chunk);
            assert_eq!(got, data, "with {chunk}-byte reads");
        }
    }

    #[test]
    fn a_read_nested_in_another_on_the_same_thread_still_arrives() {
        // hyper's Read over futures_io over hyper's Read: the inner read runs while the outer
        // one holds the thread's scratch buffer.
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 13) as u8).collect();
        let nested = CoroIo::new(CoroIo::new(CoroIo::new(&data[..])));
        assert_eq!(read_all_through_hyper(nested, 3000), data);
        let mut back = Vec::new();
        futures::executor::block_on(CoroIo::new(CoroIo::new(&data[..])).read_to_end(&mut back))
            .unwrap();
        assert_eq!(back, data);
    }
}
