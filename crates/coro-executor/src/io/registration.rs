//! [`Registration`]: the handle a socket type holds on its fd's readiness, registered with the
//! IO driver of the pool it is made on.

use super::driver::IoDriver;
use super::readiness::{READABLE, ReadyEvent, WRITABLE};
use super::source::Source;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::task::{Context, Poll};

/// A file descriptor registered with a coro pool's IO driver: the readiness half of an async
/// socket. The pool's idle workers poll the OS for it; a task waiting on it is woken through its
/// own waker, so it resumes on its own executor.
///
/// Readiness is edge-triggered and remembered (tokio's `Registration` works alike): a fresh
/// registration counts as readable and writable, `poll_*_ready` returns a [`ReadyEvent`] while
/// its direction is ready, and readiness stays until the caller reports it gone with
/// [`clear_readiness`](Registration::clear_readiness) after an operation returned
/// `WouldBlock` (or with [`clear_drained`](Registration::clear_drained) after a read or write on
/// a stream socket moved fewer bytes than offered, which drains the socket). So the loop is:
/// wait for readiness, try the operation, clear on `WouldBlock`, and again.
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
///             let ready =
///                 std::future::poll_fn(|cx| registration.poll_read_ready(cx)).await.unwrap();
///             match a.read(&mut buf) {
///                 Ok(n) => return buf[..n].to_vec(),
///                 Err(e) if e.kind() == ErrorKind::WouldBlock => {
///                     registration.clear_readiness(ready);
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

    /// `Ready(Ok(event))` while the fd may be readable (a fresh registration counts as
    /// readable): try the read, and on `WouldBlock` pass `event` to
    /// [`clear_readiness`](Self::clear_readiness) and call this again. Pending, the task is
    /// woken when the OS reports the fd readable.
    ///
    /// ```
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&a).unwrap();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// // Assumed readable until a read says otherwise...
    /// let Poll::Ready(Ok(mut ready)) = registration.poll_read_ready(&mut cx) else { panic!() };
    /// loop {
    ///     let err = (&a).read(&mut [0; 8]).unwrap_err();
    ///     assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock); // nothing was written
    ///     registration.clear_readiness(ready);
    ///     // ...and then not, until the OS reports data (the event of the registration itself
    ///     // may come in meanwhile: its readiness is newer, so it lasts one more try).
    ///     match registration.poll_read_ready(&mut cx) {
    ///         Poll::Ready(again) => ready = again.unwrap(),
    ///         Poll::Pending => break,
    ///     }
    /// }
    /// # use std::io::Read;
    /// ```
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<ReadyEvent>> {
        self.source.poll_ready(READABLE, cx)
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
    pub fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<ReadyEvent>> {
        self.source.poll_ready(WRITABLE, cx)
    }

    /// Reports the readiness `event` found gone (the operation it allowed returned
    /// `WouldBlock`, or was short on a stream socket): the next wait pends until the OS reports
    /// the direction ready again. Readiness an OS event set after `event` was taken is kept, so
    /// a wake-up that raced the operation is not lost.
    ///
    /// ```
    /// use std::io::Write;
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&a).unwrap();
    /// let mut cx = Context::from_waker(Waker::noop());
    /// while let Poll::Ready(ready) = registration.poll_read_ready(&mut cx) {
    ///     registration.clear_readiness(ready.unwrap()); // as if a read had found nothing
    /// }
    /// b.write_all(b"x").unwrap();
    /// // The pool's workers poll the OS and set the readiness again.
    /// let ready = futures::executor::block_on(std::future::poll_fn(|cx| {
    ///     registration.poll_read_ready(cx)
    /// }));
    /// assert!(ready.is_ok());
    /// ```
    pub fn clear_readiness(&self, event: ReadyEvent) {
        self.source.clear(event, false);
    }

    /// Reports that the operation `event` allowed drained the fd: a read or write on a stream
    /// socket moved fewer bytes than offered, but some. As
    /// [`clear_readiness`](Self::clear_readiness), except that a close the OS reported stays:
    /// the peer's end of stream often comes in the same OS event as its last data, so the read
    /// after a draining one must still see it. (After `WouldBlock`, use `clear_readiness`: an
    /// operation on a closed direction does not block, so `WouldBlock` proves there is no close
    /// to keep.)
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::task::{Context, Poll, Waker};
    ///
    /// let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    /// a.set_nonblocking(true).unwrap();
    /// let registration = coro_executor::io::Registration::new(&a).unwrap();
    /// b.write_all(b"bye").unwrap();
    /// drop(b); // the data and the end of the stream
    /// let mut buf = [0u8; 16];
    /// let read = |buf: &mut [u8]| {
    ///     futures::executor::block_on(async {
    ///         loop {
    ///             let ready = std::future::poll_fn(|cx| registration.poll_read_ready(cx))
    ///                 .await
    ///                 .unwrap();
    ///             match (&a).read(buf) {
    ///                 Ok(n) if n > 0 && n < buf.len() => {
    ///                     registration.clear_drained(ready);
    ///                     return n;
    ///                 }
    ///                 Ok(n) => return n,
    ///                 Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
    ///                     registration.clear_readiness(ready);
    ///                 }
    ///                 Err(e) => panic!("{e}"),
    ///             }
    ///         }
    ///     })
    /// };
    /// assert_eq!(read(&mut buf), 3);
    /// assert_eq!(read(&mut buf), 0); // the end of the stream is still seen
    /// # let _ = (Context::from_waker(Waker::noop()), Poll::<()>::Pending);
    /// ```
    pub fn clear_drained(&self, event: ReadyEvent) {
        self.source.clear(event, true);
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
