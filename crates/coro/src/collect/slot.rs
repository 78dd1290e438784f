//! A collect's children in place: each child lives in a [`Slot`] inside the collect's shared
//! state from its creation to its outcome, and is polled there, by whoever owns it at the time.
//!
//! Ownership of a slot is handed on, never shared: the collect's claim counter gives each index
//! to exactly one claimer (the collect itself, or an idle worker taking from its offer); the
//! claimer polls the child inline, and if it suspends, the task spawned to drive it takes over
//! (the spawn orders the hand-over); once that task has finished, the collect reads the
//! outcome. An index nobody claimed belongs to the collect's closing, which sets the counter
//! past every index first. So the slots need no lock: one owner at a time, by construction.
//!
//! Children of one range share a type ([`Box<[Slot<F>]>`](Slot)); the children of
//! `collect_all!` do not, and live in a tuple of slots. Both are [`ChildSlots`].

use crate::Task;
use crate::task::context::{TaskContext, enter_context_if_changed};
use crate::task::poll_in_frame;
use crate::trace::frame_chain::FrameNode;
use coro_executor::JoinError;
use coro_executor::PanicPayload;
use coro_executor::trace::Frame;
use coro_loom::UnsafeCell;
use std::any::{Any, TypeId};
use std::future::Future;
use std::panic::{AssertUnwindSafe, Location, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A child's outcome: its output, or the payload of its panic.
pub(super) type Outcome<T> = Result<T, PanicPayload>;

/// A taken outcome as a join result: `None` (no outcome: the child's executor dropped it
/// unfinished) is `Cancelled`, a caught panic `Panicked`.
pub(super) fn joined<T>(outcome: Option<Outcome<T>>) -> Result<T, JoinError> {
    match outcome {
        Some(Ok(value)) => Ok(value),
        Some(Err(payload)) => Err(JoinError::Panicked(payload)),
        None => Err(JoinError::Cancelled),
    }
}

/// Drops `value`, catching a panic in its destructor (the panic hook has reported it).
fn drop_quietly<T>(value: T) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(value)));
}

/// One child: its future and frame until it finishes, then its outcome until taken. It runs in
/// its collect's children's context, which the collect keeps (one for all of them).
pub(super) struct Slot<F: Future> {
    state: UnsafeCell<State<F>>,
    /// Which outputs count as failures (a `try_` collect's `Err`).
    is_failure: fn(&F::Output) -> bool,
}

enum State<F: Future> {
    /// Not finished. The future is pinned from its first poll until dropped in place. `frame`:
    /// the frame the child runs in, unless it is a `Task`, which has its own (linked under the
    /// collect's directly: the chain shows the child's frame, then the collect's).
    Running {
        frame: FrameNode,
        future: F,
    },
    Done(Outcome<F::Output>),
    /// The outcome was taken, or the child dropped unstarted.
    Empty,
}

// SAFETY: a slot is used by one owner at a time, handed on as the module doc says, each hand-over
// ordered by an atomic claim or a spawn/join (happens-before); so sharing `&Slot` between threads
// never lets two of them touch `state` at once. What crosses threads is the future and its output,
// hence the `Send` bounds.
unsafe impl<F> Sync for Slot<F>
where
    F: Future + Send,
    F::Output: Send,
{
}

/// Whether children of type `F` are [`Task`]s, which run in frames of their own. Known at
/// compile time: each slot type keeps only the branch it takes.
#[inline(always)]
fn is_task<F>() -> bool
where
    F: Future + 'static,
    F::Output: 'static,
{
    TypeId::of::<F>() == TypeId::of::<Task<F::Output>>()
}

