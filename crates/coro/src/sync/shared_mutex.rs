//! [`SharedMutexFair`]: folly's fair async reader-writer lock with upgradable reads.
//!
//! # How it works
//!
//! One word holds the lock: an exclusive flag, an upgrade flag, a reader count and a `QUEUED`
//! flag. While `QUEUED` is clear nobody waits, so acquiring and releasing are single
//! compare-and-swaps on that word and never touch the queue. `QUEUED` is set (under the queue's
//! mutex) as soon as anyone waits or an upgrade transition is pending; from then on every
//! acquire, and every release that may let a waiter in (all but a reader leaving other readers
//! behind), goes through the mutex, which applies folly's policy to the queue:
//!
//! - one FIFO queue for every mode; a reader arriving while a writer waits (or an upgrade
//!   transition is pending) queues behind it;
//! - a pending upgrade-to-exclusive transition comes first: nothing else is granted until the
//!   other readers have left, then the upgrader is;
//! - otherwise the head writer is granted once the lock is free, or the head run of readers
//!   with at most one upgrader is granted together;
//! - after an exclusive release, readers are granted up to (not past) the next queued writer,
//!   skipping queued upgraders; the same happens when a queued writer gives up, so readers
//!   that were only waiting behind it proceed at once.

use super::holders::{Held, LockTrace, LockWait};
use super::waiters::{
    Acquired, Grantor, Key, WaitFor, WaitList, WaiterState, WakeList, set_queued,
};
use super::wakers::drop_unused;
use coro_loom::sync::Mutex;
use coro_loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

const EXCLUSIVE: usize = 1;
const UPGRADE: usize = 2;
/// Someone waits, or an upgrade transition is pending: take the queue's mutex.
const QUEUED: usize = 4;
const READER: usize = 8;

/// How many times a waiting acquire looks at the word again before it queues, while the lock is
/// held and nobody is queued. A critical section that does not suspend is over in far less
/// time than a queued waiter takes to be woken and polled again, and the first waiter to queue
/// makes every later acquire queue behind it (folly's order) until the queue drains: without
/// the spin, one collision between two workers can turn every later operation into a queue, a
/// wake-up and a task switch. Bounded, because a holder may also be suspended (or its thread
/// descheduled): then the spin costs a few hundred nanoseconds once, and the waiter queues.
#[cfg(not(loom))]
const SPINS: u32 = 32;
/// Under loom each look is a yield to the model: two keep the spin's paths in the model
/// without multiplying its interleavings.
#[cfg(loom)]
const SPINS: u32 = 2;

/// What a waiter asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Shared,
    Upgrade,
    Exclusive,
}

impl Mode {
    fn bits(self) -> usize {
        match self {
            Mode::Shared => READER,
            Mode::Upgrade => UPGRADE,
            Mode::Exclusive => EXCLUSIVE,
        }
    }
}

/// The holder of the upgrade lock waiting to become exclusive (at most one: there is one
/// upgrade lock).
enum Upgrader {
    None,
    Waiting(Waker),
    /// Made exclusive; the `Upgrade` future has not taken it yet.
    Granted,
}

struct Queue {
    waiters: WaitList<Mode>,
    waiting_writers: usize,
    upgrader: Upgrader,
}

/// The lock without the data: the state word and the queue.
pub(crate) struct RawSharedMutex {
    state: AtomicUsize,
    queue: Mutex<Queue>,
    pub(crate) trace: LockTrace,
}

/// The modes held in a state word, without `QUEUED`.
fn held(state: usize) -> usize {
    state & !QUEUED
}

fn add(state: usize, mode: Mode) -> usize {
    state
        .checked_add(mode.bits())
        .expect("too many readers on one coro::sync::SharedMutexFair")
}

impl RawSharedMutex {
    pub(crate) fn new() -> Self {
        RawSharedMutex {
            state: AtomicUsize::new(0),
            queue: Mutex::new(Queue {
                waiters: WaitList::new(),
                waiting_writers: 0,
                upgrader: Upgrader::None,
            }),
            trace: LockTrace::new(coro_executor::trace::LockKind::SharedMutexFair),
        }
    }

