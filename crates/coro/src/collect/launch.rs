//! How `collect_all_range`, `try_collect_all_range`, `collect_all_settled_range` and the tuple
//! macros run their children: in place, inline first, the rest offered to idle workers.
//!
//! Spawning every child costs an allocation, a queue push and a wake-up per child, and for the
//! commonest children (ready at once, or after one short wait) that cost dominates. So each
//! child lives in a slot of the collect's shared state (`slot.rs`), and the collect polls it
//! there, inline, in the child's own frame and context, until it first suspends (folly's
//! collectAll starts its children the same way). A child that suspends is then driven by a
//! task of its own, which polls it in the same slot, so that it resumes on the executor by
//! itself. A ready child costs no allocation, no spawn and no wake-up.
//!
//! Children that never suspend (CPU-bound work) would then run one after another. To keep them
//! parallel on a thread pool, the collect *posts* its unstarted children as an offer on its
//! worker while it starts them ([`coro_executor::offer_while`]). Posting wakes nobody and costs a
//! few atomic operations; if the children are quick, the offer is revoked before anyone looks.
//! If the worker stays busy, the pool's monitor wakes an idle worker, which takes the next
//! unstarted child and drives it as a task there (offering the rest in turn while it runs, so
//! the work spreads over every idle worker).

// Loom models of the launch: `collect/loom_launch.rs`, a child module so that it can reach
// the launch's private state.
#[cfg(all(test, loom))]
#[path = "loom_launch.rs"]
mod loom_launch;

use super::awaiter::{AwaiterChain, LentChain};
use super::children::Failure;
use super::slot::ChildSlots;
use crate::cancel::CancellationToken;
use crate::task::context::{TaskContext, current_context, enter_context};
use crate::task::spawn_root::{RootBody, spawn_root};
use crate::trace::Frame;
use crate::trace::frame_chain::{continue_into_unpublished, inside_frame};
use crate::trace::root_trace::{RootTrace, without_publishing};
use coro_executor::{JoinError, JoinHandle, Offer, offer_while};
use coro_loom::sync::Mutex;
use coro_loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::future::{Future, poll_fn};
use std::num::NonZeroU64;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::Poll;

/// A collect's shared state: its children, who has claimed which, and its failure policy.
pub(super) struct Collect<S> {
    children: S,
    /// The next index to claim (each claim takes one; closing sets it past every index).
    next: AtomicUsize,
    /// The context the children run in: the caller's, with the children's token (the
    /// caller's merged with the collect's own, unless the collect never cancels). Its token
    /// goes back with `failure`'s source for reuse when the collect is dropped.
    child_ctx: TaskContext,
    /// Records the first failure and cancels the siblings (`None`: `settled`, never cancels).
    failure: Option<Failure>,
    /// Children taken by idle workers. Locked from a taker's claim to the push of its child's
    /// handle, so that once every child is claimed, the collect finds every taken one here.
    taken: Mutex<Vec<Driven>>,
    /// Set (under `taken`'s lock, before claiming) by every idle worker that tries to take a
    /// child, so that the collect need not lock `taken` when none did.
    tried_taking: AtomicBool,
    /// The task running the collect: driven children show under it in dumps.
    /// (Task ids start at 1: a `NonZeroU64` keeps this a word, which, with `lent`, keeps a
    /// small collect's state within the size it copies quickly.)
    collect_task: Option<NonZeroU64>,
    /// The collect's chain of frames, which driven children continue their stacks into, lent
    /// to claimers during the start poll.
    lent: LentChain,
}

impl<S: ChildSlots> Collect<S> {
    /// The state of a collect of `children` that starts now, in the current task, whose
    /// context the children inherit; `cancels`: whether the first failure cancels the
    /// siblings.
    pub(super) fn start(children: S, cancels: bool) -> Arc<Collect<S>> {
        let mut child_ctx = current_context();
        let failure = cancels.then(|| {
            let (failure, own) = Failure::unshared();
            let caller = &mut child_ctx.token;
            // Without a caller's token to merge, the merge would return the collect's own.
            *caller = if caller.can_be_cancelled() {
                CancellationToken::merge([std::mem::take(caller), own])
            } else {
                own
            };
            failure
        });
        Arc::new(Collect {
            children,
            next: AtomicUsize::new(0),
            child_ctx,
            failure,
            taken: Mutex::new(Vec::new()),
            tried_taking: AtomicBool::new(false),
            collect_task: coro_executor::trace::current_task_id().and_then(NonZeroU64::new),
            lent: LentChain::new(),
        })
    }

    /// The children, to take their outcomes from.
    ///
    /// Only once [`run`] has returned: every child is then finished (or dropped by a shut-down
    /// executor), nobody can claim one any more, and their slots are the caller's.
    pub(super) fn children(&self) -> &S {
        debug_assert!(!self.has_unstarted());
        &self.children
    }

    /// The index of the child that failed first, if any did.
    pub(super) fn first_failure(&self) -> Option<usize> {
        self.failure.as_ref().and_then(Failure::first)
    }

