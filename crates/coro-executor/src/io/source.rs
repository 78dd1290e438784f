//! [`Source`]: one registered file descriptor: its key in the driver, its readiness word
//! (`readiness.rs`, which states the protocol) and the poller it is registered with (the handle a
//! socket type holds, `Registration`, is in `registration.rs`).
//!
//! The fd is registered once, edge-triggered for both directions, and never re-armed: an event
//! only sets readiness and wakes waiters, and a wait that finds none only stores its waker (and
//! gets a worker to poll the OS if none does). No `epoll_ctl` runs per wait.

use super::poller::{OsPoller, pool_gone};
use super::readiness::{Readiness, ReadyEvent};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

pub(crate) struct Source {
    pub(super) fd: RawFd,
    key: usize,
    /// The pool's poller: told when a task starts waiting, so that some worker polls the OS.
    os: Arc<OsPoller>,
    readiness: Readiness,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, os: Arc<OsPoller>) -> Source {
        Source {
            fd,
            key,
            os,
            readiness: Readiness::new(),
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.fd
    }

    pub(crate) fn key(&self) -> usize {
        self.key
    }

    /// `Ready` while `interest` is set in the readiness word (with the event to clear it with);
    /// else keeps the task's waker until an event sets it. Fails once the pool shut down.
    pub(super) fn poll_ready(
        &self,
        interest: usize,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<ReadyEvent>> {
        match self.readiness.poll_ready(interest, cx) {
            Poll::Ready(Some(event)) => Poll::Ready(Ok(event)),
            Poll::Ready(None) => Poll::Ready(Err(pool_gone())),
            Poll::Pending => {
                self.os.need_waiter();
                // Until the task's next poll, it waits on this socket (the poll functions have
                // no future of their own to hold a registration).
                crate::trace::wait_until_polled(crate::trace::WaitOn::Io(self.fd));
                Poll::Pending
            }
        }
    }

    /// An operation saw `event`'s readiness gone (`drained`: by a short read or write, which
    /// keeps a close): clears it, unless a newer event set it again.
    pub(super) fn clear(&self, event: ReadyEvent, drained: bool) {
        self.readiness.clear(event, drained);
    }

    /// An event reported `ready` (readiness bits): records it and moves the wakers of those
    /// directions into `wake`.
    pub(super) fn fire(&self, ready: usize, wake: &mut Vec<Waker>) {
        self.readiness.set(ready, wake);
    }

    /// The pool shut down: fails every wait; moves every waker into `wake`.
    pub(super) fn close(&self, wake: &mut Vec<Waker>) {
        self.readiness.close(wake);
    }
}
