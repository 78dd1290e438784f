//! [`AsyncScope`]: folly's AsyncScope and a bounded task pool in one type.
//!
//! The shared state lives behind one `std::sync::Mutex`: the running count (slots taken), the
//! FIFO queue of waiting spawners, the capacity, the closed flag, the first child panic, the
//! children's kill switches and the wakers of `join`. A slot is taken when a child is admitted
//! and released when its future is dropped (completed, panicked or cancelled), which admits the
//! head waiter. No user code runs and no waker is woken while the lock is held.

use crate::Task;
use crate::cancel::{CancellationSource, CancellationToken};
use coro_executor::{JoinHandle, PanicPayload};
use std::any::Any;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// The panic payload a child's [`JoinHandle`] reports when its scope was dropped first.
const DROPPED: &str = "the AsyncScope was dropped before this child finished, so the child was \
                       dropped too; join the scope (AsyncScope::join) before dropping it";

/// Why [`AsyncScope::spawn`] or [`AsyncScope::spawn_wait`] did not spawn.
///
/// ```
/// let scope = coro::AsyncScope::bounded(1);
/// scope.close();
/// let err = scope.spawn(async {}).unwrap_err();
/// assert_eq!(err, coro::ScopeError::Closed);
/// assert!(err.to_string().contains("closed"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScopeError {
    /// The scope is bounded and every slot is taken (or earlier spawners are waiting for one).
    Full,
    /// The scope was closed: it accepts no new children.
    Closed,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeError::Full => f.write_str(
                "the AsyncScope is full: all its slots are running children; use spawn_wait to \
                 wait for a slot, or raise the limit with set_capacity",
            ),
            ScopeError::Closed => f.write_str(
                "the AsyncScope is closed and accepts no new children; spawn into a new scope",
            ),
        }
    }
}

impl std::error::Error for ScopeError {}

/// A snapshot of an [`AsyncScope`], from [`AsyncScope::status`].
///
/// ```
/// let scope = coro::AsyncScope::bounded(3);
/// assert_eq!(
///     scope.status(),
///     coro::ScopeStatus { running: 0, waiting: 0, capacity: Some(3) }
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeStatus {
    /// Children admitted and not yet finished (slots taken).
    pub running: usize,
    /// Spawners waiting in [`AsyncScope::spawn_wait`] for a slot.
    pub waiting: usize,
    /// The most children that run at once; `None` when unbounded.
    pub capacity: Option<usize>,
}

