//! [`UdpSocket`].
//!
//! Rule: an OS socket on the IO driver, or, opened inside a simulation, a socket of the
//! simulated network; the public API is the same for both.

use super::addr::{ToSocketAddrs, resolve, try_each};
use super::evented::Evented;
use crate::sim::net::udp::SimUdp;
use crate::sim::net::world;
use std::io;
use std::net::SocketAddr;

/// A UDP socket. Any number of tasks may send and receive on it at once (`&self` methods).
///
/// ```
/// # coro::block_wait(async {
/// let a = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
/// let b = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
/// a.send_to(b"hello", b.local_addr().unwrap()).await.unwrap();
/// let mut buf = [0; 16];
/// let (n, from) = b.recv_from(&mut buf).await.unwrap();
/// assert_eq!(&buf[..n], b"hello");
/// assert_eq!(from, a.local_addr().unwrap());
/// # });
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    inner: UdpInner,
}

/// What a [`UdpSocket`] sends through.
#[derive(Debug)]
enum UdpInner {
    Os(Evented<std::net::UdpSocket>),
    Sim(SimUdp),
}

impl UdpSocket {
    /// Binds to `addr` (the first of its addresses that binds).
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind(("127.0.0.1", 0)).await.unwrap();
    /// assert_ne!(socket.local_addr().unwrap().port(), 0);
    /// # });
    /// ```
    pub async fn bind(addr: impl ToSocketAddrs) -> io::Result<UdpSocket> {
        let addrs = resolve(addr).await?;
        try_each(addrs, |addr| async move {
            if world::is_active() {
                return Ok(UdpSocket {
                    inner: UdpInner::Sim(SimUdp::bind(addr)?),
                });
            }
            UdpSocket::try_from(std::net::UdpSocket::bind(addr)?)
        })
        .await
    }

    /// Sends `buf` to `addr` (its first address); returns the bytes sent.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// let to = socket.local_addr().unwrap();
    /// assert_eq!(socket.send_to(b"self", to).await.unwrap(), 4);
    /// # });
    /// ```
    pub async fn send_to(&self, buf: &[u8], addr: impl ToSocketAddrs) -> io::Result<usize> {
        let to = resolve(addr).await?[0];
        match &self.inner {
            UdpInner::Os(os) => {
                std::future::poll_fn(|cx| os.poll_write_with(cx, |s| s.send_to(buf, to))).await
            }
            UdpInner::Sim(sim) => sim.send_to(buf, to),
        }
    }

    /// Receives one datagram into `buf`; returns its length and sender.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// socket.send_to(b"echo", socket.local_addr().unwrap()).await.unwrap();
    /// let mut buf = [0; 8];
    /// let (n, _) = socket.recv_from(&mut buf).await.unwrap();
    /// assert_eq!(&buf[..n], b"echo");
    /// # });
    /// ```
    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        match &self.inner {
            UdpInner::Os(os) => {
                std::future::poll_fn(|cx| os.poll_read_with(cx, |s| s.recv_from(buf))).await
            }
            UdpInner::Sim(sim) => std::future::poll_fn(|cx| sim.poll_recv_from(cx, buf)).await,
        }
    }

    /// Connects to `addr`: [`send`](Self::send) and [`recv`](Self::recv) then talk to it only.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let a = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// let b = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// a.connect(b.local_addr().unwrap()).await.unwrap();
    /// b.connect(a.local_addr().unwrap()).await.unwrap();
    /// a.send(b"x").await.unwrap();
    /// let mut buf = [0; 1];
    /// assert_eq!(b.recv(&mut buf).await.unwrap(), 1);
    /// # });
    /// ```
    pub async fn connect(&self, addr: impl ToSocketAddrs) -> io::Result<()> {
        let addrs = resolve(addr).await?;
        try_each(addrs, |addr| async move {
            match &self.inner {
                UdpInner::Os(os) => os.get_ref().connect(addr),
                UdpInner::Sim(sim) => sim.connect(addr),
            }
        })
        .await
    }

    /// Sends `buf` to the connected peer.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// socket.connect(socket.local_addr().unwrap()).await.unwrap();
    /// assert_eq!(socket.send(b"me").await.unwrap(), 2);
    /// # });
    /// ```
    pub async fn send(&self, buf: &[u8]) -> io::Result<usize> {
        match &self.inner {
            UdpInner::Os(os) => {
                std::future::poll_fn(|cx| os.poll_write_with(cx, |s| s.send(buf))).await
            }
            UdpInner::Sim(sim) => sim.send_to(buf, sim.peer()?),
        }
    }

    /// Receives one datagram from the connected peer.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// socket.connect(socket.local_addr().unwrap()).await.unwrap();
    /// socket.send(b"loop").await.unwrap();
    /// let mut buf = [0; 4];
    /// assert_eq!(socket.recv(&mut buf).await.unwrap(), 4);
    /// # });
    /// ```
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        match &self.inner {
            UdpInner::Os(os) => {
                std::future::poll_fn(|cx| os.poll_read_with(cx, |s| s.recv(buf))).await
            }
            UdpInner::Sim(sim) => {
                sim.peer()?;
                std::future::poll_fn(|cx| sim.poll_recv_from(cx, buf))
                    .await
                    .map(|(n, _)| n)
            }
        }
    }

    /// The local address.
    ///
    /// ```
    /// # coro::block_wait(async {
    /// let socket = coro::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    /// assert!(socket.local_addr().unwrap().ip().is_loopback());
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.inner {
            UdpInner::Os(os) => os.get_ref().local_addr(),
            UdpInner::Sim(sim) => Ok(sim.local_addr()),
        }
    }
}

impl TryFrom<std::net::UdpSocket> for UdpSocket {
    type Error = io::Error;

    /// Registers an existing socket (made non-blocking here).
    ///
    /// ```
    /// let std_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// let socket = coro::net::UdpSocket::try_from(std_socket).unwrap();
    /// assert!(socket.local_addr().is_ok());
    /// ```
    fn try_from(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        Ok(UdpSocket {
            inner: UdpInner::Os(Evented::new(socket)?),
        })
    }
}
