//! [`SharedPromise`] and [`SharedFuture`]: one value, any number of waiters.
//!
//! The promise keeps its state behind a short mutex: empty, fulfilled with the value inline
//! (no future was ever handed out, so nothing was allocated), or shared with the futures
//! through an `Arc`. The shared part is written once (the value, then a `SET` flag with release
//! ordering) and read lock-free by the futures.
//!
//! Waiting futures keep their wakers in a [`WakerSlab`] (see there for the protocol): woken
//! futures read the value without locking, and a future dropped after fulfilment does not lock
//! at all. (This replaced event-listener here: besides waking under its lock, a listener
//! allocation per waiter and its removal under that lock made a 10,000-waiter fan-out about 1.2x
//! slower than tokio's `watch`.)

use super::wakers::WakerSlab;
use super::{BrokenPromise, PromiseAlreadySatisfied};
use coro_loom::UnsafeCell;
use coro_loom::sync::atomic::{AtomicPtr, AtomicU8, Ordering::*};
use coro_loom::sync::{Arc, Mutex, MutexGuard};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::ptr;
use std::task::{Context, Poll};

const EMPTY: u8 = 0;
const SET: u8 = 1;
const BROKEN: u8 = 2;

/// What the promise and its futures share once a future was handed out.
struct Inner<T> {
    state: AtomicU8,
    /// Written once, under the promise's mutex, before `state` becomes `SET`.
    value: UnsafeCell<Option<T>>,
    waiters: Mutex<WakerSlab>,
}

// SAFETY: `value` is written once, by the promise holding its mutex, before `state` is stored
// `SET` with release ordering; after that it is only read (`&T`, cloned) by futures on any
// thread that loaded `SET` with acquire ordering. Sharing it so needs `T: Send + Sync`.
unsafe impl<T: Send + Sync> Sync for Inner<T> {}
// SAFETY: the value moves with the last owner of the `Arc`, so it needs `T: Send`.
unsafe impl<T: Send> Send for Inner<T> {}

impl<T> Inner<T> {
    fn lock_waiters(&self) -> MutexGuard<'_, WakerSlab> {
        // Only wakers live here, changed by short sections that cannot leave them half-done.
        self.waiters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores the final `state` (`SET` or `BROKEN`), then wakes every registered future.
    fn complete(&self, state: u8) {
        self.state.store(state, Release);
        self.wake_all();
    }

    /// Wakes every registered future; the final state must be stored already.
    fn wake_all(&self) {
        // Taken after the store: a future registering later sees the state under the lock.
        let waiters = self.lock_waiters().take();
        waiters.wake_all();
    }

    /// The value, once `SET` was seen.
    fn value(&self) -> &T {
        // SAFETY: only called after an acquire load saw `SET`: the single write happened
        // before, and nothing writes again.
        self.value
            .with(|value| unsafe { (*value).as_ref() })
            .expect("SET without a value")
    }
}

enum Slot<T> {
    Empty,
    /// Fulfilled before any future was asked for: the value lives here, unallocated.
    Fulfilled(T),
    Shared(Arc<Inner<T>>),
}

/// A promise many futures can wait on (folly's `coro::SharedPromise`).
///
/// [`get_future`](Self::get_future) hands out any number of [`SharedFuture`]s, before or after
/// [`set_value`](Self::set_value); each resolves to a clone of the value. Waiters resume
/// through their own wakers, so each continues on its own executor; fulfilling wakes them all
/// and runs none inline. Dropped unfulfilled, the promise resolves every future to
/// `Err(`[`BrokenPromise`]`)`. A promise fulfilled before it handed out a future allocates
/// nothing.
///
/// ```
/// use coro::sync::SharedPromise;
///
/// let promise = SharedPromise::new();
/// let early = promise.get_future();
/// let waiters: Vec<_> = (0..3).map(|_| coro::spawn(promise.get_future())).collect();
/// assert_eq!(promise.pending(), 4);
/// promise.set_value("config".to_string()).unwrap();
/// for waiter in waiters {
///     assert_eq!(coro::block_wait(waiter).unwrap().unwrap(), "config");
/// }
/// assert_eq!(coro::block_wait(early).unwrap(), "config");
/// assert!(promise.set_value("again".to_string()).is_err());
/// ```
pub struct SharedPromise<T> {
    slot: Mutex<Slot<T>>,
    /// The shared state once a future was handed out, for `get_future` to clone without the
    /// lock. Set once; the slot keeps the reference it points through until the promise drops.
    shared: AtomicPtr<Inner<T>>,
}

