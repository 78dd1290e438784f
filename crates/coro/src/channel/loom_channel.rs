//! Loom models of `coro::channel`: sends, receives, cancellation and close racing on two
//! threads. Each checks that every value is delivered exactly once or given back to its sender,
//! and that no waiter is left hanging (loom reports a waiter nobody can wake as a deadlock).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro --lib --release --target-dir target/loom -- loom_channel
//! ```
//!
//! - `loom_channel_send_races_receive_drop`: a queued receive dropped while a send hands it a
//!   value: the value is received afterwards, exactly once.
//! - `loom_channel_full_send_drop_races_receive`: a send waiting on a full bounded(1) channel is
//!   dropped while a receive makes room (and may grant it): the dropped send never sent, and
//!   the place it may have been granted is free again.
//! - `loom_channel_close_races_send_and_receive`: `close` racing a waiting send and a receive:
//!   the send either delivered (and its value is received) or failed with its value back.
//! - `loom_channel_rendezvous`: a rendezvous send and receive on two threads meet; a dropped
//!   receive in between does not strand the send.
//! - `loom_channel_receive_slot_read_without_lock`: a queued receive polled again (reading its
//!   slot without the channel's lock) while a send fills it: the value arrives once, and
//!   loom checks the slot's cell for a racing access.
//! - `loom_channel_close_races_taking_a_handed_value`: the channel closes while a value handed
//!   to one receive is being taken on another thread and a second receive waits: the first gets
//!   the value, the second learns the channel is drained (it never hangs, and never reports it
//!   while the value could still come back).
//! - `loom_oneshot_send_races_receiver_drop`: the value is received or comes back to the
//!   sender, never both and never neither.
//! - `loom_channel_unbounded_lock_free_send_races_queuing_receive`: an unbounded channel's
//!   lock-free push racing a receive that finds the queue empty and queues: the Dekker pair
//!   (push, fence, look for waiters; queue, fence, look at the queue) never leaves the receive
//!   waiting beside a pushed value, and one sender's two values arrive in order.
//! - `loom_channel_unbounded_close_races_send_and_receive`: `close` racing a lock-free push and
//!   a receive: the value is received, or the send fails with it; never sent and lost.
//! - `loom_channel_bounded_full_send_races_lock_free_receive`: a send that finds a bounded(1)
//!   channel full and queues, racing a receive that pops without the lock: the second Dekker
//!   pair (queue, fence, try again; pop, fence, look for waiting sends) never leaves the send
//!   waiting beside free room.
//! - `loom_channel_bounded_granted_send_races_a_newcomer`: room granted to a waiting send is
//!   taken first by a send that never waited (which takes room it finds without the lock): the
//!   granted send goes back to the front and still completes; both values arrive exactly once.
//! - `loom_channel_bounded_close_races_full_send_and_receive`: `close` racing a send waiting on
//!   a full bounded(1) channel and a receive: the send either delivered (and its value is
//!   drained after the first) or failed with its value back.

use super::{RecvError, SendError, TryRecvError, bounded, oneshot, unbounded};
use coro_loom::sync::Arc;
use coro_loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use coro_loom::thread;
use loom::future::block_on;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn loom_channel_send_races_receive_drop() {
    loom::model(|| {
        let (tx, rx) = unbounded::<u32>();
        let rx = Arc::new(rx);
        let waiting = {
            let rx = rx.clone();
            thread::spawn(move || {
                let mut recv = pin!(rx.recv());
                // Queued (or, if the send came first, done): dropped either way.
                match poll_once(recv.as_mut()) {
                    Poll::Ready(value) => Some(value.expect("the channel is open")),
                    Poll::Pending => None,
                }
            })
        };
        tx.try_send(7).unwrap();
        let early = waiting.join().unwrap();
        let late = rx.try_recv().ok();
        assert_eq!(
            early.into_iter().chain(late).collect::<Vec<_>>(),
            [7],
            "delivered exactly once"
        );
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn loom_channel_full_send_drop_races_receive() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let tx = Arc::new(tx);
        let dropped = {
            let tx = tx.clone();
            thread::spawn(move || {
                let mut send = pin!(tx.send(1));
                // Sent now if the receive made room first; else queued and then dropped.
                poll_once(send.as_mut()).is_ready()
            })
        };
        assert_eq!(rx.try_recv(), Ok(0));
        let sent_one = dropped.join().unwrap();
        let got: Vec<u32> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        if sent_one {
            assert_eq!(got, [1]);
        } else {
            assert_eq!(got, [], "a dropped send never sent");
        }
        // Nothing is left reserved by the dropped send: a new one gets the place at once.
        assert_eq!(tx.try_send(2), Ok(()));
        assert_eq!(rx.try_recv(), Ok(2));
    });
}

