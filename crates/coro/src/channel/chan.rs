//! [`Chan`]: the state every sender and receiver of one channel share, and the two operations
//! that move values through it.
//!
//! The waiting lives under one short mutex, as in Go's `hchan`: the closed flag and two FIFO
//! queues of waiters (the [`WaitList`] of `coro::sync`), sends waiting for room and receives
//! waiting for a value. The values themselves pass through a lock-free queue while nobody waits
//! (see the last points).
//!
//! - A send that finds a receive waiting puts its value straight into that receive's slot and
//!   wakes it (from a pool worker, into that worker's next slot, so it runs as soon as the
//!   sender's task suspends). Nothing goes through the buffer.
//! - A send that finds no room waits, keeping its value. A receive that makes room *grants* the
//!   first waiting send a reserved place (`reserved` counts them) and wakes it; the send puts
//!   its value in when it runs. On a rendezvous channel a receive that queues grants a waiting
//!   send instead, which then hands its value to a waiting receive.
//! - So a value enters the channel only in the poll of its own send, the one that returns
//!   `Ready(Ok)`: a send future dropped at any other point never sent (tokio's guarantee for
//!   `select!`), and a granted send that is dropped passes its grant to the next one.
//! - Closing grants every waiting send (it fails and gives its value back) and every waiting
//!   receive with an empty slot (closed and drained: a receive only waits while the buffer is
//!   empty), but only once no value handed to a receive is still untaken: such a value comes
//!   back to the channel if its receive is dropped, so until it is taken the channel is not
//!   drained, and a receive that finds it closed and empty waits too.
//! - A value handed to a waiting receive goes into that receive's own [`ReceiveSlot`], which it
//!   reads without the lock when it runs (Go's `sudog`): one lock per message on that path.
//! - A receive that was handed a value and then dropped before taking it gives the value back:
//!   to the next waiting receive, or to the front of the buffer, so it is delivered exactly
//!   once and ahead of everything sent after it.
//!
//! - A buffered channel (unbounded, or bounded with a capacity above 0) keeps its values in a
//!   lock-free queue (`concurrent-queue`, as async-channel does) instead: while nobody waits, a
//!   send pushes there and a receive pops there without the lock, so producers and consumers on
//!   different workers do not meet on the mutex for every value. Only a send that finds the
//!   queue full, a receive that finds it empty, and whoever must wake them take the lock.
//!   - A receive that finds the queue empty queues under the lock as above; a send that sees
//!     receives waiting delivers under the lock, feeding them what the queue holds first, so one
//!     sender's values stay in order. The two meet as a Dekker pair: a send pushes, fences, and
//!     reads `waiting_recvs`; a queuing receive stores it, fences, and looks at the queue again;
//!     at least one of them sees the other.
//!   - A send that finds the queue full queues under the lock; a receive that pops while sends
//!     wait grants the first of them under the lock. The second Dekker pair: the first send to
//!     queue stores `waiting_sends`, fences, and tries the queue again; a receive pops, fences,
//!     and reads `waiting_sends`. An unbounded channel's sends never wait, so its receives
//!     skip this pair.
//!   - While receives wait, sends take the lock, so receives are never overtaken. Sends that
//!     wait do not stop a send that finds room from pushing (as with async-channel and flume):
//!     requiring the lock of every send while one waits made a full channel stay full, every
//!     value waking one producer (see `mpmc_bounded` in benches/README). Under the lock
//!     the places granted to waiting sends are theirs; a granted send whose place a lock-free
//!     push took finds the queue full and goes back to the front of the line.
//!   - Closing closes the queue under the lock, so a push either lands before the close (and
//!     is drained like any buffered value) or fails.
//!   - Values given back by dropped receives go to the front of `State::buffer`, which receives
//!     take first (`given_back` says when it holds any); they ride over the capacity until taken.
//!
//! Wakers are woken, and values dropped, only after the mutex is released: both may run user
//! code, which may use this channel again.

use super::receive_slot::{ReceiveSlot, ReceiveSlotPtr};
use crate::sync::waiters::{Key, WaitList, WaiterState, WakeList};
use concurrent_queue::{ConcurrentQueue, PushError};
use coro_loom::sync::atomic::{AtomicUsize, Ordering::*, fence};
use coro_loom::sync::{Mutex, MutexGuard};
use std::collections::VecDeque;
use std::task::{Poll, Waker};

