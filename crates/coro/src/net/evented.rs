//! [`Evented`]: a non-blocking OS socket and its registration with the pool's IO driver, and
//! the retry loop every socket operation shares.

use coro_executor::io::{ReadyEvent, Registration};
use std::io;
use std::os::fd::AsFd;
use std::task::{Context, Poll, ready};

/// A non-blocking socket registered with an IO driver. The registration is declared first, so
/// it is dropped (deregistered) before the socket closes its fd.
#[derive(Debug)]
pub(crate) struct Evented<T> {
    registration: Registration,
    io: T,
}

impl<T: AsFd> Evented<T> {
    /// Registers `io`, which must already be non-blocking.
    pub(crate) fn new(io: T) -> io::Result<Evented<T>> {
        Ok(Evented {
            registration: Registration::new(&io)?,
            io,
        })
    }

    pub(crate) fn get_ref(&self) -> &T {
        &self.io
    }

    /// Runs `op` until it does not report `WouldBlock`, waiting for read readiness in between.
    pub(crate) fn poll_read_with<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_with(cx, op, Registration::poll_read_ready, |_| false)
    }

    /// As [`poll_read_with`](Self::poll_read_with), waiting for write readiness.
    pub(crate) fn poll_write_with<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_with(cx, op, Registration::poll_write_ready, |_| false)
    }

    /// A read of up to `len` bytes from a stream socket: as
    /// [`poll_read_with`](Self::poll_read_with), and a short read (fewer bytes than `len`, but
    /// some) also clears the read readiness: the socket was drained, so the next read waits for
    /// the OS to report new data instead of trying a `recv` that would fail.
    pub(crate) fn poll_read_stream(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        op: impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_with(cx, op, Registration::poll_read_ready, |&n| n > 0 && n < len)
    }

    /// A write of `len` bytes to a stream socket: a short write clears the write readiness (the
    /// send buffer is full), as a short read does in [`poll_read_stream`](Self::poll_read_stream).
    pub(crate) fn poll_write_stream(
        &self,
        cx: &mut Context<'_>,
        len: usize,
        op: impl FnMut(&T) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_with(cx, op, Registration::poll_write_ready, |&n| {
            n > 0 && n < len
        })
    }

    /// The retry loop: a wait for readiness (`ready`), `op`, and on `WouldBlock` (or when
    /// `drained` says the result emptied the socket) a clear of the readiness it relied on.
    fn poll_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
        ready: fn(&Registration, &mut Context<'_>) -> Poll<io::Result<ReadyEvent>>,
        drained: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let event = ready!(ready(&self.registration, cx))?;
            match op(&self.io) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    self.registration.clear_readiness(event);
                }
                result => {
                    if result.as_ref().is_ok_and(&drained) {
                        self.registration.clear_drained(event);
                    }
                    return Poll::Ready(result);
                }
            }
        }
    }

    /// Waits until a non-blocking connect has finished: `connected` says whether it has
    /// (`Ok(false)`: still in progress), or the error it ended with.
    pub(crate) fn poll_connected(
        &self,
        cx: &mut Context<'_>,
        connected: impl Fn(&T) -> io::Result<bool>,
    ) -> Poll<io::Result<()>> {
        // A socket counts as writable until an attempt says otherwise, so "writable" alone does
        // not say that the connect finished: ask, and wait again while it goes on.
        self.poll_write_with(cx, |io| match connected(io)? {
            true => Ok(()),
            false => Err(io::ErrorKind::WouldBlock.into()),
        })
    }
}

/// Whether a non-blocking connect has finished, from the socket's pending error (`SO_ERROR`) and
/// its peer address: the error it failed with, `Ok(true)` once there is a peer, `Ok(false)`
/// while there is neither (still connecting).
pub(crate) fn connect_finished<A>(
    error: io::Result<Option<io::Error>>,
    peer: io::Result<A>,
) -> io::Result<bool> {
    if let Some(err) = error? {
        return Err(err);
    }
    match peer {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotConnected => Ok(false),
        Err(err) => Err(err),
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::Evented;
    use std::cell::Cell;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::task::{Context, Poll, Waker};
    use std::time::{Duration, Instant};

    /// Reads through `poll_read_stream` with a 64-byte buffer, counting the `recv`s tried.
    fn read(stream: &Evented<UnixStream>, recvs: &Cell<usize>) -> Poll<std::io::Result<usize>> {
        let mut buf = [0u8; 64];
        let mut cx = Context::from_waker(Waker::noop());
        stream.poll_read_stream(&mut cx, buf.len(), |mut s| {
            recvs.set(recvs.get() + 1);
            s.read(&mut buf)
        })
    }

    /// Reads until the pool's driver has reported the data the caller wrote (5 s at most).
    fn read_when_reported(stream: &Evented<UnixStream>, recvs: &Cell<usize>) -> usize {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match read(stream, recvs) {
                Poll::Ready(got) => return got.unwrap(),
                Poll::Pending if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Poll::Pending => panic!("the driver never reported the new data"),
            }
        }
    }

    #[test]
    fn a_short_read_drains_the_readiness_so_no_recv_is_wasted() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let a = Evented::new(a).unwrap();
        let recvs = Cell::new(0);
        // A fresh registration counts as readable: one recv finds nothing. (Data written before
        // this point could be read before the driver reports it, and its report would then come
        // in after the read and cost the one extra recv that a report racing a read may cost.)
        assert!(read(&a, &recvs).is_pending());
        assert_eq!(recvs.get(), 1);
        b.write_all(b"hello").unwrap();
        assert_eq!(read_when_reported(&a, &recvs), 5);
        let tried = recvs.get();
        // Fewer bytes than the buffer: the socket is empty, and the next read waits for the OS
        // to report new data instead of trying a `recv` that would fail.
        assert!(read(&a, &recvs).is_pending());
        assert_eq!(recvs.get(), tried, "a recv was tried on a drained socket");
        // New data: the pool's driver reports it, and the next read gets it.
        b.write_all(b"again").unwrap();
        assert_eq!(read_when_reported(&a, &recvs), 5);
    }

    #[test]
    fn a_full_read_keeps_the_readiness_for_what_is_left() {
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let a = Evented::new(a).unwrap();
        let recvs = Cell::new(0);
        b.write_all(&[7; 100]).unwrap();
        // A full buffer says nothing about what is left: read on without waiting.
        assert!(matches!(read(&a, &recvs), Poll::Ready(Ok(64))));
        assert!(matches!(read(&a, &recvs), Poll::Ready(Ok(36))));
        assert_eq!(recvs.get(), 2);
    }
}
