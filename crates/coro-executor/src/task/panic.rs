//! Panics caught where a task runs, never unwinding through a worker: the payload type, its
//! message, the wrapper that turns a panicking poll into an outcome, and the outcome whose
//! destructor cannot abort the process.

use std::any::Any;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// A panic payload, as `std::panic::catch_unwind` returns it and [`JoinError::Panicked`](crate::JoinError::Panicked) carries
/// it: the one name coro uses for it.
///
/// ```
/// let payload: coro_executor::PanicPayload = std::panic::catch_unwind(|| panic!("boom")).unwrap_err();
/// assert_eq!(coro_executor::panic_message(&*payload), Some("boom"));
/// ```
pub type PanicPayload = Box<dyn Any + Send + 'static>;

/// The message of a panic payload, when it is a string (as `panic!` makes it: a `&'static str`
/// for a literal message, a `String` for a formatted one); `None` for any other payload.
///
/// ```
/// use coro_executor::panic_message;
///
/// let literal = std::panic::catch_unwind(|| panic!("down")).unwrap_err();
/// let formatted = std::panic::catch_unwind(|| panic!("shard {} down", 7)).unwrap_err();
/// let other = std::panic::catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
/// assert_eq!(panic_message(&*literal), Some("down"));
/// assert_eq!(panic_message(&*formatted), Some("shard 7 down"));
/// assert_eq!(panic_message(&*other), None);
/// ```
pub fn panic_message(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<&'static str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
}

/// A task's outcome as async-task stores it: its value, or the payload of its panic. Its Drop
/// catches a panic in the value's (or the payload's) destructor: async-task drops an outcome
/// nobody took (a detached task's) under an abort-on-panic guard, and a user's destructor must
/// not abort the process. (The panic hook has reported the panic when it happened.)
pub(crate) struct Outcome<T>(ManuallyDrop<Result<T, PanicPayload>>);

impl<T> Outcome<T> {
    pub(crate) fn new(outcome: Result<T, PanicPayload>) -> Self {
        Outcome(ManuallyDrop::new(outcome))
    }

    pub(crate) fn into_inner(self) -> Result<T, PanicPayload> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once; `this` is never dropped, so the value is not dropped again.
        unsafe { ManuallyDrop::take(&mut this.0) }
    }
}

impl<T> Drop for Outcome<T> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; the field is not used afterwards.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            ManuallyDrop::drop(&mut self.0)
        }));
    }
}

/// Drops `value`, catching a panic in its destructor; returns the panic's payload if any.
pub(crate) fn drop_catching<T>(value: T) -> Option<PanicPayload> {
    catch_unwind(AssertUnwindSafe(move || drop(value))).err()
}

/// Runs a future, turning a panic in `poll` into `Err(payload)` so that it reaches the
/// [`JoinHandle`](crate::JoinHandle) instead of unwinding through the worker.
pub(crate) struct CatchUnwind<F> {
    future: F,
}

impl<F> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind { future }
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, PanicPayload>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self`, and
        // `CatchUnwind` has no Drop impl and no Unpin impl that would let it move.
        let future = unsafe { self.map_unchecked_mut(|s| &mut s.future) };
        // A panicking future is never polled again (async-task drops it after Ready), so the
        // state it unwound through cannot be observed broken: AssertUnwindSafe is sound here.
        match catch_unwind(AssertUnwindSafe(|| future.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(value)) => Poll::Ready(Ok(value)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}
