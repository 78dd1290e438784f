//! Unix-domain sockets (Unix only): [`UnixListener`], [`UnixStream`] and its owned halves.

use super::cancel_aware;
use super::evented::{Evented, connect_finished};
use super::stream::{impl_read, impl_write};
use super::tcp::in_progress;
use std::io;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

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
    inner: Arc<Evented<std::os::unix::net::UnixStream>>,
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
        cancel_aware(std::future::poll_fn(|cx| {
            inner.poll_connected(cx, |s| connect_finished(s.take_error(), s.peer_addr()))
        }))
        .await?;
        Ok(UnixStream {
            inner: Arc::new(inner),
        })
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

    /// Splits the stream into a reading and a writing half, usable from two tasks at once.
    ///
    /// ```
    /// use futures::{AsyncReadExt, AsyncWriteExt};
    ///
    /// # coro::block_wait(async {
    /// let (a, b) = coro::net::UnixStream::pair().unwrap();
    /// let (mut read, mut write) = a.into_split();
    /// let (mut peer_read, mut peer_write) = b.into_split();
    /// let echo = coro::spawn(async move {
    ///     let mut buf = [0; 4];
    ///     peer_read.read_exact(&mut buf).await?;
    ///     peer_write.write_all(&buf).await
    /// });
    /// write.write_all(b"ping").await.unwrap();
    /// let mut buf = [0; 4];
    /// read.read_exact(&mut buf).await.unwrap();
    /// assert_eq!(&buf, b"ping");
    /// echo.await.unwrap().unwrap();
    /// # });
    /// ```
    pub fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        (
            OwnedReadHalf {
                inner: self.inner.clone(),
            },
            OwnedWriteHalf { inner: self.inner },
        )
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
            inner: Arc::new(Evented::new(stream)?),
        })
    }
}

/// The reading half of a [`UnixStream`] ([`UnixStream::into_split`]).
///
/// ```
/// use futures::AsyncReadExt;
///
/// # coro::block_wait(async {
/// let (a, b) = coro::net::UnixStream::pair().unwrap();
/// let (mut read, _write): (coro::net::unix::OwnedReadHalf, _) = a.into_split();
/// drop(b);
/// let mut rest = Vec::new();
/// assert_eq!(read.read_to_end(&mut rest).await.unwrap(), 0); // the peer is gone
/// # });
/// ```
#[derive(Debug)]
pub struct OwnedReadHalf {
    inner: Arc<Evented<std::os::unix::net::UnixStream>>,
}

/// The writing half of a [`UnixStream`] ([`UnixStream::into_split`]); closing it shuts down
/// the write side.
///
/// ```
/// use futures::{AsyncReadExt, AsyncWriteExt};
///
/// # coro::block_wait(async {
/// let (a, mut b) = coro::net::UnixStream::pair().unwrap();
/// let (_read, mut write): (_, coro::net::unix::OwnedWriteHalf) = a.into_split();
/// write.write_all(b"done").await.unwrap();
/// write.close().await.unwrap(); // b reads to the end
/// let mut got = String::new();
/// b.read_to_string(&mut got).await.unwrap();
/// assert_eq!(got, "done");
/// # });
/// ```
#[derive(Debug)]
pub struct OwnedWriteHalf {
    inner: Arc<Evented<std::os::unix::net::UnixStream>>,
}

impl_read!(UnixStream);
impl_write!(UnixStream);
impl_read!(OwnedReadHalf);
impl_write!(OwnedWriteHalf);