#[test]
fn loom_channel_close_races_send_and_receive() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(0);
        let rx = Arc::new(rx);
        let closer = {
            let rx = rx.clone();
            thread::spawn(move || {
                rx.close();
            })
        };
        let received = {
            let rx = rx.clone();
            thread::spawn(move || block_on(rx.recv()))
        };
        let sent = block_on(tx.send(5));
        closer.join().unwrap();
        let received = received.join().unwrap();
        match (sent, received) {
            (Ok(()), Ok(5)) => {}
            (Err(SendError(5)), Err(RecvError)) => {}
            other => panic!("delivered once or given back, got {other:?}"),
        }
    });
}

#[test]
fn loom_channel_rendezvous() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(0);
        let delivered = Arc::new(AtomicUsize::new(0));
        let receiver = {
            let delivered = delivered.clone();
            thread::spawn(move || {
                {
                    // A receive that queues and is dropped at once.
                    let mut first = pin!(rx.recv());
                    if let Poll::Ready(Ok(v)) = poll_once(first.as_mut()) {
                        delivered.fetch_add(v as usize, SeqCst);
                        return;
                    }
                }
                let v = block_on(rx.recv()).unwrap();
                delivered.fetch_add(v as usize, SeqCst);
            })
        };
        assert_eq!(block_on(tx.send(1)), Ok(()));
        receiver.join().unwrap();
        assert_eq!(delivered.load(SeqCst), 1);
    });
}

#[test]
fn loom_oneshot_send_races_receiver_drop() {
    loom::model(|| {
        let (tx, rx) = oneshot::<u32>();
        let receiver = thread::spawn(move || {
            let mut rx = rx;
            match poll_once(std::pin::Pin::new(&mut rx)) {
                Poll::Ready(v) => Some(v.unwrap()),
                Poll::Pending => None,
            }
        });
        let back = tx.send(3).err();
        let got = receiver.join().unwrap();
        // Received, or given back, or (dropped after the send) dropped with the receiver.
        assert!(!(got.is_some() && back.is_some()));
    });
}

#[test]
fn loom_channel_receive_slot_read_without_lock() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        let receiver = thread::spawn(move || {
            let mut recv = pin!(rx.recv());
            match poll_once(recv.as_mut()) {
                Poll::Ready(value) => value.unwrap(),
                Poll::Pending => block_on(recv).unwrap(),
            }
        });
        tx.try_send(7).unwrap();
        assert_eq!(receiver.join().unwrap(), 7);
    });
}

#[test]
fn loom_channel_close_races_taking_a_handed_value() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        let rx = Arc::new(rx);
        let mut first = Box::pin(rx_recv_owned(rx.clone()));
        assert!(poll_once(first.as_mut()).is_pending());
        tx.try_send(5).unwrap(); // handed to `first`
        let taker = thread::spawn(move || block_on(first));
        let mut second = Box::pin(rx_recv_owned(rx.clone()));
        let early = poll_once(second.as_mut());
        drop(tx); // closes
        let second = match early {
            Poll::Ready(result) => result,
            Poll::Pending => block_on(second),
        };
        assert_eq!(taker.join().unwrap(), Ok(5));
        assert_eq!(second, Err(RecvError));
    });
}