impl<F> Slot<F>
where
    F: Future + 'static,
    F::Output: 'static,
{
    /// A slot for `fut`, framed as `name` created at `location` unless it is a [`Task`], which
    /// has a frame of its own (the slot's then goes unused).
    pub(super) fn new(
        fut: F,
        name: &'static str,
        location: &'static Location<'static>,
        is_failure: fn(&F::Output) -> bool,
    ) -> Slot<F> {
        Slot {
            state: UnsafeCell::new(State::Running {
                frame: FrameNode::new(Frame::new(name, location)),
                future: fut,
            }),
            is_failure,
        }
    }

    /// Polls the child in place, in context `ctx` (`None`: the caller made the children's
    /// context current), catching a panic. `Ready(failed)` once it
    /// finished: its outcome is then stored, and `failed` says whether it panicked or its
    /// output is a failure.
    ///
    /// # Safety
    ///
    /// The caller owns the slot, and the slot does not move from its first poll until it is
    /// dropped (it lives in the collect's shared allocation).
    pub(super) unsafe fn poll(
        &self,
        ctx: Option<&TaskContext>,
        cx: &mut Context<'_>,
    ) -> Poll<bool> {
        self.state.with_mut(|state| {
            // SAFETY: the caller owns the slot: this is the only reference to its state.
            let state = unsafe { &mut *state };
            let State::Running { frame, future } = state else {
                return Poll::Ready(false);
            };
            // SAFETY: the slot does not move (caller's promise), and the future is only ever
            // dropped in place (the assignment below, or the slot's own drop).
            let future = unsafe { Pin::new_unchecked(future) };
            let polled = catch_unwind(AssertUnwindSafe(|| {
                if is_task::<F>() {
                    // A `Task` enters its own frame, under the current one, and captures the
                    // context current at its first poll.
                    let _ctx = ctx.and_then(enter_context_if_changed);
                    future.poll(cx)
                } else {
                    poll_in_frame(frame, ctx, future, cx)
                }
            }));
            let outcome = match polled {
                Ok(Poll::Pending) => return Poll::Pending,
                Ok(Poll::Ready(value)) => Ok(value),
                Err(payload) => Err(payload),
            };
            // Drops the finished future in place, catching a panic in its destructor (an
            // assignment stores the new value even when dropping the old one unwinds): like a
            // spawned task's, such a panic is the child's outcome, a failure; unwinding from
            // here instead would skip the collect's bookkeeping (the failure was neither
            // recorded nor, from a driven child, ever seen).
            let dropped = catch_unwind(AssertUnwindSafe(|| *state = State::Empty));
            let outcome = match (outcome, dropped) {
                (outcome, Ok(())) => outcome,
                (Ok(value), Err(payload)) => {
                    // The value is lost with the child's failure; its destructor may panic too.
                    drop_quietly(value);
                    Err(payload)
                }
                // The poll's panic is the one reported.
                (Err(payload), Err(second)) => {
                    drop_quietly(second);
                    Err(payload)
                }
            };
            let failed = !outcome.as_ref().is_ok_and(|v| !(self.is_failure)(v));
            *state = State::Done(outcome);
            Poll::Ready(failed)
        })
    }

    /// The child's frame, for the task that drives it once it suspended.
    ///
    /// # Safety
    ///
    /// The caller owns the slot.
    pub(super) unsafe fn frame(&self) -> Option<Frame> {
        self.state.with(|state| {
            // SAFETY: the caller owns the slot.
            match unsafe { &*state } {
                State::Running { frame, future } => Some(
                    match (future as &dyn Any).downcast_ref::<Task<F::Output>>() {
                        Some(task) => task.frame().clone(),
                        None => frame.frame.clone(),
                    },
                ),
                _ => None,
            }
        })
    }

    /// Takes the outcome of a finished child; `None` if it never finished (its task was
    /// dropped by a shut-down executor) or was taken already.
    ///
    /// # Safety
    ///
    /// The caller owns the slot.
    pub(super) unsafe fn take(&self) -> Option<Outcome<F::Output>> {
        self.state.with_mut(|state| {
            // SAFETY: the caller owns the slot.
            let state = unsafe { &mut *state };
            // A running child stays where it is (pinned), to be dropped in place with the slot.
            if !matches!(state, State::Done(_)) {
                return None;
            }
            match std::mem::replace(state, State::Empty) {
                State::Done(outcome) => Some(outcome),
                _ => unreachable!("checked above"),
            }
        })
    }

    /// Drops a child that was never started (its collect is gone).
    ///
    /// # Safety
    ///
    /// The caller owns the slot, and the child was never polled.
    pub(super) unsafe fn drop_unstarted(&self) {
        self.state.with_mut(|state| {
            // SAFETY: the caller owns the slot; an unpolled future is not pinned yet.
            drop(std::mem::replace(unsafe { &mut *state }, State::Empty));
        });
    }
}

