//! [`generator`]: an async body that yields values to its consumer one at a time (folly's
//! `AsyncGenerator`).
//!
//! The body runs inside the consumer's `poll_next`, under the generator's own frame and in the
//! consumer's context (its cancellation token and task-locals). `co.yield_(v)` puts `v` in the
//! slot the body shares with its [`Generator`] and suspends; the generator takes the value out
//! as soon as the body returns `Pending`, hands it to the consumer, and the next `poll_next`
//! resumes the body, where the yield then completes. So there is never more than one value in
//! flight: a second yield waits until the first value was taken.
//!
//! A [`Co`] only works while its own generator polls its body: the generator marks itself
//! active on the thread for the duration of that poll, and a yield polled anywhere else panics.

use crate::trace::Frame;
use crate::trace::frame_chain::FrameNode;
use futures_core::{FusedStream, Stream};
use pin_project::pin_project;
use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, Location, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

/// The name of a generator's frame in async stack traces, unless [`Generator::named`] renames it.
const NAME: &str = "generator";

thread_local! {
    /// The generator whose body is being polled on this thread (the address of its shared
    /// slot), or null. Only ever compared, never dereferenced.
    static ACTIVE: Cell<*const ()> = const { Cell::new(ptr::null()) };
}

/// What a generator's body and the generator share: the value yielded and not yet taken.
struct Slot<T> {
    value: Option<T>,
    /// How many values were ever placed in the slot: the ticket of the latest one. A yield
    /// whose ticket this is waits while its value is still in the slot; any older ticket's
    /// value is gone (taken, or taken back), since a value is only placed in an empty slot.
    placed: u64,
}

type Shared<T> = Arc<Mutex<Slot<T>>>;

fn lock<T>(shared: &Shared<T>) -> MutexGuard<'_, Slot<T>> {
    // Nothing runs user code under the lock (values are dropped after it is released), but a
    // poisoned slot is still consistent: every update is a single assignment.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes a generator active on this thread until dropped (also on unwind).
struct Active {
    previous: *const (),
}

impl Active {
    fn enter<T>(shared: &Shared<T>) -> Active {
        let previous = ACTIVE.with(|active| active.replace(Arc::as_ptr(shared).cast()));
        Active { previous }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        ACTIVE.with(|active| active.set(self.previous));
    }
}

/// A stream whose values come from an async body that yields them (folly's `AsyncGenerator`).
///
/// `body` receives a [`Co`] and yields each value with `co.yield_(value).await`; the stream
/// ends (`None`, and `None` again on every later poll) when the body returns.
///
/// - **Lazy**: nothing runs, not even `body` itself, until the stream is first polled.
/// - **Inline**: the body runs inside the consumer's `poll_next`, in the consumer's context:
///   [`current_cancellation_token`](crate::current_cancellation_token),
///   [`cancellable`](crate::cancel::cancellable), [`time::sleep`](crate::time::sleep) and
///   task-locals all see the consumer's task.
/// - **Traced**: while the body runs, [`trace::current_stack`](crate::trace::current_stack)
///   shows the generator's own frame, named `generator` (see [`Generator::named`]) and located
///   where `generator` was called, above the consumer's frames.
/// - **One value at a time**: each `yield_` completes only once the consumer has taken its
///   value, so the body never runs ahead of its consumer.
/// - **Dropped in place**: dropping the stream drops the body at the point where it is
///   suspended, running the destructors of its locals.
/// - **Panics** in the body propagate out of the consumer's `poll_next`; the body is dropped
///   and the stream has ended.
///
/// The stream is `Send` when the closure, its body and `T` are, and always `Unpin`.
///
/// ```
/// use futures::StreamExt;
///
/// let squares = coro::stream::generator(|co| async move {
///     for i in 1..=4u32 {
///         co.yield_(i * i).await;
///     }
/// });
/// let all: Vec<u32> = coro::block_wait(squares.collect());
/// assert_eq!(all, [1, 4, 9, 16]);
/// ```
#[track_caller]
pub fn generator<T, F, Fut>(body: F) -> Generator<T, F, Fut>
where
    F: FnOnce(Co<T>) -> Fut,
    Fut: Future<Output = ()>,
{
    Generator {
        shared: Arc::new(Mutex::new(Slot {
            value: None,
            placed: 0,
        })),
        inner: Box::pin(Inner {
            frame: FrameNode::new(Frame::new(NAME, Location::caller())),
            start: Some(body),
            body: None,
        }),
        done: false,
    }
}

