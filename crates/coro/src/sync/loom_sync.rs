//! Loom models of `coro::sync`: the lock-free fast paths of [`SharedMutexFair`] and
//! [`Semaphore`] racing the slow paths that queue, grant and abandon waiters, and
//! [`SharedPromise`]'s fulfilment racing its futures' registration and drop. Every model
//! checks that no wake-up is lost (loom reports a waiter that can never be woken as a
//! deadlock) and the end state: the lock free with no waiter left, every permit back, every
//! future resolved.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro --lib --release --target-dir target/loom -- loom_
//! ```
//!
//! - `loom_shared_mutex_read_release_races_spinning_acquires`: a reader's lock-free release
//!   races a writer that spins and then queues, and a second reader that may get in beside
//!   the first, spin while the writer holds the lock, or queue behind it: both get the lock and
//!   it ends free (the spin stops at a queued waiter, and no wake-up is lost between a spin
//!   that gives up and the release it just missed).
//! - `loom_shared_mutex_dropped_writer_races_release`: a writer polled once (queued behind a
//!   reader) and dropped while a second reader queues behind it and both readers release: the
//!   second reader is granted (at once, or by the writer's abandon), and no waiter is left.
//! - `loom_shared_mutex_upgrade_races_reader_release`: an upgrade racing the release of the
//!   other reader always ends with the write guard; a reader queued behind it is granted
//!   after the write guard is dropped.
//! - `loom_shared_mutex_granted_writer_dropped`: a queued writer granted by a release on one
//!   thread while its own thread drops it passes the lock on: nothing stays held.
//! - `loom_shared_mutex_granted_readers_release_while_others_queue`: two readers granted
//!   together by a writer's release release on two threads while a second writer and then a
//!   reader queue; every waiter gets the lock and the lock ends free. (A variant in which the
//!   readers saw their grant without the queue's lock found a hang: one reader releasing
//!   lock-free while the other released under the lock could leave the lock free with the
//!   writer still queued. `publish` now applies the policy again after carrying such a release
//!   over.)
//! - `loom_semaphore_release_races_acquire_enqueue`: `add_permits` and a permit's drop racing
//!   an `acquire(2)` that enqueues; the acquire completes and every permit comes back.
//! - `loom_semaphore_dropped_acquire_races_release`: a queued `acquire(2)` dropped while the
//!   permits it waits for are released (and may be granted to it): every permit comes back.
//! - `loom_semaphore_dropped_acquire_lets_smaller_through`: a queued `acquire(2)` dropped while
//!   an `acquire(1)` that fits queues behind it: the latter is granted; every permit comes back.
//! - `loom_promise_set_value_races_get_future`: a future taken and polled while another
//!   thread fulfils the promise resolves to the value.
//! - `loom_promise_second_future_without_the_lock`: two threads take a future at once (the
//!   second without the promise's lock) while the promise is fulfilled: both resolve to the
//!   value, and no future is left counted as pending; with the shared pointer published
//!   `Relaxed`, loom reports the unsynchronised read of the state it points to.
//! - `loom_promise_drop_races_waiting_future`: the promise dropped unfulfilled while a future
//!   waits: the future resolves to `Err(BrokenPromise)`.
//! - `loom_promise_future_drop_races_set_value`: a registered future dropped while the
//!   promise is fulfilled: no crash, right after the drop `pending()` counts at most the
//!   clone still waiting, that clone resolves to the value, and `pending()` ends at 0.
//! - `loom_baton_post_races_wait_and_reset`: a waiter registered before a post that another
//!   thread follows with a reset still completes; a waiter dropped while registered leaves
//!   nothing behind for the next post.
//! - `loom_baton_post_races_registration`: a waiter registering while another thread posts
//!   always completes (it sees the post, or the post takes its waker).
//! - `loom_latch_count_down_races_wait`: a waiter registering while the last count-down runs on
//!   another thread always completes.
//! - `loom_barrier_dropped_wait_races_arrival`: a wait that arrives and is dropped at once on
//!   one thread races an arrival on another: the two met (one leader), or the dropped one
//!   withdrew and the other still needs a partner, never half of each.