/// A collect's children, addressed by index (see the module doc for who may touch which).
pub(super) trait ChildSlots: Send + Sync + 'static {
    /// How many children there are.
    fn len(&self) -> usize;

    /// [`Slot::poll`] of child `index`.
    ///
    /// # Safety
    ///
    /// As for [`Slot::poll`].
    unsafe fn poll(
        &self,
        index: usize,
        ctx: Option<&TaskContext>,
        cx: &mut Context<'_>,
    ) -> Poll<bool>;

    /// [`Slot::frame`] of child `index`.
    ///
    /// # Safety
    ///
    /// As for [`Slot::frame`].
    unsafe fn frame(&self, index: usize) -> Option<Frame>;

    /// [`Slot::drop_unstarted`] of child `index`.
    ///
    /// # Safety
    ///
    /// As for [`Slot::drop_unstarted`].
    unsafe fn drop_unstarted(&self, index: usize);
}

impl<F> ChildSlots for Box<[Slot<F>]>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn len(&self) -> usize {
        <[Slot<F>]>::len(self)
    }

    unsafe fn poll(
        &self,
        index: usize,
        ctx: Option<&TaskContext>,
        cx: &mut Context<'_>,
    ) -> Poll<bool> {
        // SAFETY: forwarded from the caller.
        unsafe { self[index].poll(ctx, cx) }
    }

    unsafe fn frame(&self, index: usize) -> Option<Frame> {
        // SAFETY: forwarded from the caller.
        unsafe { self[index].frame() }
    }

    unsafe fn drop_unstarted(&self, index: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { self[index].drop_unstarted() }
    }
}

/// `ChildSlots` for a tuple of slots: each index dispatches to its field.
macro_rules! impl_children_for_tuples {
    ($(($len:literal: $($F:ident $i:tt),+))+) => {$(
        impl<$($F),+> ChildSlots for ($(Slot<$F>,)+)
        where
            $($F: Future + Send + 'static, $F::Output: Send + 'static,)+
        {
            fn len(&self) -> usize {
                $len
            }

            unsafe fn poll(
                &self,
                index: usize,
                ctx: Option<&TaskContext>,
                cx: &mut Context<'_>,
            ) -> Poll<bool> {
                match index {
                    // SAFETY: forwarded from the caller.
                    $($i => unsafe { self.$i.poll(ctx, cx) },)+
                    _ => unreachable!("child {index} of {}", $len),
                }
            }

            unsafe fn frame(&self, index: usize) -> Option<Frame> {
                match index {
                    // SAFETY: forwarded from the caller.
                    $($i => unsafe { self.$i.frame() },)+
                    _ => unreachable!("child {index} of {}", $len),
                }
            }

            unsafe fn drop_unstarted(&self, index: usize) {
                match index {
                    // SAFETY: forwarded from the caller.
                    $($i => unsafe { self.$i.drop_unstarted() },)+
                    _ => unreachable!("child {index} of {}", $len),
                }
            }
        }
    )+};
}

impl_children_for_tuples! {
    (1: F0 0)
    (2: F0 0, F1 1)
    (3: F0 0, F1 1, F2 2)
    (4: F0 0, F1 1, F2 2, F3 3)
    (5: F0 0, F1 1, F2 2, F3 3, F4 4)
    (6: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5)
    (7: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6)
    (8: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6, F7 7)
    (9: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6, F7 7, F8 8)
    (10: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6, F7 7, F8 8, F9 9)
    (11: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6, F7 7, F8 8, F9 9, F10 10)
    (12: F0 0, F1 1, F2 2, F3 3, F4 4, F5 5, F6 6, F7 7, F8 8, F9 9, F10 10, F11 11)
}