/// The stream of [`generator`]: `T` is the item type, `F` the closure that makes the body, `Fut`
/// the body's future. A [`FusedStream`]: `None` once, `None` forever.
///
/// ```
/// use futures::StreamExt;
/// use futures::stream::FusedStream;
///
/// let mut once = coro::stream::generator(|co| async move { co.yield_('a').await });
/// assert_eq!(coro::block_wait(once.next()), Some('a'));
/// assert_eq!(coro::block_wait(once.next()), None);
/// assert!(once.is_terminated());
/// assert_eq!(coro::block_wait(once.next()), None);
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Generator<T, F, Fut> {
    shared: Shared<T>,
    /// Boxed so that the frame and the body stay in place (the frame is linked into the stack
    /// by address while the body runs) while the generator itself moves freely.
    inner: Pin<Box<Inner<F, Fut>>>,
    /// The body finished or panicked: the stream has ended.
    done: bool,
}

#[pin_project]
struct Inner<F, Fut> {
    frame: FrameNode,
    /// The closure that makes the body, until the first poll calls it.
    start: Option<F>,
    #[pin]
    body: Option<Fut>,
}

impl<T, F, Fut> Generator<T, F, Fut> {
    /// Names the generator's frame in async stack traces and task dumps (`generator` by default).
    ///
    /// ```
    /// use futures::StreamExt;
    ///
    /// let mut lines = coro::stream::generator(|co| async move {
    ///     co.yield_(coro::trace::current_stack().frames()[0].name().to_owned()).await;
    /// })
    /// .named("read_lines");
    /// assert_eq!(coro::block_wait(lines.next()).as_deref(), Some("read_lines"));
    /// ```
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.inner.as_mut().project().frame.set_name(name.into());
        self
    }

    /// Ends the stream: drops the body (or the closure, if it never ran).
    fn finish(&mut self) {
        self.done = true;
        let mut inner = self.inner.as_mut().project();
        inner.body.set(None);
        *inner.start = None;
    }
}

impl<T, F, Fut> Stream for Generator<T, F, Fut>
where
    F: FnOnce(Co<T>) -> Fut,
    Fut: Future<Output = ()>,
{
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let outcome = {
            let shared = &this.shared;
            let _active = Active::enter(shared);
            let mut inner = this.inner.as_mut().project();
            // The body runs in the consumer's context (current already), under this frame.
            let _frame = inner.frame.enter();
            let polled = catch_unwind(AssertUnwindSafe(|| {
                if let Some(start) = inner.start.take() {
                    let co = Co {
                        shared: shared.clone(),
                    };
                    inner.body.set(Some(start(co)));
                }
                let body = inner.body.as_mut().as_pin_mut();
                body.expect("an unfinished generator has a body").poll(cx)
            }));
            match polled {
                Ok(Poll::Pending) => {
                    let yielded = lock(shared).value.take();
                    match yielded {
                        // A yield is not where the consumer waits: it has a value to go on
                        // with. (A yield inside a task awaited by the body has made that
                        // task's frame publish the stack as a suspension; make the next
                        // publication compare the whole stack again.)
                        Some(value) => {
                            #[cfg(not(coro_untraced))]
                            crate::trace::root_trace::note_relinked();
                            Ok(Poll::Ready(Some(value)))
                        }
                        // Really suspended: if nothing deeper published where, it is here.
                        None => {
                            crate::trace::root_trace::publish_suspension(inner.frame);
                            Ok(Poll::Pending)
                        }
                    }
                }
                Ok(Poll::Ready(())) => Ok(Poll::Ready(None)),
                Err(payload) => Err(payload),
            }
        };
        match outcome {
            Ok(Poll::Ready(None)) => {
                this.finish();
                Poll::Ready(None)
            }
            Ok(poll) => poll,
            Err(payload) => {
                this.finish();
                resume_unwind(payload)
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done { (0, Some(0)) } else { (0, None) }
    }
}

impl<T, F, Fut> FusedStream for Generator<T, F, Fut>
where
    F: FnOnce(Co<T>) -> Fut,
    Fut: Future<Output = ()>,
{
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<T, F, Fut> fmt::Debug for Generator<T, F, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Generator")
            .field("frame", &self.inner.frame.frame)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

/// A generator body's handle for yielding values to its consumer (folly's `co_yield`).
///
/// Each [`generator`] gives its body one `Co`, by value; the body borrows it for each
/// [`yield_`](Self::yield_) (pass `&co` to helper functions). It only works inside the body of
/// the generator that gave it, while that generator polls the body: a yield polled anywhere
/// else (the `Co` was moved into a spawned task or another generator's body, or kept after
/// the generator ended) panics with a message saying so.
///
/// ```
/// use futures::StreamExt;
///
/// async fn countdown(co: &coro::stream::Co<u32>, from: u32) {
///     for i in (1..=from).rev() {
///         co.yield_(i).await;
///     }
/// }
///
/// let launch = coro::stream::generator(|co| async move {
///     countdown(&co, 3).await;
///     co.yield_(0).await;
/// });
/// assert_eq!(coro::block_wait(launch.collect::<Vec<_>>()), [3, 2, 1, 0]);
/// ```
pub struct Co<T> {
    shared: Shared<T>,
}

impl<T> Co<T> {
    /// Yields `value` to the consumer: the returned future completes once the consumer has
    /// taken it (at the consumer's next `poll_next`, the body resumes from here).
    ///
    /// A value is delivered at most once. If the body drops a `Yield` before the consumer took
    /// its value (a `select!` branch that lost, say), the value is taken back and dropped,
    /// never delivered.
    ///
    /// # Panics
    ///
    /// When polled outside the body of the generator this `Co` belongs to (see [`Co`]).
    ///
    /// ```
    /// use futures::StreamExt;
    ///
    /// let mut words = coro::stream::generator(|co| async move {
    ///     co.yield_("hello").await;
    ///     co.yield_("world").await;
    /// });
    /// coro::block_wait(async {
    ///     assert_eq!(words.next().await, Some("hello"));
    ///     assert_eq!(words.next().await, Some("world"));
    ///     assert_eq!(words.next().await, None);
    /// });
    /// ```
    pub fn yield_(&self, value: T) -> Yield<'_, T> {
        Yield {
            co: self,
            state: YieldState::Unplaced(value),
        }
    }

    /// Panics unless this `Co`'s generator is polling its body on this thread.
    fn check_active(&self) {
        let active = ACTIVE.with(Cell::get);
        assert!(
            ptr::eq(active, Arc::as_ptr(&self.shared).cast()),
            "coro::stream::Co::yield_ polled outside its generator's body: a Co can only yield \
             from inside the body of the generator that gave it, while that generator is being \
             polled; this one was moved out of it (into a spawned task, another generator's \
             body, or kept after its generator ended)"
        );
    }
}

impl<T> fmt::Debug for Co<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Co").finish_non_exhaustive()
    }
}

