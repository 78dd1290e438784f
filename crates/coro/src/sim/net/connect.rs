//! [`connect`]: opens a simulated TCP connection to a listening port.
//!
//! Rule: a connect takes a seeded latency to reach its host; while the hosts are partitioned
//! the SYN is resent every [`SYN_RETRY`] until [`CONNECT_TIMEOUT`] of virtual time has passed
//! (then `TimedOut`); a port without a listener refuses (`ConnectionRefused`, after the reset
//! travels back); otherwise the server's end goes to the listener's backlog and the client's
//! end is ready one more latency later (the SYN-ACK).

use super::flow::Flow;
use super::host;
use super::listener::Backlog;
use super::stream::SimStream;
use super::world::{self, Protocol};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// How long a connect to a host it cannot reach keeps trying (Linux gives up after about two
/// minutes of SYN retries).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(75);

/// How often a connect to a host it cannot reach resends its SYN.
pub(crate) const SYN_RETRY: Duration = Duration::from_secs(1);

/// Connects the current host to `addr`.
pub(crate) async fn connect(addr: SocketAddr) -> io::Result<SimStream> {
    let me = host::current();
    let to = world::host_at(addr.ip(), me)?;
    let start = coro_executor::time::now();
    loop {
        coro_executor::time::sleep(world::latency()).await;
        if world::connected(me, to) {
            break;
        }
        if coro_executor::time::now().duration_since(start) >= CONNECT_TIMEOUT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "connecting to {addr} timed out: simulated host {:?} is partitioned from {:?}",
                    world::name(to),
                    world::name(me)
                ),
            ));
        }
        coro_executor::time::sleep(SYN_RETRY).await;
    }
    let backlog = world::bound(Protocol::Tcp, to, addr.port())
        .and_then(|bound| bound.downcast::<Backlog>().ok());
    let refused = || {
        io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!(
                "connection to {addr} refused: nothing listens on port {} of simulated host {:?}",
                addr.port(),
                world::name(to)
            ),
        )
    };
    let Some(backlog) = backlog else {
        coro_executor::time::sleep(world::latency()).await; // the reset travels back
        return Err(refused());
    };
    let local = SocketAddr::new(world::address(me), world::ephemeral(Protocol::Tcp, me)?);
    let remote = SocketAddr::new(world::address(to), addr.port());
    let (up, down) = (Flow::new(me, to), Flow::new(to, me));
    let accepted = SimStream::new(remote, local, up.clone(), down.clone());
    if let Err(accepted) = backlog.push(accepted) {
        drop(accepted);
        return Err(refused());
    }
    coro_executor::time::sleep(world::latency()).await; // the SYN-ACK
    Ok(SimStream::new(local, remote, down, up))
}
