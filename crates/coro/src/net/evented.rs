//! [`Evented`]: a non-blocking OS socket and its registration with the pool's IO driver, and
//! the retry loop every socket operation shares.

use coro_executor::io::Registration;
use std::io;
use std::os::fd::AsFd;
use std::task::{Context, Poll};

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
        self.poll_with(cx, op, Registration::poll_read_ready)
    }

    /// As [`poll_read_with`](Self::poll_read_with), waiting for write readiness.
    pub(crate) fn poll_write_with<R>(
        &self,
        cx: &mut Context<'_>,
        op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_with(cx, op, Registration::poll_write_ready)
    }

    /// The retry loop: `op`, and on `WouldBlock` a wait for readiness (`ready`), again.
    fn poll_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
        ready: fn(&Registration, &mut Context<'_>) -> Poll<io::Result<()>>,
    ) -> Poll<io::Result<R>> {
        loop {
            match op(&self.io) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    match ready(&self.registration, cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                result => return Poll::Ready(result),
            }
        }
    }

    /// Waits until the socket is writable (a non-blocking connect has finished).
    pub(crate) fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.registration.poll_write_ready(cx)
    }
}
