//! The FIFO waiter list behind [`SharedMutexFair`](super::SharedMutexFair) and
//! [`Semaphore`](super::Semaphore) (and so [`Mutex`](super::Mutex)).
//!
//! It lives inside the primitive's short internal mutex. Each waiter has a slot holding its mode
//! (what it asks for), its waker and whether it was granted. A releaser *grants* a waiter: it
//! unlinks the slot from the queue, marks it granted and takes its waker to wake after the
//! mutex is released, so a releasing task never runs a waiter inline and wakes nobody under a
//! lock. The slot itself belongs to the waiting future until that future frees it, on
//! completion or on drop; a future dropped after its grant frees the slot and passes the grant
//! on. Slots are recycled through a free list, so a steady state of waiting allocates nothing.
//!
//! The queue is doubly linked through slot indices: the fair shared mutex grants readers from
//! the middle of the queue (past queued upgraders), and a dropped waiter leaves from anywhere.
//! Why not `event-listener`: a listener has no mode and no notion of "granted", and granting
//! the right run of waiters *in order* is the whole point of these primitives.

use coro_loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::{Poll, Waker};

/// "No slot" in the links.
const NIL: u32 = u32::MAX;

/// Where a waiter stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaiterState {
    /// In the queue, waiting.
    Queued,
    /// Taken off the queue and given what it asked for.
    Granted,
}

/// Identifies a waiter's slot. Only the waiter holding it frees it, so it cannot go stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key(u32);

struct Slot<M> {
    mode: M,
    waker: Option<Waker>,
    /// `None` while the slot is free.
    state: Option<WaiterState>,
    prev: u32,
    /// The next queued slot, or the next free slot while free.
    next: u32,
}

/// A FIFO of waiters with modes `M`.
pub(crate) struct WaitList<M> {
    slots: Vec<Slot<M>>,
    free: u32,
    head: u32,
    tail: u32,
    queued: usize,
}

impl<M> WaitList<M> {
    pub(crate) const fn new() -> Self {
        WaitList {
            slots: Vec::new(),
            free: NIL,
            head: NIL,
            tail: NIL,
            queued: 0,
        }
    }

    /// Whether nobody is queued (granted waiters that have not picked up their grant yet do not
    /// count: they are no longer in line).
    pub(crate) fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// How many waiters are queued.
    pub(crate) fn len(&self) -> usize {
        self.queued
    }

    /// Queues a waiter at the back.
    pub(crate) fn push_back(&mut self, mode: M, waker: Waker) -> Key {
        let key = self.alloc(mode, waker);
        let index = key.0;
        self.slots[index as usize].prev = self.tail;
        match self.tail {
            NIL => self.head = index,
            tail => self.slots[tail as usize].next = index,
        }
        self.tail = index;
        self.queued += 1;
        key
    }

    /// Queues a waiter at the front: one that was granted and has to wait again keeps its turn.
    pub(crate) fn push_front(&mut self, mode: M, waker: Waker) -> Key {
        let key = self.alloc(mode, waker);
        let index = key.0;
        self.slots[index as usize].next = self.head;
        match self.head {
            NIL => self.tail = index,
            head => self.slots[head as usize].prev = index,
        }
        self.head = index;
        self.queued += 1;
        key
    }

