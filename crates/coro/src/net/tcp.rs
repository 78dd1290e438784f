//! [`TcpListener`], [`TcpStream`] and its owned halves.
//!
//! Rule: each holds an OS socket on the IO driver, or, when it was opened inside a simulation
//! (a simulated network is installed on the thread), a socket of the simulated network; the
//! public API is the same for both, and no OS socket is opened inside a simulation.

use super::addr::{ToSocketAddrs, resolve, try_each};
use super::cancel_aware;
use super::evented::{Evented, connect_finished};
use super::stream::{StreamIo, impl_read, impl_write};
use crate::sim::net::connect as sim_connect;
use crate::sim::net::listener::SimListener;
use crate::sim::net::stream::SimStream;
use crate::sim::net::world;
use futures_core::Stream;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A TCP listening socket.
///
/// ```
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let client = coro::spawn(coro::net::TcpStream::connect(addr));
/// let (_stream, peer) = listener.accept().await.unwrap();
/// let client = client.await.unwrap().unwrap();
/// assert_eq!(peer, client.local_addr().unwrap());
/// # });
/// ```
#[derive(Debug)]
pub struct TcpListener {
    inner: ListenerSocket,
}

/// What a [`TcpListener`] listens with.
#[derive(Debug)]
enum ListenerSocket {
    Os(Evented<std::net::TcpListener>),
    Sim(SimListener),
}

impl ListenerSocket {
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        match self {
            ListenerSocket::Os(os) => os.poll_read_with(cx, |l| l.accept()).map(|accepted| {
                let (stream, addr) = accepted?;
                Ok((TcpStream::try_from(stream)?, addr))
            }),
            ListenerSocket::Sim(sim) => sim.poll_accept(cx).map_ok(|(stream, addr)| {
                let stream = TcpStream {
                    inner: Arc::new(TcpSocket::Sim(stream)),
                };
                (stream, addr)
            }),
        }
    }
}

impl TcpListener {
    /// Binds to `addr` (the first of its addresses that binds). Port 0 picks a free port.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    /// assert_ne!(listener.local_addr().unwrap().port(), 0);
    /// # });
    /// ```
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let addrs = resolve(addr).await?;
        try_each(addrs, |addr| async move {
            if world::is_active() {
                return Ok(TcpListener {
                    inner: ListenerSocket::Sim(SimListener::bind(addr)?),
                });
            }
            TcpListener::try_from(std::net::TcpListener::bind(addr)?)
        })
        .await
    }

    /// Accepts a connection. Cancellation-aware: returns an error once the current task's token
    /// fires.
    ///
    /// ```
    /// use coro::cancel::{CancellationSource, CancelledOutcome};
    ///
    /// let source = CancellationSource::new();
    /// source.request_cancellation();
    /// let err = coro::block_wait(coro::Task::new(async {
    ///     let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    ///     listener.accept().await.unwrap_err()
    /// }).with_cancellation(source.token()));
    /// assert!(err.is_cancelled());
    /// ```
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        cancel_aware(std::future::poll_fn(|cx| self.inner.poll_accept(cx))).await
    }

    /// The stream of incoming connections (each `accept` in turn; the stream never ends).
    ///
    /// ```
    /// use futures::StreamExt;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// coro::spawn(coro::net::TcpStream::connect(addr));
    /// let mut incoming = listener.incoming();
    /// assert!(incoming.next().await.unwrap().is_ok());
    /// # });
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address it listens on.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// assert!(listener.local_addr().unwrap().ip().is_loopback());
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            ListenerSocket::Os(os) => os.get_ref().local_addr(),
            ListenerSocket::Sim(sim) => Ok(sim.local_addr()),
        }
    }
}

impl TryFrom<std::net::TcpListener> for TcpListener {
    type Error = io::Error;

    /// Registers an existing listener (made non-blocking here).
    ///
    /// ```
    /// let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let listener = coro::net::TcpListener::try_from(std_listener).unwrap();
    /// assert!(listener.local_addr().is_ok());
    /// ```
    fn try_from(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        Ok(TcpListener {
            inner: ListenerSocket::Os(Evented::new(listener)?),
        })
    }
}

/// The stream returned by [`TcpListener::incoming`].
///
/// ```
/// use futures::StreamExt;
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let client = coro::spawn(coro::net::TcpStream::connect(listener.local_addr().unwrap()));
/// let mut incoming: coro::net::Incoming<'_> = listener.incoming();
/// let accepted = incoming.next().await.unwrap().unwrap();
/// let client = client.await.unwrap().unwrap();
/// assert_eq!(accepted.peer_addr().unwrap(), client.local_addr().unwrap());
/// # });
/// ```
#[derive(Debug)]
#[must_use = "streams do nothing unless polled"]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Stream for Incoming<'_> {
    type Item = io::Result<TcpStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.listener
            .inner
            .poll_accept(cx)
            .map(|accepted| Some(accepted.map(|(stream, _)| stream)))
    }
}

