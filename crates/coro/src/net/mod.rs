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
//! Layout: `addr` (what `bind` and `connect` accept, resolved off the workers), `evented` (a
//! registered socket and the retry-on-`WouldBlock` loop), `tcp`, `udp`, `unix`.

mod addr;
mod evented;
mod tcp;
mod udp;
#[cfg(unix)]
mod unix;

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