    fn lock_queue(&self) -> coro_loom::sync::MutexGuard<'_, Queue> {
        // The queue is only changed by this file's short, non-panicking sections; a poisoned
        // lock can only come from an allocation failure, and the data is still consistent.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether folly's policy lets `mode` be taken now, with the queue in view.
    fn allowed(state: usize, queue: &Queue, mode: Mode) -> bool {
        let held = held(state);
        let nobody_waits_to_write =
            queue.waiting_writers == 0 && matches!(queue.upgrader, Upgrader::None);
        match mode {
            Mode::Exclusive => held == 0,
            Mode::Shared => held == 0 || (held & EXCLUSIVE == 0 && nobody_waits_to_write),
            Mode::Upgrade => {
                held == 0 || (held & (EXCLUSIVE | UPGRADE) == 0 && queue.waiting_writers == 0)
            }
        }
    }

    /// Takes `mode` with compare-and-swaps on the word alone, while nobody is queued; while
    /// the lock is held in a way that excludes `mode`, looks again up to `spins` times.
    ///
    /// Spinning keeps folly's order: it stops as soon as `QUEUED` is set, so a spinner never
    /// overtakes a waiter, and it is bounded, so a writer spinning while readers come and go
    /// queues after `spins` looks, and the readers that come after it queue behind it.
    #[inline]
    fn acquire_lock_free(&self, mode: Mode, mut spins: u32) -> bool {
        // The first compare-and-swap guesses the word (free) instead of loading it: when the
        // word's cache line is on another core, a load and then a compare-and-swap fetch it
        // twice (shared, then owned), and a failed compare-and-swap returns the word anyway.
        let mut state = 0;
        loop {
            let free = match mode {
                Mode::Shared => state & (EXCLUSIVE | QUEUED) == 0,
                Mode::Upgrade => state & (EXCLUSIVE | UPGRADE | QUEUED) == 0,
                Mode::Exclusive => state == 0,
            };
            if free {
                match self
                    .state
                    .compare_exchange_weak(state, add(state, mode), Acquire, Relaxed)
                {
                    Ok(_) => return true,
                    Err(actual) => state = actual,
                }
                continue;
            }
            if state & QUEUED != 0 || spins == 0 {
                return false;
            }
            spins -= 1;
            coro_loom::spin_loop();
            // Loads while spinning: a compare-and-swap would take the line from the holder,
            // which needs it to release.
            state = self.state.load(Relaxed);
        }
    }

