//! Models of a source's readiness word (`readiness.rs`) against the OS events that set it:
//! - `loom_readiness_event_races_wait`: an event racing a task on its way to wait always wakes
//!   it or is seen by it (otherwise loom reports a deadlock), and the readiness stays set;
//! - `loom_readiness_clear_keeps_a_newer_event`: a clear with an event taken before another OS
//!   event came in never removes that newer readiness;
//! - `loom_readiness_close_races_wait`: the pool's shutdown racing a wait wakes the waiter, and
//!   every wait fails from then on;
//! - `loom_readiness_edge_stream_loses_no_data`: the whole protocol against an edge-triggered
//!   stand-in socket: a writer adds a byte and reports the edge, then adds the last byte and
//!   closes, reported in one edge (as the OS does when the peer's FIN comes with its data); a
//!   reader waits, reads up to two bytes, clears on `WouldBlock` and after a short read, and
//!   blocks when told `Pending` until woken. It must get both bytes and then the end of the
//!   stream (a lost wake-up, or a close cleared with the data, leaves it blocked: deadlock).
//!
//! Run with the other models (see `crate::loom` for the two checkers and how to run them):
//! `RUSTFLAGS="--cfg loom" cargo test -p coro-executor --lib --release --target-dir target/loom
//! -- loom_`, and the same with `--cfg shuttle`.

use super::readiness::{READ_CLOSED, READABLE, Readiness, ReadyEvent};
use crate::loom::model;
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use crate::loom::sync::{Condvar, Mutex};
use crate::loom::thread;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that a blocked model thread sleeps on.
struct Signal {
    woken: Mutex<bool>,
    condvar: Condvar,
}

impl Signal {
    fn new() -> Arc<Signal> {
        Arc::new(Signal {
            woken: Mutex::new(false),
            condvar: Condvar::new(),
        })
    }

    /// Blocks until woken, and consumes the wake-up.
    fn wait(&self) {
        let mut woken = self.woken.lock().unwrap();
        while !*woken {
            woken = self.condvar.wait(woken).unwrap();
        }
        *woken = false;
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        *self.woken.lock().unwrap() = true;
        self.condvar.notify_one();
    }
}

/// An OS event: sets `bits` and wakes whoever waited for them.
fn event(readiness: &Readiness, bits: usize) {
    let mut wake = Vec::new();
    readiness.set(bits, &mut wake);
    wake.into_iter().for_each(Waker::wake);
}

/// The read readiness of a fresh source, cleared as a failed read would.
fn not_readable() -> Readiness {
    let readiness = Readiness::new();
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Some(fresh)) = readiness.poll_ready(READABLE, &mut cx) else {
        panic!("a fresh source counts as readable");
    };
    readiness.clear(fresh, false);
    assert!(readiness.poll_ready(READABLE, &mut cx).is_pending());
    readiness
}

#[test]
fn loom_readiness_event_races_wait() {
    model(|| {
        let readiness = Arc::new(not_readable());
        let signal = Signal::new();
        let waker = Waker::from(signal.clone());
        let os = {
            let readiness = readiness.clone();
            thread::spawn(move || event(&readiness, READABLE))
        };
        if readiness
            .poll_ready(READABLE, &mut Context::from_waker(&waker))
            .is_pending()
        {
            signal.wait(); // a lost wake-up blocks here: deadlock
        }
        os.join().unwrap();
        let polled = readiness.poll_ready(READABLE, &mut Context::from_waker(Waker::noop()));
        assert!(
            matches!(polled, Poll::Ready(Some(_))),
            "the event's readiness was lost"
        );
    });
}

#[test]
fn loom_readiness_clear_keeps_a_newer_event() {
    model(|| {
        let readiness = Arc::new(Readiness::new());
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Some(seen)) = readiness.poll_ready(READABLE, &mut cx) else {
            panic!("a fresh source counts as readable");
        };
        // The OS reports new data while the operation that saw `seen` fails and clears.
        let os = {
            let readiness = readiness.clone();
            thread::spawn(move || event(&readiness, READABLE))
        };
        readiness.clear(seen, false);
        os.join().unwrap();
        let polled: Poll<Option<ReadyEvent>> = readiness.poll_ready(READABLE, &mut cx);
        assert!(
            matches!(polled, Poll::Ready(Some(_))),
            "a newer event was cleared"
        );
    });
}

#[test]
fn loom_readiness_close_races_wait() {
    model(|| {
        let readiness = Arc::new(not_readable());
        let signal = Signal::new();
        let waker = Waker::from(signal.clone());
        let close = {
            let readiness = readiness.clone();
            thread::spawn(move || {
                let mut wake = Vec::new();
                readiness.close(&mut wake);
                wake.into_iter().for_each(Waker::wake);
            })
        };
        match readiness.poll_ready(READABLE, &mut Context::from_waker(&waker)) {
            Poll::Pending => signal.wait(), // a lost wake-up blocks here: deadlock
            Poll::Ready(polled) => assert!(polled.is_none(), "read ready on a closed source"),
        }
        close.join().unwrap();
        let polled = readiness.poll_ready(READABLE, &mut Context::from_waker(Waker::noop()));
        assert!(
            matches!(polled, Poll::Ready(None)),
            "a wait after shutdown did not fail"
        );
    });
}

#[test]
fn loom_readiness_edge_stream_loses_no_data() {
    model(|| {
        let readiness = Arc::new(Readiness::new());
        // The stand-in socket: bytes buffered in the kernel, and whether the peer closed.
        let buffered = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let writer = {
            let (readiness, buffered, closed) =
                (readiness.clone(), buffered.clone(), closed.clone());
            thread::spawn(move || {
                // Edge-triggered: the OS reports each arrival once, after the data is there.
                buffered.fetch_add(1, SeqCst);
                event(&readiness, READABLE);
                // The last byte and the close arrive together: one edge for both.
                buffered.fetch_add(1, SeqCst);
                closed.store(true, SeqCst);
                event(&readiness, READABLE | READ_CLOSED);
            })
        };
        let signal = Signal::new();
        let waker = Waker::from(signal.clone());
        let mut got = 0;
        loop {
            let seen = match readiness.poll_ready(READABLE, &mut Context::from_waker(&waker)) {
                Poll::Ready(Some(seen)) => seen,
                Poll::Ready(None) => panic!("nobody closed the source"),
                Poll::Pending => {
                    signal.wait(); // a lost wake-up blocks here: deadlock
                    continue;
                }
            };
            // recv with a 2-byte buffer: what is there, up to 2; 0 at the end of the stream.
            let was_closed = closed.load(SeqCst);
            let n = buffered
                .fetch_update(SeqCst, SeqCst, |b| Some(b - b.min(2)))
                .map(|b| b.min(2))
                .unwrap();
            if n == 0 && was_closed {
                break; // the end of the stream
            }
            // WouldBlock (n == 0), or a short read (the socket is drained, a close stays): clear
            // what was seen.
            if n < 2 {
                readiness.clear(seen, n > 0);
            }
            got += n;
        }
        writer.join().unwrap();
        assert_eq!(got, 2, "the stream ended before its data was read");
    });
}
