//! Sockets on the pool's own IO driver: TCP, UDP and (on Unix) Unix-domain sockets.
//!
//! Every socket registers with the IO driver of the pool it is created on (the default pool's
//! outside any pool): the pool's idle workers poll the OS for it, one at a time, instead of
//! sleeping, so using `coro::net` starts no thread beyond the pool's own, and a readiness event
//! reaches a worker without crossing threads first. A task waiting on a socket is woken through
//! its own waker and resumes on its own executor. Streams implement `futures_io`'s
//! [`AsyncRead`](futures_io::AsyncRead) and [`AsyncWrite`](futures_io::AsyncWrite); errors are
//! [`std::io::Error`]s.
//!
//! `accept` and `connect` are cancellation-aware: once the current task's token fires, a pending
//! one returns an `io::Error` promptly, whose inner error is [`Cancelled`]
//! (`cancel::CancelledOutcome` says so for `io::Error`). Reads and writes are cancelled by
//! dropping them, as every wait in coro.
//!
//! Inside a [`coro::sim`](crate::sim) simulation, [`TcpListener`], [`TcpStream`] and
//! [`UdpSocket`] open no OS socket: they talk over the simulation's in-memory network of named
//! hosts, with the same API (see [the guide](crate::sim#a-simulated-network)).
//!
//! Runtime-agnostic IO keeps working inside coro tasks: async-io / async-net sockets run on their
//! own reactor thread beside the pool.
//!
//! ```
//! use futures::{AsyncReadExt, AsyncWriteExt};
//!
//! # coro::block_wait(async {
//! let listener = coro::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let server = coro::spawn(async move {
//!     let (mut stream, _) = listener.accept().await?;
//!     let mut buf = [0; 4];
//!     stream.read_exact(&mut buf).await?;
//!     stream.write_all(&buf).await?; // echo
//!     std::io::Result::Ok(())
//! });
//! let mut client = coro::net::TcpStream::connect(addr).await?;
//! client.write_all(b"ping").await?;
//! let mut reply = [0; 4];
//! client.read_exact(&mut reply).await?;
//! assert_eq!(&reply, b"ping");
//! server.await.unwrap()?;
//! # std::io::Result::Ok(())
//! # }).unwrap();
//! ```
//!
//! # tokio's IO traits (feature `tokio-io`)
//!
//! With the `tokio-io` feature, [`TcpStream`], [`UnixStream`] and their split halves also
//! implement [`tokio::io::AsyncRead`] and [`tokio::io::AsyncWrite`], over the same IO driver: no
//! tokio runtime is started or needed. Crates that take any tokio-IO stream run on coro's own
//! driver that way: tokio-postgres' `Config::connect_raw`, tokio-rustls, hyper-util's `TokioIo`,
//! tonic over a connector. A read lands in tokio's `ReadBuf` in place (its unfilled,
//! uninitialised part), with no zeroing and no copy.
//!
//! ```
//! # #[cfg(feature = "tokio-io")] {
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # coro::block_wait(async {
//! let (mut a, mut b) = coro::net::UnixStream::pair()?;
//! a.write_all(b"tokio traits").await?; // tokio's extension traits, on coro's driver
//! a.shutdown().await?;
//! let mut got = String::new();
//! b.read_to_string(&mut got).await?;
//! assert_eq!(got, "tokio traits");
//! assert!(tokio::runtime::Handle::try_current().is_err()); // no tokio runtime anywhere
//! # std::io::Result::Ok(())
//! # }).unwrap();
//! # }
//! ```
//!
//! Layout: `addr` (what `bind` and `connect` accept, resolved off the workers), `evented` (a
//! registered socket and the retry-on-`WouldBlock` loop), `stream` (the reads, writes and trait
//! impls every stream socket shares), `tcp`, `udp`, `unix`.

mod addr;
mod evented;
mod stream;
mod tcp;
mod udp;
#[cfg(unix)]
pub mod unix;

pub use addr::ToSocketAddrs;
pub use tcp::{Incoming, OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
pub use udp::UdpSocket;
#[cfg(unix)]
pub use unix::{UnixListener, UnixStream};

use crate::cancel::{Cancelled, cancellable};
use std::future::Future;
use std::io;

/// The error a cancelled `accept` or `connect` returns: kind `Other`, holding [`Cancelled`].
fn cancelled() -> io::Error {
    io::Error::other(Cancelled)
}

/// Runs `op` until it completes or the current task's token fires.
async fn cancel_aware<T>(op: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    cancellable(op)
        .await
        .unwrap_or_else(|Cancelled| Err(cancelled()))
}
