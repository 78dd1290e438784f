//! How `collect_all_range`, `try_collect_all_range`, `collect_all_settled_range` and the tuple
//! macros start their children: inline first, the rest offered to idle workers.
//!
//! Spawning every child costs an allocation, a queue push and a wake-up per child, and for the
//! commonest children (ready at once, or after one short wait) that cost dominates. So the
//! collect runs each child inline, in its own frame and context, until the child first
//! suspends (folly's collectAll starts its children the same way); a child that suspends is
//! then spawned as a task of its own, so that it resumes on the executor by itself. Children
//! that never suspend (CPU-bound work) would then run one after another; to keep them parallel
//! on a thread pool, the collect keeps one *offer* queued while unstarted children remain: a
//! helper task that an idle worker may pick up. A helper that starts claims the next unstarted
//! child, first queues the next offer (so the offers spread over every idle worker), then runs
//! that child to completion, and returns its outcome with the next helper's handle. When the
//! collect has started every child itself, it revokes the outstanding offer: a revoked helper
//! that still runs claims nothing. For children that are ready at once this costs one helper
//! spawn per collect, not one spawn per child.

use super::children::{Failure, Payload, guarded};
use crate::Task;
use crate::cancel::CancellationToken;
use crate::task::root::without_publishing;
use coro_executor::{JoinError, JoinHandle};
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

/// How a collect treats its children.
pub(super) struct Policy<O> {
    /// The name of the children's frames.
    pub(super) name: &'static str,
    /// Records the first failure and cancels the siblings (`None`: `settled`, never cancels).
    pub(super) failure: Option<Arc<Failure>>,
    /// The children's token, if not the caller's.
    pub(super) token: Option<CancellationToken>,
    /// Which outputs count as failures.
    pub(super) is_failure: fn(&O) -> bool,
}

impl<O> Clone for Policy<O> {
    fn clone(&self) -> Self {
        Policy {
            name: self.name,
            failure: self.failure.clone(),
            token: self.token.clone(),
            is_failure: self.is_failure,
        }
    }
}

type Outcome<O> = Result<O, Payload>;

/// The children not started yet, shared by the collect and its helpers.
struct Unstarted<F> {
    futs: Vec<Mutex<Option<F>>>,
    next: AtomicUsize,
    /// The id of the helper on offer (queued, not started), or 0.
    offer: AtomicU64,
    ids: AtomicU64,
    /// The task running the collect: every helper shows under it in dumps, also one that
    /// another helper offered.
    collect_task: Option<u64>,
}

impl<F> Unstarted<F> {
    /// Takes the next unstarted child, if any.
    fn claim(&self) -> Option<(usize, F)> {
        loop {
            let index = self.next.fetch_add(1, AcqRel);
            let slot = self.futs.get(index)?;
            // Empty only if the collect was dropped and emptied it: then claim nothing.
            if let Some(fut) = slot.lock().unwrap_or_else(PoisonError::into_inner).take() {
                return Some((index, fut));
            }
        }
    }

    fn has_unstarted(&self) -> bool {
        self.next.load(Acquire) < self.futs.len()
    }

    /// Drops every child not started yet (the collect is gone).
    fn close(&self) {
        self.next.store(usize::MAX / 2, Release);
        for slot in &self.futs {
            drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }
}

/// What a helper hands back: the child it ran, and the helper it offered next.
struct HelperOut<O> {
    child: Option<(usize, Outcome<O>)>,
    next: Option<Helper<O>>,
}

/// A helper's handle, cancelled when dropped (a dropped collect leaves no helper behind).
struct Helper<O> {
    id: u64,
    handle: Option<JoinHandle<HelperOut<O>>>,
}

impl<O> Drop for Helper<O> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.cancel();
        }
    }
}

/// Offers the next unstarted child to an idle worker, unless an offer is outstanding.
fn offer<F>(unstarted: &Arc<Unstarted<F>>, policy: &Policy<F::Output>) -> Option<Helper<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    if !unstarted.has_unstarted() {
        return None;
    }
    let id = unstarted.ids.fetch_add(1, Relaxed) + 1;
    unstarted
        .offer
        .compare_exchange(0, id, AcqRel, Acquire)
        .ok()?;
    let body = helper(id, unstarted.clone(), policy.clone());
    let mut task = Task::new(body).named(policy.name);
    if let Some(token) = &policy.token {
        task = task.with_cancellation(token.clone());
    }
    Some(Helper {
        id,
        // Behind the worker's queue, with a worker woken for it: the collect (or the helper
        // that offers it) keeps its own worker busy with a child meanwhile.
        handle: Some(crate::task::spawn_task_stealable(
            task,
            unstarted.collect_task,
        )),
    })
}

