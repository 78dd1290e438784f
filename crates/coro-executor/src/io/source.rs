//! [`Source`]: one registered file descriptor's readiness, and [`Registration`], the handle a
//! socket type holds.
//!
//! Per direction (read, write) a source keeps: whether the poller is armed for it, whether an
//! event fired since a waiter last looked, and the wakers of the tasks waiting for it. The
//! poller is one-shot (each event disarms the fd), so:
//! - a waiter that finds no event arms its direction and sets the fd's interest to every armed
//!   direction (`epoll_ctl(MOD)` checks the fd's level at once, so readiness that arrived
//!   between the failed `read` and the arming is not lost);
//! - an event clears the armed flag of the directions it reports, marks them fired, takes their
//!   wakers and re-arms the directions still waited for (the event disarmed them too);
//! - a waiter that finds its direction fired consumes the mark and returns ready: its caller
//!   retries the operation, and on `WouldBlock` waits again.
//!
//! The mark may be stale (readiness consumed by an operation that did not wait): that costs one
//! extra `WouldBlock`, never a lost wake-up. All of it sits under the source's own mutex, and
//! wakers are woken after it is released.

use super::driver::{IoDriver, pool_gone};
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

const READ: usize = 0;
const WRITE: usize = 1;

#[derive(Default)]
struct Direction {
    armed: bool,
    fired: bool,
    wakers: Vec<Waker>,
}

pub(crate) struct Source {
    fd: RawFd,
    key: usize,
    driver: Arc<IoDriver>,
    directions: Mutex<[Direction; 2]>,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, driver: Arc<IoDriver>) -> Source {
        Source {
            fd,
            key,
            driver,
            directions: Mutex::new(Default::default()),
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    pub(crate) fn key(&self) -> usize {
        self.key
    }

    fn interest(&self, directions: &[Direction; 2]) -> polling::Event {
        let mut event = polling::Event::none(self.key);
        event.readable = directions[READ].armed;
        event.writable = directions[WRITE].armed;
        event
    }

    /// `Ready` once the fd reported readiness in direction `dir` since the last time this
    /// returned `Ready` for it; else registers the task's waker and arms the poller.
    fn poll_ready(&self, dir: usize, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut directions = self.directions.lock().unwrap();
        if self.driver.is_closed() {
            return Poll::Ready(Err(pool_gone()));
        }
        let direction = &mut directions[dir];
        if direction.fired {
            direction.fired = false;
            return Poll::Ready(Ok(()));
        }
        if !direction.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            direction.wakers.push(cx.waker().clone());
        }
        if !direction.armed {
            direction.armed = true;
            let interest = self.interest(&directions);
            if let Err(err) = self.driver.set_interest(self.fd, interest) {
                directions[dir].armed = false;
                return Poll::Ready(Err(err));
            }
            drop(directions);
            self.driver.armed();
        }
        Poll::Pending
    }

    /// An event (or the pool's shutdown) reported these directions ready.
    pub(crate) fn fire(&self, readable: bool, writable: bool) {
        let mut wakers = Vec::new();
        {
            let mut directions = self.directions.lock().unwrap();
            for (dir, ready) in [(READ, readable), (WRITE, writable)] {
                if ready {
                    let direction = &mut directions[dir];
                    direction.armed = false;
                    direction.fired = true;
                    wakers.append(&mut direction.wakers);
                }
            }
            // The event disarmed the whole fd: re-arm what is still waited for.
            if (directions[READ].armed || directions[WRITE].armed) && !self.driver.is_closed() {
                let interest = self.interest(&directions);
                if self.driver.set_interest(self.fd, interest).is_err() {
                    // Cannot wait any more: let the waiters retry and see the error.
                    for direction in directions.iter_mut() {
                        direction.armed = false;
                        direction.fired = true;
                        wakers.append(&mut direction.wakers);
                    }
                }
            }
        }
        for waker in wakers {
            waker.wake();
        }
    }
}

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
        let driver = crate::pool::current_io_driver()?;
        let source = driver.register(fd.as_fd().as_raw_fd())?;
        Ok(Registration { source })
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
        self.source.driver.deregister(&self.source);
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("fd", &self.source.fd)
            .finish()
    }
}
