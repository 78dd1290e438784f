//! [`Source`]: one registered file descriptor's readiness (the handle a socket type holds,
//! `Registration`, is in `registration.rs`).
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

use super::poller::{OsPoller, pool_gone};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

pub(super) const READ: usize = 0;
pub(super) const WRITE: usize = 1;

#[derive(Default)]
struct Direction {
    armed: bool,
    fired: bool,
    wakers: Vec<Waker>,
}

pub(crate) struct Source {
    pub(super) fd: RawFd,
    key: usize,
    /// The pool's poller, through which the source arms its interest.
    os: Arc<OsPoller>,
    directions: Mutex<[Direction; 2]>,
}

impl Source {
    pub(crate) fn new(fd: RawFd, key: usize, os: Arc<OsPoller>) -> Source {
        Source {
            fd,
            key,
            os,
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
    pub(super) fn poll_ready(&self, dir: usize, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut directions = self.directions.lock().unwrap();
        if self.os.is_closed() {
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
            if let Err(err) = self.os.set_interest(self.fd, interest) {
                directions[dir].armed = false;
                return Poll::Ready(Err(err));
            }
            drop(directions);
            self.os.armed();
        }
        // Until the task's next poll, it waits on this socket (the poll functions have no
        // future of their own to hold a registration).
        crate::trace::wait_until_polled(crate::trace::WaitOn::Io(self.fd));
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
            if (directions[READ].armed || directions[WRITE].armed) && !self.os.is_closed() {
                let interest = self.interest(&directions);
                if self.os.set_interest(self.fd, interest).is_err() {
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