/// One channel's shared state.
pub(crate) struct Chan<T> {
    state: Mutex<State<T>>,
    /// `None`: unbounded; `Some(0)`: rendezvous.
    capacity: Option<usize>,
    /// Live `Sender` handles; the last one to go closes the channel.
    senders: AtomicUsize,
    /// Live `Receiver` handles; the last one to go closes the channel and drops what is buffered.
    receivers: AtomicUsize,
    /// The number of values receives took from their receive slots (modulo 2^63), with [`CLOSED`]
    /// set once the channel is closed: one word, so that the close and the taking of the last
    /// value in flight are ordered by their read-modify-writes alone. A value is *in flight*
    /// from its hand-over (counted in `State::handed`, under the lock) until it is taken here;
    /// while one is, the channel is not drained: a receive that finds it closed and empty waits
    /// instead of reporting `Closed` (the value may come back, if its receive is dropped), and
    /// the close releases waiting receives only once nothing is in flight (see `value_taken`).
    /// Two counters, not one, so that the hand-over (under the lock) costs no read-modify-write:
    /// one per message fewer than a shared count, which both sides would change.
    taken: AtomicUsize,
    /// A buffered channel's values (see the module docs); `None` for a rendezvous channel.
    queue: Option<ConcurrentQueue<T>>,
    /// Buffered: receives queued in `State::recv_waiters`, for sends that look without the
    /// lock. Written under the lock.
    waiting_recvs: AtomicUsize,
    /// Buffered: sends queued in `State::send_waiters` (not counting granted ones, which are
    /// already woken), for receives that look without the lock. Written under the lock.
    waiting_sends: AtomicUsize,
    /// Buffered: values in `State::buffer` (given back by dropped receives), which receives
    /// must take before the queue's. Written under the lock.
    given_back: AtomicUsize,
}

/// Stores `value` in `count`, a counter written only under the channel's lock, if it changed.
///
/// Relaxed: where a count going up must be seen by the other side of a Dekker pair, the writer
/// fences (`SeqCst`) after publishing and before it looks again, as the other side does
/// between its push or pop and its read of the count; two `SeqCst` fences order a store
/// buffering pair of relaxed accesses. A count going down needs no order: a reader that still
/// sees the old value takes the lock, where it learns the truth. Most changes under the lock
/// leave most counts as they were, so the store is skipped when it would change nothing.
#[inline]
fn publish(count: &AtomicUsize, value: usize) {
    if count.load(Relaxed) != value {
        count.store(value, Relaxed);
    }
}

/// The closed bit of `Chan::taken`; the bits below it count (2^63 values, centuries of
/// hand-overs, before they would reach it).
const CLOSED: usize = 1 << (usize::BITS - 1);

struct State<T> {
    /// Values given back by receives dropped after they were handed one: the next to deliver,
    /// ahead of the queue's.
    buffer: VecDeque<T>,
    closed: bool,
    /// Granted sends that have not put their value in yet: each holds a place in the queue
    /// (or, on a rendezvous channel, a claim on a waiting receive).
    reserved: usize,
    /// Values handed over to waiting receives (modulo 2^63, as `Chan::taken`), less those given
    /// back by receives dropped before they took them.
    handed: usize,
    /// Sends waiting for room (their values stay in their futures).
    send_waiters: WaitList<()>,
    /// Receives waiting for a value, by their receive slots (see `receive_slot.rs`).
    recv_waiters: WaitList<ReceiveSlotPtr<T>>,
}

/// What an attempt to send did.
pub(crate) enum SendAttempt {
    /// The value is in the channel (taken from the caller's `Option`).
    Sent,
    /// The channel is closed; the value stays with the caller.
    Closed,
    /// No room, and there was no waker to queue with (a `try_send`).
    Full,
    /// Queued; wait for [`Chan::poll_send_grant`].
    Queued(Key),
}

/// What an attempt to receive did.
pub(crate) enum RecvAttempt<T> {
    /// A value.
    Received(T),
    /// Closed and drained.
    Closed,
    /// Nothing to take, and there was no waker to queue with (a `try_recv`).
    Empty,
    /// Queued; wait for [`Chan::poll_recv_grant`].
    Queued(Key),
}

