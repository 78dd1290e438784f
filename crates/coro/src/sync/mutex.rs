//! [`Mutex`]: a strictly FIFO async mutex with direct hand-off, on a one-permit [`Semaphore`].

use super::semaphore::{Acquire, Semaphore};
use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A strictly FIFO async mutex.
///
/// Waiters get the lock in arrival order, handed directly from the releasing task to the next
/// waiter (the lock is never free in between, so nobody can barge in), and resume through
/// their own wakers, on their own executors. Uncontended, a lock and an unlock are one atomic
/// compare-and-swap each. Dropping a waiting [`Lock`] leaves the queue; one dropped just after
/// the hand-off passes the lock on.
///
/// ```
/// use coro::sync::Mutex;
///
/// let counter = Mutex::new(0);
/// coro::block_wait(async {
///     *counter.lock().await += 1;
///     let guard = counter.lock().await;
///     assert!(counter.try_lock().is_none());
///     drop(guard);
/// });
/// assert_eq!(counter.into_inner(), 1);
/// ```
pub struct Mutex<T: ?Sized> {
    semaphore: Semaphore,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex gives `&mut T` to one holder at a time, from whatever thread holds the
// guard: like `std::sync::Mutex`, it is Sync when `T` can be sent between threads.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// SAFETY: the mutex owns its `T`; the semaphore is atomics and a mutex.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    /// A new, unlocked mutex holding `value`.
    ///
    /// ```
    /// let mutex = coro::sync::Mutex::new(1);
    /// assert_eq!(*mutex.try_lock().unwrap(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        Mutex {
            semaphore: Semaphore::with_kind(1, coro_executor::trace::LockKind::Mutex),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex, returning the data.
    ///
    /// ```
    /// assert_eq!(coro::sync::Mutex::new(7).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Waits for the lock, behind everyone already waiting.
    ///
    /// ```
    /// let mutex = coro::sync::Mutex::new(vec![]);
    /// coro::block_wait(async { mutex.lock().await.push(1) });
    /// assert_eq!(mutex.into_inner(), [1]);
    /// ```
    pub fn lock(&self) -> Lock<'_, T> {
        Lock {
            acquire: self.semaphore.acquire(1),
            mutex: self,
        }
    }

    /// The lock, if it is free now and nobody waits.
    ///
    /// ```
    /// let mutex = coro::sync::Mutex::new(1);
    /// let guard = mutex.try_lock().unwrap();
    /// assert!(mutex.try_lock().is_none());
    /// drop(guard);
    /// ```
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let permit = self.semaphore.try_acquire(1)?;
        let held = permit.forget_into_held();
        Some(MutexGuard { mutex: self, held })
    }

    /// The data, through exclusive access to the mutex itself (no locking needed).
    ///
    /// ```
    /// let mut mutex = coro::sync::Mutex::new(1);
    /// *mutex.get_mut() += 1;
    /// assert_eq!(mutex.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(value: T) -> Self {
        Mutex::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Some(guard) => d.field("data", &&*guard),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

/// The future of [`Mutex::lock`]. Dropping it while it waits leaves the queue.
///
/// ```
/// let mutex = coro::sync::Mutex::new(1);
/// let lock: coro::sync::Lock<'_, i32> = mutex.lock();
/// *coro::block_wait(lock) += 1;
/// assert_eq!(mutex.into_inner(), 2);
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Lock<'a, T: ?Sized> {
    acquire: Acquire<'a>,
    mutex: &'a Mutex<T>,
}

impl<'a, T: ?Sized> Future for Lock<'a, T> {
    type Output = MutexGuard<'a, T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MutexGuard<'a, T>> {
        let mutex = self.mutex;
        Pin::new(&mut self.acquire).poll(cx).map(|permit| {
            // The guard gives the permit back itself.
            let held = permit.forget_into_held();
            MutexGuard { mutex, held }
        })
    }
}

impl<T: ?Sized> fmt::Debug for Lock<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock").finish_non_exhaustive()
    }
}

/// Exclusive access to a [`Mutex`]'s data; the lock passes to the next waiter on drop.
///
/// ```
/// let mutex = coro::sync::Mutex::new(String::new());
/// mutex.try_lock().unwrap().push('a');
/// assert_eq!(mutex.into_inner(), "a");
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    held: super::holders::Held,
}

// SAFETY: sharing the guard shares `&T`, which needs `T: Sync` (the mutex alone only asks
// `T: Send`); sending it is sending `&mut T`-like access, which `T: Send` covers.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the guard holds the mutex's only permit: no other access exists.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the mutex's only permit, so no access exists but through it,
        // and `&mut self` makes this the only access through the guard.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.semaphore.trace.release(self.held.take());
        self.mutex.semaphore.add_permits(1);
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