/// A receive that owns its receiver, so that it can move to another thread.
async fn rx_recv_owned(rx: Arc<super::Receiver<u32>>) -> Result<u32, RecvError> {
    rx.recv().await
}

#[test]
fn loom_channel_unbounded_lock_free_send_races_queuing_receive() {
    loom::model(|| {
        let (tx, rx) = unbounded::<u32>();
        let sender = thread::spawn(move || {
            block_on(tx.send(1)).unwrap();
            block_on(tx.send(2)).unwrap();
        });
        assert_eq!(block_on(rx.recv()), Ok(1));
        assert_eq!(block_on(rx.recv()), Ok(2));
        sender.join().unwrap();
    });
}

#[test]
fn loom_channel_unbounded_close_races_send_and_receive() {
    loom::model(|| {
        let (tx, rx) = unbounded::<u32>();
        let rx = Arc::new(rx);
        let closer = {
            let rx = rx.clone();
            thread::spawn(move || {
                rx.close();
            })
        };
        let sent = block_on(tx.send(5));
        closer.join().unwrap();
        let received = block_on(rx.recv());
        match (sent, received) {
            (Ok(()), Ok(5)) => {}
            (Err(SendError(5)), Err(RecvError)) => {}
            other => panic!("delivered once or given back, got {other:?}"),
        }
    });
}

#[test]
fn loom_channel_bounded_full_send_races_lock_free_receive() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let sender = thread::spawn(move || block_on(tx.send(1)));
        assert_eq!(block_on(rx.recv()), Ok(0));
        // The room this receive made is enough: nothing else happens until the send is done.
        assert_eq!(sender.join().unwrap(), Ok(()));
        assert_eq!(rx.try_recv(), Ok(1));
    });
}

#[test]
fn loom_channel_bounded_granted_send_races_a_newcomer() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let tx = Arc::new(tx);
        let mut waiting = pin!(tx.send(1));
        assert!(
            poll_once(waiting.as_mut()).is_pending(),
            "full: the send waits"
        );
        let newcomer = {
            let tx = tx.clone();
            thread::spawn(move || block_on(tx.send(2)))
        };
        // Room: granted to the waiting send, unless the newcomer takes it first.
        assert_eq!(rx.try_recv(), Ok(0));
        let mut got = Vec::new();
        let mut waiting_done = false;
        while got.len() < 2 {
            if !waiting_done {
                match poll_once(waiting.as_mut()) {
                    Poll::Ready(sent) => {
                        sent.unwrap();
                        waiting_done = true;
                    }
                    Poll::Pending => {}
                }
            }
            match rx.try_recv() {
                Ok(value) => got.push(value),
                Err(TryRecvError::Empty) => thread::yield_now(),
                Err(TryRecvError::Closed) => panic!("the channel closed early"),
            }
        }
        assert_eq!(newcomer.join().unwrap(), Ok(()));
        got.sort_unstable();
        assert_eq!(got, [1, 2], "each value exactly once");
        assert!(waiting_done || poll_once(waiting.as_mut()) == Poll::Ready(Ok(())));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    });
}

#[test]
fn loom_channel_bounded_close_races_full_send_and_receive() {
    loom::model(|| {
        let (tx, rx) = bounded::<u32>(1);
        tx.try_send(0).unwrap();
        let rx = Arc::new(rx);
        let closer = {
            let rx = rx.clone();
            thread::spawn(move || {
                rx.close();
            })
        };
        let receiver = {
            let rx = rx.clone();
            thread::spawn(move || block_on(rx_recv_owned(rx)))
        };
        let sent = block_on(tx.send(1));
        closer.join().unwrap();
        assert_eq!(
            receiver.join().unwrap(),
            Ok(0),
            "buffered values survive the close"
        );
        match (sent, rx.try_recv()) {
            (Ok(()), Ok(1)) => {}
            (Err(SendError(1)), Err(TryRecvError::Closed)) => {}
            other => panic!("delivered once or given back, got {other:?}"),
        }
    });
}