    /// A slot for a new queued waiter, not linked yet.
    fn alloc(&mut self, mode: M, waker: Waker) -> Key {
        let slot = Slot {
            mode,
            waker: Some(waker),
            state: Some(WaiterState::Queued),
            prev: NIL,
            next: NIL,
        };
        let index = if self.free != NIL {
            let index = self.free;
            self.free = self.slots[index as usize].next;
            self.slots[index as usize] = slot;
            index
        } else {
            let index = u32::try_from(self.slots.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("more than 4 billion waiters queued on one coro::sync primitive");
            self.slots.push(slot);
            index
        };
        Key(index)
    }

    /// The first queued waiter.
    pub(crate) fn front(&self) -> Option<Key> {
        (self.head != NIL).then_some(Key(self.head))
    }

    /// The queued waiter after `key` (which must be queued).
    pub(crate) fn next(&self, key: Key) -> Option<Key> {
        let next = self.slots[key.0 as usize].next;
        (next != NIL).then_some(Key(next))
    }

    /// What the waiter asked for.
    pub(crate) fn mode(&self, key: Key) -> M
    where
        M: Copy,
    {
        self.slots[key.0 as usize].mode
    }

    /// Where the waiter stands.
    pub(crate) fn state(&self, key: Key) -> WaiterState {
        self.slots[key.0 as usize]
            .state
            .expect("a coro::sync waiter's slot was freed while it still held it")
    }

    /// Takes a queued waiter off the queue as granted; its waker goes to `wakes`.
    pub(crate) fn grant(&mut self, key: Key, wakes: &mut WakeList) {
        debug_assert_eq!(self.state(key), WaiterState::Queued);
        self.unlink(key);
        let slot = &mut self.slots[key.0 as usize];
        slot.state = Some(WaiterState::Granted);
        if let Some(waker) = slot.waker.take() {
            wakes.push(waker);
        }
    }

    /// Takes a queued waiter off the queue and frees its slot, its waker going to `wakes`: for
    /// a waiter told of its grant some other way (a channel hands the value to the receive's
    /// own slot), which therefore never looks at the list again.
    pub(crate) fn dismiss(&mut self, key: Key, wakes: &mut WakeList) {
        debug_assert_eq!(self.state(key), WaiterState::Queued);
        if let Some(waker) = self.slots[key.0 as usize].waker.take() {
            wakes.push(waker);
        }
        self.remove(key);
    }

    /// Stores the waker of a still-queued waiter that was polled again.
    pub(crate) fn set_waker(&mut self, key: Key, waker: &Waker) {
        let slot = &mut self.slots[key.0 as usize];
        match &mut slot.waker {
            Some(old) if old.will_wake(waker) => {}
            other => *other = Some(waker.clone()),
        }
    }

    /// Frees the waiter's slot, taking it off the queue if it is still queued. Returns where it
    /// stood: a `Granted` waiter owns its grant and must pass it on.
    pub(crate) fn remove(&mut self, key: Key) -> WaiterState {
        let state = self.state(key);
        if state == WaiterState::Queued {
            self.unlink(key);
        }
        let slot = &mut self.slots[key.0 as usize];
        slot.state = None;
        slot.waker = None;
        slot.next = self.free;
        self.free = key.0;
        state
    }

    fn unlink(&mut self, key: Key) {
        let (prev, next) = {
            let slot = &self.slots[key.0 as usize];
            (slot.prev, slot.next)
        };
        match prev {
            NIL => self.head = next,
            prev => self.slots[prev as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            next => self.slots[next as usize].prev = prev,
        }
        self.queued -= 1;
    }
}

/// Wakers collected under a lock, woken after it is released. One waker (the common hand-off)
/// needs no allocation.
#[derive(Default)]
pub(crate) struct WakeList {
    first: Option<Waker>,
    rest: Vec<Waker>,
}

impl WakeList {
    #[inline]
    pub(crate) fn push(&mut self, waker: Waker) {
        if self.first.is_none() {
            self.first = Some(waker);
        } else {
            self.rest.push(waker);
        }
    }

    /// Whether nobody was collected.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Wakes everyone collected, as [`wake_each`](super::wakers::wake_each) does (a panicking
    /// waker does not keep the others asleep). Call it with no lock held.
    #[inline]
    pub(crate) fn wake_all(self) {
        // Most lists are empty (nothing to wake) or hold one waker (a hand-off): neither pays
        // for the chained iterator (about 65 instructions for an empty list, measured with
        // callgrind on the channel ping-pong).
        let Some(first) = self.first else { return };
        if self.rest.is_empty() {
            super::wakers::wake_each(Some(first));
        } else {
            super::wakers::wake_each(std::iter::once(first).chain(self.rest));
        }
    }
}

/// Sets the `queued` flag in `word`, whose value was last seen as `*seen`, on the way to
/// queueing a waiter: true once the flag is set (now, or already), false if the word changed
/// meanwhile (`*seen` is updated, and the caller decides again).
pub(crate) fn set_queued(word: &AtomicUsize, seen: &mut usize, queued: usize) -> bool {
    if *seen & queued != 0 {
        return true;
    }
    match word.compare_exchange_weak(*seen, *seen | queued, AcqRel, Acquire) {
        Ok(_) => true,
        Err(actual) => {
            *seen = actual;
            false
        }
    }
}

/// What a primitive that queues its waiters in a [`WaitList`] offers [`WaitFor`].
pub(crate) trait Grantor {
    /// What a waiter asks for (a lock mode, a number of permits).
    type Mode: Copy;

    /// Takes `mode` without touching the queue, if that is allowed right now.
    fn try_acquire_fast(&self, mode: Self::Mode) -> bool;

    /// A waiting acquire's first attempt, before it queues: [`try_acquire_fast`], which a
    /// primitive may repeat for a bounded while if that cannot overtake a queued waiter.
    ///
    /// [`try_acquire_fast`]: Grantor::try_acquire_fast
    fn try_acquire_first(&self, mode: Self::Mode) -> bool {
        self.try_acquire_fast(mode)
    }

    /// Under the queue's lock: takes `mode` if the policy allows it now, else queues a waiter
    /// with `waker`, or fails when there is no waker (a `try_`).
    fn acquire_or_enqueue(&self, mode: Self::Mode, waker: Option<&Waker>) -> Acquired;

    /// Whether the queued waiter `key` was granted; if so its slot is freed, else `waker`
    /// replaces its waker.
    fn take_grant(&self, key: Key, waker: &Waker) -> bool;

    /// The waiter `key` gives up: it leaves the queue, or passes on a grant it received but
    /// never took, and whoever can now proceed is granted.
    fn abandon(&self, key: Key, mode: Self::Mode);

    /// The lock's holders and id, for task snapshots.
    fn trace(&self) -> &super::holders::LockTrace;
}

/// The outcome of [`Grantor::acquire_or_enqueue`].
pub(crate) enum Acquired {
    /// Taken at once.
    Now,
    /// Queued; wait for the grant.
    Queued(Key),
    /// Not available, and nothing was queued.
    No,
}

/// The waiting part of every acquiring future in `coro::sync`: a fast attempt, then a place in
/// the queue until granted. Dropped while queued, it leaves the queue (or passes its grant on),
/// which is what makes every wait here cancel-safe.
pub(crate) struct WaitFor<'a, G: Grantor> {
    grantor: &'a G,
    mode: G::Mode,
    key: Option<Key>,
    done: bool,
    /// While queued: the waiting task's registration, for task snapshots.
    traced: Option<super::holders::LockWait>,
}

impl<'a, G: Grantor> WaitFor<'a, G> {
    pub(crate) fn new(grantor: &'a G, mode: G::Mode) -> Self {
        WaitFor {
            grantor,
            mode,
            key: None,
            done: false,
            traced: None,
        }
    }

