//! [`Baton`]: a multi-waiter manual-reset event, on `event-listener`.

use coro_executor::loom::sync::atomic::{AtomicBool, Ordering::*};
use event_listener::{Event, EventListener};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A manual-reset event any number of tasks can wait on (folly's `coro::Baton`, with many
/// waiters).
///
/// [`post`](Self::post) wakes every waiter and lets later waits through at once until
/// [`reset`](Self::reset). A task waiting when `post` ran is released even if `reset` follows
/// before it runs. Waiters resume through their own wakers, on their own executors; dropping a
/// waiting [`Wait`] simply stops waiting.
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
    event: Event,
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
            event: Event::new(),
        }
    }

    /// Posts the baton: every waiter is woken, and waits complete at once until
    /// [`reset`](Self::reset).
    ///
    /// ```
    /// let baton = coro::sync::Baton::new();
    /// baton.post();
    /// coro::block_wait(baton.wait()); // does not wait
    /// ```
    pub fn post(&self) {
        self.posted.store(true, SeqCst);
        // `notify` begins with a SeqCst fence: a waiter that registered before the store above
        // is woken; one registering after it sees `posted` on its second look.
        self.event.notify(usize::MAX);
    }

    /// Waits until the baton is posted.
    ///
    /// ```
    /// let baton = coro::sync::Baton::new();
    /// baton.post();
    /// coro::block_wait(async { baton.wait().await });
    /// ```
    pub fn wait(&self) -> Wait<'_> {
        Wait {
            baton: self,
            listener: None,
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

/// The future of [`Baton::wait`].
#[must_use = "futures do nothing unless awaited"]
pub struct Wait<'a> {
    baton: &'a Baton,
    listener: Option<EventListener>,
}

impl Future for Wait<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if let Some(listener) = &mut self.listener {
                // Notified by a `post`: released, even if a `reset` came since.
                if Pin::new(listener).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.listener = None;
                return Poll::Ready(());
            }
            if self.baton.is_ready() {
                return Poll::Ready(());
            }
            // Register, then look again (event-listener's documented protocol): a `post`
            // between the two looks either is seen by the second or notifies the listener.
            self.listener = Some(self.baton.event.listen());
            if self.baton.is_ready() {
                self.listener = None;
                return Poll::Ready(());
            }
        }
    }
}

impl fmt::Debug for Wait<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wait")
            .field("registered", &self.listener.is_some())
            .finish()
    }
}