    /// Releases `mode`, granting whoever can proceed.
    #[inline]
    pub(crate) fn release(&self, mode: Mode) {
        // Lock-free while nobody waits, and for a reader that leaves other readers behind:
        // every grant needs the lock free, or only the upgrader left in it, so such a release
        // can grant no one (after each dispatch the queue's head is not grantable as things
        // stand, and one reader fewer of several changes nothing a rule looks at). The first
        // compare-and-swap guesses the word (this holder alone, nobody queued) instead of
        // loading it: see `acquire_lock_free`.
        let mut state = mode.bits();
        while state & QUEUED == 0 || (mode == Mode::Shared && state >> READER.trailing_zeros() > 1)
        {
            match self
                .state
                .compare_exchange_weak(state, state - mode.bits(), Release, Relaxed)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        self.release_queued(mode);
    }

    /// [`release`](Self::release) with somebody queued: under the queue's lock.
    #[cold]
    fn release_queued(&self, mode: Mode) {
        let mut wakes = WakeList::default();
        {
            let mut queue = self.lock_queue();
            self.release_locked(&mut queue, mode, &mut wakes);
        }
        wakes.wake_all();
    }

    fn release_locked(&self, queue: &mut Queue, mode: Mode, wakes: &mut WakeList) {
        let mut state = self.state.load(Acquire);
        // `QUEUED` may have been cleared since the caller looked: then nobody waits.
        while state & QUEUED == 0 {
            match self
                .state
                .compare_exchange_weak(state, state - mode.bits(), AcqRel, Acquire)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        // `QUEUED` is set and the queue is locked: see `publish` for who else may change it.
        let base = state;
        state -= mode.bits();
        Self::dispatch(&mut state, queue, mode == Mode::Exclusive, wakes);
        self.publish(base, state, queue, wakes);
    }

    /// Replaces `base`, read under the queue's lock with `QUEUED` set, by `state` computed from
    /// it, with `QUEUED` telling whether anybody still waits. While `QUEUED` is set, the only
    /// change anyone else can make to the word is a reader leaving other readers behind (the
    /// lock-free release in `release`): those are carried over, not overwritten, and the
    /// policy is applied again, since two readers that each saw the other (one lock-free, one
    /// here) may together have left the lock to a queued writer or upgrader. A loom model
    /// found that hang.
    fn publish(&self, mut base: usize, mut state: usize, queue: &mut Queue, wakes: &mut WakeList) {
        loop {
            let waiting = !queue.waiters.is_empty() || !matches!(queue.upgrader, Upgrader::None);
            let new = if waiting {
                state | QUEUED
            } else {
                state & !QUEUED
            };
            match self.state.compare_exchange_weak(base, new, AcqRel, Acquire) {
                Ok(_) => return,
                Err(actual) => {
                    debug_assert!(
                        actual <= base && (base - actual) % READER == 0,
                        "only lock-free reader releases may race a locked update"
                    );
                    state -= base - actual;
                    base = actual;
                    Self::dispatch(&mut state, queue, false, wakes);
                }
            }
        }
    }

    /// Grants what the policy allows in `state`; see the module doc. `long_scan`: grant readers
    /// up to the next queued writer, skipping upgraders that cannot be granted.
    fn dispatch(state: &mut usize, queue: &mut Queue, long_scan: bool, wakes: &mut WakeList) {
        match std::mem::replace(&mut queue.upgrader, Upgrader::None) {
            Upgrader::Waiting(waker) if held(*state) == UPGRADE => {
                *state = (*state & QUEUED) | EXCLUSIVE;
                queue.upgrader = Upgrader::Granted;
                wakes.push(waker);
                return;
            }
            Upgrader::None => {}
            other => {
                // Still draining readers, or already granted: nothing else moves meanwhile.
                queue.upgrader = other;
                return;
            }
        }
        let Some(head) = queue.waiters.front() else {
            return;
        };
        if held(*state) & EXCLUSIVE != 0 {
            return;
        }
        if queue.waiters.mode(head) == Mode::Exclusive {
            if held(*state) == 0 {
                queue.waiters.grant(head, wakes);
                queue.waiting_writers -= 1;
                *state |= EXCLUSIVE;
            }
            return;
        }
        let mut at = Some(head);
        while let Some(key) = at {
            let next = queue.waiters.next(key);
            match queue.waiters.mode(key) {
                Mode::Shared => {
                    queue.waiters.grant(key, wakes);
                    *state = add(*state, Mode::Shared);
                }
                Mode::Upgrade if *state & UPGRADE == 0 => {
                    queue.waiters.grant(key, wakes);
                    *state |= UPGRADE;
                }
                Mode::Upgrade if long_scan => {}
                _ => break,
            }
            at = next;
        }
    }

    /// Upgrade without waiting: succeeds when the caller's upgrade lock is the only lock held
    /// (folly lets a transition skip the queue).
    pub(crate) fn try_upgrade(&self) -> bool {
        if self
            .state
            .compare_exchange(UPGRADE, EXCLUSIVE, Acquire, Relaxed)
            .is_ok()
        {
            return true;
        }
        let _queue = self.lock_queue();
        self.upgrade_if_alone()
    }

    /// Under the queue's lock: the upgrade-to-exclusive transition, if no reader is left.
    fn upgrade_if_alone(&self) -> bool {
        let mut state = self.state.load(Acquire);
        while held(state) == UPGRADE {
            match self.state.compare_exchange_weak(
                state,
                (state & QUEUED) | EXCLUSIVE,
                AcqRel,
                Acquire,
            ) {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
        false
    }

    /// Polls an upgrade transition; `registered` says whether this upgrader waits already.
    fn poll_upgrade(&self, registered: &mut bool, cx: &mut Context<'_>) -> Poll<()> {
        if !*registered
            && self
                .state
                .compare_exchange(UPGRADE, EXCLUSIVE, Acquire, Relaxed)
                .is_ok()
        {
            return Poll::Ready(());
        }
        let mut queue = self.lock_queue();
        if *registered {
            return match &mut queue.upgrader {
                Upgrader::Granted => {
                    queue.upgrader = Upgrader::None;
                    *registered = false;
                    let state = self.state.load(Acquire);
                    // Held exclusively: no reader can race this, so nobody is granted here.
                    let mut wakes = WakeList::default();
                    self.publish(state, state, &mut queue, &mut wakes);
                    debug_assert!(wakes.is_empty());
                    Poll::Ready(())
                }
                Upgrader::Waiting(waker) => {
                    if !waker.will_wake(cx.waker()) {
                        *waker = cx.waker().clone();
                    }
                    Poll::Pending
                }
                Upgrader::None => unreachable!("a registered upgrader was lost"),
            };
        }
        let mut state = self.state.load(Acquire);
        loop {
            let (next, upgraded) = if held(state) == UPGRADE {
                ((state & QUEUED) | EXCLUSIVE, true)
            } else {
                // Other readers hold the lock: wait for them, ahead of every queued waiter.
                // Setting `QUEUED` in the same step as seeing them makes the last of them
                // take the slow path and grant us.
                (state | QUEUED, false)
            };
            match self
                .state
                .compare_exchange_weak(state, next, AcqRel, Acquire)
            {
                Ok(_) if upgraded => return Poll::Ready(()),
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        queue.upgrader = Upgrader::Waiting(cx.waker().clone());
        *registered = true;
        Poll::Pending
    }

    /// An `Upgrade` future dropped while registered: give up the transition, and with it the
    /// upgrade lock (or the exclusive lock it was just granted).
    fn abandon_upgrade(&self) {
        let mut wakes = WakeList::default();
        {
            let mut queue = self.lock_queue();
            let mode = match std::mem::replace(&mut queue.upgrader, Upgrader::None) {
                Upgrader::Granted => Mode::Exclusive,
                _ => Mode::Upgrade,
            };
            self.release_locked(&mut queue, mode, &mut wakes);
        }
        wakes.wake_all();
    }
}

impl Grantor for RawSharedMutex {
    type Mode = Mode;

    fn trace(&self) -> &LockTrace {
        &self.trace
    }

    #[inline]
    fn try_acquire_fast(&self, mode: Mode) -> bool {
        self.acquire_lock_free(mode, 0)
    }

    fn try_acquire_first(&self, mode: Mode) -> bool {
        self.acquire_lock_free(mode, SPINS)
    }

    fn acquire_or_enqueue(&self, mode: Mode, waker: Option<&Waker>) -> Acquired {
        let mut queue = self.lock_queue();
        let mut state = self.state.load(Acquire);
        // The waiter's waker, cloned before `QUEUED` is set: `clone` is user code, and a panic
        // in it with the flag up (and a writer counted) and nobody queued would keep readers
        // waiting behind a writer that never came.
        let mut clone = None;
        loop {
            // Without `QUEUED`, lock-free acquirers and releasers may change the word under
            // us: every step is a compare-and-swap.
            if Self::allowed(state, &queue, mode) {
                match self
                    .state
                    .compare_exchange_weak(state, add(state, mode), AcqRel, Acquire)
                {
                    Ok(_) => {
                        drop_unused(clone);
                        return Acquired::Now;
                    }
                    Err(actual) => state = actual,
                }
                continue;
            }
            let Some(waker) = waker else {
                return Acquired::No;
            };
            if clone.is_none() {
                clone = Some(waker.clone());
            }
            if !set_queued(&self.state, &mut state, QUEUED) {
                continue;
            }
            if mode == Mode::Exclusive {
                queue.waiting_writers += 1;
            }
            let waker = clone.take().expect("cloned above");
            return Acquired::Queued(queue.waiters.push_back(mode, waker));
        }
    }

    fn take_grant(&self, key: Key, waker: &Waker) -> bool {
        let mut queue = self.lock_queue();
        match queue.waiters.state(key) {
            WaiterState::Granted => {
                queue.waiters.remove(key);
                true
            }
            WaiterState::Queued => {
                queue.waiters.set_waker(key, waker);
                false
            }
        }
    }

    fn abandon(&self, key: Key, mode: Mode) {
        let mut wakes = WakeList::default();
        {
            let mut queue = self.lock_queue();
            match queue.waiters.remove(key) {
                WaiterState::Granted => self.release_locked(&mut queue, mode, &mut wakes),
                WaiterState::Queued => {
                    if mode == Mode::Exclusive {
                        queue.waiting_writers -= 1;
                    }
                    // It was queued, so `QUEUED` is set (see `publish`).
                    let base = self.state.load(Acquire);
                    let mut state = base;
                    // Readers that waited only because of this writer may go now.
                    Self::dispatch(&mut state, &mut queue, mode == Mode::Exclusive, &mut wakes);
                    self.publish(base, state, &mut queue, &mut wakes);
                }
            }
        }
        wakes.wake_all();
    }
}

/// A fair (FIFO) async reader-writer lock with upgradable reads: folly's `SharedMutexFair`.
///
/// All waiters share one FIFO queue, so neither readers nor writers starve: a reader that
/// arrives while a writer waits queues behind it; when a writer releases, the readers queued
/// up to the next writer are granted together; an upgradable reader (one at a time, alongside
/// plain readers) can turn into a writer, and that transition goes ahead of every queued
/// waiter once the other readers leave. Waiters resume through their own wakers (so on their
/// own executors); a releasing task never runs one inline. Uncontended, a lock and an unlock
/// are one atomic compare-and-swap each.
///
/// Every wait is cancel-safe: dropping a waiting future takes it out of the queue (readers
/// queued only behind a dropped writer proceed at once), and one dropped just after it was
/// granted passes the lock on, so [`cancellable`](crate::cancel::cancellable) works on it.
///
/// ```
/// use coro::sync::SharedMutexFair;
///
/// let cache = SharedMutexFair::new(Vec::new());
/// coro::block_wait(async {
///     cache.write().await.push("profile");
///     let reader = cache.read().await;
///     let other = cache.read().await; // readers share the lock
///     assert_eq!(*reader, *other);
///     drop((reader, other));
///     let maybe = cache.upgradable_read().await;
///     if maybe.is_empty() {
///         maybe.upgrade().await.push("feed");
///     }
/// });
/// assert_eq!(cache.into_inner(), ["profile"]);
/// ```
pub struct SharedMutexFair<T: ?Sized> {
    raw: RawSharedMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands out `&T` to several threads at once (readers) and `&mut T` to one
// (a writer), so sharing it needs `T: Send + Sync`, as for `std::sync::RwLock`. Sending it
// sends the `T`.
unsafe impl<T: ?Sized + Send + Sync> Sync for SharedMutexFair<T> {}
// SAFETY: the lock owns its `T`, so sending the lock sends the `T` (`T: Send`); the raw lock
// is plain atomics and a mutex, which any thread may own.
unsafe impl<T: ?Sized + Send> Send for SharedMutexFair<T> {}

impl<T> SharedMutexFair<T> {
    /// A new, unlocked lock holding `value`.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(5);
    /// assert_eq!(*lock.try_read().unwrap(), 5);
    /// ```
    pub fn new(value: T) -> Self {
        SharedMutexFair {
            raw: RawSharedMutex::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock, returning the data.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(String::from("x"));
    /// assert_eq!(lock.into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> SharedMutexFair<T> {
    /// Waits for shared (read) access. Queues behind any waiting writer.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let value = coro::block_wait(async { *lock.read().await });
    /// assert_eq!(value, 1);
    /// ```
    pub fn read(&self) -> Read<'_, T> {
        Read {
            wait: WaitFor::new(&self.raw, Mode::Shared),
            lock: self,
        }
    }

    /// Waits for exclusive (write) access.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// coro::block_wait(async { *lock.write().await += 1 });
    /// assert_eq!(lock.into_inner(), 2);
    /// ```
    pub fn write(&self) -> Write<'_, T> {
        Write {
            wait: WaitFor::new(&self.raw, Mode::Exclusive),
            lock: self,
        }
    }

    /// Waits for upgradable read access: shared with plain readers, exclusive among
    /// upgradable readers, and able to [`upgrade`](UpgradableReadGuard::upgrade) to write access
    /// without letting another writer in between.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// coro::block_wait(async {
    ///     let guard = lock.upgradable_read().await;
    ///     assert!(lock.try_read().is_some()); // plain readers still get in
    ///     assert!(lock.try_upgradable_read().is_none()); // a second upgrader does not
    ///     *guard.upgrade().await = 2;
    /// });
    /// assert_eq!(lock.into_inner(), 2);
    /// ```
    pub fn upgradable_read(&self) -> UpgradableRead<'_, T> {
        UpgradableRead {
            wait: WaitFor::new(&self.raw, Mode::Upgrade),
            lock: self,
        }
    }

    /// Read access if it can be had now: the lock is free, or only read-locked with no writer
    /// waiting and no upgrade pending.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let writer = lock.try_write().unwrap();
    /// assert!(lock.try_read().is_none());
    /// drop(writer);
    /// assert!(lock.try_read().is_some());
    /// ```
    pub fn try_read(&self) -> Option<ReadGuard<'_, T>> {
        // Build the guard only once the lock is held: a guard dropped on failure would
        // release a lock somebody else holds.
        if self.try_acquire(Mode::Shared) {
            Some(ReadGuard {
                lock: self,
                held: self.raw.trace.hold(),
            })
        } else {
            None
        }
    }

    /// Write access if the lock is free now.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let reader = lock.try_read().unwrap();
    /// assert!(lock.try_write().is_none());
    /// drop(reader);
    /// assert!(lock.try_write().is_some());
    /// ```
    pub fn try_write(&self) -> Option<WriteGuard<'_, T>> {
        // Build the guard only once the lock is held: a guard dropped on failure would
        // release a lock somebody else holds.
        if self.try_acquire(Mode::Exclusive) {
            Some(WriteGuard {
                lock: self,
                held: self.raw.trace.hold(),
            })
        } else {
            None
        }
    }

    /// Upgradable read access if it can be had now: the lock is free, or only read-locked with
    /// no other upgradable reader and no writer waiting.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let first = lock.try_upgradable_read().unwrap();
    /// assert!(lock.try_upgradable_read().is_none());
    /// drop(first);
    /// assert!(lock.try_upgradable_read().is_some());
    /// ```
    pub fn try_upgradable_read(&self) -> Option<UpgradableReadGuard<'_, T>> {
        // Build the guard only once the lock is held: a guard dropped on failure would
        // release a lock somebody else holds.
        if self.try_acquire(Mode::Upgrade) {
            Some(UpgradableReadGuard {
                lock: self,
                held: self.raw.trace.hold(),
            })
        } else {
            None
        }
    }

    fn try_acquire(&self, mode: Mode) -> bool {
        self.raw.try_acquire_fast(mode)
            || matches!(self.raw.acquire_or_enqueue(mode, None), Acquired::Now)
    }

    /// The data, through exclusive access to the lock itself (no locking needed).
    ///
    /// ```
    /// let mut lock = coro::sync::SharedMutexFair::new(1);
    /// *lock.get_mut() = 3;
    /// assert_eq!(*lock.try_read().unwrap(), 3);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: Default> Default for SharedMutexFair<T> {
    fn default() -> Self {
        SharedMutexFair::new(T::default())
    }
}

impl<T> From<T> for SharedMutexFair<T> {
    fn from(value: T) -> Self {
        SharedMutexFair::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for SharedMutexFair<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("SharedMutexFair");
        match self.try_read() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

macro_rules! lock_future {
    ($(#[$doc:meta])* $name:ident => $guard:ident) => {
        $(#[$doc])*
        #[must_use = "futures do nothing unless awaited"]
        pub struct $name<'a, T: ?Sized> {
            wait: WaitFor<'a, RawSharedMutex>,
            lock: &'a SharedMutexFair<T>,
        }

        impl<'a, T: ?Sized> Future for $name<'a, T> {
            type Output = $guard<'a, T>;

            fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<$guard<'a, T>> {
                let lock = self.lock;
                self.wait.poll_acquire(cx).map(|()| $guard {
                    lock,
                    held: lock.raw.trace.hold(),
                })
            }
        }

        impl<T: ?Sized> fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

lock_future! {
    /// The future of [`SharedMutexFair::read`]. Dropping it while it waits leaves the queue.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let read: coro::sync::Read<'_, i32> = lock.read();
    /// assert_eq!(*coro::block_wait(read), 1);
    /// ```
    Read => ReadGuard
}
lock_future! {
    /// The future of [`SharedMutexFair::write`]. Dropping it while it waits leaves the queue,
    /// and readers queued only behind it proceed.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let write: coro::sync::Write<'_, i32> = lock.write();
    /// *coro::block_wait(write) = 2;
    /// assert_eq!(lock.into_inner(), 2);
    /// ```
    Write => WriteGuard
}
lock_future! {
    /// The future of [`SharedMutexFair::upgradable_read`]. Dropping it while it waits leaves
    /// the queue.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(1);
    /// let upgradable: coro::sync::UpgradableRead<'_, i32> = lock.upgradable_read();
    /// assert_eq!(*coro::block_wait(upgradable), 1);
    /// ```
    UpgradableRead => UpgradableReadGuard
}

/// Shared access to a [`SharedMutexFair`]'s data; released on drop.
///
/// ```
/// let lock = coro::sync::SharedMutexFair::new(vec![1, 2]);
/// let guard = lock.try_read().unwrap();
/// assert_eq!(guard.len(), 2);
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct ReadGuard<'a, T: ?Sized> {
    lock: &'a SharedMutexFair<T>,
    held: Held,
}

/// Exclusive access to a [`SharedMutexFair`]'s data; released on drop.
///
/// ```
/// let lock = coro::sync::SharedMutexFair::new(vec![1]);
/// lock.try_write().unwrap().push(2);
/// assert_eq!(lock.into_inner(), [1, 2]);
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct WriteGuard<'a, T: ?Sized> {
    lock: &'a SharedMutexFair<T>,
    held: Held,
}

/// Upgradable shared access to a [`SharedMutexFair`]'s data; released on drop, or turned into
/// a [`WriteGuard`] by [`upgrade`](Self::upgrade).
///
/// ```
/// let lock = coro::sync::SharedMutexFair::new(0);
/// let guard = lock.try_upgradable_read().unwrap();
/// let mut writer = guard.try_upgrade().ok().unwrap(); // nobody else reads
/// *writer = 1;
/// drop(writer);
/// assert_eq!(lock.into_inner(), 1);
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct UpgradableReadGuard<'a, T: ?Sized> {
    lock: &'a SharedMutexFair<T>,
    held: Held,
}

impl<'a, T: ?Sized> UpgradableReadGuard<'a, T> {
    /// Waits until the other readers have left, then turns this into write access. The
    /// transition goes ahead of every queued waiter, and no writer gets in between. Dropping
    /// the future gives up the transition and releases the lock.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(0);
    /// coro::block_wait(async {
    ///     let guard = lock.upgradable_read().await;
    ///     *guard.upgrade().await += 1;
    /// });
    /// assert_eq!(lock.into_inner(), 1);
    /// ```
    pub fn upgrade(mut self) -> Upgrade<'a, T> {
        let lock = self.lock;
        let held = self.held.take();
        std::mem::forget(self);
        Upgrade {
            lock,
            registered: false,
            done: false,
            held,
            traced: None,
        }
    }

    /// Write access now, if no other reader holds the lock; otherwise the guard back.
    ///
    /// ```
    /// let lock = coro::sync::SharedMutexFair::new(0);
    /// let guard = lock.try_upgradable_read().unwrap();
    /// let reader = lock.try_read().unwrap();
    /// let guard = guard.try_upgrade().err().unwrap(); // a reader is still in
    /// drop(reader);
    /// assert!(guard.try_upgrade().is_ok());
    /// ```
    pub fn try_upgrade(mut self) -> Result<WriteGuard<'a, T>, Self> {
        if self.lock.raw.try_upgrade() {
            let lock = self.lock;
            let held = self.held.take();
            std::mem::forget(self);
            Ok(WriteGuard { lock, held })
        } else {
            Err(self)
        }
    }
}

/// The future of [`UpgradableReadGuard::upgrade`]. Dropping it while it waits gives up the
/// transition and releases the upgradable lock.
///
/// ```
/// let lock = coro::sync::SharedMutexFair::new(1);
/// let guard = lock.try_upgradable_read().unwrap();
/// let upgrade: coro::sync::Upgrade<'_, i32> = guard.upgrade();
/// *coro::block_wait(upgrade) += 1;
/// assert_eq!(lock.into_inner(), 2);
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Upgrade<'a, T: ?Sized> {
    lock: &'a SharedMutexFair<T>,
    registered: bool,
    done: bool,
    /// The upgradable guard's holder record, handed on to the write guard.
    held: Held,
    /// While waiting: the task's registration, for task snapshots.
    traced: Option<LockWait>,
}

impl<'a, T: ?Sized> Future for Upgrade<'a, T> {
    type Output = WriteGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WriteGuard<'a, T>> {
        assert!(
            !self.done,
            "a coro::sync::Upgrade future was polled again after it completed"
        );
        let this = &mut *self;
        let lock = this.lock;
        let poll = lock.raw.poll_upgrade(&mut this.registered, cx);
        if poll.is_pending() && this.traced.is_none() {
            this.traced = Some(lock.raw.trace.wait());
        }
        poll.map(|()| {
            this.done = true;
            this.traced = None;
            WriteGuard {
                lock,
                held: this.held.take(),
            }
        })
    }
}