/// A helper task: takes up its offer (unless revoked), claims a child, offers the next one, and
/// runs its child to completion.
async fn helper<F>(
    id: u64,
    unstarted: Arc<Unstarted<F>>,
    policy: Policy<F::Output>,
) -> HelperOut<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let idle = HelperOut {
        child: None,
        next: None,
    };
    if unstarted
        .offer
        .compare_exchange(id, 0, AcqRel, Acquire)
        .is_err()
    {
        return idle; // revoked: the collect started everything itself
    }
    let Some((index, fut)) = unstarted.claim() else {
        return idle;
    };
    let next = offer(&unstarted, &policy);
    let outcome = guarded(index, policy.failure.clone(), policy.is_failure, fut).await;
    HelperOut {
        child: Some((index, outcome)),
        next,
    }
}

/// Awaits the task behind `handle` (a helper or a spawned child), emptying the slot once it
/// finished; until then the slot's owner still cancels the task if dropped.
async fn finish<T>(handle: &mut Option<JoinHandle<T>>) -> Result<T, JoinError> {
    let outcome =
        poll_fn(|cx| Pin::new(handle.as_mut().expect("each task is awaited once")).poll(cx)).await;
    *handle = None;
    outcome
}

/// A child started inline that suspended, now a task of its own.
struct Spawned<O> {
    index: usize,
    handle: Option<JoinHandle<Outcome<O>>>,
}

impl<O> Drop for Spawned<O> {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.cancel();
        }
    }
}

/// Dropped with the collect: drops the children it never started.
struct CloseOnDrop<F>(Arc<Unstarted<F>>);

impl<F> Drop for CloseOnDrop<F> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Runs every future of `futs` as a child of the collect, as the module doc says, and returns
/// their outcomes in input order (`Err(Cancelled)` for a child its executor dropped unfinished).
pub(super) async fn launch<F>(
    futs: Vec<F>,
    policy: Policy<F::Output>,
) -> Vec<Result<Outcome<F::Output>, JoinError>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let count = futs.len();
    let unstarted = Arc::new(Unstarted {
        futs: futs.into_iter().map(|f| Mutex::new(Some(f))).collect(),
        next: AtomicUsize::new(0),
        offer: AtomicU64::new(0),
        ids: AtomicU64::new(0),
        collect_task: coro_executor::trace::current_task_id(),
    });
    let _close = CloseOnDrop(unstarted.clone());
    let mut outcomes: Vec<Option<Result<Outcome<F::Output>, JoinError>>> =
        (0..count).map(|_| None).collect();
    let mut spawned = Vec::new();
    let mut helpers = Vec::new();

    // Start every child the collect can claim, offering the rest meanwhile.
    loop {
        if count > 1 {
            helpers.extend(offer(&unstarted, &policy));
        }
        let Some((index, fut)) = unstarted.claim() else {
            break;
        };
        let body = guarded(index, policy.failure.clone(), policy.is_failure, fut);
        let mut child = Task::new(body).named(policy.name);
        if let Some(token) = &policy.token {
            child = child.with_cancellation(token.clone());
        }
        // A child that suspends here moves to a task of its own: its stack is not where this
        // task waits, so it must not be published as this task's.
        let first_poll =
            poll_fn(|cx| Poll::Ready(without_publishing(|| Pin::new(&mut child).poll(cx))));
        match first_poll.await {
            Poll::Ready(outcome) => outcomes[index] = Some(Ok(outcome)),
            Poll::Pending => spawned.push(Spawned {
                index,
                handle: Some(crate::spawn(child)),
            }),
        }
    }

    // Revoke the outstanding offer; if it is one of ours, it need not even run.
    let revoked = unstarted.offer.swap(0, AcqRel);
    helpers.retain(|helper: &Helper<F::Output>| helper.id != revoked);

    // Gather the helpers' children (and the helpers they offered in turn), then the spawned
    // ones. Each is awaited through its cancel-on-drop owner: if the collect is dropped while
    // waiting, the child is cancelled, not detached.
    while let Some(mut helper) = helpers.pop() {
        if let Ok(out) = finish(&mut helper.handle).await {
            if let Some((index, outcome)) = out.child {
                outcomes[index] = Some(Ok(outcome));
            }
            helpers.extend(out.next);
        }
    }
    for child in &mut spawned {
        outcomes[child.index] = Some(finish(&mut child.handle).await);
    }
    outcomes
        .into_iter()
        .map(|outcome| outcome.unwrap_or(Err(JoinError::Cancelled)))
        .collect()
}
