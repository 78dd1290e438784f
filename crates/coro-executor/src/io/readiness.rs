//! [`Readiness`]: one registered fd's readiness word and the tasks waiting on it (tokio's
//! `ScheduledIo`), and [`ReadyEvent`], the snapshot an operation clears it with.
//!
//! The fd is registered edge-triggered: the OS reports a direction when it *becomes* ready, not
//! while it stays so. The word therefore remembers readiness until an operation proves it gone,
//! and the rules are:
//! - a fresh source counts as readable and writable: the first operation is tried at once (an
//!   accepted socket usually has its request waiting), and a `WouldBlock` clears the guess;
//! - an OS event sets its directions' bits and bumps the word's tick, then wakes the tasks
//!   waiting on those directions;
//! - an operation first takes a [`ReadyEvent`] (the bits and the tick it saw), and clears those
//!   bits only when the OS says they are gone (`WouldBlock`, or a short read or write on a stream
//!   socket, which drains it), and only if the tick is still the one it saw: readiness that an
//!   event set in between is newer than the operation's evidence and stays;
//! - a waiter that finds no bit registers its waker under the waiters' mutex and looks again
//!   there; an event sets the bits before it takes that mutex, so either the waiter sees the
//!   bits or the event sees the waiter (no lost wake-up);
//! - a direction's close (the peer's half-close, a hang-up, an error) survives a drain: a reader
//!   that drained the last data with a short read still gets the end of stream (the OS reported
//!   both in one edge, and will not again). Only `WouldBlock` clears it: an operation on a
//!   closed direction ends (end of stream, an error), so `WouldBlock` proves the close is not
//!   there, and keeping it would have every later wait return at once and the caller retry
//!   forever;
//! - the pool's shutdown sets `CLOSED`, which no clear removes: every wait fails from then on.
//!
//! Wakers are returned to the caller, which wakes them after every lock is released.

use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::{Context, Poll, Waker};

/// The readable bit of the word (and of an interest).
pub(crate) const READABLE: usize = 0b0_0001;
/// The writable bit.
pub(crate) const WRITABLE: usize = 0b0_0010;
/// The peer closed its write side (or the socket failed): reads end, and the next one says so.
/// A drain keeps it, so a socket drained by a short read still reads its end of stream (the
/// OS reported the close with the data, in one edge, and will not again).
pub(crate) const READ_CLOSED: usize = 0b0_0100;
/// The socket can no longer write (peer gone, or failed): the next write says why. A drain
/// keeps it, as [`READ_CLOSED`].
pub(crate) const WRITE_CLOSED: usize = 0b0_1000;
/// The pool shut down: every wait fails. Final.
const CLOSED: usize = 0b1_0000;
/// The readiness bits; the tick counts events above them.
const READY_MASK: usize = READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED | CLOSED;
const TICK_SHIFT: u32 = 5;

/// The readiness an operation relied on, as [`Registration::poll_read_ready`] and
/// [`poll_write_ready`](super::Registration::poll_write_ready) saw it, with the count of OS events at
/// that moment: what [`Registration::clear_readiness`] takes, so that it clears only readiness
/// no newer event has set.
///
/// [`Registration::poll_read_ready`]: super::Registration::poll_read_ready
/// [`Registration::clear_readiness`]: super::Registration::clear_readiness
///
/// ```
/// use coro_executor::io::{ReadyEvent, Registration};
/// use std::io::{ErrorKind, Read};
/// use std::task::{Context, Poll, Waker};
///
/// let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
/// a.set_nonblocking(true).unwrap();
/// let registration = Registration::new(&a).unwrap();
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut tries = 0;
/// // Nothing was written: every read fails, and once its readiness is cleared (an event that
/// // came in meanwhile keeps it for one more try), the wait pends.
/// while let Poll::Ready(ready) = registration.poll_read_ready(&mut cx) {
///     let ready: ReadyEvent = ready.unwrap();
///     assert_eq!((&a).read(&mut [0; 8]).unwrap_err().kind(), ErrorKind::WouldBlock);
///     registration.clear_readiness(ready);
///     tries += 1;
/// }
/// assert!(tries >= 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadyEvent {
    tick: usize,
    ready: usize,
}

/// The readiness word and the waiters of one source.
pub(crate) struct Readiness {
    /// Readiness bits (`READY_MASK`) and, above them, the tick (events so far, wrapping).
    word: AtomicUsize,
    /// Tasks waiting for each direction: `[read, write]`.
    waiters: Mutex<[Vec<Waker>; 2]>,
}

fn slot(interest: usize) -> usize {
    if interest == READABLE { 0 } else { 1 }
}

/// The bits that make `interest` (`READABLE` or `WRITABLE`) ready: itself, or its direction
/// closed.
fn ready_bits(interest: usize) -> usize {
    if interest == READABLE {
        READABLE | READ_CLOSED
    } else {
        WRITABLE | WRITE_CLOSED
    }
}

impl Readiness {
    /// A fresh source's readiness: readable and writable until an operation says otherwise.
    pub(crate) fn new() -> Readiness {
        Readiness {
            word: AtomicUsize::new(READABLE | WRITABLE),
            waiters: Mutex::new([Vec::new(), Vec::new()]),
        }
    }