/// The future of [`Co::yield_`]: completes once the consumer has taken the value.
///
/// ```
/// use futures::StreamExt;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// let resumed = Arc::new(AtomicBool::new(false));
/// let mut values = coro::stream::generator({
///     let resumed = resumed.clone();
///     move |co| async move {
///         co.yield_(1).await; // completes when the consumer asks for the next value
///         resumed.store(true, Ordering::SeqCst);
///     }
/// });
/// assert_eq!(coro::block_wait(values.next()), Some(1));
/// assert!(!resumed.load(Ordering::SeqCst));
/// assert_eq!(coro::block_wait(values.next()), None);
/// assert!(resumed.load(Ordering::SeqCst));
/// ```
#[must_use = "a yield does nothing unless awaited"]
pub struct Yield<'a, T> {
    co: &'a Co<T>,
    state: YieldState<T>,
}

enum YieldState<T> {
    /// Not in the slot yet.
    Unplaced(T),
    /// In the slot (or taken from it) under this ticket.
    Placed(u64),
    Done,
}

// The value is never pinned: it is moved into the slot.
impl<T> Unpin for Yield<'_, T> {}

impl<T> Future for Yield<'_, T> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        this.co.check_active();
        let mut slot = lock(&this.co.shared);
        match std::mem::replace(&mut this.state, YieldState::Done) {
            YieldState::Unplaced(value) => {
                if slot.value.is_some() {
                    // Another yield of this body (polled in the same poll, as by a `join!`)
                    // has its value waiting. No wake-up is needed: the generator hands that
                    // value over now, and polls the body again at the consumer's next
                    // `poll_next`, when this one takes its turn.
                    this.state = YieldState::Unplaced(value);
                } else {
                    slot.value = Some(value);
                    slot.placed += 1;
                    this.state = YieldState::Placed(slot.placed);
                }
                Poll::Pending
            }
            YieldState::Placed(ticket) => {
                if slot.placed == ticket && slot.value.is_some() {
                    // Not taken yet: the generator takes it when the body returns `Pending`.
                    this.state = YieldState::Placed(ticket);
                    return Poll::Pending;
                }
                Poll::Ready(())
            }
            YieldState::Done => panic!("a coro::stream::Yield was polled after it completed"),
        }
    }
}

impl<T> Drop for Yield<'_, T> {
    fn drop(&mut self) {
        if let YieldState::Placed(ticket) = self.state {
            // Taken back if the consumer never got it; dropped after the lock is released.
            let _untaken = {
                let mut slot = lock(&self.co.shared);
                if slot.placed == ticket {
                    slot.value.take()
                } else {
                    None
                }
            };
        }
    }
}

impl<T> fmt::Debug for Yield<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            YieldState::Unplaced(_) => "unplaced",
            YieldState::Placed(_) => "placed",
            YieldState::Done => "done",
        };
        f.debug_struct("Yield").field("state", &state).finish()
    }
}
