//! The simulated network of one simulation run: its hosts and their addresses, which pairs of
//! hosts are cut off from each other, the latency and loss settings, the bound ports, and the
//! timers that carry segments and datagrams.
//!
//! Rule: a `World` exists only while a [`Builder`](crate::sim::Builder) run is stepping, on
//! that run's thread (installed by [`install`], removed when its guard drops, before the
//! simulation's pool is torn down). `coro::net` asks [`is_active`] on every socket it opens: a
//! world present means in-memory sockets, none means the OS. Every delivery is a timer on the
//! simulation's virtual wheel ([`at`]), so the idle-time clock jump covers the network, and
//! every random choice the network makes is a seeded draw. Values removed from the world are
//! dropped after its borrow ends, since dropping a socket reaches the world again.

use coro_executor::ExecutorHandle;
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The default latency range of a segment or datagram.
const DEFAULT_LATENCY: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(5));

/// The first port handed out for port 0 and for a connecting socket's own end.
const FIRST_EPHEMERAL_PORT: u16 = 49152;

/// The kinds of port a host binds, each its own number space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Protocol {
    Tcp,
    Udp,
}

/// Something whose delivery waits for two hosts to be connected again: run again by
/// [`heal`] once they are.
pub(crate) trait Held: Send + Sync {
    /// The two hosts it travels between.
    fn hosts(&self) -> (usize, usize);
    /// Schedules its delivery again.
    fn resume(self: Arc<Self>);
}

/// A bound port: whatever the protocol keeps there (a TCP backlog, a UDP inbox).
pub(crate) type Bound = Arc<dyn Any + Send + Sync>;

struct World {
    hosts: Vec<String>,
    executor: ExecutorHandle,
    /// Unordered pairs of hosts (smaller first) that cannot reach each other.
    cut: BTreeSet<(usize, usize)>,
    latency: (Duration, Duration),
    udp_drop: f64,
    ports: BTreeMap<(Protocol, usize, u16), Bound>,
    next_port: Vec<u16>,
    held: Vec<Arc<dyn Held>>,
}

std::thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

/// Removes the world when dropped (also on unwind).
pub(crate) struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        // Taken out first, dropped after the borrow: the sockets it holds reach the world as
        // they close, and find it gone.
        let world = WORLD.with(|w| w.borrow_mut().take());
        drop(world);
    }
}

/// Makes a network of `hosts` (host `i` has address `10.0.0.(i+1)`) this thread's until the
/// guard drops; deliveries run as tasks of `executor`.
pub(crate) fn install(hosts: Vec<String>, executor: ExecutorHandle) -> Installed {
    let count = hosts.len();
    let world = World {
        hosts,
        executor,
        cut: BTreeSet::new(),
        latency: DEFAULT_LATENCY,
        udp_drop: 0.0,
        ports: BTreeMap::new(),
        next_port: vec![FIRST_EPHEMERAL_PORT; count],
        held: Vec::new(),
    };
    WORLD.with(|w| {
        let previous = w.borrow_mut().replace(world);
        assert!(
            previous.is_none(),
            "a simulated network is already installed on this thread: simulations do not nest"
        );
    });
    Installed(())
}

/// Whether a simulated network is installed on this thread (then `coro::net` uses it).
pub(crate) fn is_active() -> bool {
    WORLD.try_with(|w| w.borrow().is_some()).unwrap_or(false)
}

fn with<R>(f: impl FnOnce(&mut World) -> R) -> Option<R> {
    WORLD
        .try_with(|w| w.borrow_mut().as_mut().map(f))
        .ok()
        .flatten()
}

/// As [`with`], for the public controls: panics, saying how to fix it, outside a simulation.
fn with_or_panic<R>(what: &str, f: impl FnOnce(&mut World) -> R) -> R {
    with(f).unwrap_or_else(|| {
        panic!(
            "coro::sim::net::{what} called outside a simulation: the simulated network exists \
             only inside coro::sim::Builder::run (or #[coro::test(sim)])"
        )
    })
}

fn host_index(world: &World, name: &str, what: &str) -> usize {
    world
        .hosts
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| {
            panic!(
                "coro::sim::net::{what}: no simulated host is named {name:?} (the hosts are {:?}; \
                 add one with coro::sim::Builder::host)",
                world.hosts
            )
        })
}

/// The address of host `index`.
pub(crate) fn address(index: usize) -> IpAddr {
    let n = index + 1;
    IpAddr::V4(Ipv4Addr::new(10, 0, (n >> 8) as u8, (n & 0xff) as u8))
}

/// The address of the host named `name`, if there is one.
pub(crate) fn resolve_name(name: &str) -> Option<IpAddr> {
    with(|w| w.hosts.iter().position(|h| h == name).map(address)).flatten()
}

/// The address of host `name`; panics if there is none.
pub(crate) fn lookup(name: &str) -> IpAddr {
    with_or_panic("lookup", |w| address(host_index(w, name, "lookup")))
}

/// The host that `ip` names, seen from host `me`: loopback and unspecified addresses are `me`.
pub(crate) fn host_at(ip: IpAddr, me: usize) -> io::Result<usize> {
    if ip.is_loopback() || ip.is_unspecified() {
        return Ok(me);
    }
    let count = with(|w| w.hosts.len()).unwrap_or(0);
    (0..count).find(|&i| address(i) == ip).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!("no simulated host has the address {ip} (see coro::sim::net::lookup)"),
        )
    })
}

/// The name of host `index`.
pub(crate) fn name(index: usize) -> String {
    with(|w| w.hosts.get(index).cloned())
        .flatten()
        .unwrap_or_default()
}