    fn event(word: usize, interest: usize) -> Option<ReadyEvent> {
        let ready = word & ready_bits(interest);
        (ready != 0).then_some(ReadyEvent {
            tick: word >> TICK_SHIFT,
            ready,
        })
    }

    /// `Ready(Some(event))` while `interest` (`READABLE` or `WRITABLE`) is set, `Ready(None)`
    /// once the pool shut down; else the task's waker is kept until an event sets it.
    pub(crate) fn poll_ready(
        &self,
        interest: usize,
        cx: &mut Context<'_>,
    ) -> Poll<Option<ReadyEvent>> {
        let word = self.word.load(Acquire);
        if word & CLOSED != 0 {
            return Poll::Ready(None);
        }
        if let Some(event) = Self::event(word, interest) {
            return Poll::Ready(Some(event));
        }
        let mut waiters = self.waiters.lock().unwrap();
        // Again under the mutex: an event that set the bit before this lock is seen here; one
        // that sets it after finds the waker below.
        let word = self.word.load(Acquire);
        if word & CLOSED != 0 {
            return Poll::Ready(None);
        }
        if let Some(event) = Self::event(word, interest) {
            return Poll::Ready(Some(event));
        }
        let wakers = &mut waiters[slot(interest)];
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Clears what `event` saw ready, unless an event came in since (the tick moved on). An
    /// operation that returned `WouldBlock` clears the direction's close too (`drained` false);
    /// a short read or write (`drained` true) keeps it.
    pub(crate) fn clear(&self, event: ReadyEvent, drained: bool) {
        let bits = if drained {
            event.ready & (READABLE | WRITABLE)
        } else {
            event.ready
        };
        let mut word = self.word.load(Acquire);
        while word >> TICK_SHIFT == event.tick {
            let cleared = word & !bits;
            if cleared == word {
                return;
            }
            match self
                .word
                .compare_exchange_weak(word, cleared, AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    /// The OS reported `ready` (`READABLE`, `WRITABLE`, `READ_CLOSED`, `WRITE_CLOSED`): sets
    /// it, bumps the tick, and moves the wakers of those directions into `wake`.
    pub(crate) fn set(&self, ready: usize, wake: &mut Vec<Waker>) {
        self.update(
            ready & (READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED),
            wake,
        );
    }

    /// The pool shut down: every wait fails from now on; moves every waker into `wake`.
    pub(crate) fn close(&self, wake: &mut Vec<Waker>) {
        self.update(CLOSED | READABLE | WRITABLE, wake);
    }

    fn update(&self, bits: usize, wake: &mut Vec<Waker>) {
        let mut word = self.word.load(Acquire);
        loop {
            let tick = (word >> TICK_SHIFT).wrapping_add(1);
            let next = (tick << TICK_SHIFT) | (word & READY_MASK) | bits;
            match self.word.compare_exchange_weak(word, next, AcqRel, Acquire) {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        let mut waiters = self.waiters.lock().unwrap();
        for interest in [READABLE, WRITABLE] {
            if bits & (ready_bits(interest) | CLOSED) != 0 {
                wake.append(&mut waiters[slot(interest)]);
            }
        }
    }
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::{READ_CLOSED, READABLE, Readiness, WRITABLE, WRITE_CLOSED};
    use std::task::{Context, Poll, Waker};

    /// A source whose fresh readiness a failed operation cleared, then given `bits` by an event.
    fn after_event(interest: usize, bits: usize) -> Readiness {
        let readiness = Readiness::new();
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Some(fresh)) = readiness.poll_ready(interest, &mut cx) else {
            panic!("a fresh source counts as ready");
        };
        readiness.clear(fresh, false);
        readiness.set(bits, &mut Vec::new());
        readiness
    }

    #[test]
    fn would_block_clears_a_close_it_disproves() {
        for (interest, closed) in [(READABLE, READ_CLOSED), (WRITABLE, WRITE_CLOSED)] {
            // A close the socket does not have (say, an event meant for an earlier fd).
            let readiness = after_event(interest, closed);
            let mut cx = Context::from_waker(Waker::noop());
            let Poll::Ready(Some(seen)) = readiness.poll_ready(interest, &mut cx) else {
                panic!("a close makes its direction ready");
            };
            // The operation returned `WouldBlock`: had the direction been closed, it would
            // have ended instead. Keeping the close would make every wait return at once.
            readiness.clear(seen, false);
            assert!(
                readiness.poll_ready(interest, &mut cx).is_pending(),
                "a WouldBlock left the direction ready: its caller would retry forever"
            );
        }
    }

    #[test]
    fn a_drain_keeps_the_close_that_came_with_the_data() {
        let readiness = after_event(READABLE, READABLE | READ_CLOSED);
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Some(seen)) = readiness.poll_ready(READABLE, &mut cx) else {
            panic!("the data makes the source readable");
        };
        // A short read took the data: the end of stream must still be read.
        readiness.clear(seen, true);
        assert!(
            matches!(
                readiness.poll_ready(READABLE, &mut cx),
                Poll::Ready(Some(_))
            ),
            "the end of the stream was cleared with the data"
        );
    }
}