    /// Takes the next unstarted child: the caller owns its slot from here on.
    fn claim(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, AcqRel);
        (index < self.children.len()).then_some(index)
    }

    /// Claims and starts (with `start`) every child the collect can, beginning with `first`
    /// (from [`claim_first`](Self::claim_first)); stops after the last index rather than
    /// making a claim that would fail.
    fn claim_each(&self, mut first: Option<usize>, mut start: impl FnMut(usize)) {
        while let Some(index) = first.take().or_else(|| self.claim()) {
            start(index);
            if index + 1 == self.children.len() {
                break;
            }
        }
    }

    /// [`claim`](Self::claim) for the collect's own first claim, before it offers anything:
    /// while it holds the only reference, nobody can claim concurrently, and a plain store does
    /// (published to idle workers by the offer's release).
    fn claim_first(this: &Arc<Self>) -> Option<usize> {
        if Arc::strong_count(this) != 1 || this.children.len() == 0 {
            return this.claim();
        }
        this.next.store(1, Relaxed);
        Some(0)
    }

    fn has_unstarted(&self) -> bool {
        self.next.load(Acquire) < self.children.len()
    }

    /// Polls child `index`, recording its failure if it finished failing; `in_child_ctx`: the
    /// caller made the children's context current already.
    ///
    /// # Safety
    ///
    /// The caller owns the child's slot (see `slot.rs`), which lives in this shared allocation.
    unsafe fn poll_child(
        &self,
        index: usize,
        in_child_ctx: bool,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<()> {
        let ctx = (!in_child_ctx).then_some(&self.child_ctx);
        // SAFETY: forwarded from the caller.
        let failed = std::task::ready!(unsafe { self.children.poll(index, ctx, cx) });
        if let (true, Some(failure)) = (failed, &self.failure) {
            failure.record(index);
        }
        Poll::Ready(())
    }

    /// Drops every child nobody claimed and cancels the taken ones (the collect is gone).
    fn close(&self) {
        let first_unclaimed = self.next.swap(usize::MAX / 2, AcqRel);
        for index in first_unclaimed..self.children.len() {
            // SAFETY: the swap took every index from `first_unclaimed` on away from any future
            // claim (they now get `usize::MAX / 2` and up), so those slots are ours, unpolled.
            unsafe { self.children.drop_unstarted(index) };
        }
        drop(self.take_taken());
    }

    /// Claims the next unstarted child for an idle worker, and lists what `start` makes of it
    /// (its driver, given the collect's chain to continue into) for the collect to await.
    fn take_with(&self, start: impl FnOnce(usize, Arc<[Frame]>) -> Driven) {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        // Before the claim: the claim's release carries it to the collect's final claim.
        self.tried_taking.store(true, Relaxed);
        let Some(index) = self.claim() else {
            return;
        };
        // SAFETY: a successful claim, under the lock. The chain is complete before the child
        // can run.
        let awaiter = unsafe { self.lent.frames() };
        // The claim made the slot ours; `start` hands it over.
        taken.push(start(index, awaiter));
    }

    /// The children idle workers took, once no more can be claimed (the caller made the last
    /// claim, successful or not, or closed the collect).
    fn take_taken(&self) -> Vec<Driven> {
        // A taker sets the flag before its claim. A successful one comes before the caller's
        // last claim (or close) in the order of `next`'s updates, so that read-modify-write
        // acquired the flag; takers that come later claim nothing.
        // The collect's chain is lent no more, once no claimer can be reading it.
        if !self.tried_taking.load(Relaxed) {
            // SAFETY: no taker has claimed anything, and none will: none reads the chain.
            unsafe { self.lent.end_loan() };
            return Vec::new();
        }
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: a taker that claimed reads the chain under this lock, now released; later
        // ones claim nothing.
        unsafe { self.lent.end_loan() };
        std::mem::take(&mut *taken)
    }
}

impl<S> Drop for Collect<S> {
    fn drop(&mut self) {
        if let Some(failure) = self.failure.take() {
            // The children's token is the source's own unless it was merged with the caller's.
            failure.recycle(std::mem::take(&mut self.child_ctx.token));
        }
    }
}

impl<S: ChildSlots> Offer for Collect<S> {
    fn has_work(&self) -> bool {
        self.has_unstarted()
    }

    /// On an idle worker: claims the next unstarted child and spawns its driver there.
    fn take(self: Arc<Self>) {
        self.take_with(|index, awaiter| drive(&self, index, awaiter));
    }
}

/// A child driven by a task of its own (it suspended, or an idle worker took it); cancelled,
/// not detached, if the collect is dropped first.
struct Driven {
    index: usize,
    handle: Option<JoinHandle<()>>,
}

impl Drop for Driven {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.cancel();
        }
    }
}

/// The task that drives a child in its slot.
struct Driver<S> {
    collect: Arc<Collect<S>>,
    index: usize,
    /// The child's frame, which dumps show as this task's name. (A copy: the child's own is in
    /// its slot, which outlives the child but not necessarily this task.)
    frame: Frame,
    /// The collect's chain, innermost first, which the child's stack continues into.
    awaiter: Arc<[Frame]>,
}

