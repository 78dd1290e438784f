//! [`Semaphore`]: a FIFO async counting semaphore.
//!
//! One word holds the free permits (shifted left by one) and a `QUEUED` flag. While nobody waits
//! an acquire or a release is one compare-and-swap; once someone waits, both go through the
//! queue's mutex, and a release hands its permits straight to the waiters at the head of the
//! queue, in order, so a large request is never overtaken by smaller ones behind it.

use super::holders::{Held, LockTrace};
use super::waiters::{
    Acquired, Grantor, Key, WaitFor, WaitList, WaiterState, WakeList, set_queued,
};
use super::wakers::drop_unused;
use coro_executor::trace::LockKind;
use coro_loom::sync::Mutex;
use coro_loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

const QUEUED: usize = 1;
const SHIFT: u32 = 1;

/// A FIFO async counting semaphore.
///
/// Waiters are served strictly in arrival order: [`acquire(n)`](Self::acquire) for a large
/// `n` is not overtaken by smaller requests that arrive after it, and
/// [`try_acquire`](Self::try_acquire) fails while anyone is queued. Permits released go
/// straight to the waiters at the head of the queue, who resume through their own wakers (on
/// their own executors); a releasing task never runs one inline. Dropping a waiting
/// [`Acquire`] leaves the queue, letting those behind it proceed at once, and one dropped just
/// after it was granted gives its permits back.
///
/// ```
/// use coro::sync::Semaphore;
///
/// let connections = Semaphore::new(2);
/// coro::block_wait(async {
///     let a = connections.acquire(1).await;
///     let b = connections.acquire(1).await;
///     assert_eq!(connections.available_permits(), 0);
///     assert!(connections.try_acquire(1).is_none());
///     drop(a);
///     let _c = connections.acquire(1).await;
///     drop(b);
/// });
/// assert_eq!(connections.available_permits(), 2);
/// ```
pub struct Semaphore {
    state: AtomicUsize,
    queue: Mutex<WaitList<usize>>,
    pub(crate) trace: LockTrace,
}

impl Semaphore {
    /// The most permits a semaphore can hold.
    ///
    /// ```
    /// assert!(coro::sync::Semaphore::MAX_PERMITS >= u32::MAX as usize);
    /// ```
    pub const MAX_PERMITS: usize = usize::MAX >> 3;

    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` is over [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(3);
    /// assert_eq!(semaphore.available_permits(), 3);
    /// ```
    pub fn new(permits: usize) -> Semaphore {
        Semaphore::with_kind(permits, LockKind::Semaphore)
    }

    /// [`new`](Self::new), named `kind` in task snapshots (a `Mutex` is a one-permit semaphore).
    pub(crate) fn with_kind(permits: usize, kind: LockKind) -> Semaphore {
        assert!(
            permits <= Self::MAX_PERMITS,
            "Semaphore::new({permits}): a semaphore holds at most Semaphore::MAX_PERMITS ({}) \
             permits",
            Self::MAX_PERMITS
        );
        Semaphore {
            state: AtomicUsize::new(permits << SHIFT),
            queue: Mutex::new(WaitList::new()),
            trace: LockTrace::new(kind),
        }
    }

