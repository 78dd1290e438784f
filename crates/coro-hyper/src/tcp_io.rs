//! [`TcpIo`]: hyper's IO traits straight on a [`coro::net::TcpStream`], for the plain (non-TLS)
//! connections of [`serve`](crate::serve) and the client's connector.
//!
//! Rule: what [`CoroIo`](crate::CoroIo) cannot do for an arbitrary `futures_io` stream, this
//! does for coro's own: reads land in hyper's uninitialised buffer in place (no zeroing, no
//! scratch copy), and writes are vectored (`is_write_vectored`), so hyper sends a response's
//! head and body with one `writev` instead of flattening them into one buffer first.

use coro::net::TcpStream;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// A coro TCP stream as hyper's [`Read`](hyper::rt::Read) and [`Write`](hyper::rt::Write).
#[derive(Debug)]
pub(crate) struct TcpIo {
    stream: TcpStream,
}

impl TcpIo {
    pub(crate) fn new(stream: TcpStream) -> TcpIo {
        TcpIo { stream }
    }

    pub(crate) fn get_ref(&self) -> &TcpStream {
        &self.stream
    }
}

impl hyper::rt::Read for TcpIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: the read only writes initialised bytes into the slice and never
        // de-initialises any (the kernel gets it as a plain buffer), as `as_mut` requires.
        let unfilled = unsafe { buf.as_mut() };
        let n = ready!(self.stream.poll_read_uninit(cx, unfilled))?;
        // SAFETY: the read returned `n`: the kernel wrote the first `n` bytes of the slice.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for TcpIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        futures_io::AsyncWrite::poll_write(Pin::new(&mut self.stream), cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        futures_io::AsyncWrite::poll_write_vectored(Pin::new(&mut self.stream), cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        futures_io::AsyncWrite::poll_flush(Pin::new(&mut self.stream), cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        futures_io::AsyncWrite::poll_close(Pin::new(&mut self.stream), cx)
    }
}

#[cfg(test)]
mod tests {
    use super::TcpIo;
    use hyper::rt::{Read, Write};
    use std::future::poll_fn;
    use std::mem::MaybeUninit;
    use std::pin::Pin;

    #[test]
    fn reads_land_in_place_and_vectored_writes_arrive_whole() {
        coro::block_wait(async {
            let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let client = coro::spawn(coro::net::TcpStream::connect(
                listener.local_addr().unwrap(),
            ));
            let (server, _) = listener.accept().await.unwrap();
            let mut client = TcpIo::new(client.await.unwrap().unwrap());
            let mut server = TcpIo::new(server);
            assert!(client.is_write_vectored());
            let bufs = [io_slice(b"head "), io_slice(b"and body")];
            let written = poll_fn(|cx| Pin::new(&mut client).poll_write_vectored(cx, &bufs))
                .await
                .unwrap();
            assert_eq!(written, 13, "one vectored write sends both buffers");
            let mut got = Vec::new();
            while got.len() < 13 {
                let mut storage = [MaybeUninit::<u8>::uninit(); 64];
                let mut buf = hyper::rt::ReadBuf::uninit(&mut storage);
                poll_fn(|cx| Pin::new(&mut server).poll_read(cx, buf.unfilled()))
                    .await
                    .unwrap();
                assert!(!buf.filled().is_empty(), "the stream ended early");
                got.extend_from_slice(buf.filled());
            }
            assert_eq!(got, b"head and body");
        });
    }

    fn io_slice(bytes: &[u8]) -> std::io::IoSlice<'_> {
        std::io::IoSlice::new(bytes)
    }
}