impl<T> Chan<T> {
    /// Registers that the running task waits on this channel (its address is its id while it
    /// lives), until the registration drops.
    pub(crate) fn wait(&self) -> coro_executor::trace::WaitRegistration {
        let id = self as *const Chan<T> as usize as u64;
        coro_executor::trace::wait_on(coro_executor::trace::WaitOn::Channel(id))
    }

    /// A channel with one sender and one receiver.
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        let queue = match capacity {
            None => Some(ConcurrentQueue::unbounded()),
            Some(0) => None,
            Some(cap) => {
                // Each place holds a value and a stamp word (concurrent-queue's slot).
                let place = size_of::<T>() + size_of::<usize>();
                assert!(
                    cap.checked_mul(place)
                        .is_some_and(|bytes| bytes <= isize::MAX as usize),
                    "coro::channel::bounded({cap}): a buffer of {cap} places does not fit in \
                     memory; use coro::channel::unbounded() for a channel without a useful bound"
                );
                Some(ConcurrentQueue::bounded(cap))
            }
        };
        Chan {
            state: Mutex::new(State {
                buffer: VecDeque::new(),
                closed: false,
                reserved: 0,
                handed: 0,
                send_waiters: WaitList::new(),
                recv_waiters: WaitList::new(),
            }),
            capacity,
            senders: AtomicUsize::new(1),
            receivers: AtomicUsize::new(1),
            taken: AtomicUsize::new(0),
            queue,
            waiting_recvs: AtomicUsize::new(0),
            waiting_sends: AtomicUsize::new(0),
            given_back: AtomicUsize::new(0),
        }
    }

    /// Buffered: publishes how many receives and sends wait and how many values were given
    /// back, after a change under the lock (one side of the Dekker pairs of the module docs;
    /// see [`publish`] for the ordering).
    #[inline]
    fn publish_counts(&self, state: &State<T>) {
        if self.queue.is_some() {
            publish(&self.waiting_recvs, state.recv_waiters.len());
            publish(&self.waiting_sends, state.send_waiters.len());
            publish(&self.given_back, state.buffer.len());
        }
    }

    /// Buffered: hands values to waiting receives, given-back ones first, then the queue's;
    /// room made in the queue goes to waiting sends.
    fn feed_waiters(&self, state: &mut State<T>, wakes: &mut WakeList) {
        let Some(queue) = &self.queue else { return };
        let mut popped = false;
        while let Some(receiver) = state.recv_waiters.front() {
            let value = match state.buffer.pop_front() {
                Some(value) => value,
                // A load first: a failed pop is a locked instruction.
                None if queue.is_empty() => break,
                None => match queue.pop() {
                    Ok(value) => {
                        popped = true;
                        value
                    }
                    Err(_) => break,
                },
            };
            self.hand_over(state, receiver, Some(value), wakes);
        }
        if popped {
            self.grant_senders(state, wakes);
        }
        self.publish_counts(state);
    }

    /// Buffered: a send that saw receives appear after it pushed feeds them, under the lock.
    fn feed_waiters_locked(&self) {
        let mut wakes = WakeList::default();
        {
            let mut state = self.lock();
            self.feed_waiters(&mut state, &mut wakes);
        }
        wakes.wake_all();
    }

    /// Buffered: a receive that popped while sends wait grants them the room it made, under
    /// the lock.
    fn grant_senders_locked(&self) {
        let mut wakes = WakeList::default();
        {
            let mut state = self.lock();
            self.grant_senders(&mut state, &mut wakes);
            self.publish_counts(&state);
        }
        wakes.wake_all();
    }

    /// Whether nothing is buffered (given back, or in a buffered channel's queue).
    fn buffer_is_empty(&self, state: &State<T>) -> bool {
        state.buffer.is_empty() && self.queue.as_ref().is_none_or(ConcurrentQueue::is_empty)
    }

    /// The state. A panic never leaves it half-changed (user code runs only outside the lock,
    /// except a waker's `clone`, which happens before anything is changed), so a poisoned lock
    /// is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// Whether one more waiting send can be granted: a place in the queue nobody has reserved,
    /// or on a rendezvous channel a waiting receive no granted send has claimed.
    fn can_grant_sender(&self, state: &State<T>) -> bool {
        match (&self.queue, self.capacity) {
            (None, _) => state.recv_waiters.len() > state.reserved,
            (Some(queue), _) => self.has_unreserved_room(queue, state),
        }
    }

    /// Grants waiting sends while there is room for them.
    fn grant_senders(&self, state: &mut State<T>, wakes: &mut WakeList) {
        while let Some(sender) = state.send_waiters.front() {
            if state.closed || !self.can_grant_sender(state) {
                break;
            }
            state.send_waiters.grant(sender, wakes);
            state.reserved += 1;
        }
    }

    /// Whether `queue` has room that no granted send holds (under the lock, the places of
    /// granted sends are theirs; only a send that never waited can take one, without it).
    fn has_unreserved_room(&self, queue: &ConcurrentQueue<T>, state: &State<T>) -> bool {
        self.capacity
            .is_none_or(|cap| queue.len() + state.reserved < cap)
    }

    /// Puts `value` in the channel under the lock, if it may go now: into the first waiting
    /// receive's slot, else the queue. Gives it back when there is no room (a full queue,
    /// or on a rendezvous channel no receive that a granted send has not claimed).
    fn try_deliver(&self, state: &mut State<T>, value: T, wakes: &mut WakeList) -> Result<(), T> {
        let Some(queue) = &self.queue else {
            if state.recv_waiters.len() <= state.reserved {
                return Err(value);
            }
            let receiver = state.recv_waiters.front().expect("a waiting receive");
            self.hand_over(state, receiver, Some(value), wakes);
            return Ok(());
        };
        // What the queue holds goes first: it may be this sender's earlier values.
        if !state.recv_waiters.is_empty() && !self.buffer_is_empty(state) {
            self.feed_waiters(state, wakes);
        }
        if let Some(receiver) = state.recv_waiters.front() {
            self.hand_over(state, receiver, Some(value), wakes);
            self.publish_counts(state);
            return Ok(());
        }
        if !self.has_unreserved_room(queue, state) {
            return Err(value);
        }
        match queue.push(value) {
            Ok(()) => Ok(()),
            Err(PushError::Full(value)) => Err(value),
            // The caller saw the channel open under this lock, and the queue is only closed
            // under it, with the channel.
            Err(PushError::Closed(_)) => unreachable!("a channel's queue is closed only with it"),
        }
    }

    /// Under the lock, with no send ahead in line: puts the value in `value` in the channel
    /// (taking it), or queues the send with `waker` (at the front if `first`, a granted send
    /// that found no room after all), or reports `Full` when there is no waker.
    fn send_or_queue(
        &self,
        state: &mut State<T>,
        value: &mut Option<T>,
        waker: Option<&Waker>,
        first: bool,
        wakes: &mut WakeList,
    ) -> SendAttempt {
        let taken = value.take().expect("a coro::channel send without a value");
        let mut unsent = match self.try_deliver(state, taken, wakes) {
            Ok(()) => return SendAttempt::Sent,
            Err(unsent) => unsent,
        };
        let Some(waker) = waker else {
            *value = Some(unsent);
            return SendAttempt::Full;
        };
        if let Some(queue) = &self.queue {
            if state.send_waiters.is_empty() {
                // The second Dekker pair of the module docs: a receive that popped meanwhile
                // and did not see this send is seen here. (No receive waits: `try_deliver`
                // served them, and they queue only under this lock.)
                publish(&self.waiting_sends, 1);
                fence(SeqCst);
                if self.has_unreserved_room(queue, state) {
                    match queue.push(unsent) {
                        Ok(()) => {
                            publish(&self.waiting_sends, 0);
                            return SendAttempt::Sent;
                        }
                        Err(PushError::Full(back)) => unsent = back,
                        Err(PushError::Closed(_)) => {
                            unreachable!("a channel's queue is closed only with it")
                        }
                    }
                }
            }
        }
        *value = Some(unsent);
        let waker = waker.clone();
        let key = if first {
            state.send_waiters.push_front((), waker)
        } else {
            state.send_waiters.push_back((), waker)
        };
        self.publish_counts(state);
        SendAttempt::Queued(key)
    }

    /// Grants the queued receive `receiver` `value` (`None`: closed), under the lock.
    fn hand_over(
        &self,
        state: &mut State<T>,
        receiver: Key,
        value: Option<T>,
        wakes: &mut WakeList,
    ) {
        if value.is_some() {
            state.handed = state.handed.wrapping_add(1) & !CLOSED;
        }
        let slot = state.recv_waiters.mode(receiver);
        state.recv_waiters.dismiss(receiver, wakes);
        // SAFETY: under the channel's lock, the receive just dismissed from the queue (so still
        // alive: it cannot leave the queue without this lock) and not granted before (a granted
        // receive is no longer queued); `slot` is not touched again.
        unsafe { slot.grant(value) };
    }

    /// Sends the value in `value` now (taking it), or queues with `waker` (or reports `Full`
    /// when there is none). A send that must wait queues behind those already waiting.
    pub(crate) fn start_send(&self, value: &mut Option<T>, waker: Option<&Waker>) -> SendAttempt {
        if let Some(queue) = &self.queue {
            // Sends that wait do not stop this one from taking room it finds (see the module
            // docs); receives that wait do, since they are served first.
            if self.waiting_recvs.load(SeqCst) == 0 {
                let taken = value.take().expect("a coro::channel send without a value");
                match queue.push(taken) {
                    Ok(()) => {
                        // The first Dekker pair of the module docs: a receive that queued
                        // meanwhile and did not see this value is seen here, and fed under
                        // the lock.
                        fence(SeqCst);
                        if self.waiting_recvs.load(SeqCst) != 0 {
                            self.feed_waiters_locked();
                        }
                        return SendAttempt::Sent;
                    }
                    Err(PushError::Closed(back)) => {
                        *value = Some(back);
                        return SendAttempt::Closed;
                    }
                    // Full: wait, under the lock.
                    Err(PushError::Full(back)) => *value = Some(back),
                }
            }
        }
        let mut wakes = WakeList::default();
        let attempt = {
            let mut state = self.lock();
            if state.closed {
                SendAttempt::Closed
            } else if state.send_waiters.is_empty() {
                self.send_or_queue(&mut state, value, waker, false, &mut wakes)
            } else if let Some(waker) = waker {
                let key = state.send_waiters.push_back((), waker.clone());
                self.publish_counts(&state);
                SendAttempt::Queued(key)
            } else {
                SendAttempt::Full
            }
        };
        wakes.wake_all();
        attempt
    }

    /// Whether the queued send `*key` is done: `Ready(Ok(()))` once it put the value in `value`
    /// into the channel (taking it), `Ready(Err(()))` if the channel closed first (the value
    /// stays). Pending, it keeps `waker`; a send whose room went away meanwhile (its receive,
    /// on a rendezvous channel; its place in the queue, to a send that raced it) queues again
    /// at the front (`*key` changes).
    pub(crate) fn poll_send_grant(
        &self,
        key: &mut Key,
        value: &mut Option<T>,
        waker: &Waker,
    ) -> Poll<Result<(), ()>> {
        let mut wakes = WakeList::default();
        let polled = {
            let mut state = self.lock();
            match state.send_waiters.state(*key) {
                WaiterState::Queued => {
                    state.send_waiters.set_waker(*key, waker);
                    Poll::Pending
                }
                WaiterState::Granted => {
                    state.send_waiters.remove(*key);
                    state.reserved -= 1;
                    if state.closed {
                        self.publish_counts(&state);
                        Poll::Ready(Err(()))
                    } else {
                        match self.send_or_queue(&mut state, value, Some(waker), true, &mut wakes) {
                            SendAttempt::Sent => {
                                self.publish_counts(&state);
                                Poll::Ready(Ok(()))
                            }
                            SendAttempt::Queued(again) => {
                                *key = again;
                                Poll::Pending
                            }
                            SendAttempt::Closed | SendAttempt::Full => {
                                unreachable!("a send with a waker on an open channel")
                            }
                        }
                    }
                }
            }
        };
        wakes.wake_all();
        polled
    }

    /// The queued send `key` gives up (its value stays with the caller); a grant it received
    /// goes to the next waiting send.
    pub(crate) fn abandon_send(&self, key: Key) {
        let mut wakes = WakeList::default();
        {
            let mut state = self.lock();
            if state.send_waiters.remove(key) == WaiterState::Granted {
                state.reserved -= 1;
                self.grant_senders(&mut state, &mut wakes);
            }
            self.publish_counts(&state);
        }
        wakes.wake_all();
    }

    /// Takes a value now, or queues the receive whose slot is `slot` with `waker` (or
    /// reports `Empty` when there is none).
    pub(crate) fn start_recv(
        &self,
        slot: Option<&ReceiveSlot<T>>,
        waker: Option<&Waker>,
    ) -> RecvAttempt<T> {
        if let Some(queue) = &self.queue {
            // No lock while nobody waits (a newcomer does not overtake waiting receives) and
            // nothing was given back (which goes first). No look at the queue before the pop:
            // `is_empty` reads the tail the producers write, and with it `mpmc_bounded` took
            // twice as long and `pipeline` a quarter longer (alternating runs of each build).
            // Except with one place: that queue's emptiness is in the word its pop locks, so
            // the look costs nothing more, and it saves the locked instruction of a failed pop
            // (a `bounded(1)` receive that waits for each value, as in a ping-pong, always
            // finds the queue empty).
            let empty_at_a_look = self.capacity == Some(1) && queue.is_empty();
            if !empty_at_a_look
                && self.waiting_recvs.load(SeqCst) == 0
                && self.given_back.load(SeqCst) == 0
            {
                if let Ok(value) = queue.pop() {
                    // The second Dekker pair of the module docs: room was made; a send that
                    // queued meanwhile and did not see it is seen here, and granted. Not on an
                    // unbounded channel, whose sends never wait: the fence is the costliest
                    // instruction of that receive.
                    if self.capacity.is_some() {
                        fence(SeqCst);
                        if self.waiting_sends.load(SeqCst) != 0 {
                            self.grant_senders_locked();
                        }
                    }
                    return RecvAttempt::Received(value);
                }
            }
        }
        let mut wakes = WakeList::default();
        let attempt = {
            let mut state = self.lock();
            let unqueued = match state.buffer.pop_front() {
                Some(value) => Some(value),
                // Waiting receives come first for the queue's values. A load first: a failed pop
                // is a locked instruction.
                None if state.recv_waiters.is_empty() => self
                    .queue
                    .as_ref()
                    .filter(|queue| !queue.is_empty())
                    .and_then(|queue| queue.pop().ok()),
                None => None,
            };
            if let Some(value) = unqueued {
                // Room was made for a waiting send.
                self.grant_senders(&mut state, &mut wakes);
                self.publish_counts(&state);
                RecvAttempt::Received(value)
            } else if state.closed && self.buffer_is_empty(&state) && !self.any_in_flight(&state) {
                RecvAttempt::Closed
            } else if let (Some(slot), Some(waker)) = (slot, waker) {
                let waker = waker.clone();
                slot.reset();
                let key = state.recv_waiters.push_back(slot.as_ptr(), waker);
                // On a rendezvous channel a waiting receive is what a send waits for.
                self.grant_senders(&mut state, &mut wakes);
                if self.queue.is_some() {
                    // The other side of the first Dekker pair: published, fenced, then the
                    // queue is looked at again (a value pushed meanwhile goes to the first
                    // waiter).
                    self.publish_counts(&state);
                    fence(SeqCst);
                    if !self.buffer_is_empty(&state) {
                        self.feed_waiters(&mut state, &mut wakes);
                    }
                }
                RecvAttempt::Queued(key)
            } else {
                RecvAttempt::Empty
            }
        };
        wakes.wake_all();
        attempt
    }

    /// Whether the queued receive `key` (with `slot`) is done: `Ready(Some(value))` when it
    /// was handed a value, `Ready(None)` when the channel closed and drained first. Pending, it
    /// keeps `waker`. A grant is seen without the lock.
    pub(crate) fn poll_recv_grant(
        &self,
        key: Key,
        slot: &ReceiveSlot<T>,
        waker: &Waker,
    ) -> Poll<Option<T>> {
        if let Some(granted) = slot.take() {
            if granted.is_some() {
                self.value_taken();
            }
            return Poll::Ready(granted);
        }
        let polled = {
            let mut state = self.lock();
            // Under the lock the grant cannot change: look again, then wait.
            match slot.take() {
                Some(granted) => Poll::Ready(granted),
                None => {
                    state.recv_waiters.set_waker(key, waker);
                    Poll::Pending
                }
            }
        };
        if let Poll::Ready(Some(_)) = &polled {
            self.value_taken();
        }
        polled
    }

    /// Whether a value handed to a receive has not been taken yet (under the lock).
    fn any_in_flight(&self, state: &State<T>) -> bool {
        let taken = self.taken.load(Acquire) & !CLOSED;
        state.handed.wrapping_sub(taken) & !CLOSED != 0
    }

    /// A value handed to a receive was taken. If the channel is closed, it may have been the
    /// last one in flight: the receives that waited for it to settle may learn that the channel
    /// is drained.
    fn value_taken(&self) {
        // One read-modify-write on the word the close sets its bit in: either this take comes
        // first and the close counts it, or the close comes first and this sees it, and looks
        // under the lock (where `handed` is) whether it was the last.
        if self.taken.fetch_add(1, AcqRel) & CLOSED != 0 {
            let mut wakes = WakeList::default();
            {
                let mut state = self.lock();
                self.release_if_drained(&mut state, &mut wakes);
            }
            wakes.wake_all();
        }
    }

    /// On a closed channel with nothing buffered or in flight, grants every waiting receive
    /// "closed".
    fn release_if_drained(&self, state: &mut State<T>, wakes: &mut WakeList) {
        if state.closed && self.buffer_is_empty(state) && !self.any_in_flight(state) {
            while let Some(receiver) = state.recv_waiters.front() {
                self.hand_over(state, receiver, None, wakes);
            }
            self.publish_counts(state);
        }
    }

    /// The queued receive `key` (with `slot`) gives up. A value it was handed and never took
    /// goes to the next waiting receive or back to the front of the buffer; if no receiver is
    /// left to take it, it is returned for the caller to drop outside the lock.
    pub(crate) fn abandon_recv(&self, key: Key, slot: &ReceiveSlot<T>) -> Option<T> {
        let mut wakes = WakeList::default();
        let orphan = {
            let mut state = self.lock();
            match slot.take() {
                // Still queued (a grant is only made under this lock).
                None => {
                    state.recv_waiters.remove(key);
                    self.publish_counts(&state);
                    None
                }
                Some(None) => None,
                Some(Some(value)) => {
                    // No longer in flight: it goes to the next waiting receive (in flight
                    // again), back to the buffer, or nowhere.
                    state.handed = state.handed.wrapping_sub(1) & !CLOSED;
                    let orphan = if let Some(next) = state.recv_waiters.front() {
                        self.hand_over(&mut state, next, Some(value), &mut wakes);
                        None
                    } else if self.receivers.load(Acquire) == 0 {
                        Some(value)
                    } else {
                        state.buffer.push_front(value);
                        None
                    };
                    self.publish_counts(&state);
                    orphan
                }
            }
        };
        wakes.wake_all();
        orphan
    }

    /// Closes the channel: true for the call that closed it. Waiting senders get their values
    /// back, waiting receivers learn it is closed; buffered values stay to be drained.
    pub(crate) fn close(&self) -> bool {
        let mut wakes = WakeList::default();
        let closed_now = {
            let mut state = self.lock();
            if state.closed {
                false
            } else {
                state.closed = true;
                self.taken.fetch_or(CLOSED, AcqRel);
                if let Some(queue) = &self.queue {
                    // Under the lock: a push either landed before (and is drained like any
                    // buffered value) or fails, and its send reports the close.
                    queue.close();
                }
                while let Some(sender) = state.send_waiters.front() {
                    // Granted to learn of the close; counted like any grant until it does.
                    state.send_waiters.grant(sender, &mut wakes);
                    state.reserved += 1;
                }
                // Receives wait only while nothing is buffered; if a value is still in flight
                // they wait for it to be taken (or given back to one of them).
                self.release_if_drained(&mut state, &mut wakes);
                self.publish_counts(&state);
                true
            }
        };
        wakes.wake_all();
        closed_now
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().buffer.len() + self.queue.as_ref().map_or(0, ConcurrentQueue::len)
    }

    pub(crate) fn add_sender(&self) {
        self.senders.fetch_add(1, Relaxed);
    }

    /// A sender handle is gone; the last one closes the channel.
    pub(crate) fn drop_sender(&self) {
        if self.senders.fetch_sub(1, AcqRel) == 1 {
            self.close();
        }
    }

    pub(crate) fn add_receiver(&self) {
        self.receivers.fetch_add(1, Relaxed);
    }

    /// A receiver handle is gone; the last one closes the channel and drops what nobody can
    /// receive any more (outside the lock: a value's `Drop` may use the channel).
    pub(crate) fn drop_receiver(&self) {
        if self.receivers.fetch_sub(1, AcqRel) == 1 {
            self.close();
            let mut buffered = std::mem::take(&mut self.lock().buffer);
            if let Some(queue) = &self.queue {
                // Closed: nothing can be pushed any more.
                buffered.extend(queue.try_iter());
            }
            drop(buffered);
        }
    }
}