    /// Waits for `n` permits, behind everyone already waiting. The permits come back when the
    /// returned [`SemaphorePermit`] is dropped.
    ///
    /// # Panics
    ///
    /// If `n` is over [`MAX_PERMITS`](Self::MAX_PERMITS): such a request could never be met.
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(5);
    /// let permit = coro::block_wait(semaphore.acquire(3));
    /// assert_eq!(permit.num_permits(), 3);
    /// assert_eq!(semaphore.available_permits(), 2);
    /// ```
    pub fn acquire(&self, n: usize) -> Acquire<'_> {
        Self::check_request("acquire", n);
        Acquire {
            wait: WaitFor::new(self, n),
            semaphore: self,
            permits: n,
        }
    }

    /// `n` permits if they are free now and nobody is queued.
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(1);
    /// let permit = semaphore.try_acquire(1).unwrap();
    /// assert!(semaphore.try_acquire(1).is_none());
    /// drop(permit);
    /// assert!(semaphore.try_acquire(1).is_some());
    /// ```
    pub fn try_acquire(&self, n: usize) -> Option<SemaphorePermit<'_>> {
        Self::check_request("try_acquire", n);
        let acquired =
            self.try_acquire_fast(n) || matches!(self.acquire_or_enqueue(n, None), Acquired::Now);
        // Build the permit only once the permits are taken: one dropped on failure would give
        // back permits that were never taken.
        if acquired {
            Some(SemaphorePermit {
                semaphore: self,
                permits: n,
                held: self.trace.hold(),
            })
        } else {
            None
        }
    }

    /// Adds `n` permits, granting queued waiters in order.
    ///
    /// # Panics
    ///
    /// If the total would exceed [`MAX_PERMITS`](Self::MAX_PERMITS).
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(0);
    /// semaphore.add_permits(2);
    /// assert_eq!(semaphore.available_permits(), 2);
    /// ```
    pub fn add_permits(&self, n: usize) {
        Self::check_request("add_permits", n);
        let mut state = self.state.load(Relaxed);
        while state & QUEUED == 0 {
            let next = Self::with_added(state, n);
            match self
                .state
                .compare_exchange_weak(state, next, Release, Relaxed)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        let mut wakes = WakeList::default();
        {
            let mut queue = self.lock_queue();
            self.release_locked(&mut queue, n, &mut wakes);
        }
        wakes.wake_all();
    }

    /// The permits free right now (0 while waiters are being served).
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(4);
    /// let _two = semaphore.try_acquire(2).unwrap();
    /// assert_eq!(semaphore.available_permits(), 2);
    /// ```
    pub fn available_permits(&self) -> usize {
        self.state.load(Acquire) >> SHIFT
    }

    fn check_request(what: &str, n: usize) {
        assert!(
            n <= Self::MAX_PERMITS,
            "Semaphore::{what}({n}): more than Semaphore::MAX_PERMITS ({}), which no semaphore \
             can ever hold",
            Self::MAX_PERMITS
        );
    }

    fn with_added(state: usize, n: usize) -> usize {
        let permits = (state >> SHIFT) + n;
        assert!(
            permits <= Self::MAX_PERMITS,
            "a coro::sync::Semaphore would hold {permits} permits, over Semaphore::MAX_PERMITS ({})",
            Self::MAX_PERMITS
        );
        (permits << SHIFT) | (state & QUEUED)
    }

    fn lock_queue(&self) -> coro_loom::sync::MutexGuard<'_, WaitList<usize>> {
        // Only this file's short sections change the queue; after a poisoning panic (an
        // allocation failure) its contents are still consistent.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Under the queue's lock: `n` permits come back; the head waiters that now fit are
    /// granted, in order.
    fn release_locked(&self, queue: &mut WaitList<usize>, n: usize, wakes: &mut WakeList) {
        let mut state = self.state.load(Acquire);
        while state & QUEUED == 0 {
            match self.state.compare_exchange_weak(
                state,
                Self::with_added(state, n),
                AcqRel,
                Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        // `QUEUED` is set and the queue is locked: every other path to the word is closed.
        let free = Self::with_added(state, n) >> SHIFT;
        self.grant_and_publish(queue, free, wakes);
    }

    fn grant_and_publish(
        &self,
        queue: &mut WaitList<usize>,
        mut free: usize,
        wakes: &mut WakeList,
    ) {
        while let Some(head) = queue.front() {
            let wanted = queue.mode(head);
            if wanted > free {
                break;
            }
            free -= wanted;
            queue.grant(head, wakes);
        }
        let queued = if queue.is_empty() { 0 } else { QUEUED };
        self.state.store((free << SHIFT) | queued, Release);
    }
}

impl Grantor for Semaphore {
    type Mode = usize;

    fn trace(&self) -> &LockTrace {
        &self.trace
    }

    fn try_acquire_fast(&self, n: usize) -> bool {
        let mut state = self.state.load(Relaxed);
        loop {
            if state & QUEUED != 0 || state >> SHIFT < n {
                return false;
            }
            match self
                .state
                .compare_exchange_weak(state, state - (n << SHIFT), Acquire, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    fn acquire_or_enqueue(&self, n: usize, waker: Option<&Waker>) -> Acquired {
        let mut queue = self.lock_queue();
        let mut state = self.state.load(Acquire);
        // The waiter's waker, cloned before `QUEUED` is set: `clone` is user code, and a panic
        // in it with the flag up and nobody queued would keep free permits from being taken
        // until a release.
        let mut clone = None;
        loop {
            if state & QUEUED == 0 && state >> SHIFT >= n {
                match self
                    .state
                    .compare_exchange_weak(state, state - (n << SHIFT), AcqRel, Acquire)
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
            let waker = clone.take().expect("cloned above");
            return Acquired::Queued(queue.push_back(n, waker));
        }
    }

    fn take_grant(&self, key: Key, waker: &Waker) -> bool {
        let mut queue = self.lock_queue();
        match queue.state(key) {
            WaiterState::Granted => {
                queue.remove(key);
                true
            }
            WaiterState::Queued => {
                queue.set_waker(key, waker);
                false
            }
        }
    }

    fn abandon(&self, key: Key, n: usize) {
        let mut wakes = WakeList::default();
        {
            let mut queue = self.lock_queue();
            match queue.remove(key) {
                WaiterState::Granted => self.release_locked(&mut queue, n, &mut wakes),
                WaiterState::Queued => {
                    // It was queued, so `QUEUED` is set and the word is ours to change; those
                    // behind it may fit now.
                    let free = self.state.load(Acquire) >> SHIFT;
                    self.grant_and_publish(&mut queue, free, &mut wakes);
                }
            }
        }
        wakes.wake_all();
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available_permits", &self.available_permits())
            .finish()
    }
}

/// The future of [`Semaphore::acquire`]. Dropping it while it waits leaves the queue.
///
/// ```
/// let semaphore = coro::sync::Semaphore::new(2);
/// let acquire: coro::sync::Acquire<'_> = semaphore.acquire(2);
/// assert_eq!(coro::block_wait(acquire).num_permits(), 2);
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Acquire<'a> {
    wait: WaitFor<'a, Semaphore>,
    semaphore: &'a Semaphore,
    permits: usize,
}

impl<'a> Future for Acquire<'a> {
    type Output = SemaphorePermit<'a>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<SemaphorePermit<'a>> {
        let (semaphore, permits) = (self.semaphore, self.permits);
        self.wait.poll_acquire(cx).map(|()| SemaphorePermit {
            semaphore,
            permits,
            held: semaphore.trace.hold(),
        })
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("permits", &self.permits)
            .finish()
    }
}

/// Permits taken from a [`Semaphore`]; given back on drop.
///
/// ```
/// let semaphore = coro::sync::Semaphore::new(2);
/// let permit = semaphore.try_acquire(2).unwrap();
/// assert_eq!(permit.num_permits(), 2);
/// drop(permit);
/// assert_eq!(semaphore.available_permits(), 2);
/// ```
#[must_use = "the permits are given back as soon as this is dropped"]
pub struct SemaphorePermit<'a> {
    semaphore: &'a Semaphore,
    permits: usize,
    held: Held,
}

impl SemaphorePermit<'_> {
    /// How many permits this holds.
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(2);
    /// assert_eq!(semaphore.try_acquire(1).unwrap().num_permits(), 1);
    /// ```
    pub fn num_permits(&self) -> usize {
        self.permits
    }

    /// Keeps the permits out of the semaphore for good (drop gives nothing back).
    ///
    /// ```
    /// let semaphore = coro::sync::Semaphore::new(2);
    /// semaphore.try_acquire(1).unwrap().forget();
    /// assert_eq!(semaphore.available_permits(), 1);
    /// ```
    pub fn forget(mut self) {
        self.permits = 0;
    }

    /// Forgets the permits (as [`forget`](Self::forget)) but hands the holder record on, to a
    /// guard that gives the permits back itself.
    pub(crate) fn forget_into_held(mut self) -> Held {
        self.permits = 0;
        self.held.take()
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.semaphore.trace.release(self.held.take());
        if self.permits > 0 {
            self.semaphore.add_permits(self.permits);
        }
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}