impl<T: Clone + Send + Sync> SharedPromise<T> {
    /// An unfulfilled promise.
    ///
    /// ```
    /// let promise = coro::sync::SharedPromise::<u32>::new();
    /// assert!(!promise.is_fulfilled());
    /// ```
    pub fn new() -> Self {
        SharedPromise {
            slot: Mutex::new(Slot::Empty),
            shared: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// A future of the value: ready at once if the promise is fulfilled.
    ///
    /// ```
    /// let promise = coro::sync::SharedPromise::new();
    /// promise.set_value(3).unwrap();
    /// assert_eq!(coro::block_wait(promise.get_future()), Ok(3));
    /// ```
    pub fn get_future(&self) -> SharedFuture<T> {
        // Every future but the first: no lock (a fan-out hands out thousands in a row).
        let shared = self.shared.load(Acquire);
        if !shared.is_null() {
            // SAFETY: `shared` came from `Arc::as_ptr` of the `Arc` in the slot, which keeps it
            // alive until the promise is dropped, and we borrow the promise: taking one more
            // reference and owning it is sound.
            let inner = unsafe {
                Arc::increment_strong_count(shared);
                Arc::from_raw(shared)
            };
            return SharedFuture {
                repr: Repr::waiting(inner),
            };
        }
        let mut slot = self.lock_slot();
        let repr = match &*slot {
            Slot::Fulfilled(value) => Repr::Ready(Some(value.clone())),
            Slot::Shared(inner) => Repr::waiting(inner.clone()),
            Slot::Empty => {
                let inner = Arc::new(Inner {
                    state: AtomicU8::new(EMPTY),
                    value: UnsafeCell::new(None),
                    waiters: Mutex::new(WakerSlab::default()),
                });
                *slot = Slot::Shared(inner.clone());
                // Release: a lock-free `get_future` that sees it sees the state initialised.
                self.shared.store(Arc::as_ptr(&inner).cast_mut(), Release);
                Repr::waiting(inner)
            }
        };
        SharedFuture { repr }
    }

    /// Fulfils the promise and wakes every waiting future.
    ///
    /// # Errors
    ///
    /// [`PromiseAlreadySatisfied`] if it was fulfilled before; the first value stays.
    ///
    /// ```
    /// let promise = coro::sync::SharedPromise::new();
    /// assert!(promise.set_value(1).is_ok());
    /// assert_eq!(promise.set_value(2), Err(coro::sync::PromiseAlreadySatisfied));
    /// assert_eq!(coro::block_wait(promise.get_future()), Ok(1));
    /// ```
    pub fn set_value(&self, value: T) -> Result<(), PromiseAlreadySatisfied> {
        let inner = {
            let mut slot = self.lock_slot();
            match &*slot {
                Slot::Fulfilled(_) => return Err(PromiseAlreadySatisfied),
                Slot::Empty => {
                    *slot = Slot::Fulfilled(value);
                    return Ok(());
                }
                Slot::Shared(inner) => {
                    if inner.state.load(Acquire) != EMPTY {
                        return Err(PromiseAlreadySatisfied);
                    }
                    // SAFETY: the promise's mutex is held and `state` is still `EMPTY`: no
                    // future reads `value` yet, and no other `set_value` can be here.
                    inner.value.with_mut(|slot| unsafe { *slot = Some(value) });
                    // Published under the promise's lock, so that `pending` never counts the
                    // reference this takes for the wake-up as a waiting future.
                    inner.state.store(SET, Release);
                    inner.clone()
                }
            }
        };
        // Outside the promise's lock: wake everyone.
        inner.wake_all();
        Ok(())
    }

    /// Whether [`set_value`](Self::set_value) succeeded.
    ///
    /// ```
    /// let promise = coro::sync::SharedPromise::new();
    /// promise.set_value(()).unwrap();
    /// assert!(promise.is_fulfilled());
    /// ```
    pub fn is_fulfilled(&self) -> bool {
        match &*self.lock_slot() {
            Slot::Empty => false,
            Slot::Fulfilled(_) => true,
            Slot::Shared(inner) => inner.state.load(Acquire) == SET,
        }
    }

    /// How many futures handed out before fulfilment are still alive (waiting); 0 once
    /// fulfilled.
    ///
    /// ```
    /// let promise = coro::sync::SharedPromise::<u8>::new();
    /// let a = promise.get_future();
    /// let b = a.clone();
    /// assert_eq!(promise.pending(), 2);
    /// drop(a);
    /// assert_eq!(promise.pending(), 1);
    /// promise.set_value(1).unwrap();
    /// assert_eq!(promise.pending(), 0);
    /// assert_eq!(coro::block_wait(b), Ok(1));
    /// ```
    pub fn pending(&self) -> usize {
        match &*self.lock_slot() {
            // Every waiting future holds one reference, and the slot the other: a count of its
            // own cost every future two more read-modify-writes on that cache line.
            Slot::Shared(inner) if inner.state.load(Acquire) == EMPTY => {
                Arc::strong_count(inner) - 1
            }
            _ => 0,
        }
    }
}

impl<T> SharedPromise<T> {
    fn lock_slot(&self) -> coro_loom::sync::MutexGuard<'_, Slot<T>> {
        // The slot is only changed by short sections that cannot leave it half-written; a
        // panicking `T::clone` poisons nothing that matters.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Clone + Send + Sync> Default for SharedPromise<T> {
    fn default() -> Self {
        SharedPromise::new()
    }
}

impl<T> Drop for SharedPromise<T> {
    fn drop(&mut self) {
        let slot = std::mem::replace(&mut *self.lock_slot(), Slot::Empty);
        if let Slot::Shared(inner) = slot {
            if inner.state.load(Acquire) == EMPTY {
                inner.complete(BROKEN);
            }
        }
    }
}

impl<T> fmt::Debug for SharedPromise<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fulfilled = match &*self.lock_slot() {
            Slot::Empty => false,
            Slot::Fulfilled(_) => true,
            Slot::Shared(inner) => inner.state.load(Acquire) == SET,
        };
        f.debug_struct("SharedPromise")
            .field("fulfilled", &fulfilled)
            .finish()
    }
}