/// Whether hosts `a` and `b` can reach each other now.
pub(crate) fn connected(a: usize, b: usize) -> bool {
    with(|w| !w.cut.contains(&(a.min(b), a.max(b)))).unwrap_or(false)
}

/// Cuts the link between hosts `a` and `b`.
pub(crate) fn partition(a: &str, b: &str) {
    with_or_panic("partition", |w| {
        let (a, b) = (host_index(w, a, "partition"), host_index(w, b, "partition"));
        w.cut.insert((a.min(b), a.max(b)));
    });
}

/// Restores the link between hosts `a` and `b`, and resumes what waited for it.
pub(crate) fn heal(a: &str, b: &str) {
    let resumed = with_or_panic("heal", |w| {
        let (a, b) = (host_index(w, a, "heal"), host_index(w, b, "heal"));
        let pair = (a.min(b), a.max(b));
        w.cut.remove(&pair);
        let (resumed, still) = std::mem::take(&mut w.held).into_iter().partition(|h| {
            let (x, y) = h.hosts();
            (x.min(y), x.max(y)) == pair
        });
        w.held = still;
        resumed
    });
    let resumed: Vec<Arc<dyn Held>> = resumed;
    for held in resumed {
        held.resume();
    }
}

/// Sets the latency range of segments and datagrams.
pub(crate) fn set_latency(min: Duration, max: Duration) {
    assert!(
        min <= max,
        "coro::sim::net::set_latency({min:?}, {max:?}): min must not exceed max"
    );
    with_or_panic("set_latency", |w| w.latency = (min, max));
}

/// Sets the probability that a datagram is lost.
pub(crate) fn set_udp_drop(probability: f64) {
    assert!(
        (0.0..=1.0).contains(&probability),
        "coro::sim::net::set_udp_drop({probability}): a probability is between 0.0 and 1.0"
    );
    with_or_panic("set_udp_drop", |w| w.udp_drop = probability);
}

/// A seeded latency from the configured range.
pub(crate) fn latency() -> Duration {
    let (min, max) = with(|w| w.latency).unwrap_or(DEFAULT_LATENCY);
    let span = (max - min).as_nanos() as u64;
    let offset = match span {
        0 => 0,
        span => coro_executor::sim::random_u64() % (span + 1),
    };
    min + Duration::from_nanos(offset)
}

/// A seeded draw: whether to lose the next datagram.
pub(crate) fn drop_datagram() -> bool {
    let probability = with(|w| w.udp_drop).unwrap_or(0.0);
    probability > 0.0 && coro_executor::sim::buggify(probability)
}

/// Runs `f` at virtual time `when`, as a task of the simulation (nothing happens once the world
/// is gone: the run is over).
pub(crate) fn at(when: Instant, f: impl FnOnce() + Send + 'static) {
    let executor = with(|w| w.executor.clone());
    if let Some(executor) = executor {
        drop(executor.spawn(async move {
            coro_executor::time::sleep_until(when).await;
            f();
        }));
    }
}

/// Keeps `held` until [`heal`] connects its hosts again.
pub(crate) fn hold(held: Arc<dyn Held>) {
    with(|w| w.held.push(held));
}

/// Binds `addr` of `host` (its own address, a loopback or the unspecified address; port 0: a
/// free one) to `value`; returns the port.
pub(crate) fn bind_local(
    protocol: Protocol,
    host: usize,
    addr: SocketAddr,
    value: Bound,
) -> io::Result<u16> {
    if host_at(addr.ip(), host)? != host {
        return Err(io::Error::new(
            io::ErrorKind::AddrNotAvailable,
            format!(
                "cannot bind {addr} on simulated host {:?}: the address belongs to another host",
                name(host)
            ),
        ));
    }
    bind(protocol, host, addr.port(), value)
}

/// Binds `port` (0: a free one) of `protocol` on `host` to `value`; returns the port.
fn bind(protocol: Protocol, host: usize, port: u16, value: Bound) -> io::Result<u16> {
    with(|w| {
        let port = match port {
            0 => next_free(w, protocol, host)?,
            port => port,
        };
        if w.ports.contains_key(&(protocol, host, port)) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "simulated host {:?} already has {protocol:?} port {port} bound",
                    w.hosts[host]
                ),
            ));
        }
        w.ports.insert((protocol, host, port), value);
        Ok(port)
    })
    .unwrap_or_else(|| Err(gone()))
}

/// A port of `host` for a connecting socket's own end.
pub(crate) fn ephemeral(protocol: Protocol, host: usize) -> io::Result<u16> {
    with(|w| next_free(w, protocol, host)).unwrap_or_else(|| Err(gone()))
}

fn next_free(w: &mut World, protocol: Protocol, host: usize) -> io::Result<u16> {
    for _ in FIRST_EPHEMERAL_PORT..=u16::MAX {
        let port = w.next_port[host];
        w.next_port[host] = port.checked_add(1).unwrap_or(FIRST_EPHEMERAL_PORT);
        if !w.ports.contains_key(&(protocol, host, port)) {
            return Ok(port);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "every ephemeral port of the simulated host is bound",
    ))
}

/// Unbinds a port; returns what was bound there (to be dropped by the caller).
pub(crate) fn unbind(protocol: Protocol, host: usize, port: u16) -> Option<Bound> {
    with(|w| w.ports.remove(&(protocol, host, port))).flatten()
}

/// What is bound at `port` of `host`.
pub(crate) fn bound(protocol: Protocol, host: usize, port: u16) -> Option<Bound> {
    with(|w| w.ports.get(&(protocol, host, port)).cloned()).flatten()
}

/// The error of a socket used after its simulation ended.
pub(crate) fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "the simulation this socket belonged to has ended",
    )
}
