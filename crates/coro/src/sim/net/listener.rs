//! [`SimListener`]: a listening port of a simulated host, and its [`Backlog`] of connections
//! not yet accepted.
//!
//! Rule: binding puts the backlog in the world's port table, where a connect finds it; dropping
//! the listener unbinds it (later connects are refused) and closes what was never accepted.

use super::host;
use super::stream::SimStream;
use super::world::{self, Protocol};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

#[derive(Debug, Default)]
struct Queue {
    streams: VecDeque<SimStream>,
    acceptor: Option<Waker>,
    closed: bool,
}

/// Connections that reached a listening port and wait for `accept`.
#[derive(Debug, Default)]
pub(crate) struct Backlog {
    queue: Mutex<Queue>,
}

impl Backlog {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a connection for `accept`; gives it back if the listener is closed.
    pub(crate) fn push(&self, stream: SimStream) -> Result<(), SimStream> {
        let mut queue = self.queue();
        if queue.closed {
            return Err(stream);
        }
        queue.streams.push_back(stream);
        let acceptor = queue.acceptor.take();
        drop(queue);
        if let Some(acceptor) = acceptor {
            acceptor.wake();
        }
        Ok(())
    }
}

/// A listening port of a simulated host.
#[derive(Debug)]
pub(crate) struct SimListener {
    host: usize,
    port: u16,
    backlog: Arc<Backlog>,
}

impl SimListener {
    /// Listens on `addr` of the current host (its own address, a loopback or the unspecified
    /// address; port 0 picks a free port).
    pub(crate) fn bind(addr: SocketAddr) -> io::Result<SimListener> {
        let host = host::current();
        let backlog = Arc::new(Backlog::default());
        let port = world::bind_local(Protocol::Tcp, host, addr, backlog.clone())?;
        Ok(SimListener {
            host,
            port,
            backlog,
        })
    }

    /// The host's address and the bound port.
    pub(crate) fn local_addr(&self) -> SocketAddr {
        SocketAddr::new(world::address(self.host), self.port)
    }

    pub(crate) fn poll_accept(
        &self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(SimStream, SocketAddr)>> {
        let mut queue = self.backlog.queue();
        match queue.streams.pop_front() {
            Some(stream) => {
                let peer = stream.peer_addr();
                Poll::Ready(Ok((stream, peer)))
            }
            None => {
                queue.acceptor = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for SimListener {
    fn drop(&mut self) {
        let unbound = world::unbind(Protocol::Tcp, self.host, self.port);
        let waiting = {
            let mut queue = self.backlog.queue();
            queue.closed = true;
            std::mem::take(&mut queue.streams)
        };
        drop(waiting);
        drop(unbound);
    }
}
