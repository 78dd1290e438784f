//! The IO every connected stream socket shares (TCP, Unix): reads, writes and shutting down the
//! write side, for `futures_io`'s traits and, with the `tokio-io` feature, tokio's.
//!
//! Rule: a stream type (or split half) holds its socket as `inner: Arc<T>`, `T` a [`StreamIo`]
//! (an `Evented` OS socket, or TCP's socket that is an OS one or a simulated one), and gets its
//! trait impls from the macros here, so the two stream kinds and their halves behave alike:
//! writes go straight to the socket (nothing is buffered, so flushing is a no-op), and closing
//! (`poll_close`, tokio's `poll_shutdown`) shuts down the write side only.

use super::evented::Evented;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::task::{Context, Poll};

/// A connected, non-blocking OS stream socket.
pub(super) trait StreamSocket: AsFd
where
    for<'a> &'a Self: Read + Write,
{
    fn shutdown(&self, how: Shutdown) -> io::Result<()>;
}

impl StreamSocket for std::net::TcpStream {
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        std::net::TcpStream::shutdown(self, how)
    }
}

#[cfg(unix)]
impl StreamSocket for std::os::unix::net::UnixStream {
    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        std::os::unix::net::UnixStream::shutdown(self, how)
    }
}

/// The IO of a connected stream, whatever carries it: an OS socket on the IO driver, or a
/// simulated connection. The trait impl macros below call only these.
pub(super) trait StreamIo {
    /// Reads into `buf` in place, which may be uninitialised: no zeroing, no scratch copy.
    fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>>;

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>>;

    fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>>;

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>>;

    /// Shuts down the write side.
    fn shutdown_write(&self) -> Poll<io::Result<()>>;
}

impl<S: StreamSocket> StreamIo for Evented<S>
where
    for<'a> &'a S: Read + Write,
{
    fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.poll_read_stream(cx, len, |s| socket2::SockRef::from(s).recv(buf))
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.poll_read_stream(cx, buf.len(), |mut s| s.read(buf))
    }

    fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_stream(cx, buf.len(), |mut s| s.write(buf))
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.poll_write_stream(cx, len, |mut s| s.write_vectored(bufs))
    }

    fn shutdown_write(&self) -> Poll<io::Result<()>> {
        Poll::Ready(match self.get_ref().shutdown(Shutdown::Write) {
            // Already shut down, or the peer is gone: nothing left to close.
            Err(err) if err.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}

/// Reads into tokio's `ReadBuf` in place: the bytes land in its unfilled (possibly
/// uninitialised) part, with no zeroing and no scratch copy.
#[cfg(feature = "tokio-io")]
pub(super) fn poll_read_buf<S: StreamIo + ?Sized>(
    inner: &S,
    cx: &mut Context<'_>,
    buf: &mut tokio::io::ReadBuf<'_>,
) -> Poll<io::Result<()>> {
    // SAFETY: every `StreamIo::poll_read_uninit` only writes initialised bytes into the slice
    // and never de-initialises any (the OS socket hands it to the kernel as a plain buffer, a
    // simulated one copies bytes in), so bytes that were initialised before stay so, as
    // `unfilled_mut` requires.
    let unfilled = unsafe { buf.unfilled_mut() };
    let n = std::task::ready!(inner.poll_read_uninit(cx, unfilled))?;
    // SAFETY: the read returned `n`: it wrote the first `n` bytes of the unfilled part.
    unsafe { buf.assume_init(n) };
    buf.advance(n);
    Poll::Ready(Ok(()))
}

/// `futures_io::AsyncRead` (and with `tokio-io`, `tokio::io::AsyncRead`) for a type whose
/// `inner` is the shared [`StreamIo`] stream.
macro_rules! impl_read {
    ($ty:ty) => {
        impl futures_io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut [u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::StreamIo::poll_read(&*self.inner, cx, buf)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::net::stream::poll_read_buf(&*self.inner, cx, buf)
            }
        }
    };
}

/// `futures_io::AsyncWrite` (and with `tokio-io`, `tokio::io::AsyncWrite`) for a type whose
/// `inner` is the shared [`StreamIo`] stream.
macro_rules! impl_write {
    ($ty:ty) => {
        impl futures_io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::StreamIo::poll_write(&*self.inner, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::StreamIo::poll_write_vectored(&*self.inner, cx, bufs)
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_close(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::net::stream::StreamIo::shutdown_write(&*self.inner)
            }
        }

        #[cfg(feature = "tokio-io")]
        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::StreamIo::poll_write(&*self.inner, cx, buf)
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                $crate::net::stream::StreamIo::poll_write_vectored(&*self.inner, cx, bufs)
            }

            fn is_write_vectored(&self) -> bool {
                true
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::task::Poll::Ready(Ok(()))
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                $crate::net::stream::StreamIo::shutdown_write(&*self.inner)
            }
        }
    };
}

pub(super) use {impl_read, impl_write};
