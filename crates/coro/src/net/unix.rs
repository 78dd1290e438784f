//! [`UnixListener`] and [`UnixStream`] (Unix only).

use super::cancel_aware;
use super::evented::Evented;
use super::tcp::in_progress;
use futures_io::{AsyncRead, AsyncWrite};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A Unix-domain listening socket.
///
/// ```
/// # coro::block_wait(async {
/// let dir = std::env::temp_dir().join(format!("coro-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("listener.sock");
/// let _ = std::fs::remove_file(&path);
/// let listener = coro::net::UnixListener::bind(&path).unwrap();
/// let client = coro::spawn(coro::net::UnixStream::connect(path.clone()));
/// let (_stream, _addr) = listener.accept().await.unwrap();
/// client.await.unwrap().unwrap();
/// std::fs::remove_file(&path).unwrap();
/// # });
/// ```
#[derive(Debug)]
pub struct UnixListener {
    inner: Evented<std::os::unix::net::UnixListener>,
}

impl UnixListener {
    /// Binds to `path` (which must not exist yet).
    ///
    /// ```
    /// let err = coro::net::UnixListener::bind("/nonexistent-dir/x.sock").unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// ```
    pub fn bind(path: impl AsRef<Path>) -> io::Result<UnixListener> {
        UnixListener::try_from(std::os::unix::net::UnixListener::bind(path)?)
    }

    /// Accepts a connection. Cancellation-aware, as [`TcpListener::accept`](super::TcpListener::accept).
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let path = std::env::temp_dir().join(format!("coro-doc-accept-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let listener = coro::net::UnixListener::bind(&path).unwrap();
    /// let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
    /// assert!(listener.accept().await.is_ok());
    /// std::fs::remove_file(&path).unwrap();
    /// # });
    /// ```
    pub async fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (stream, addr) = cancel_aware(std::future::poll_fn(|cx| {
            self.inner.poll_read_with(cx, |l| l.accept())
        }))
        .await?;
        Ok((UnixStream::try_from(stream)?, addr))
    }
}

impl TryFrom<std::os::unix::net::UnixListener> for UnixListener {
    type Error = io::Error;

    /// Registers an existing listener (made non-blocking here).
    ///
    /// ```
    /// let path = std::env::temp_dir().join(format!("coro-doc-from-{}.sock", std::process::id()));
    /// let _ = std::fs::remove_file(&path);
    /// let std_listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    /// assert!(coro::net::UnixListener::try_from(std_listener).is_ok());
    /// std::fs::remove_file(&path).unwrap();
    /// ```
    fn try_from(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        listener.set_nonblocking(true)?;
        Ok(UnixListener {
            inner: Evented::new(listener)?,
        })
    }
}

/// A Unix-domain stream: `futures_io`'s `AsyncRead` and `AsyncWrite` (closing shuts down the
/// write side).
///
/// ```
/// use futures::{AsyncReadExt, AsyncWriteExt};
///
/// # coro::block_wait(async {
/// let (mut a, mut b) = coro::net::UnixStream::pair().unwrap();
/// a.write_all(b"over").await.unwrap();
/// let mut buf = [0; 4];
/// b.read_exact(&mut buf).await.unwrap();
/// assert_eq!(&buf, b"over");
/// # });
/// ```
#[derive(Debug)]
pub struct UnixStream {
    inner: Evented<std::os::unix::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`. Cancellation-aware.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let err = coro::net::UnixStream::connect("/nonexistent-dir/x.sock").await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    /// # });
    /// ```
    pub async fn connect(path: impl AsRef<Path>) -> io::Result<UnixStream> {
        let addr = socket2::SockAddr::unix(path)?;
        let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        match socket.connect(&addr) {
            Ok(()) => {}
            Err(err) if in_progress(&err) => {}
            Err(err) => return Err(err),
        }
        let inner = Evented::new(std::os::unix::net::UnixStream::from(
            std::os::fd::OwnedFd::from(socket),
        ))?;
        cancel_aware(std::future::poll_fn(|cx| inner.poll_writable(cx))).await?;
        if let Some(err) = inner.get_ref().take_error()? {
            return Err(err);
        }
        Ok(UnixStream { inner })
    }

    /// A connected pair of streams.
    ///
    /// ```
    /// use futures::{AsyncReadExt, AsyncWriteExt};
    ///
    /// # coro::block_wait(async {
    /// let (mut a, mut b) = coro::net::UnixStream::pair().unwrap();
    /// b.write_all(b"bye").await.unwrap();
    /// drop(b);
    /// let mut got = String::new();
    /// a.read_to_string(&mut got).await.unwrap(); // to the end of the stream: `b` is gone
    /// assert_eq!(got, "bye");
    /// # });
    /// ```
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream::try_from(a)?, UnixStream::try_from(b)?))
    }
}

impl TryFrom<std::os::unix::net::UnixStream> for UnixStream {
    type Error = io::Error;

    /// Registers an existing stream (made non-blocking here).
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// assert!(coro::net::UnixStream::try_from(a).is_ok());
    /// ```
    fn try_from(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        stream.set_nonblocking(true)?;
        Ok(UnixStream {
            inner: Evented::new(stream)?,
        })
    }
}

impl AsyncRead for UnixStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_read_with(cx, |mut s| s.read(buf))
    }
}

impl AsyncWrite for UnixStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_write_with(cx, |mut s| s.write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(match self.inner.get_ref().shutdown(Shutdown::Write) {
            Err(err) if err.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}
