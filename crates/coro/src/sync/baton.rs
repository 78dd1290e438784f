//! [`Baton`]: a multi-waiter manual-reset event, on a [`WakerSlab`].
//!
//! Each `post` starts a new generation and takes every registered waker; a waiter remembers the
//! generation it registered in, so one that was waiting when a `post` ran completes even if a
//! `reset` came before it was polled again.

use super::wakers::WakerSlab;
use coro_loom::sync::atomic::{AtomicBool, Ordering::*};
use coro_loom::sync::{Mutex, MutexGuard};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A manual-reset event any number of tasks can wait on (folly's `coro::Baton`, with many
/// waiters).
///
/// [`post`](Self::post) wakes every waiter and lets later waits through at once until
/// [`reset`](Self::reset). A task waiting when `post` ran is released even if `reset` follows
/// before it runs. Waiters resume through their own wakers, on their own executors, woken after
/// the baton's lock is released; dropping a waiting [`Wait`] simply stops waiting.
///
/// ```
/// use coro::sync::Baton;
/// use std::sync::Arc;
///
/// let ready = Arc::new(Baton::new());
/// let waiter = coro::spawn({
///     let ready = ready.clone();
///     async move {
///         ready.wait().await;
///         "released"
///     }
/// });
/// ready.post();
/// assert_eq!(coro::block_wait(waiter).unwrap(), "released");
/// assert!(ready.is_ready());
/// ```
pub struct Baton {
    posted: AtomicBool,
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    /// Posts so far: a waiter registered in an earlier generation was released.
    generation: u64,
    wakers: WakerSlab,
}

impl Baton {
    /// A baton not yet posted.
    ///
    /// ```
    /// assert!(!coro::sync::Baton::new().is_ready());
    /// ```
    pub fn new() -> Baton {
        Baton {
            posted: AtomicBool::new(false),
            waiting: Mutex::new(Waiting::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Waiting> {
        // Only wakers and a counter live here, changed by short sections.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Posts the baton: every waiter is woken, and waits complete at once until
    /// [`reset`](Self::reset).
    ///
    /// ```
    /// use futures::FutureExt;
    ///
    /// let baton = coro::sync::Baton::new();
    /// assert_eq!(baton.wait().now_or_never(), None); // not posted: it would wait
    /// baton.post();
    /// assert_eq!(baton.wait().now_or_never(), Some(())); // does not wait
    /// ```
    pub fn post(&self) {
        self.posted.store(true, SeqCst);
        let wakers = {
            let mut waiting = self.lock();
            waiting.generation += 1;
            waiting.wakers.take()
        };
        wakers.wake_all();
    }

    /// Waits until the baton is posted.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let baton = std::sync::Arc::new(coro::sync::Baton::new());
    /// let poster = baton.clone();
    /// let start = Instant::now();
    /// std::thread::spawn(move || {
    ///     std::thread::sleep(Duration::from_millis(20));
    ///     poster.post();
    /// });
    /// coro::block_wait(async { baton.wait().await });
    /// assert!(start.elapsed() >= Duration::from_millis(20));
    /// ```
    pub fn wait(&self) -> Wait<'_> {
        Wait {
            baton: self,
            registered: None,
        }
    }

    /// Un-posts the baton: later waits wait for the next [`post`](Self::post).
    ///
    /// ```
    /// let baton = coro::sync::Baton::new();
    /// baton.post();
    /// baton.reset();
    /// assert!(!baton.is_ready());
    /// ```
    pub fn reset(&self) {
        self.posted.store(false, SeqCst);
    }

    /// Whether the baton is posted.
    ///
    /// ```
    /// let baton = coro::sync::Baton::new();
    /// baton.post();
    /// assert!(baton.is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        self.posted.load(SeqCst)
    }
}

impl Default for Baton {
    fn default() -> Self {
        Baton::new()
    }
}

impl fmt::Debug for Baton {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Baton")
            .field("ready", &self.is_ready())
            .finish()
    }
}

/// The future of [`Baton::wait`]. Dropping it while it waits simply stops waiting.
///
/// ```
/// use futures::FutureExt;
///
/// let baton = coro::sync::Baton::new();
/// let mut wait: coro::sync::Wait<'_> = baton.wait();
/// assert_eq!((&mut wait).now_or_never(), None); // registered, waiting
/// baton.post();
/// assert_eq!(wait.now_or_never(), Some(())); // woken: the same future completes
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Wait<'a> {
    baton: &'a Baton,
    /// The generation this waiter registered in, and its slot.
    registered: Option<(u64, usize)>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.registered.is_none() && self.baton.is_ready() {
            return Poll::Ready(());
        }
        let baton = self.baton;
        let mut waiting = baton.lock();
        match self.registered {
            // A post since we registered released us (and took our waker), even if a reset
            // followed.
            Some((generation, _)) if generation != waiting.generation => {
                self.registered = None;
                Poll::Ready(())
            }
            _ if baton.is_ready() => {
                if let Some((_, index)) = self.registered.take() {
                    waiting.wakers.remove(index);
                }
                Poll::Ready(())
            }
            registered => {
                let mut slot = registered.map(|(_, index)| index);
                waiting.wakers.register(&mut slot, cx.waker());
                let generation = waiting.generation;
                self.registered = slot.map(|index| (generation, index));
                // Until the task's next poll it waits on the baton, a promise of no value
                // named by its address.
                let id = std::ptr::from_ref(baton) as usize as u64;
                coro_executor::trace::wait_until_polled(coro_executor::trace::WaitOn::Promise(id));
                Poll::Pending
            }
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some((generation, index)) = self.registered {
            let mut waiting = self.baton.lock();
            // After a post the slab was taken: the slot is void.
            if waiting.generation == generation {
                waiting.wakers.remove(index);
            }
        }
    }
}

impl fmt::Debug for Wait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wait")
            .field("registered", &self.registered.is_some())
            .finish()
    }
}
