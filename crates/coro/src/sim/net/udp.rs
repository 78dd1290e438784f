//! [`SimUdp`]: a UDP socket of a simulated host.
//!
//! Rule: a datagram is lost with the seeded probability of `set_udp_drop`; otherwise it
//! arrives after a seeded latency (datagrams may overtake each other), at the port bound on its
//! host at that moment. A datagram between partitioned hosts, or to a port nobody has bound, is
//! lost, as on a real network: UDP holds nothing back.

use super::host;
use super::world::{self, Protocol};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// The most datagrams a socket keeps unread; later ones are lost, as a full receive buffer
/// loses them.
const INBOX_LIMIT: usize = 1024;

#[derive(Debug, Default)]
struct Queue {
    datagrams: VecDeque<(Vec<u8>, SocketAddr)>,
    receiver: Option<Waker>,
}

/// The datagrams that reached a bound UDP port.
#[derive(Debug, Default)]
struct Inbox {
    queue: Mutex<Queue>,
}

impl Inbox {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, datagram: Vec<u8>, from: SocketAddr) {
        let mut queue = self.queue();
        if queue.datagrams.len() >= INBOX_LIMIT {
            return;
        }
        queue.datagrams.push_back((datagram, from));
        let receiver = queue.receiver.take();
        drop(queue);
        if let Some(receiver) = receiver {
            receiver.wake();
        }
    }
}

/// A bound UDP socket of a simulated host.
#[derive(Debug)]
pub(crate) struct SimUdp {
    host: usize,
    port: u16,
    inbox: Arc<Inbox>,
    peer: Mutex<Option<SocketAddr>>,
}

impl SimUdp {
    /// Binds `addr` on the current host (its own address, a loopback or the unspecified
    /// address; port 0 picks a free port).
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<SimUdp> {
        let host = host::current();
        let inbox = Arc::new(Inbox::default());
        let port = world::bind_local(Protocol::Udp, host, addr, inbox.clone())?;
        Ok(SimUdp {
            host,
            port,
            inbox,
            peer: Mutex::new(None),
        })
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        SocketAddr::new(world::address(self.host), self.port)
    }

    /// Sends `buf` to `to`: it arrives after a seeded latency, or is lost.
    pub(crate) fn send_to(&self, buf: &[u8], to: SocketAddr) -> io::Result<usize> {
        let target = world::host_at(to.ip(), self.host)?;
        if world::drop_datagram() {
            return Ok(buf.len());
        }
        let (from, datagram, source) = (self.host, buf.to_vec(), self.local_addr());
        let due = coro_executor::time::now() + world::latency();
        world::at(due, move || {
            if !world::connected(from, target) {
                return;
            }
            let inbox = world::bound(Protocol::Udp, target, to.port())
                .and_then(|bound| bound.downcast::<Inbox>().ok());
            if let Some(inbox) = inbox {
                inbox.push(datagram, source);
            }
        });
        Ok(buf.len())
    }

    /// Receives one datagram (from the connected peer only, once connected).
    pub(crate) fn poll_recv_from(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<(usize, SocketAddr)>> {
        let peer = *self.peer.lock().unwrap_or_else(|e| e.into_inner());
        let mut queue = self.inbox.queue();
        while let Some((datagram, from)) = queue.datagrams.pop_front() {
            if peer.is_some_and(|peer| !same_peer(peer, from, self.host)) {
                continue;
            }
            // As a real socket: what does not fit in `buf` is cut off.
            let n = datagram.len().min(buf.len());
            buf[..n].copy_from_slice(&datagram[..n]);
            return Poll::Ready(Ok((n, from)));
        }
        queue.receiver = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Sends and receives to and from `peer` only, from now on.
    pub(crate) fn connect(&self, peer: SocketAddr) -> io::Result<()> {
        world::host_at(peer.ip(), self.host)?;
        *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
        Ok(())
    }

    pub(crate) fn peer(&self) -> io::Result<SocketAddr> {
        self.peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotConnected,
                    "the UDP socket is not connected",
                )
            })
    }
}

/// Whether a datagram from `from` comes from `peer` (a loopback peer is the own host).
fn same_peer(peer: SocketAddr, from: SocketAddr, me: usize) -> bool {
    peer.port() == from.port()
        && world::host_at(peer.ip(), me).ok() == world::host_at(from.ip(), me).ok()
}

impl Drop for SimUdp {
    fn drop(&mut self) {
        let unbound = world::unbind(Protocol::Udp, self.host, self.port);
        drop(unbound);
    }
}