/// A child's kill switch: set when the scope is dropped, then the child is woken to drop its
/// future.
#[derive(Default)]
struct Kill {
    killed: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Kill {
    fn kill(&self) {
        self.killed.store(true, SeqCst);
        let waker = lock(&self.waker).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

#[derive(Default)]
struct State {
    running: usize,
    capacity: Option<usize>,
    closed: bool,
    /// Waiting spawners in arrival order, with their wakers.
    queue: VecDeque<(u64, Waker)>,
    /// Waiters that were given a slot (counted in `running`) and have not taken it yet.
    granted: HashSet<u64>,
    next_id: u64,
    first_panic: Option<PanicPayload>,
    children: HashMap<u64, Arc<Kill>>,
    joiners: Vec<Waker>,
}

impl State {
    fn has_room(&self) -> bool {
        self.capacity.is_none_or(|cap| self.running < cap)
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn idle(&self) -> bool {
        self.running == 0 && self.queue.is_empty()
    }

    /// Gives free slots to the head waiters; returns the wakers to wake outside the lock.
    fn admit(&mut self, wake: &mut Vec<Waker>) {
        while !self.closed && self.has_room() {
            let Some((id, waker)) = self.queue.pop_front() else {
                break;
            };
            self.running += 1;
            self.granted.insert(id);
            wake.push(waker);
        }
        if self.idle() {
            wake.append(&mut self.joiners);
        }
    }

    /// Releases one slot; returns the wakers to wake outside the lock.
    fn release(&mut self) -> Vec<Waker> {
        let mut wake = Vec::new();
        self.running -= 1;
        self.admit(&mut wake);
        wake
    }
}

struct Shared {
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Wakes them all, even if some panic (then the first panic is resumed afterwards).
fn wake_all(wakers: Vec<Waker>) {
    crate::sync::wake_each(wakers);
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Records a child panic; returns the payload its own `JoinHandle` reports: the original
    /// unless the scope keeps it (the first panic, which `join` resumes), then a copy of its
    /// message.
    fn record_panic(&self, payload: PanicPayload) -> PanicPayload {
        let mut state = self.lock();
        if state.first_panic.is_some() {
            return payload;
        }
        let message = coro_executor::panic_message(&*payload)
            .unwrap_or("a scope child panicked; AsyncScope::join resumes the original payload")
            .to_owned();
        state.first_panic = Some(payload);
        Box::new(message)
    }
}

/// A taken slot: dropping it releases the slot and forgets the child's kill switch.
struct Slot {
    shared: Arc<Shared>,
    child: Option<u64>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let wake = {
            let mut state = self.shared.lock();
            if let Some(id) = self.child {
                state.children.remove(&id);
            }
            state.release()
        };
        wake_all(wake);
    }
}

/// The body of a child: the user's future, dropped when the scope is, and its slot, released
/// when the future is dropped.
struct Child<F: Future> {
    // Field order matters: the future is dropped before its slot is released.
    fut: Option<Pin<Box<F>>>,
    slot: Option<Slot>,
    kill: Arc<Kill>,
}

impl<F: Future> Child<F> {
    fn finish(&mut self) {
        self.fut = None;
        self.slot = None;
    }
}

impl<F: Future> Future for Child<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        {
            let mut waker = lock(&this.kill.waker);
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        if this.kill.killed.load(SeqCst) {
            this.finish();
            resume_unwind(Box::new(DROPPED));
        }
        let fut = this
            .fut
            .as_mut()
            .expect("scope child polled after it finished");
        match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => {
                this.finish();
                Poll::Ready(value)
            }
            Err(payload) => {
                let shared = this.slot.as_ref().map(|s| s.shared.clone());
                let payload = match shared {
                    Some(shared) => shared.record_panic(payload),
                    None => payload,
                };
                this.finish();
                resume_unwind(payload)
            }
        }
    }
}

/// A place in the queue of [`AsyncScope::spawn_wait`]; dropping it leaves the queue, and passes
/// on a slot it was given and did not take.
struct Ticket<'a> {
    shared: &'a Arc<Shared>,
    id: Option<u64>,
}

impl Ticket<'_> {
    /// Ready with a reserved slot, or an error.
    fn poll_slot(&mut self, cx: &mut Context<'_>) -> Poll<Result<Slot, ScopeError>> {
        let mut wake = Vec::new();
        let outcome = {
            let mut state = self.shared.lock();
            match self.id {
                None if state.closed => Poll::Ready(Err(ScopeError::Closed)),
                None if state.queue.is_empty() && state.has_room() => {
                    state.running += 1;
                    Poll::Ready(Ok(()))
                }
                None => {
                    let id = state.id();
                    state.queue.push_back((id, cx.waker().clone()));
                    self.id = Some(id);
                    Poll::Pending
                }
                Some(id) => {
                    if state.granted.remove(&id) {
                        self.id = None;
                        if state.closed {
                            wake = state.release();
                            Poll::Ready(Err(ScopeError::Closed))
                        } else {
                            Poll::Ready(Ok(()))
                        }
                    } else if let Some(entry) = state.queue.iter_mut().find(|(i, _)| *i == id) {
                        if !entry.1.will_wake(cx.waker()) {
                            entry.1 = cx.waker().clone();
                        }
                        Poll::Pending
                    } else {
                        // Neither queued nor granted: `close` turned the queue away.
                        self.id = None;
                        Poll::Ready(Err(ScopeError::Closed))
                    }
                }
            }
        };
        wake_all(wake);
        outcome.map(|r| {
            r.map(|()| Slot {
                shared: self.shared.clone(),
                child: None,
            })
        })
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id else { return };
        let wake = {
            let mut state = self.shared.lock();
            if state.granted.remove(&id) {
                state.release()
            } else {
                state.queue.retain(|(i, _)| *i != id);
                let mut wake = Vec::new();
                state.admit(&mut wake);
                wake
            }
        };
        wake_all(wake);
    }
}

