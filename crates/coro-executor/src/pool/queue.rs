//! The per-worker run queue: a bounded single-producer, multi-consumer ring.
//!
//! The owning worker pushes and pops at its two ends without contention; idle workers steal half
//! of it at once (Go's `runqsteal`, tokio's `steal_into`). When the ring is full the owner moves
//! half of it to the global injector in one go (Go's `runqputslow`), so a burst of spawns spreads
//! over the pool instead of failing.
//!
//! `head` packs two 32-bit indices: `real`, the next slot to consume, and `steal`, the first slot a
//! stealer is still copying out. They differ only while a steal is in flight; the owner never
//! writes into `[steal, real)` because it measures free space from `steal`. Indices wrap: only
//! their difference modulo 2^32 matters, and the ring size divides 2^32.

use crate::loom::UnsafeCell;
use crate::loom::sync::Arc;
use crate::loom::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::mem::MaybeUninit;

/// Slots in each worker's ring.
pub(crate) const CAPACITY: usize = 256;
const MASK: u32 = CAPACITY as u32 - 1;
const HALF: u32 = CAPACITY as u32 / 2;

struct Inner<T> {
    /// `steal << 32 | real`.
    head: AtomicU64,
    /// Written by the owner only; read by stealers.
    tail: AtomicU32,
    buffer: Box<[UnsafeCell<MaybeUninit<T>>]>,
}

// SAFETY: slots are handed from one thread to another through the acquire/release protocol on
// `head` and `tail` below: a slot is written only by the owner before it publishes `tail`, and read
// only by whoever won the CAS on `head` that covers it. `T: Send` is all that moving items between
// threads requires.
unsafe impl<T: Send> Send for Inner<T> {}
// SAFETY: shared, the queue moves items between threads only through the `head`/`tail`
// protocol described on the `Send` impl, and never hands out a `&T`, so `T: Send` suffices.
unsafe impl<T: Send> Sync for Inner<T> {}

/// The owner's end: push, pop, overflow. Not `Clone`: exactly one exists per ring.
pub(crate) struct Local<T> {
    inner: Arc<Inner<T>>,
}

/// Another worker's end: steal half.
pub(crate) struct Steal<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Clone for Steal<T> {
    fn clone(&self) -> Self {
        Steal {
            inner: self.inner.clone(),
        }
    }
}

fn pack(steal: u32, real: u32) -> u64 {
    ((steal as u64) << 32) | real as u64
}

fn unpack(head: u64) -> (u32, u32) {
    ((head >> 32) as u32, head as u32)
}

/// Creates a ring and its two ends.
pub(crate) fn local<T>() -> (Local<T>, Steal<T>) {
    let buffer = (0..CAPACITY)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let inner = Arc::new(Inner {
        head: AtomicU64::new(0),
        tail: AtomicU32::new(0),
        buffer,
    });
    (
        Local {
            inner: inner.clone(),
        },
        Steal { inner },
    )
}

impl<T> Inner<T> {
    /// # Safety
    /// The caller must own slot `index` (it is outside every other thread's claimed range) and it
    /// must be empty.
    unsafe fn write(&self, index: u32, value: T) {
        self.buffer[(index & MASK) as usize].with_mut(|slot| {
            // SAFETY: the caller owns the slot, so no other access to it is in flight.
            unsafe { (*slot).write(value) };
        });
    }

    /// # Safety
    /// The caller must have claimed slot `index` through `head` and it must hold a value that
    /// nobody else will read.
    unsafe fn read(&self, index: u32) -> T {
        self.buffer[(index & MASK) as usize].with(|slot| {
            // SAFETY: the slot was initialised before `tail` published it, and the claim on `head`
            // makes this the only read of it.
            unsafe { (*slot).assume_init_read() }
        })
    }

    fn len(&self) -> u32 {
        let (_, real) = unpack(self.head.load(Acquire));
        self.tail.load(Acquire).wrapping_sub(real)
    }
}

impl<T> Local<T> {
    /// Whether the ring is empty (a snapshot: a thief may have emptied it since).
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// Free slots (slots being stolen from count as occupied), a lower bound the owner can rely
    /// on: only it adds items.
    pub(crate) fn free_slots(&self) -> usize {
        let (steal, _) = unpack(self.inner.head.load(Acquire));
        CAPACITY - self.tail().wrapping_sub(steal) as usize
    }

    /// Whether there is room for `n` more without overflowing (stealers count as occupying).
    fn room_for(&self, n: u32) -> bool {
        let (steal, _) = unpack(self.inner.head.load(Acquire));
        // Only the owner writes `tail`, so an unsynchronised view of it is current.
        let tail = self.tail();
        tail.wrapping_sub(steal) + n <= CAPACITY as u32
    }

    fn tail(&self) -> u32 {
        // Only this thread ever stores `tail`; a relaxed load sees our own last store.
        self.inner.tail.load(Relaxed)
    }

