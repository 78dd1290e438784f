//! [`ToSocketAddrs`]: what `bind`, `connect` and `send_to` accept, resolved without blocking a
//! worker: literal addresses at once, host names on the blocking pool, or, inside a simulation,
//! from the simulated network's host names (no OS resolver is asked there).

use crate::sim::net::world;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// An address (or several) to bind or connect to: a [`SocketAddr`], an `(IpAddr, u16)` pair, a
/// `"host:port"` string or a `(host, port)` pair. Host names are resolved on the blocking pool,
/// never on a worker.
///
/// ```
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let port = listener.local_addr().unwrap().port();
/// let stream = coro::net::TcpStream::connect(("localhost", port)).await.unwrap();
/// assert_eq!(stream.peer_addr().unwrap().port(), port);
/// # });
/// ```
pub trait ToSocketAddrs: sealed::Sealed {}

mod sealed {
    /// What an address turns into: addresses, or a name to look up.
    pub enum Addrs {
        Ready(Vec<std::net::SocketAddr>),
        Lookup(String, u16),
        LookupHostPort(String),
    }

    pub trait Sealed {
        fn into_addrs(self) -> Addrs;
    }
}

use sealed::{Addrs, Sealed};

macro_rules! ready_addr {
    ($($ty:ty),*) => {$(
        impl Sealed for $ty {
            fn into_addrs(self) -> Addrs {
                Addrs::Ready(vec![SocketAddr::from(self)])
            }
        }
        impl ToSocketAddrs for $ty {}
    )*};
}

ready_addr!(
    SocketAddr,
    SocketAddrV4,
    SocketAddrV6,
    (IpAddr, u16),
    (Ipv4Addr, u16),
    (Ipv6Addr, u16),
    ([u8; 4], u16)
);

impl Sealed for &[SocketAddr] {
    fn into_addrs(self) -> Addrs {
        Addrs::Ready(self.to_vec())
    }
}
impl ToSocketAddrs for &[SocketAddr] {}

impl Sealed for &str {
    fn into_addrs(self) -> Addrs {
        match self.parse::<SocketAddr>() {
            Ok(addr) => Addrs::Ready(vec![addr]),
            Err(_) => Addrs::LookupHostPort(self.to_owned()),
        }
    }
}
impl ToSocketAddrs for &str {}

impl Sealed for String {
    fn into_addrs(self) -> Addrs {
        self.as_str().into_addrs()
    }
}
impl ToSocketAddrs for String {}

impl Sealed for &String {
    fn into_addrs(self) -> Addrs {
        self.as_str().into_addrs()
    }
}
impl ToSocketAddrs for &String {}

impl Sealed for (&str, u16) {
    fn into_addrs(self) -> Addrs {
        match self.0.parse::<IpAddr>() {
            Ok(ip) => Addrs::Ready(vec![SocketAddr::new(ip, self.1)]),
            Err(_) => Addrs::Lookup(self.0.to_owned(), self.1),
        }
    }
}
impl ToSocketAddrs for (&str, u16) {}

impl Sealed for (String, u16) {
    fn into_addrs(self) -> Addrs {
        (self.0.as_str(), self.1).into_addrs()
    }
}
impl ToSocketAddrs for (String, u16) {}

/// Resolves `addr`: literal addresses at once, names with `std`'s resolver on the blocking pool.
pub(crate) async fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let addrs = match addr.into_addrs() {
        Addrs::Ready(addrs) => addrs,
        Addrs::Lookup(host, port) if world::is_active() => vec![simulated(&host, port)?],
        Addrs::LookupHostPort(host_port) if world::is_active() => {
            let (host, port) = split_host_port(&host_port)?;
            vec![simulated(host, port)?]
        }
        Addrs::Lookup(host, port) => {
            lookup(move || std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))).await?
        }
        Addrs::LookupHostPort(host_port) => {
            lookup(move || std::net::ToSocketAddrs::to_socket_addrs(host_port.as_str())).await?
        }
    };
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolved to no socket address",
        ));
    }
    Ok(addrs)
}

/// A host name of the simulated network (`localhost`: the current host).
fn simulated(host: &str, port: u16) -> io::Result<SocketAddr> {
    if host == "localhost" {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    world::resolve_name(host)
        .map(|ip| SocketAddr::new(ip, port))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the simulation has no host named {host:?}: add it with \
                     coro::sim::Builder::host"
                ),
            )
        })
}

/// `"host:port"` split at its last colon.
fn split_host_port(host_port: &str) -> io::Result<(&str, u16)> {
    host_port
        .rsplit_once(':')
        .and_then(|(host, port)| Some((host, port.parse().ok()?)))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host_port:?} is not a \"host:port\" address"),
            )
        })
}

async fn lookup<I: Iterator<Item = SocketAddr>>(
    f: impl FnOnce() -> io::Result<I> + Send + 'static,
) -> io::Result<Vec<SocketAddr>> {
    match crate::spawn_blocking(move || f().map(Iterator::collect)).await {
        Ok(result) => result,
        Err(err) => Err(io::Error::other(format!(
            "resolving a host name failed: {err}"
        ))),
    }
}

/// Tries each address in turn with `op`, returning the first success or the last error.
pub(crate) async fn try_each<T, F: std::future::Future<Output = io::Result<T>>>(
    addrs: Vec<SocketAddr>,
    mut op: impl FnMut(SocketAddr) -> F,
) -> io::Result<T> {
    let mut last = None;
    for addr in addrs {
        match op(addr).await {
            Ok(value) => return Ok(value),
            Err(err) => last = Some(err),
        }
    }
    Err(last.expect("resolve never returns an empty list"))
}