    /// `Ready` once the grantor gave this waiter what it asked for (exactly once).
    pub(crate) fn poll_acquire(&mut self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        assert!(
            !self.done,
            "a coro::sync future was polled again after it completed"
        );
        let acquired = match self.key {
            Some(key) => {
                if !self.grantor.take_grant(key, cx.waker()) {
                    return Poll::Pending;
                }
                self.key = None;
                true
            }
            None if self.grantor.try_acquire_first(self.mode) => true,
            None => match self.grantor.acquire_or_enqueue(self.mode, Some(cx.waker())) {
                Acquired::Now => true,
                Acquired::Queued(key) => {
                    self.key = Some(key);
                    self.traced = Some(self.grantor.trace().wait());
                    false
                }
                Acquired::No => unreachable!("a waiter with a waker is always queued"),
            },
        };
        if acquired {
            self.traced = None;
            self.done = true;
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl<G: Grantor> Drop for WaitFor<'_, G> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.grantor.abandon(key, self.mode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn order(list: &WaitList<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut at = list.front();
        while let Some(key) = at {
            out.push(list.mode(key));
            at = list.next(key);
        }
        out
    }

    #[test]
    fn fifo_with_removal_from_anywhere_and_slot_reuse() {
        let mut list = WaitList::new();
        let keys: Vec<Key> = (0..5u8)
            .map(|m| list.push_back(m, Waker::noop().clone()))
            .collect();
        assert_eq!(order(&list), [0, 1, 2, 3, 4]);
        assert_eq!(list.remove(keys[2]), WaiterState::Queued);
        assert_eq!(list.remove(keys[0]), WaiterState::Queued);
        assert_eq!(list.remove(keys[4]), WaiterState::Queued);
        assert_eq!(order(&list), [1, 3]);
        let mut wakes = WakeList::default();
        list.grant(keys[1], &mut wakes);
        assert_eq!(order(&list), [3]);
        assert_eq!(list.state(keys[1]), WaiterState::Granted);
        assert_eq!(list.remove(keys[1]), WaiterState::Granted);
        // Freed slots are reused before the slab grows.
        let reused = list.push_back(9, Waker::noop().clone());
        assert!(reused.0 < 5);
        assert_eq!(order(&list), [3, 9]);
        assert_eq!(list.slots.len(), 5);
        let first = list.push_front(7, Waker::noop().clone());
        assert_eq!(order(&list), [7, 3, 9]);
        assert_eq!(list.len(), 3);
        list.remove(keys[3]);
        list.remove(reused);
        assert_eq!(order(&list), [7]);
        list.remove(first);
        assert!(list.is_empty());
        assert_eq!(list.front(), None);
    }
}