    /// Pushes to the back. If the ring is full, moves half of it plus `value` to `overflow`
    /// and returns how many items went there (0 in the common case).
    pub(crate) fn push_back(&mut self, value: T, overflow: &mut dyn FnMut(T)) -> usize {
        let mut value = value;
        loop {
            let head = self.inner.head.load(Acquire);
            let (steal, real) = unpack(head);
            let tail = self.tail();
            if tail.wrapping_sub(steal) < CAPACITY as u32 {
                // SAFETY: slot `tail` is outside `[steal, tail)`, the only range anyone else may
                // touch, and it is empty because it was consumed before `steal` passed it.
                unsafe { self.inner.write(tail, value) };
                self.inner.tail.store(tail.wrapping_add(1), Release);
                return 0;
            }
            if steal != real {
                // A stealer is copying out; it will free half the ring shortly. Rather than
                // wait for it, hand this one item to the global queue.
                overflow(value);
                return 1;
            }
            match self.push_overflow(value, real, tail, overflow) {
                Ok(moved) => return moved,
                // A stealer claimed items between our load and CAS: there is room now.
                Err(v) => value = v,
            }
        }
    }

    /// Moves the front half of a full ring, then `value`, to `overflow` (Go's runqputslow).
    fn push_overflow(
        &mut self,
        value: T,
        real: u32,
        tail: u32,
        overflow: &mut dyn FnMut(T),
    ) -> Result<usize, T> {
        debug_assert_eq!(tail.wrapping_sub(real), CAPACITY as u32);
        let prev = pack(real, real);
        let next_real = real.wrapping_add(HALF);
        let next = pack(next_real, next_real);
        if self
            .inner
            .head
            .compare_exchange(prev, next, AcqRel, Acquire)
            .is_err()
        {
            return Err(value);
        }
        for i in 0..HALF {
            // SAFETY: the CAS above claimed `[real, real + HALF)` for this thread alone, and those
            // slots were published by our own earlier pushes.
            overflow(unsafe { self.inner.read(real.wrapping_add(i)) });
        }
        overflow(value);
        Ok(HALF as usize + 1)
    }

    /// Pops from the front (the oldest item).
    pub(crate) fn pop(&mut self) -> Option<T> {
        let mut head = self.inner.head.load(Acquire);
        loop {
            let (steal, real) = unpack(head);
            if real == self.tail() {
                return None;
            }
            let next_real = real.wrapping_add(1);
            // With no steal in flight both halves move together; otherwise leave `steal` for the
            // stealer to release.
            let next = if steal == real {
                pack(next_real, next_real)
            } else {
                pack(steal, next_real)
            };
            match self
                .inner
                .head
                .compare_exchange(head, next, AcqRel, Acquire)
            {
                // SAFETY: the CAS claimed slot `real` for this thread alone; it was published by an
                // earlier push of ours.
                Ok(_) => return Some(unsafe { self.inner.read(real) }),
                Err(actual) => head = actual,
            }
        }
    }
}

impl<T> Drop for Local<T> {
    fn drop(&mut self) {
        // Items left behind are dropped with the ring, exactly once, by the only owner.
        while self.pop().is_some() {}
    }
}

impl<T> Steal<T> {
    /// Whether the ring looks empty (a snapshot).
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.len() == 0
    }

    /// Number of queued items (a snapshot).
    pub(crate) fn len(&self) -> usize {
        self.inner.len() as usize
    }

    /// Steals half of this ring into `dst` and returns one of the stolen items to run now, with
    /// the number of items stolen in all. `dst` must be empty (a worker steals only when idle).
    pub(crate) fn steal_into(&self, dst: &mut Local<T>) -> Option<(T, usize)> {
        let dst_tail = dst.tail();
        // A stealer fills at most half a ring, so an empty destination always has room.
        if !dst.room_for(HALF) {
            return None;
        }
        let (first, count) = self.claim_half()?;
        for i in 0..count {
            // SAFETY: `claim_half` reserved `[first, first + count)` of the source for this thread;
            // the destination slots `dst_tail + i` are beyond `dst`'s tail and within its free
            // room (checked above), and only `dst`'s owner (us) writes there.
            unsafe {
                let value = self.inner.read(first.wrapping_add(i));
                dst.inner.write(dst_tail.wrapping_add(i), value);
            }
        }
        self.release_claim();
        // Hand the last stolen item straight to the caller and publish the rest.
        let last = dst_tail.wrapping_add(count - 1);
        // SAFETY: slot `last` was written just above and not yet published, so it is ours alone.
        let ret = unsafe { dst.inner.read(last) };
        if count > 1 {
            dst.inner.tail.store(last, Release);
        }
        Some((ret, count as usize))
    }

    /// Moves `real` forward over half of the queued items, leaving `steal` behind them so that
    /// the owner will not reuse their slots while they are copied. Returns (first, count).
    fn claim_half(&self) -> Option<(u32, u32)> {
        let mut head = self.inner.head.load(Acquire);
        loop {
            let (steal, real) = unpack(head);
            if steal != real {
                // Another stealer is mid-copy; try another victim instead of waiting.
                return None;
            }
            let tail = self.inner.tail.load(Acquire);
            let available = tail.wrapping_sub(real);
            // Take the larger half, so a single queued item can be stolen.
            let count = available - available / 2;
            if count == 0 {
                return None;
            }
            let next = pack(steal, real.wrapping_add(count));
            match self
                .inner
                .head
                .compare_exchange(head, next, AcqRel, Acquire)
            {
                Ok(_) => return Some((real, count)),
                Err(actual) => head = actual,
            }
        }
    }

    /// Ends a steal: lets the owner reuse the copied-out slots.
    fn release_claim(&self) {
        let mut head = self.inner.head.load(Acquire);
        loop {
            let (steal, real) = unpack(head);
            debug_assert_ne!(steal, real, "a claimed steal must be in flight");
            match self
                .inner
                .head
                .compare_exchange(head, pack(real, real), AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }
}