/// A set of child tasks that can be joined, cancelled and bounded: folly's `AsyncScope` and a
/// task pool in one type. All methods take `&self`, so a scope can be shared by reference.
///
/// - Children run on the current executor (as [`crate::spawn`] does) with the scope's
///   [token](AsyncScope::token) merged with the spawner's cancellation token.
/// - A bounded scope runs at most `capacity` children at once: [`spawn`](AsyncScope::spawn)
///   fails with [`ScopeError::Full`], [`spawn_wait`](AsyncScope::spawn_wait) waits for a slot
///   in FIFO order.
/// - [`join`](AsyncScope::join) waits for every child, then resumes the first child panic.
/// - Dropping a scope that still has unfinished children drops (cancels) them; their
///   [`JoinHandle`]s report a panic saying so.
///
/// A child that panics gives the original payload to the scope (resumed by `join`) when it is
/// the first panic since the last `join`; its own `JoinHandle` then reports
/// [`JoinError::Panicked`](crate::JoinError::Panicked) with a `String` copy of the message.
///
/// ```
/// use coro::AsyncScope;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
///
/// let pool = coro::ThreadPool::new(2).unwrap();
/// let done = Arc::new(AtomicUsize::new(0));
/// let d = done.clone();
/// coro::block_wait(coro::Task::new(async move {
///     let scope = AsyncScope::bounded(2);
///     for _ in 0..5 {
///         let d = d.clone();
///         scope
///             .spawn_wait(async move { d.fetch_add(1, Ordering::SeqCst); })
///             .await
///             .unwrap()
///             .detach();
///     }
///     scope.join().await;
/// }).schedule_on(&pool));
/// assert_eq!(done.load(Ordering::SeqCst), 5);
/// ```
pub struct AsyncScope {
    shared: Arc<Shared>,
    source: CancellationSource,
}

