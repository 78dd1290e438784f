//! `coro::channel`: ordering, waiting, rendezvous, closing, cancel safety (a value is delivered
//! exactly once or given back), MPMC stress with random cancellation, and the oneshot.

use crate::support::{CountDrop, ms};
use coro::cancel::{CancellationSource, Cancelled, cancellable};
use coro::channel::{self, RecvError, SendError, TryRecvError, TrySendError};
use futures::StreamExt;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::task::{Context, Poll, Waker};

fn poll_once<F: Future + ?Sized>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

fn assert_send_sync<T: Send + Sync + Unpin>() {}
fn assert_send_unpin<T: Send + Unpin>() {}
fn assert_send<T: Send>() {}

#[test]
fn handles_and_futures_are_send_sync_unpin() {
    assert_send_sync::<channel::Sender<String>>();
    assert_send_sync::<channel::Receiver<String>>();
    assert_send_unpin::<channel::SendFuture<'static, String>>();
    assert_send::<channel::RecvFuture<'static, String>>();
    assert_send_sync::<channel::oneshot::Sender<String>>();
    assert_send_sync::<channel::oneshot::Receiver<String>>();
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn messages_from_one_sender_arrive_in_order() {
    for cap in [Some(0), Some(1), Some(7), None] {
        let (tx, rx) = match cap {
            Some(cap) => channel::bounded(cap),
            None => channel::unbounded(),
        };
        let producer = coro::spawn(async move {
            for i in 0..2_000u32 {
                tx.send(i).await.unwrap();
            }
        });
        let got: Vec<u32> = rx.collect().await;
        assert_eq!(got, (0..2_000).collect::<Vec<_>>(), "capacity {cap:?}");
        producer.await.unwrap();
    }
}

#[test]
fn a_full_channel_makes_senders_wait_in_order() {
    let (tx, rx) = channel::bounded(1);
    tx.try_send(0).unwrap();
    assert_eq!(tx.try_send(9), Err(TrySendError::Full(9)));
    let mut first = pin!(tx.send(1));
    let mut second = pin!(tx.send(2));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(tx.len(), 1);
    // Each receive makes room for the first waiting sender, whose send is then done.
    assert_eq!(rx.try_recv(), Ok(0));
    assert_eq!(poll_once(first.as_mut()), Poll::Ready(Ok(())));
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

#[test]
fn a_send_that_finds_room_goes_in_and_a_granted_send_it_passed_goes_back_to_the_front() {
    let (tx, rx) = channel::bounded(1);
    tx.try_send(0).unwrap();
    let mut first = pin!(tx.send(1));
    let mut second = pin!(tx.send(2));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    // Room: granted to `first`, but a send that never waited finds it first.
    assert_eq!(rx.try_recv(), Ok(0));
    assert_eq!(
        tx.try_send(9),
        Ok(()),
        "a send that finds room goes in at once"
    );
    // `first` lost its place: it waits again, still ahead of `second`.
    assert!(poll_once(first.as_mut()).is_pending());
    assert_eq!(rx.try_recv(), Ok(9));
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(poll_once(first.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(rx.try_recv(), Ok(2));
}

#[test]
#[should_panic(expected = "does not fit in memory; use coro::channel::unbounded()")]
fn a_bounded_channel_larger_than_memory_panics_with_a_clear_message() {
    let _ = channel::bounded::<u64>(usize::MAX);
}

#[test]
fn rendezvous_send_completes_only_when_a_receiver_takes_the_value() {
    let (tx, rx) = channel::bounded(0);
    assert_eq!(tx.capacity(), Some(0));
    // Nobody waits to receive: try_send fails.
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    let mut send = pin!(tx.send(2));
    assert!(poll_once(send.as_mut()).is_pending());
    assert!(poll_once(send.as_mut()).is_pending());
    assert_eq!(tx.len(), 0, "a rendezvous channel buffers nothing");
    // A value passes only from a send to a receive that waits for it.
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    let mut recv = pin!(rx.recv());
    assert!(poll_once(recv.as_mut()).is_pending());
    assert_eq!(poll_once(send.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(poll_once(recv.as_mut()), Poll::Ready(Ok(2)));
    // A waiting receiver lets try_send through.
    let mut recv = pin!(rx.recv());
    assert!(poll_once(recv.as_mut()).is_pending());
    assert_eq!(tx.try_send(3), Ok(()));
    assert_eq!(poll_once(recv.as_mut()), Poll::Ready(Ok(3)));
}

#[test]
fn a_rendezvous_send_whose_receive_left_waits_again_first_in_line() {
    let (tx, rx) = channel::bounded(0);
    let mut first = pin!(tx.send(1));
    let mut second = pin!(tx.send(2));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    {
        let mut recv = pin!(rx.recv());
        assert!(poll_once(recv.as_mut()).is_pending()); // grants the first send
    }
    // Its receive is gone: the first send waits again, still ahead of the second.
    assert!(poll_once(first.as_mut()).is_pending());
    let mut recv = pin!(rx.recv());
    assert!(poll_once(recv.as_mut()).is_pending());
    assert!(poll_once(second.as_mut()).is_pending());
    assert_eq!(poll_once(first.as_mut()), Poll::Ready(Ok(())));
    assert_eq!(poll_once(recv.as_mut()), Poll::Ready(Ok(1)));
}

#[test]
fn a_granted_send_dropped_passes_its_place_on_and_never_sent() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded(1);
    tx.try_send(CountDrop(drops.clone())).ok().unwrap();
    let mut second = pin!(tx.send(CountDrop(drops.clone())));
    {
        let mut first = pin!(tx.send(CountDrop(drops.clone())));
        assert!(poll_once(first.as_mut()).is_pending());
        assert!(poll_once(second.as_mut()).is_pending());
        drop(rx.try_recv().ok().unwrap()); // room: granted to `first`
        assert_eq!(drops.load(SeqCst), 1);
    }
    assert_eq!(
        drops.load(SeqCst),
        2,
        "the dropped send's value went with it"
    );
    assert!(poll_once(second.as_mut()).is_ready(), "the place passed on");
    assert_eq!(rx.len(), 1);
    drop(rx);
    assert_eq!(drops.load(SeqCst), 3);
}

#[test]
fn waiting_receivers_are_served_first_come_first_served() {
    let (tx, rx) = channel::unbounded();
    let mut a = pin!(rx.recv());
    let mut b = pin!(rx.recv());
    let mut c = pin!(rx.recv());
    assert!(poll_once(a.as_mut()).is_pending());
    assert!(poll_once(b.as_mut()).is_pending());
    assert!(poll_once(c.as_mut()).is_pending());
    for i in 0..3 {
        tx.try_send(i).unwrap();
    }
    assert_eq!(poll_once(c.as_mut()), Poll::Ready(Ok(2)));
    assert_eq!(poll_once(a.as_mut()), Poll::Ready(Ok(0)));
    assert_eq!(poll_once(b.as_mut()), Poll::Ready(Ok(1)));
}

#[test]
fn close_fails_senders_with_their_values_and_lets_receivers_drain() {
    let (tx, rx) = channel::bounded(1);
    tx.try_send("buffered").unwrap();
    let mut waiting = pin!(tx.send("waiting"));
    assert!(poll_once(waiting.as_mut()).is_pending());
    assert!(rx.close());
    assert!(!tx.close(), "only the first close reports true");
    assert!(tx.is_closed() && rx.is_closed());
    match poll_once(waiting.as_mut()) {
        Poll::Ready(Err(SendError(value))) => assert_eq!(value, "waiting"),
        other => panic!("the waiting send should fail with its value, got {other:?}"),
    }
    assert_eq!(tx.try_send("late"), Err(TrySendError::Closed("late")));
    assert_eq!(rx.try_recv(), Ok("buffered"));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(coro::block_wait(rx.recv()), Err(RecvError));
}

#[test]
fn the_last_sender_gone_wakes_waiting_receivers_with_closed() {
    let (tx, rx) = channel::bounded::<u8>(4);
    let tx2 = tx.clone();
    let mut recv = pin!(rx.recv());
    assert!(poll_once(recv.as_mut()).is_pending());
    drop(tx);
    assert!(poll_once(recv.as_mut()).is_pending(), "one sender is left");
    drop(tx2);
    assert_eq!(poll_once(recv.as_mut()), Poll::Ready(Err(RecvError)));
}

#[test]
fn the_last_receiver_gone_drops_buffered_values_and_fails_senders() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded(2);
    tx.try_send(CountDrop(drops.clone())).unwrap();
    tx.try_send(CountDrop(drops.clone())).unwrap();
    let mut waiting = pin!(tx.send(CountDrop(drops.clone())));
    assert!(poll_once(waiting.as_mut()).is_pending());
    let rx2 = rx.clone();
    drop(rx);
    assert_eq!(drops.load(SeqCst), 0, "a receiver is still there");
    drop(rx2);
    assert_eq!(
        drops.load(SeqCst),
        2,
        "buffered values go with the last receiver"
    );
    match poll_once(waiting.as_mut()) {
        Poll::Ready(Err(SendError(value))) => drop(value),
        _ => panic!("the waiting send should fail with its value"),
    }
    assert_eq!(drops.load(SeqCst), 3);
    assert!(matches!(
        tx.try_send(CountDrop(drops.clone())),
        Err(TrySendError::Closed(_))
    ));
    assert_eq!(drops.load(SeqCst), 4);
}

#[test]
fn a_receive_dropped_after_the_handoff_gives_the_value_back() {
    // To the front of the buffer, ahead of later values.
    let (tx, rx) = channel::unbounded();
    {
        let mut recv = pin!(rx.recv());
        assert!(poll_once(recv.as_mut()).is_pending());
        tx.try_send(1).unwrap(); // handed to the waiting receive
        tx.try_send(2).unwrap();
    }
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));

    // To the next waiting receive.
    let mut second = pin!(rx.recv());
    {
        let mut first = pin!(rx.recv());
        assert!(poll_once(first.as_mut()).is_pending());
        assert!(poll_once(second.as_mut()).is_pending());
        tx.try_send(3).unwrap();
    }
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(Ok(3)));

    // On a rendezvous channel too: the sender is done, the value is not lost.
    let (tx, rx) = channel::bounded(0);
    {
        let mut recv = pin!(rx.recv());
        assert!(poll_once(recv.as_mut()).is_pending());
        assert_eq!(tx.try_send(4), Ok(()));
    }
    assert_eq!(rx.try_recv(), Ok(4));
}

#[test]
fn a_send_dropped_while_waiting_keeps_its_value_out() {
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::bounded(0);
    {
        let mut send = pin!(tx.send(CountDrop(drops.clone())));
        assert!(poll_once(send.as_mut()).is_pending());
    }
    assert_eq!(drops.load(SeqCst), 1, "the value went with its send");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
}

#[test]
fn cancellable_receive_returns_cancelled_and_loses_nothing() {
    let source = CancellationSource::new();
    let (tx, rx) = channel::unbounded::<u32>();
    let rx2 = rx.clone();
    let task = coro::Task::new(async move { cancellable(rx2.recv()).await })
        .with_cancellation(source.token());
    let handle = task.schedule_on(coro::default_pool()).start();
    std::thread::sleep(ms(20));
    source.request_cancellation();
    assert_eq!(coro::block_wait(handle).unwrap(), Err(Cancelled));
    tx.try_send(5).unwrap();
    assert_eq!(rx.try_recv(), Ok(5));
}

#[test]
fn error_messages_and_into_inner() {
    assert_eq!(SendError(1).to_string(), "sending on a closed channel");
    assert_eq!(format!("{:?}", SendError(1)), "SendError(..)");
    assert_eq!(
        TrySendError::Full(1).to_string(),
        "sending on a full channel"
    );
    assert_eq!(TrySendError::Closed(2).into_inner(), 2);
    assert_eq!(
        TryRecvError::Empty.to_string(),
        "receiving on an empty channel"
    );
    assert_eq!(TryRecvError::from(RecvError), TryRecvError::Closed);
}

/// A tiny xorshift for reproducible randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Polls `fut` until it is ready or `rng` decides to give up on a poll that found it pending:
/// `None` then, and `fut` is dropped (cancelled) wherever it stood, possibly after a value was
/// handed to it. While pending it asks to be polled again soon, so it may give up at any time.
async fn flaky<F: Future>(fut: F, rng: &mut Rng) -> Option<F::Output> {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending if rng.next() % 3 == 0 => Poll::Ready(None),
        Poll::Pending => {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// Every value is received exactly once across 4 producers and 4 consumers, while some of the
/// consumers' receives and the producers' sends are cancelled at random points (a cancelled
/// receive gives back a value it was handed; a cancelled send did not happen and is retried).
async fn mpmc_exactly_once(cap: Option<usize>) {
    const PER_PRODUCER: u64 = 5_000;
    let (tx, rx) = match cap {
        Some(cap) => channel::bounded(cap),
        None => channel::unbounded(),
    };
    let received = Arc::new(
        (0..4 * PER_PRODUCER)
            .map(|_| AtomicUsize::new(0))
            .collect::<Vec<_>>(),
    );
    let cancelled = Arc::new(AtomicUsize::new(0));
    let producers: Vec<_> = (0..4u64)
        .map(|p| {
            let tx = tx.clone();
            let cancelled = cancelled.clone();
            coro::spawn(async move {
                let mut rng = Rng(p * 7919 + 1);
                for i in 0..PER_PRODUCER {
                    let value = p * PER_PRODUCER + i;
                    if i % 500 == 250 {
                        // A pause long enough for the consumers to drain the channel and
                        // wait, so that receives are cancelled even where sends never wait
                        // (an unbounded channel) and the consumers are never behind.
                        coro::time::sleep(ms(1)).await.unwrap();
                    }
                    loop {
                        if rng.next() % 4 != 0 {
                            tx.send(value).await.unwrap();
                            if rng.next() % 8 == 0 {
                                // Let the consumers catch up, so that they wait too.
                                coro::executor::yield_now().await;
                            }
                            break;
                        }
                        match flaky(tx.send(value), &mut rng).await {
                            Some(sent) => {
                                sent.unwrap();
                                break;
                            }
                            None => {
                                cancelled.fetch_add(1, SeqCst);
                            }
                        }
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let consumers: Vec<_> = (0..4u64)
        .map(|c| {
            let rx = rx.clone();
            let received = received.clone();
            let cancelled = cancelled.clone();
            coro::spawn(async move {
                let mut rng = Rng(c * 104_729 + 3);
                loop {
                    let got = if rng.next() % 2 == 0 {
                        match flaky(rx.recv(), &mut rng).await {
                            Some(got) => got,
                            None => {
                                cancelled.fetch_add(1, SeqCst);
                                continue;
                            }
                        }
                    } else {
                        rx.recv().await
                    };
                    match got {
                        Ok(value) => {
                            received[value as usize].fetch_add(1, SeqCst);
                        }
                        Err(RecvError) => break,
                    }
                }
            })
        })
        .collect();
    drop(rx);
    for p in producers {
        p.await.unwrap();
    }
    for c in consumers {
        c.await.unwrap();
    }
    for (value, count) in received.iter().enumerate() {
        assert_eq!(count.load(SeqCst), 1, "value {value} with capacity {cap:?}");
    }
    assert!(
        cancelled.load(SeqCst) > 20,
        "the stress should cancel waits, cancelled {}",
        cancelled.load(SeqCst)
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 60_000)]
async fn mpmc_stress_bounded_every_value_exactly_once() {
    mpmc_exactly_once(Some(16)).await;
}

/// Capacity 1: every send but the first of a burst finds the channel full, so granted sends
/// race sends that find the room first (and go back to the front of the line) on every value.
#[coro::test(worker_threads = 2, timeout_ms = 60_000)]
async fn mpmc_stress_bounded_one_every_value_exactly_once() {
    mpmc_exactly_once(Some(1)).await;
}

#[coro::test(worker_threads = 2, timeout_ms = 60_000)]
async fn mpmc_stress_unbounded_every_value_exactly_once() {
    mpmc_exactly_once(None).await;
}

#[coro::test(worker_threads = 4, timeout_ms = 60_000)]
async fn mpmc_stress_rendezvous_every_value_exactly_once() {
    mpmc_exactly_once(Some(0)).await;
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn ping_pong_over_two_bounded_channels() {
    let (ping_tx, ping_rx) = channel::bounded(1);
    let (pong_tx, pong_rx) = channel::bounded(1);
    let echo = coro::spawn(async move {
        while let Ok(v) = ping_rx.recv().await {
            pong_tx.send(v + 1).await.unwrap();
        }
    });
    for i in 0..10_000u32 {
        ping_tx.send(i).await.unwrap();
        assert_eq!(pong_rx.recv().await, Ok(i + 1));
    }
    drop(ping_tx);
    echo.await.unwrap();
}

#[test]
fn oneshot_delivers_once_or_reports_the_sender_gone() {
    let (tx, rx) = channel::oneshot();
    let waiter = std::thread::spawn(move || coro::block_wait(rx));
    std::thread::sleep(ms(10));
    tx.send(String::from("v")).unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(String::from("v")));

    let (tx, rx) = channel::oneshot::<u8>();
    let waiter = std::thread::spawn(move || coro::block_wait(rx));
    std::thread::sleep(ms(10));
    drop(tx);
    assert_eq!(waiter.join().unwrap(), Err(RecvError));

    // A value sent to a receiver that is dropped without taking it is dropped with it.
    let drops = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = channel::oneshot();
    tx.send(CountDrop(drops.clone())).ok().unwrap();
    assert_eq!(drops.load(SeqCst), 0);
    drop(rx);
    assert_eq!(drops.load(SeqCst), 1);
    let (tx, rx) = channel::oneshot();
    drop(rx);
    assert!(tx.is_closed());
    let back = tx.send(CountDrop(drops.clone())).err().unwrap();
    drop(back);
    assert_eq!(drops.load(SeqCst), 2);
}

/// `select!` over two channels' receives: when both were handed a value, the loser gives its
/// value back, so every value is received exactly once; and a send that loses a select never
/// sent.
#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn select_over_channels_loses_no_value() {
    const N: u32 = 5_000;
    let (a_tx, a_rx) = channel::bounded(1);
    let (b_tx, b_rx) = channel::bounded(1);
    let producers = [(a_tx, 0), (b_tx, N)].map(|(tx, base)| {
        coro::spawn(async move {
            for i in base..base + N {
                tx.send(i).await.unwrap();
            }
        })
    });
    let mut seen = vec![0u8; 2 * N as usize];
    let (mut a_open, mut b_open) = (true, true);
    loop {
        coro::select! {
            Ok(v) = a_rx.recv(), if a_open => seen[v as usize] += 1,
            Ok(v) = b_rx.recv(), if b_open => seen[v as usize] += 1,
            else => break,
        }
        a_open = !a_rx.is_closed() || !a_rx.is_empty();
        b_open = !b_rx.is_closed() || !b_rx.is_empty();
    }
    for p in producers {
        p.await.unwrap();
    }
    assert!(seen.iter().all(|&n| n == 1), "every value exactly once");

    // A send that loses: with nobody receiving, the timer wins and the value was not sent.
    let (tx, rx) = channel::bounded(0);
    let outcome = coro::select! {
        _ = tx.send(1) => "sent",
        _ = coro::time::sleep(ms(5)) => "timed out",
    };
    assert_eq!(outcome, "timed out");
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
}

/// A value handed to a waiting receive that is then dropped comes back to the channel: until
/// it is taken, the channel is not drained, even once closed. Another receive must not report
/// "closed and drained" meanwhile (the value would be left behind by consumers that stopped).
#[test]
fn closed_is_not_drained_while_a_handed_value_is_untaken() {
    for cap in [0, 1, 4] {
        let (tx, rx) = channel::bounded(cap);
        let rx2 = rx.clone();
        {
            let mut r1 = Box::pin(rx.recv());
            assert!(poll_once(r1.as_mut()).is_pending());
            tx.try_send(9).unwrap(); // handed to r1
            drop(tx); // closed
            let mut r2 = pin!(rx2.recv());
            assert!(
                poll_once(r2.as_mut()).is_pending(),
                "capacity {cap}: a value is still in flight"
            );
            // r1 goes away without taking it: it goes to r2, still waiting.
            drop(r1);
            assert_eq!(poll_once(r2.as_mut()), Poll::Ready(Ok(9)), "capacity {cap}");
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Closed), "capacity {cap}");
        // And once the value is taken, waiting receives learn the channel is drained.
        let (tx, rx) = channel::bounded::<u8>(cap);
        let mut r1 = pin!(rx.recv());
        let mut r2 = pin!(rx.recv());
        assert!(poll_once(r1.as_mut()).is_pending());
        tx.try_send(1).unwrap();
        drop(tx);
        assert!(poll_once(r2.as_mut()).is_pending());
        assert_eq!(poll_once(r1.as_mut()), Poll::Ready(Ok(1)));
        assert_eq!(poll_once(r2.as_mut()), Poll::Ready(Err(RecvError)));
    }
}