use super::{
    Barrier, Baton, BrokenPromise, Latch, Semaphore, SemaphorePermit, SharedMutexFair,
    SharedPromise,
};
use coro_loom::sync::Arc;
use coro_loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use coro_loom::thread;
use loom::future::block_on;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` once, with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Waits (yielding to loom) until `flag` is set.
fn wait_for(flag: &AtomicBool) {
    while !flag.load(SeqCst) {
        thread::yield_now();
    }
}

/// The lock is free and nobody waits: a writer gets in, and then two readers and an upgrader
/// share it (a second reader is refused while a writer is still counted as waiting or an
/// upgrade transition is still pending).
fn assert_lock_free(lock: &SharedMutexFair<usize>) {
    drop(lock.try_write().expect("the lock was left held"));
    let first = lock.try_read().expect("the lock was left held");
    let second = lock
        .try_read()
        .expect("a second reader was refused: a writer or upgrade was left waiting");
    let upgrader = lock
        .try_upgradable_read()
        .expect("an upgradable reader was refused: a writer was left waiting");
    drop((first, second, upgrader));
}

/// Every permit of a semaphore created with `total` is back and nobody waits.
fn assert_permits_back(semaphore: &Semaphore, total: usize) {
    assert_eq!(semaphore.available_permits(), total, "permits were lost");
    let all: SemaphorePermit<'_> = semaphore
        .try_acquire(total)
        .expect("try_acquire refused: a waiter was left in the queue");
    drop(all);
}

#[test]
fn loom_shared_mutex_read_release_races_spinning_acquires() {
    loom::model(|| {
        let lock = Arc::new(SharedMutexFair::new(0usize));
        let first_reader = lock.try_read().unwrap();
        // Spins while the first reader holds the lock, then queues (or gets in as it leaves).
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || *block_on(lock.write()) += 1)
        };
        // Gets in beside the first reader, spins while the writer holds the lock, or queues
        // behind the writer: whichever came first, it reads what the writer left.
        let second_reader = {
            let lock = lock.clone();
            thread::spawn(move || *block_on(lock.read()))
        };
        drop(first_reader);
        writer.join().unwrap();
        let seen = second_reader.join().unwrap();
        assert!(seen <= 1, "a reader saw a write that never happened");
        assert_eq!(*lock.try_read().unwrap(), 1, "the writer never wrote");
        assert_lock_free(&lock);
    });
}

#[test]
fn loom_shared_mutex_dropped_writer_races_release() {
    loom::model(|| {
        let lock = Arc::new(SharedMutexFair::new(0usize));
        let reader = lock.try_read().unwrap();
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                let mut write = pin!(lock.write());
                if let Poll::Ready(mut guard) = poll_once(write.as_mut()) {
                    *guard += 1;
                }
                // Dropping `write` here, queued or granted, races the reader's release.
            })
        };
        // Queues behind the writer if it waits (a reader does not pass a queued writer);
        // the writer's abandon must then grant it.
        let second = block_on(lock.read());
        // The last release grants the writer if it queued only now, racing its drop.
        drop(reader);
        drop(second);
        writer.join().unwrap();
        assert_lock_free(&lock);
    });
}

#[test]
fn loom_shared_mutex_upgrade_races_reader_release() {
    loom::model(|| {
        let lock = Arc::new(SharedMutexFair::new(0usize));
        let upgrader = lock.try_upgradable_read().unwrap();
        let reading = Arc::new(AtomicBool::new(false));
        let reader = {
            let (lock, reading) = (lock.clone(), reading.clone());
            thread::spawn(move || {
                let guard = lock.try_read().expect("readers share with an upgrader");
                reading.store(true, SeqCst);
                drop(guard);
                // Behind the pending upgrade or the write guard, unless it comes before both.
                let value = *block_on(lock.read());
                assert!(value <= 1);
            })
        };
        wait_for(&reading);
        let mut writer = block_on(upgrader.upgrade());
        *writer += 1;
        drop(writer);
        reader.join().unwrap();
        assert_eq!(*lock.try_read().unwrap(), 1);
        assert_lock_free(&lock);
    });
}

#[test]
fn loom_shared_mutex_granted_writer_dropped() {
    loom::model(|| {
        let lock = Arc::new(SharedMutexFair::new(0usize));
        let reader = lock.try_read().unwrap();
        let queued = Arc::new(AtomicBool::new(false));
        let writer = {
            let (lock, queued) = (lock.clone(), queued.clone());
            thread::spawn(move || {
                let mut write = pin!(lock.write());
                assert!(
                    poll_once(write.as_mut()).is_pending(),
                    "the reader holds the lock"
                );
                queued.store(true, SeqCst);
                // Dropped while the reader's release may be granting it.
            })
        };
        wait_for(&queued);
        drop(reader);
        writer.join().unwrap();
        assert_lock_free(&lock);
    });
}

#[test]
fn loom_semaphore_release_races_acquire_enqueue() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        let acquirer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || {
                let permit = block_on(semaphore.acquire(2));
                assert_eq!(permit.num_permits(), 2);
            })
        };
        semaphore.add_permits(1);
        drop(held);
        acquirer.join().unwrap();
        assert_permits_back(&semaphore, 2);
    });
}

/// On another thread: an `acquire(2)` that finds too few permits free queues, then is
/// dropped. Returns once it has queued; the thread's drop races whatever the caller does next.
fn queue_then_drop_acquire_2(semaphore: &Arc<Semaphore>) -> thread::JoinHandle<()> {
    let queued = Arc::new(AtomicBool::new(false));
    let dropper = {
        let (semaphore, queued) = (semaphore.clone(), queued.clone());
        thread::spawn(move || {
            let mut acquire = pin!(semaphore.acquire(2));
            assert!(
                poll_once(acquire.as_mut()).is_pending(),
                "fewer than 2 permits are free"
            );
            queued.store(true, SeqCst);
        })
    };
    wait_for(&queued);
    dropper
}

#[test]
fn loom_semaphore_dropped_acquire_races_release() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(2));
        let held = semaphore.try_acquire(2).unwrap();
        // Dropped, queued or just granted, while the permits come back.
        let dropper = queue_then_drop_acquire_2(&semaphore);
        drop(held);
        dropper.join().unwrap();
        assert_permits_back(&semaphore, 2);
    });
}

#[test]
fn loom_semaphore_dropped_acquire_lets_smaller_through() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(2));
        let held = semaphore.try_acquire(1).unwrap();
        let dropper = queue_then_drop_acquire_2(&semaphore);
        // Queues behind the `acquire(2)` if it still waits (FIFO): its drop must grant us
        // the free permit.
        let one = block_on(semaphore.acquire(1));
        assert_eq!(one.num_permits(), 1);
        drop(one);
        drop(held);
        dropper.join().unwrap();
        assert_permits_back(&semaphore, 2);
    });
}

#[test]
fn loom_promise_set_value_races_get_future() {
    loom::model(|| {
        let promise = Arc::new(SharedPromise::new());
        let setter = {
            let promise = promise.clone();
            thread::spawn(move || promise.set_value(7u32).unwrap())
        };
        assert_eq!(block_on(promise.get_future()), Ok(7));
        setter.join().unwrap();
        assert!(promise.is_fulfilled());
        assert_eq!(promise.pending(), 0);
    });
}

#[test]
fn loom_promise_drop_races_waiting_future() {
    loom::model(|| {
        let promise = SharedPromise::<u32>::new();
        let future = promise.get_future();
        let dropper = thread::spawn(move || drop(promise));
        assert_eq!(block_on(future), Err(BrokenPromise));
        dropper.join().unwrap();
    });
}

#[test]
fn loom_promise_future_drop_races_set_value() {
    loom::model(|| {
        let promise = Arc::new(SharedPromise::new());
        let dropped = promise.get_future();
        let kept = dropped.clone();
        let setter = {
            let promise = promise.clone();
            thread::spawn(move || promise.set_value(7u32).unwrap())
        };
        {
            let mut dropped = pin!(dropped);
            if let Poll::Ready(value) = poll_once(dropped.as_mut()) {
                assert_eq!(value, Ok(7));
            }
        }
        assert!(promise.pending() <= 1, "only `kept` may still wait");
        assert_eq!(block_on(kept), Ok(7));
        setter.join().unwrap();
        assert_eq!(promise.pending(), 0);
    });
}

#[test]
fn loom_baton_post_races_wait_and_reset() {
    loom::model(|| {
        let baton = Arc::new(Baton::new());
        // Registered (or released) before the poster starts: the post releases it even though
        // a reset follows before it is polled again.
        let mut early = Box::pin(baton.wait());
        let _ = poll_once(early.as_mut());
        let poster = {
            let baton = baton.clone();
            thread::spawn(move || {
                baton.post();
                baton.reset();
            })
        };
        block_on(early);
        poster.join().unwrap();
        assert!(!baton.is_ready());
        // A waiter that registers and gives up leaves nothing behind for the next post.
        {
            let mut wait = pin!(baton.wait());
            assert!(poll_once(wait.as_mut()).is_pending());
        }
        baton.post();
        assert!(poll_once(pin!(baton.wait())).is_ready());
    });
}

#[test]
fn loom_baton_post_races_registration() {
    loom::model(|| {
        let baton = Arc::new(Baton::new());
        let poster = {
            let baton = baton.clone();
            thread::spawn(move || baton.post())
        };
        // Registering while the post runs: it sees the post, or the post takes its waker.
        block_on(baton.wait());
        poster.join().unwrap();
    });
}

#[test]
fn loom_shared_mutex_granted_readers_release_while_others_queue() {
    loom::model(|| {
        let lock = Arc::new(SharedMutexFair::new(0usize));
        let writer = lock.try_write().unwrap();
        let queued = [
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        ];
        let readers: Vec<_> = queued
            .iter()
            .map(|queued| {
                let (lock, queued) = (lock.clone(), queued.clone());
                thread::spawn(move || {
                    let mut read = pin!(lock.read());
                    assert!(poll_once(read.as_mut()).is_pending(), "the writer holds it");
                    queued.store(true, SeqCst);
                    // Granted by the writer's release.
                    let guard = block_on(read);
                    assert_eq!(*guard, 0);
                })
            })
            .collect();
        for queued in &queued {
            wait_for(queued);
        }
        drop(writer);
        // Queues behind the granted readers (unless both have left already).
        let mut second_writer = pin!(lock.write());
        let mut guard = match poll_once(second_writer.as_mut()) {
            Poll::Ready(guard) => Some(guard),
            Poll::Pending => None,
        };
        let mut later_reader = pin!(lock.read());
        if guard.is_none() {
            assert!(
                poll_once(later_reader.as_mut()).is_pending(),
                "behind a queued writer"
            );
        }
        for reader in readers {
            reader.join().unwrap();
        }
        **guard.get_or_insert_with(|| block_on(second_writer)) += 1;
        drop(guard);
        assert_eq!(*block_on(later_reader), 1);
        assert_lock_free(&lock);
    });
}

#[test]
fn loom_promise_second_future_without_the_lock() {
    loom::model(|| {
        let promise = Arc::new(SharedPromise::new());
        let second = {
            let promise = promise.clone();
            thread::spawn(move || block_on(promise.get_future()))
        };
        // Races the other thread's: either may be the first (under the lock), the other then
        // takes the lock-free path.
        let first = promise.get_future();
        promise.set_value(7u32).unwrap();
        assert_eq!(block_on(first), Ok(7));
        assert_eq!(second.join().unwrap(), Ok(7));
        assert_eq!(promise.pending(), 0);
    });
}

#[test]
fn loom_latch_count_down_races_wait() {
    loom::model(|| {
        let latch = Arc::new(Latch::new(2));
        latch.count_down();
        let other = {
            let latch = latch.clone();
            thread::spawn(move || latch.count_down())
        };
        block_on(latch.wait());
        other.join().unwrap();
        assert!(latch.try_wait());
    });
}

#[test]
fn loom_barrier_dropped_wait_races_arrival() {
    loom::model(|| {
        let barrier = Arc::new(Barrier::new(2));
        let other = {
            let barrier = barrier.clone();
            thread::spawn(move || {
                // Arrives, and leaves at once unless it completed the generation.
                let mut gone = pin!(barrier.wait());
                poll_once(gone.as_mut()).map(|result| result.is_leader())
            })
        };
        let mut mine = pin!(barrier.wait());
        let first = poll_once(mine.as_mut());
        let gone = other.join().unwrap();
        let mine_done = match first {
            Poll::Ready(result) => Some(result.is_leader()),
            Poll::Pending => match poll_once(mine.as_mut()) {
                Poll::Ready(result) => Some(result.is_leader()),
                Poll::Pending => None,
            },
        };
        match (gone, mine_done) {
            // The two met: exactly one leader.
            (Poll::Ready(g), Some(m)) => assert_ne!(g, m),
            // `mine` completed the generation with the other wait, which was then dropped
            // having passed.
            (Poll::Pending, Some(m)) => assert!(m, "the last arrival leads"),
            // The other wait withdrew: `mine` waits alone, and a new arrival completes it.
            (Poll::Pending, None) => {
                let mut late = pin!(barrier.wait());
                assert!(matches!(poll_once(late.as_mut()), Poll::Ready(r) if r.is_leader()));
                assert!(matches!(poll_once(mine.as_mut()), Poll::Ready(r) if !r.is_leader()));
            }
            (Poll::Ready(_), None) => {
                panic!("the other wait completed a generation without `mine`")
            }
        }
    });
}