/// A TCP connection: `futures_io`'s `AsyncRead` and `AsyncWrite` (closing shuts down the
/// write side). [`into_split`](TcpStream::into_split) gives halves two tasks can use at once.
///
/// ```
/// use futures::{AsyncReadExt, AsyncWriteExt};
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let mut client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
/// let (mut server, _) = listener.accept().await.unwrap();
/// client.write_all(b"hi").await.unwrap();
/// client.close().await.unwrap(); // the server reads to the end
/// let mut got = String::new();
/// server.read_to_string(&mut got).await.unwrap();
/// assert_eq!(got, "hi");
/// # });
/// ```
#[derive(Debug)]
pub struct TcpStream {
    inner: Arc<TcpSocket>,
}

impl TcpStream {
    /// Connects to `addr` (its addresses in turn, until one connects). Cancellation-aware:
    /// returns an error once the current task's token fires.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// // Nobody listens on a port just freed: the connection is refused.
    /// let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    /// let err = coro::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    /// # });
    /// ```
    pub async fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        let addrs = resolve(addr).await?;
        if world::is_active() {
            return try_each(addrs, |addr| {
                cancel_aware(async move {
                    let stream = sim_connect::connect(addr).await?;
                    Ok(TcpStream {
                        inner: Arc::new(TcpSocket::Sim(stream)),
                    })
                })
            })
            .await;
        }
        try_each(addrs, |addr| cancel_aware(connect_one(addr))).await
    }

    /// Splits the stream into a reading and a writing half, usable from two tasks at once.
    ///
    /// ```
    /// use futures::{AsyncReadExt, AsyncWriteExt};
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    /// let (server, _) = listener.accept().await.unwrap();
    /// let (mut read, mut write) = client.into_split();
    /// let writer = coro::spawn(async move { write.write_all(b"abc").await });
    /// let (mut server_read, mut server_write) = server.into_split();
    /// let echo = coro::spawn(async move {
    ///     let mut buf = [0; 3];
    ///     server_read.read_exact(&mut buf).await?;
    ///     server_write.write_all(&buf).await
    /// });
    /// let mut buf = [0; 3];
    /// read.read_exact(&mut buf).await.unwrap();
    /// assert_eq!(&buf, b"abc");
    /// writer.await.unwrap().unwrap();
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

    /// The local address.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    /// assert!(client.local_addr().unwrap().ip().is_loopback());
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Reads into `buf`, which may be uninitialised, in place: the bytes land in its first
    /// `n` elements, for the `Ready(Ok(n))` returned (0: the peer closed its write side). For
    /// adapters to IO traits that hand out uninitialised buffers (hyper's `ReadBufCursor`, as
    /// `coro_hyper` uses it), which `futures_io::AsyncRead` would make them zero first.
    /// Pending, the task is woken when the socket becomes readable.
    ///
    /// ```
    /// use futures::AsyncWriteExt;
    /// use std::mem::MaybeUninit;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let mut client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    /// let (server, _) = listener.accept().await.unwrap();
    /// client.write_all(b"uninit").await.unwrap();
    /// let mut buf = [MaybeUninit::<u8>::uninit(); 16];
    /// let n = std::future::poll_fn(|cx| server.poll_read_uninit(cx, &mut buf)).await.unwrap();
    /// assert!(n > 0);
    /// // SAFETY: the first `n` bytes were written by the read.
    /// let got = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
    /// assert_eq!(got, &b"uninit"[..n]);
    /// # });
    /// ```
    pub fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        self.inner.poll_read_uninit(cx, buf)
    }

    /// The peer's address.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let client = coro::net::TcpStream::connect(addr).await.unwrap();
    /// assert_eq!(client.peer_addr().unwrap(), addr);
    /// # });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }

    /// Sets `TCP_NODELAY` (no Nagle delay for small writes).
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    /// client.set_nodelay(true).unwrap();
    /// # });
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match &*self.inner {
            TcpSocket::Os(os) => os.get_ref().set_nodelay(on),
            // A simulated segment goes out as soon as it is written.
            TcpSocket::Sim(_) => Ok(()),
        }
    }
}