impl<T: ?Sized> Drop for Upgrade<'_, T> {
    fn drop(&mut self) {
        self.lock.raw.trace.release(self.held.take());
        if self.registered {
            self.lock.raw.abandon_upgrade();
        } else if !self.done {
            // Never polled, or never waited: the upgrade lock is still ours to release.
            self.lock.raw.release(Mode::Upgrade);
        }
    }
}

impl<T: ?Sized> fmt::Debug for Upgrade<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upgrade")
            .field("waiting", &self.registered)
            .finish()
    }
}

macro_rules! guard_impls {
    ($guard:ident, $mode:expr) => {
        impl<T: ?Sized> Deref for $guard<'_, T> {
            type Target = T;

            fn deref(&self) -> &T {
                // SAFETY: this guard holds a read, upgrade or write lock, so no writer has
                // `&mut T` while it lives.
                unsafe { &*self.lock.data.get() }
            }
        }

        impl<T: ?Sized> Drop for $guard<'_, T> {
            fn drop(&mut self) {
                self.lock.raw.trace.release(self.held.take());
                self.lock.raw.release($mode);
            }
        }

        impl<T: ?Sized + fmt::Debug> fmt::Debug for $guard<'_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&**self, f)
            }
        }
    };
}

guard_impls!(ReadGuard, Mode::Shared);
guard_impls!(UpgradableReadGuard, Mode::Upgrade);
guard_impls!(WriteGuard, Mode::Exclusive);

impl<T: ?Sized> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the exclusive lock: no other guard exists.
        unsafe { &mut *self.lock.data.get() }
    }
}
