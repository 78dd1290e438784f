//! [`Flow`]: one direction of a simulated TCP connection.
//!
//! Rule: written bytes go in flight as a segment due at now + a seeded latency, but never
//! before the segment ahead of it (TCP is ordered). A delivery is a timer at that instant: it
//! moves every due segment, in order, into the reader's buffer, unless the two hosts are
//! partitioned; then the segments stay in flight until `heal` resumes the delivery. Bytes in
//! flight plus unread bytes never exceed [`WINDOW`], so a writer to a slow, stalled or cut-off
//! reader waits, as on a real socket whose buffers filled up. A closed write side is a `Fin`
//! segment, delivered in order after the data; a closed read side makes writes fail with
//! `BrokenPipe`, as a reset would.

use super::world::{self, Held};
use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

/// The most bytes one direction holds in flight and unread.
pub(crate) const WINDOW: usize = 64 * 1024;

enum Segment {
    Data(Vec<u8>),
    Fin,
}

#[derive(Default)]
struct State {
    in_flight: VecDeque<(Instant, Segment)>,
    in_flight_bytes: usize,
    buffer: VecDeque<u8>,
    /// When the last segment sent is due: the next is never due before it.
    last_due: Option<Instant>,
    fin_sent: bool,
    fin_received: bool,
    reader_gone: bool,
    /// Whether the pipe waits in the world's list for a `heal`.
    held: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// One direction of a connection, from host `from` to host `to`.
pub(crate) struct Flow {
    from: usize,
    to: usize,
    state: Mutex<State>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow")
            .field("from", &self.from)
            .field("to", &self.to)
            .finish_non_exhaustive()
    }
}

impl Flow {
    pub(crate) fn new(from: usize, to: usize) -> Arc<Flow> {
        Arc::new(Flow {
            from,
            to,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the state is held leaves it consistent (every update is one step).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends up to the free part of the window of `buf`.
    pub(crate) fn poll_write(
        self: &Arc<Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.state();
        if state.reader_gone || state.fin_sent {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                match state.fin_sent {
                    true => "the simulated connection's write side was shut down",
                    false => "the simulated connection's peer closed it",
                },
            )));
        }
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let used = state.in_flight_bytes + state.buffer.len();
        if used >= WINDOW {
            state.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(WINDOW - used);
        state.in_flight_bytes += n;
        let due = self.push(&mut state, Segment::Data(buf[..n].to_vec()));
        drop(state);
        self.schedule(due);
        Poll::Ready(Ok(n))
    }

    /// Shuts the write side: the reader sees the end after the data already sent.
    pub(crate) fn close_write(self: &Arc<Self>) {
        let mut state = self.state();
        if state.fin_sent {
            return;
        }
        state.fin_sent = true;
        let due = self.push(&mut state, Segment::Fin);
        drop(state);
        self.schedule(due);
    }

    /// The reader is gone: what arrives is discarded, and writes fail.
    pub(crate) fn close_read(&self) {
        let mut state = self.state();
        state.reader_gone = true;
        state.buffer.clear();
        let writer = state.writer.take();
        drop(state);
        if let Some(writer) = writer {
            writer.wake();
        }
    }

    /// Reads what has arrived into `buf` (0: the writer shut down, and all was read).
    pub(crate) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.state();
        if state.buffer.is_empty() {
            if state.fin_received || buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            state.reader = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = buf.len().min(state.buffer.len());
        for (slot, byte) in buf.iter_mut().zip(state.buffer.drain(..n)) {
            slot.write(byte);
        }
        let writer = state.writer.take();
        drop(state);
        if let Some(writer) = writer {
            writer.wake();
        }
        Poll::Ready(Ok(n))
    }

    /// Queues `segment`, due after a seeded latency and after the segment ahead; returns when.
    fn push(&self, state: &mut State, segment: Segment) -> Instant {
        let mut due = coro_executor::time::now() + world::latency();
        if let Some(last) = state.last_due {
            due = due.max(last);
        }
        state.last_due = Some(due);
        state.in_flight.push_back((due, segment));
        due
    }

    fn schedule(self: &Arc<Self>, due: Instant) {
        let pipe = self.clone();
        world::at(due, move || pipe.deliver());
    }

    /// Moves every due segment to the reader, unless the hosts are partitioned.
    fn deliver(self: &Arc<Self>) {
        if !world::connected(self.from, self.to) {
            let mut state = self.state();
            if !state.held && !state.in_flight.is_empty() {
                state.held = true;
                drop(state);
                world::hold(self.clone());
            }
            return;
        }
        let now = coro_executor::time::now();
        let mut state = self.state();
        let mut arrived = false;
        while state.in_flight.front().is_some_and(|(due, _)| *due <= now) {
            let (_, segment) = state.in_flight.pop_front().expect("checked non-empty");
            arrived = true;
            match segment {
                Segment::Data(bytes) => {
                    state.in_flight_bytes -= bytes.len();
                    if !state.reader_gone {
                        state.buffer.extend(bytes);
                    }
                }
                Segment::Fin => state.fin_received = true,
            }
        }
        let reader = arrived.then(|| state.reader.take()).flatten();
        // Segments dropped for a gone reader free window space too.
        let writer = (arrived && state.reader_gone)
            .then(|| state.writer.take())
            .flatten();
        drop(state);
        for waker in [reader, writer].into_iter().flatten() {
            waker.wake();
        }
    }
}

impl Held for Flow {
    fn hosts(&self) -> (usize, usize) {
        (self.from, self.to)
    }

    fn resume(self: Arc<Self>) {
        let mut state = self.state();
        state.held = false;
        // What waited is due again after one more latency from now, in its order.
        let due = coro_executor::time::now() + world::latency();
        for (when, _) in state.in_flight.iter_mut() {
            *when = (*when).max(due);
        }
        if let Some(last) = state.last_due.as_mut() {
            *last = (*last).max(due);
        }
        drop(state);
        self.schedule(due);
    }
}