/// A non-blocking connect to `addr`, then the wait for it to finish.
async fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_nonblocking(true)?;
    match socket.connect(&addr.into()) {
        Ok(()) => {}
        Err(err) if in_progress(&err) => {}
        Err(err) => return Err(err),
    }
    let evented = Evented::new(std::net::TcpStream::from(socket))?;
    std::future::poll_fn(|cx| {
        evented.poll_connected(cx, |s| connect_finished(s.take_error(), s.peer_addr()))
    })
    .await?;
    Ok(TcpStream {
        inner: Arc::new(TcpSocket::Os(evented)),
    })
}

/// Whether a non-blocking `connect` reports that it goes on in the background.
pub(super) fn in_progress(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::WouldBlock || err.raw_os_error() == Some(libc::EINPROGRESS)
}

impl TryFrom<std::net::TcpStream> for TcpStream {
    type Error = io::Error;

    /// Registers an existing, connected stream (made non-blocking here).
    ///
    /// ```
    /// let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let std_stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    /// let stream = coro::net::TcpStream::try_from(std_stream).unwrap();
    /// assert!(stream.peer_addr().is_ok());
    /// ```
    fn try_from(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        Ok(TcpStream {
            inner: Arc::new(TcpSocket::Os(Evented::new(stream)?)),
        })
    }
}

/// The reading half of a [`TcpStream`] ([`TcpStream::into_split`]).
///
/// ```
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
/// let (read, _write): (coro::net::OwnedReadHalf, _) = client.into_split();
/// assert!(read.peer_addr().is_ok());
/// # });
/// ```
#[derive(Debug)]
pub struct OwnedReadHalf {
    inner: Arc<TcpSocket>,
}

impl OwnedReadHalf {
    /// The peer's address.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let (read, _) = coro::net::TcpStream::connect(addr).await.unwrap().into_split();
    /// assert_eq!(read.peer_addr().unwrap(), addr);
    /// # });
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.peer_addr()
    }
}

/// The writing half of a [`TcpStream`] ([`TcpStream::into_split`]); closing it shuts down the
/// write side.
///
/// ```
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
/// let (_read, write): (_, coro::net::OwnedWriteHalf) = client.into_split();
/// assert!(write.local_addr().is_ok());
/// # });
/// ```
#[derive(Debug)]
pub struct OwnedWriteHalf {
    inner: Arc<TcpSocket>,
}

impl OwnedWriteHalf {
    /// The local address.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let client = coro::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
    /// let (_, write) = client.into_split();
    /// assert!(write.local_addr().unwrap().ip().is_loopback());
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// What a [`TcpStream`] (and its halves) talks through.
#[derive(Debug)]
enum TcpSocket {
    Os(Evented<std::net::TcpStream>),
    Sim(SimStream),
}

impl TcpSocket {
    fn local_addr(&self) -> io::Result<SocketAddr> {
        match self {
            TcpSocket::Os(os) => os.get_ref().local_addr(),
            TcpSocket::Sim(sim) => Ok(sim.local_addr()),
        }
    }

    fn peer_addr(&self) -> io::Result<SocketAddr> {
        match self {
            TcpSocket::Os(os) => os.get_ref().peer_addr(),
            TcpSocket::Sim(sim) => Ok(sim.peer_addr()),
        }
    }
}

impl StreamIo for TcpSocket {
    fn poll_read_uninit(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [std::mem::MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        match self {
            TcpSocket::Os(os) => os.poll_read_uninit(cx, buf),
            TcpSocket::Sim(sim) => sim.poll_read(cx, buf),
        }
    }

    fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self {
            TcpSocket::Os(os) => StreamIo::poll_read(os, cx, buf),
            TcpSocket::Sim(sim) => {
                // SAFETY: a `&mut [u8]` seen as `&mut [MaybeUninit<u8>]`: the simulated read
                // only writes initialised bytes into it, so it stays initialised.
                let uninit =
                    unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) };
                sim.poll_read(cx, uninit)
            }
        }
    }

    fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self {
            TcpSocket::Os(os) => StreamIo::poll_write(os, cx, buf),
            TcpSocket::Sim(sim) => sim.poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self {
            TcpSocket::Os(os) => os.poll_write_vectored(cx, bufs),
            // One segment of all the buffers, as a socket's vectored send makes one.
            TcpSocket::Sim(sim) => {
                let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
                sim.poll_write(cx, &joined)
            }
        }
    }

    fn shutdown_write(&self) -> Poll<io::Result<()>> {
        match self {
            TcpSocket::Os(os) => os.shutdown_write(),
            TcpSocket::Sim(sim) => {
                sim.shutdown_write();
                Poll::Ready(Ok(()))
            }
        }
    }
}

impl_read!(TcpStream);
impl_write!(TcpStream);
impl_read!(OwnedReadHalf);
impl_write!(OwnedWriteHalf);
