//! [`Registration`]: the handle a socket type holds on its fd's readiness, registered with the
//! IO driver of the pool it is made on.

use super::driver::IoDriver;
use super::source::{READ, Source, WRITE};
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

/// A file descriptor registered with a coro pool's IO driver: the readiness half of an async
/// socket. The pool's idle workers poll the OS for it; a task waiting on it is woken through its
/// own waker, so it resumes on its own executor.
///
/// It registers with the driver of the pool whose worker calls [`new`](Registration::new), or
/// with the [`default_pool`](crate::default_pool)'s elsewhere. The fd must be non-blocking and
/// stay open until the registration is dropped (declare the registration before the socket in
/// a struct, so that it is dropped first). Once its pool has shut down, every wait fails with
/// an error that says so.
///
/// ```
/// use coro_executor::io::Registration;
/// use std::io::{ErrorKind, Read, Write};
/// use std::os::unix::net::UnixStream;
///
/// let (mut a, mut b) = UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// let registration = Registration::new(&a).unwrap();
/// let reader = std::thread::spawn(move || {
///     let got = futures::executor::block_on(async {
///         let mut buf = [0u8; 5];
///         loop {
///             match a.read(&mut buf) {
///                 Ok(n) => return buf[..n].to_vec(),
///                 Err(e) if e.kind() == ErrorKind::WouldBlock => {
///                     std::future::poll_fn(|cx| registration.poll_read_ready(cx)).await.unwrap();
///                 }
///                 Err(e) => panic!("{e}"),
///             }
///         }
///     });
///     drop(registration); // before the socket closes its fd
///     got
/// });
/// b.write_all(b"hello").unwrap();
/// assert_eq!(reader.join().unwrap(), b"hello");
/// ```
pub struct Registration {
    source: Arc<Source>,
    /// The driver the source is registered with, which deregisters it on drop.
    driver: Arc<IoDriver>,
}

impl Registration {
    /// Registers `fd`, which must be non-blocking.
    ///
    /// ```
    /// let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// socket.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&socket).unwrap();
    /// drop(registration); // before the socket
    /// ```
    pub fn new(fd: &impl AsFd) -> io::Result<Registration> {
        let driver = current_io_driver()?;
        let source = driver.register(fd.as_fd().as_raw_fd())?;
        Ok(Registration { source, driver })
    }

    /// `Ready(Ok(()))` when the fd may have become readable since the last `Ready`: retry the
    /// read, and call this again on `WouldBlock`. Pending, the task is woken when it does.
    ///
    /// ```
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&a).unwrap();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(registration.poll_read_ready(&mut cx).is_pending()); // nothing was written
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.source.poll_ready(READ, cx)
    }

    /// As [`poll_read_ready`](Self::poll_read_ready), for writing.
    ///
    /// ```
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&a).unwrap();
    /// let ready = futures::executor::block_on(std::future::poll_fn(|cx| {
    ///     registration.poll_write_ready(cx)
    /// }));
    /// assert!(ready.is_ok()); // an empty socket buffer is writable
    /// ```
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.source.poll_ready(WRITE, cx)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.driver.deregister(&self.source);
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("fd", &self.source.fd)
            .finish()
    }
}

/// The IO driver that sockets created here register with: the current worker's pool's, or the
/// default pool's outside any pool.
fn current_io_driver() -> io::Result<Arc<IoDriver>> {
    match crate::pool::current_shared() {
        Some(shared) => shared.io_driver().cloned(),
        None => crate::default_pool().shared.io_driver().cloned(),
    }
}
