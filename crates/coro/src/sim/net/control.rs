//! The public controls of the simulated network: addresses, partitions, latency and loss.
//!
//! Rule: each control acts on the network of the simulation running on this thread, takes
//! effect for what is sent from then on (and, for `heal`, for what a partition held back), and
//! panics, saying so, outside a simulation or for a host name the simulation does not have.

use super::world;
use std::net::IpAddr;
use std::time::Duration;

/// The simulated address of the host named `host` (host names also resolve wherever
/// `coro::net` takes an address: `"server:80"`, `("server", 80)`). The simulation's main future
/// runs on the host `"main"`.
///
/// # Panics
///
/// Outside a simulation, or if no host has that name.
///
/// ```
/// let (main, server) = coro::sim::Builder::new()
///     .seed(1)
///     .host("server", || async {})
///     .run(async { (coro::sim::net::lookup("main"), coro::sim::net::lookup("server")) });
/// assert_ne!(main, server);
/// ```
pub fn lookup(host: &str) -> IpAddr {
    world::lookup(host)
}

/// Cuts the link between hosts `a` and `b` in both directions until [`heal`]: segments and
/// datagrams between them stay in flight (TCP writes stall once the window fills, reads see no
/// data), and a connect between them times out in virtual time.
///
/// # Panics
///
/// Outside a simulation, or if no host has one of the names.
///
/// ```
/// use std::time::Duration;
///
/// let outcome = coro::sim::Builder::new()
///     .seed(3)
///     .host("server", || async {
///         let listener = coro::net::TcpListener::bind("0.0.0.0:80").await.unwrap();
///         let _kept = listener.accept().await.unwrap();
///         coro::time::sleep(Duration::from_secs(3600)).await.unwrap();
///     })
///     .run(async {
///         coro::sim::net::partition("main", "server");
///         let connect = coro::net::TcpStream::connect("server:80");
///         coro::time::timeout(Duration::from_secs(10), connect).await.is_err()
///     });
/// assert!(outcome, "the connect did not finish while partitioned");
/// ```
pub fn partition(a: &str, b: &str) {
    world::partition(a, b);
}

/// Restores the link between hosts `a` and `b`: what the partition held back is delivered,
/// in order, after one more latency.
///
/// # Panics
///
/// Outside a simulation, or if no host has one of the names.
///
/// ```
/// use futures::{AsyncReadExt, AsyncWriteExt};
/// use std::time::Duration;
///
/// let echoed = coro::sim::Builder::new()
///     .seed(4)
///     .host("server", || async {
///         let listener = coro::net::TcpListener::bind("0.0.0.0:7").await.unwrap();
///         let (mut stream, _) = listener.accept().await.unwrap();
///         let mut buf = [0; 4];
///         stream.read_exact(&mut buf).await.unwrap();
///         stream.write_all(&buf).await.unwrap();
///     })
///     .run(async {
///         let mut stream = coro::net::TcpStream::connect("server:7").await.unwrap();
///         coro::sim::net::partition("main", "server");
///         stream.write_all(b"ping").await.unwrap();
///         let mut buf = [0; 4];
///         let read = coro::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf));
///         assert!(read.await.is_err(), "a reply crossed the partition");
///         coro::sim::net::heal("main", "server");
///         stream.read_exact(&mut buf).await.unwrap();
///         buf
///     });
/// assert_eq!(&echoed, b"ping");
/// ```
pub fn heal(a: &str, b: &str) {
    world::heal(a, b);
}

/// Sets the range each segment's and datagram's latency is drawn from (seeded, uniform;
/// default 1 ms to 5 ms).
///
/// # Panics
///
/// Outside a simulation, or if `min` exceeds `max`.
///
/// ```
/// use futures::AsyncWriteExt;
/// use std::time::Duration;
///
/// let took = coro::sim::Builder::new()
///     .seed(5)
///     .host("far", || async {
///         let listener = coro::net::TcpListener::bind("0.0.0.0:9").await.unwrap();
///         let _ = listener.accept().await.unwrap();
///     })
///     .run(async {
///         coro::sim::net::set_latency(Duration::from_millis(100), Duration::from_millis(100));
///         let start = coro::time::Instant::now();
///         coro::net::TcpStream::connect("far:9").await.unwrap();
///         start.elapsed()
///     });
/// assert_eq!(took, Duration::from_millis(200)); // the SYN there, the SYN-ACK back
/// ```
pub fn set_latency(min: Duration, max: Duration) {
    world::set_latency(min, max);
}

/// Sets the probability (0.0 to 1.0, seeded draws; default 0) that a UDP datagram is lost.
///
/// # Panics
///
/// Outside a simulation, or if `probability` is not between 0.0 and 1.0.
///
/// ```
/// use std::time::Duration;
///
/// let arrived = coro::sim::Builder::new().seed(6).run(async {
///     coro::sim::net::set_udp_drop(1.0); // every datagram is lost
///     let socket = coro::net::UdpSocket::bind("0.0.0.0:0").await.unwrap();
///     socket.send_to(b"gone", socket.local_addr().unwrap()).await.unwrap();
///     let mut buf = [0; 4];
///     let recv = socket.recv_from(&mut buf);
///     coro::time::timeout(Duration::from_secs(1), recv).await.is_ok()
/// });
/// assert!(!arrived);
/// ```
pub fn set_udp_drop(probability: f64) {
    world::set_udp_drop(probability);
}
