//! [`OsPoller`]: the OS poller of one pool, shared by its driver (which registers fds and waits
//! for events) and its sources (which arm their fd's interest): the part of the driver a source
//! needs, so that a source does not hold the driver that holds it.

// Plain std: the OS poller cannot run under loom; the models cover the protocol around it
// (`Parker::park_polling`) with a stand-in.
use polling::Poller;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering::*};

/// One pool's `polling::Poller`, whether a thread waits in it, and whether the pool shut down.
pub(crate) struct OsPoller {
    pub(super) poller: Poller,
    /// The pool shut down: every wait fails from now on.
    closed: AtomicBool,
    /// A thread waits in the OS right now.
    pub(super) waiting: AtomicBool,
    /// Gets a parked worker of the pool to come and poll (a socket started waiting while no
    /// thread waits in the OS).
    kick: Box<dyn Fn() + Send + Sync>,
}

/// The error of every wait on a socket whose pool has shut down.
pub(crate) fn pool_gone() -> io::Error {
    io::Error::other(
        "the coro thread pool that drives this socket has shut down; \
         create sockets inside a pool that outlives them",
    )
}

impl OsPoller {
    pub(super) fn new(kick: Box<dyn Fn() + Send + Sync>) -> io::Result<OsPoller> {
        Ok(OsPoller {
            poller: Poller::new()?,
            closed: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            kick,
        })
    }

    /// Sets the interest of `fd` (the poller is one-shot: each event disarms it).
    pub(super) fn set_interest(&self, fd: RawFd, event: polling::Event) -> io::Result<()> {
        // SAFETY: the fd is registered, so still open (see `IoDriver::register`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        self.poller.modify(fd, event)
    }

    /// A socket armed its interest: if no thread waits in the OS, get a parked worker to.
    pub(super) fn armed(&self) {
        if !self.waiting.load(SeqCst) {
            (self.kick)();
        }
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Release);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }
}