impl<S: ChildSlots> RootBody for Driver<S> {
    fn root_frame(&self) -> &Frame {
        &self.frame
    }
}

impl<S: ChildSlots> Future for Driver<S> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<()> {
        // The child's stack continues into the collect's chain; polled inside another frame
        // (by an inline executor, in the collect's poll), it is linked there already. Not
        // published: a dump appends the collect's task's own published stack.
        let _continued = (!inside_frame()).then(|| continue_into_unpublished(&self.awaiter));
        let collect = &self.collect;
        // SAFETY: the driver owns the slot: its spawner (the claimer) handed it over and polls
        // it no more; the collect only reads it after this task has finished.
        let mut poll = || unsafe { collect.poll_child(self.index, false, cx) };
        if collect.has_unstarted() {
            // While children are left unstarted, this worker offers them in turn.
            offer_while(collect, poll)
        } else {
            poll()
        }
    }
}

/// Spawns the driver of child `index`, which the caller owns and hands over, with the
/// collect's chain for the child's stack to continue into.
fn drive<S: ChildSlots>(collect: &Arc<Collect<S>>, index: usize, awaiter: Arc<[Frame]>) -> Driven {
    // SAFETY: the caller owns the slot until the spawn below hands it over.
    let frame = unsafe { collect.children.frame(index) }.expect("a driven child is unfinished");
    let driver = Driver {
        collect: collect.clone(),
        index,
        frame,
        awaiter,
    };
    let handle = crate::task::context::with_current_executor(|executor| {
        let default;
        let executor = match executor {
            Some(executor) => executor,
            None => {
                default = coro_executor::default_pool().handle();
                &default
            }
        };
        let parent = collect.collect_task.map(NonZeroU64::get);
        spawn_root(executor, RootTrace::awaited_by(parent), driver)
    });
    Driven {
        index,
        handle: Some(handle),
    }
}

/// Awaits the task behind `handle`, emptying the slot once it finished; until then the slot's
/// owner still cancels the task if dropped.
async fn finish<T>(handle: &mut Option<JoinHandle<T>>) -> Result<T, JoinError> {
    let outcome =
        poll_fn(|cx| Pin::new(handle.as_mut().expect("each task is awaited once")).poll(cx)).await;
    *handle = None;
    outcome
}

/// Dropped with the collect before it has started every child: drops the children nobody
/// started (and stops idle workers from taking more), cancels the taken ones. Disarmed once
/// every child is claimed and the taken ones are the collect's: nothing is left for it then.
struct CloseOnDrop<'a, S: ChildSlots>(Option<&'a Collect<S>>);

impl<S: ChildSlots> Drop for CloseOnDrop<'_, S> {
    fn drop(&mut self) {
        if let Some(collect) = self.0 {
            collect.close();
        }
    }
}

/// Runs every child of `collect`, as the module doc says, until all have finished. Their
/// outcomes are then in their slots: a child whose slot holds none was dropped unfinished by
/// its executor (shut down).
pub(super) async fn run<S: ChildSlots>(collect: &Arc<Collect<S>>) {
    let count = collect.children.len();
    let mut driven = Vec::new();

    // Start every child the collect can claim, offering the rest meanwhile: all in one poll
    // of this task (each child's first poll returns at once), as an offer must be.
    poll_fn(|cx| {
        // The collect's chain of frames, for the children it drives: this is its start poll,
        // in its own frame. Declared before `close`, so that on unwinding it outlives the
        // closing, which waits for takers copying it.
        let chain = AwaiterChain::here();
        let mut close = CloseOnDrop(Some(collect));
        let first = Collect::claim_first(collect);
        let mut start_all = || {
            collect.claim_each(first, |index| {
                // SAFETY: the claim made the slot ours; it lives in the collect's allocation.
                if unsafe { collect.poll_child(index, true, cx) }.is_pending() {
                    // SAFETY: this is the collect's start poll, on its own thread.
                    let awaiter = unsafe { chain.frames() };
                    driven.push(drive(collect, index, awaiter));
                }
            });
        };
        // The children's context, once for all of them. A child that suspends here moves to a
        // task of its own: its stack is not where this task waits, so it must not be published
        // as this task's.
        let _ctx = enter_context(&collect.child_ctx);
        without_publishing(|| {
            if count > 1 {
                // SAFETY: before the offer is posted; `chain` outlives the loan, which ends
                // when the collect reads its taken list (`take_taken`, also in `close`).
                unsafe { collect.lent.lend(&chain) };
                offer_while(collect, start_all);
            } else {
                start_all();
            }
        });
        // Every child is claimed: every one an idle worker took is listed by now.
        driven.append(&mut collect.take_taken());
        close.0 = None;
        Poll::Ready(())
    })
    .await;

    // Wait for the driven children. Each is awaited through its cancel-on-drop owner: if the
    // collect is dropped while waiting, the child is cancelled, not detached. A driver dropped
    // by a shut-down executor leaves its child's slot without an outcome.
    for child in &mut driven {
        let _ = finish(&mut child.handle).await;
        debug_assert!(child.index < count);
    }
}
