//! [`SimStream`]: one end of a simulated TCP connection.
//!
//! Rule: a connection is two [`Flow`]s, one per direction; an end reads from one and writes to
//! the other. Dropping an end shuts both its directions, as closing a socket does.

use super::flow::Flow;
use std::io;
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

/// One end of a simulated TCP connection.
#[derive(Debug)]
pub(crate) struct SimStream {
    local: SocketAddr,
    peer: SocketAddr,
    rx: Arc<Flow>,
    tx: Arc<Flow>,
}

impl SimStream {
    /// The end at `local`, talking to `peer`, reading `rx` and writing `tx`.
    pub(super) fn new(
        local: SocketAddr,
        peer: SocketAddr,
        rx: Arc<Flow>,
        tx: Arc<Flow>,
    ) -> SimStream {
        SimStream {
            local,
            peer,
            rx,
            tx,
        }
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }

    pub(crate) fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    pub(crate) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        self.rx.poll_read(cx, buf)
    }

    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.tx.poll_write(cx, buf)
    }

    pub(crate) fn shutdown_write(&self) {
        self.tx.close_write();
    }
}

impl Drop for SimStream {
    fn drop(&mut self) {
        self.tx.close_write();
        self.rx.close_read();
    }
}
