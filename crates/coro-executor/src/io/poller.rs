//! [`OsPoller`]: the OS poller of one pool, shared by its driver (which registers fds and waits
//! for events) and its sources (which get a worker to poll when a task starts waiting): the part
//! of the driver a source needs, so that a source does not hold the driver that holds it.

// Plain std: the OS poller cannot run under loom; the models cover the protocol around it
// (`Parker::park_polling`) with a stand-in.
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::*};

/// The token of the driver's own wake-up (`notify`), which no source gets.
pub(super) const NOTIFY: mio::Token = mio::Token(usize::MAX);

/// One pool's `mio` registry (the poll itself is the driver's, held by whoever waits in it), the
/// waker that interrupts a wait, whether a thread waits, and whether the pool shut down.
pub(crate) struct OsPoller {
    pub(super) registry: mio::Registry,
    /// Interrupts the wait in progress, or makes the next one return at once.
    pub(super) waker: mio::Waker,
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
    /// The registry of `poll` (whose waits the driver runs), with its waker registered.
    pub(super) fn new(poll: &mio::Poll, kick: Box<dyn Fn() + Send + Sync>) -> io::Result<OsPoller> {
        Ok(OsPoller {
            registry: poll.registry().try_clone()?,
            waker: mio::Waker::new(poll.registry(), NOTIFY)?,
            closed: AtomicBool::new(false),
            waiting: AtomicBool::new(false),
            kick,
        })
    }

    /// Someone should wait in the OS now (a task started waiting on a socket, or a poll that
    /// did not wait gave the token back): if no thread waits there, get a parked worker to, or
    /// a searcher to look (`Idle::io_wait_should_wake`).
    ///
    /// The give-back's half of a Dekker pair with a parking worker (`Worker::park`): the worker
    /// counts itself parked and then, after a `SeqCst` fence, tries for the token again; the
    /// poll unlocks the token and then, after the kick's `SeqCst` fence, reads the idle state.
    /// So either the worker gets the token or the kick sees it parked and wakes it: a worker
    /// that found the token taken by a poll that was not going to wait never sleeps while
    /// sockets wait and nobody polls.
    pub(super) fn need_waiter(&self) {
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