enum Repr<T> {
    /// From a promise fulfilled before any future was asked for.
    Ready(Option<T>),
    Waiting {
        inner: Arc<Inner<T>>,
        /// This future's slot in `inner.waiters`, once it registered.
        slot: Option<usize>,
    },
}

impl<T> Repr<T> {
    fn waiting(inner: Arc<Inner<T>>) -> Self {
        Repr::Waiting { inner, slot: None }
    }
}

/// A future of a [`SharedPromise`]'s value; clone it to wait from several places.
///
/// Resolves to a clone of the value, or `Err(`[`BrokenPromise`]`)` if the promise was dropped
/// unfulfilled. Dropping it while it waits simply stops waiting.
///
/// ```
/// let promise = coro::sync::SharedPromise::<u32>::new();
/// let future = promise.get_future();
/// let copy = future.clone();
/// drop(promise);
/// assert_eq!(coro::block_wait(copy), Err(coro::sync::BrokenPromise));
/// assert_eq!(coro::block_wait(future), Err(coro::sync::BrokenPromise));
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct SharedFuture<T> {
    repr: Repr<T>,
}

impl<T: Clone + Send + Sync> Future for SharedFuture<T> {
    type Output = Result<T, BrokenPromise>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (inner, slot) = match &mut self.repr {
            Repr::Ready(value) => {
                let value = value
                    .take()
                    .expect("a SharedFuture was polled again after it completed");
                return Poll::Ready(Ok(value));
            }
            Repr::Waiting { inner, slot } => (inner, slot),
        };
        if let Some(done) = Self::outcome(inner) {
            return Poll::Ready(done);
        }
        let mut waiters = inner.lock_waiters();
        // Again under the lock: fulfilment stores the state before it takes the wakers.
        if let Some(done) = Self::outcome(inner) {
            return Poll::Ready(done);
        }
        waiters.register(slot, cx.waker());
        // Until the task's next poll it waits on this promise, named by the address of its
        // shared state (unique while it lives).
        let id = ptr::from_ref::<Inner<T>>(inner) as usize as u64;
        coro_executor::trace::wait_until_polled(coro_executor::trace::WaitOn::Promise(id));
        Poll::Pending
    }
}

impl<T: Clone> SharedFuture<T> {
    /// The outcome, if the promise was fulfilled or broken.
    fn outcome(inner: &Inner<T>) -> Option<Result<T, BrokenPromise>> {
        match inner.state.load(Acquire) {
            SET => Some(Ok(inner.value().clone())),
            BROKEN => Some(Err(BrokenPromise)),
            _ => None,
        }
    }
}

// A `SharedFuture` never pins its value: it clones it out.
impl<T> Unpin for SharedFuture<T> {}

impl<T: Clone> Clone for SharedFuture<T> {
    fn clone(&self) -> Self {
        let repr = match &self.repr {
            Repr::Ready(value) => Repr::Ready(value.clone()),
            Repr::Waiting { inner, .. } => Repr::waiting(inner.clone()),
        };
        SharedFuture { repr }
    }
}

impl<T> Drop for SharedFuture<T> {
    fn drop(&mut self) {
        if let Repr::Waiting {
            inner,
            slot: Some(index),
        } = &self.repr
        {
            if inner.state.load(Acquire) == EMPTY {
                let mut waiters = inner.lock_waiters();
                // Unless fulfilment took the slab meanwhile (then there is nothing to free).
                if inner.state.load(Acquire) == EMPTY {
                    waiters.remove(*index);
                }
            }
        }
    }
}

impl<T> fmt::Debug for SharedFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ready = match &self.repr {
            Repr::Ready(_) => true,
            Repr::Waiting { inner, .. } => inner.state.load(Acquire) != EMPTY,
        };
        f.debug_struct("SharedFuture")
            .field("ready", &ready)
            .finish()
    }
}