impl AsyncScope {
    /// An unbounded scope.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// assert_eq!(scope.status().capacity, None);
    /// ```
    pub fn new() -> Self {
        AsyncScope {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
            }),
            source: CancellationSource::new(),
        }
    }

    /// A scope that runs at most `capacity` children at once.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0.
    ///
    /// ```
    /// let scope = coro::AsyncScope::bounded(4);
    /// assert_eq!(scope.status().capacity, Some(4));
    /// ```
    pub fn bounded(capacity: usize) -> Self {
        let scope = AsyncScope::new();
        scope.set_capacity(capacity);
        scope
    }

    /// Sets the most children that run at once. Raising it admits waiting spawners at once;
    /// lowering it lets running children finish, and admits nobody until fewer than
    /// `capacity` run.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// scope.set_capacity(2);
    /// assert_eq!(scope.status().capacity, Some(2));
    /// ```
    pub fn set_capacity(&self, capacity: usize) {
        assert!(
            capacity > 0,
            "AsyncScope capacity must be at least 1: pass the most children that may run at once, \
             or use AsyncScope::new() for an unbounded scope"
        );
        let mut wake = Vec::new();
        {
            let mut state = self.shared.lock();
            state.capacity = Some(capacity);
            state.admit(&mut wake);
        }
        wake_all(wake);
    }

    /// Spawns `fut` as a child now, or fails: [`ScopeError::Full`] when the scope is bounded and
    /// all slots are taken (or earlier [`spawn_wait`](AsyncScope::spawn_wait)ers wait),
    /// [`ScopeError::Closed`] after [`close`](AsyncScope::close). Dropping the returned handle
    /// detaches the child from the handle, not from the scope.
    ///
    /// ```
    /// let scope = coro::AsyncScope::bounded(1);
    /// let handle = scope.spawn(async { 42 }).unwrap();
    /// assert_eq!(coro::block_wait(handle).unwrap(), 42);
    /// ```
    pub fn spawn<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, ScopeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let slot = {
            let mut state = self.shared.lock();
            if state.closed {
                return Err(ScopeError::Closed);
            }
            if !state.queue.is_empty() || !state.has_room() {
                return Err(ScopeError::Full);
            }
            state.running += 1;
            Slot {
                shared: self.shared.clone(),
                child: None,
            }
        };
        Ok(self.spawn_child(slot, fut))
    }

    /// Spawns `fut` as a child once a slot is free, waiting in FIFO order behind earlier
    /// waiters; [`ScopeError::Closed`] if the scope is (or gets) closed first. Cancel-safe:
    /// dropping the future leaves the queue and passes on a slot it was just given.
    ///
    /// ```
    /// let scope = coro::AsyncScope::bounded(1);
    /// let value = coro::block_wait(async {
    ///     let a = scope.spawn_wait(async { 1 }).await.unwrap();
    ///     let b = scope.spawn_wait(async { 2 }).await.unwrap(); // waits for `a` to finish
    ///     a.await.unwrap() + b.await.unwrap()
    /// });
    /// assert_eq!(value, 3);
    /// ```
    pub async fn spawn_wait<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, ScopeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let mut ticket = Ticket {
            shared: &self.shared,
            id: None,
        };
        let slot = poll_fn(|cx| ticket.poll_slot(cx)).await?;
        Ok(self.spawn_child(slot, fut))
    }

    /// Spawns the child in a taken `slot`.
    fn spawn_child<F>(&self, mut slot: Slot, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let token = CancellationToken::merge([crate::current_cancellation_token(), self.token()]);
        let kill = Arc::new(Kill::default());
        {
            let mut state = self.shared.lock();
            let id = state.id();
            state.children.insert(id, kill.clone());
            slot.child = Some(id);
        }
        let frame = (&fut as &dyn Any)
            .downcast_ref::<Task<F::Output>>()
            .map(|task| task.frame().clone());
        let child = Child {
            fut: Some(Box::pin(fut)),
            slot: Some(slot),
            kill,
        };
        // A child that is a `Task` names its task in dumps (the wrapper takes its frame);
        // anything else is named after its type, as `coro::spawn` does.
        let named = match frame {
            Some(frame) => Task::with_frame_of(child, frame),
            None => Task::new(child).named(std::any::type_name::<F>()),
        };
        crate::spawn(named.with_cancellation(token))
    }

    /// A snapshot of the running and waiting counts and the capacity.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// assert_eq!(scope.status(), coro::ScopeStatus { running: 0, waiting: 0, capacity: None });
    /// ```
    pub fn status(&self) -> ScopeStatus {
        let state = self.shared.lock();
        ScopeStatus {
            running: state.running,
            waiting: state.queue.len(),
            capacity: state.capacity,
        }
    }

    /// Stops accepting children: later spawns, and spawners waiting for a slot, fail with
    /// [`ScopeError::Closed`]. Running children go on; [`join`](AsyncScope::join) still waits
    /// for them.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// scope.close();
    /// assert_eq!(scope.spawn(async {}).unwrap_err(), coro::ScopeError::Closed);
    /// ```
    pub fn close(&self) {
        let mut wake: Vec<Waker> = Vec::new();
        {
            let mut state = self.shared.lock();
            state.closed = true;
            wake.extend(state.queue.drain(..).map(|(_, w)| w));
            if state.idle() {
                wake.append(&mut state.joiners);
            }
        }
        wake_all(wake);
    }

    /// Waits until every child has finished, including children spawned while it waits, then
    /// resumes the first child panic (in time) since the last `join`, if any.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// coro::block_wait(async {
    ///     scope.spawn(async {}).unwrap().detach();
    ///     scope.join().await;
    /// });
    /// assert_eq!(scope.status().running, 0);
    /// ```
    pub async fn join(&self) {
        let panic = poll_fn(|cx| {
            let mut state = self.shared.lock();
            if state.idle() {
                return Poll::Ready(state.first_panic.take());
            }
            if !state.joiners.iter().any(|w| w.will_wake(cx.waker())) {
                state.joiners.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }

    /// Requests cancellation of the scope's [token](AsyncScope::token), which every child
    /// observes, then [joins](AsyncScope::join).
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let scope = coro::AsyncScope::new();
    /// coro::block_wait(async {
    ///     let child = scope.spawn(coro::time::sleep(Duration::from_secs(60))).unwrap();
    ///     scope.cancel_and_join().await;
    ///     assert!(child.await.unwrap().is_err());
    /// });
    /// ```
    pub async fn cancel_and_join(&self) {
        self.source.request_cancellation();
        self.join().await;
    }

    /// The scope's cancellation token, which every child's token includes.
    ///
    /// ```
    /// let scope = coro::AsyncScope::new();
    /// assert!(!scope.token().is_cancellation_requested());
    /// ```
    pub fn token(&self) -> CancellationToken {
        self.source.token()
    }
}

impl Default for AsyncScope {
    /// An unbounded scope, as [`AsyncScope::new`].
    fn default() -> Self {
        AsyncScope::new()
    }
}

impl fmt::Debug for AsyncScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncScope")
            .field("status", &self.status())
            .finish()
    }
}

impl Drop for AsyncScope {
    fn drop(&mut self) {
        let (kills, wake) = {
            let mut state = self.shared.lock();
            state.closed = true;
            let kills: Vec<Arc<Kill>> = state.children.drain().map(|(_, k)| k).collect();
            let wake: Vec<Waker> = state.queue.drain(..).map(|(_, w)| w).collect();
            (kills, wake)
        };
        for kill in kills {
            kill.kill();
        }
        wake_all(wake);
    }
}
