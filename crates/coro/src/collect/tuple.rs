//! [`collect_all!`](crate::collect_all) and [`try_collect_all!`](crate::try_collect_all): a
//! fixed set of children of different types, gathered into a tuple.
//!
//! The macros turn their arguments into a tuple of futures and call a hidden trait implemented
//! for tuples of up to 12 futures. The children live in a tuple of slots (`slot.rs`), each of
//! its own type, so their outputs need no boxing.

use super::children::unwrap_child;
use super::launch::{Collect, run};
use super::slot::{Slot, joined};
use crate::Task;
use coro_executor::JoinError;
use std::borrow::Cow;
use std::future::Future;
use std::panic::{Location, resume_unwind};

/// Support for [`collect_all!`](crate::collect_all); not a public API.
#[doc(hidden)]
pub trait __CollectAllTuple {
    /// The tuple of outputs.
    type Output;
    /// The collect of this tuple of futures.
    #[track_caller]
    fn __collect_all(self) -> Task<Self::Output>;
}

/// Support for [`try_collect_all!`](crate::try_collect_all); not a public API.
#[doc(hidden)]
pub trait __TryCollectAllTuple {
    /// The tuple of `Ok` values.
    type Output;
    /// The common error type.
    type Error;
    /// The collect of this tuple of futures.
    #[track_caller]
    fn __try_collect_all(self) -> Task<Result<Self::Output, Self::Error>>;
}

/// Support for [`collect_all_settled!`](crate::collect_all_settled); not a public API.
#[doc(hidden)]
pub trait __CollectAllSettledTuple {
    /// The tuple of outcomes.
    type Output;
    /// The collect of this tuple of futures.
    #[track_caller]
    fn __collect_all_settled(self) -> Task<Self::Output>;
}

macro_rules! impl_tuples {
    ($(($($F:ident $T:ident $f:ident $i:tt),+))+) => {$(
        impl<$($F, $T),+> __CollectAllTuple for ($($F,)+)
        where
            $($F: Future<Output = $T> + Send + 'static, $T: Send + 'static,)+
        {
            type Output = ($($T,)+);

            #[track_caller]
            fn __collect_all(self) -> Task<Self::Output> {
                const NAME: &str = "collect_all";
                let location = Location::caller();
                let ($($f,)+) = self;
                let body = async move {
                    let collect =
                        Collect::start(($(Slot::new($f, NAME, location, |_| false),)+), true);
                    run(&collect).await;
                    let slots = collect.children();
                    if let Some(first) = collect.first_failure() {
                        $(if first == $i {
                            // SAFETY: `run` returned: every child is done and its slot is ours (see
                            // `Collect::children`); no slot is taken twice.
                            if let Some(Err(payload)) = unsafe { slots.$i.take() } {
                                resume_unwind(payload);
                            }
                        })+
                        unreachable!("the first failure of {NAME} is a panic");
                    }
                    // SAFETY: `run` returned: every child is done and its slot is ours (see
                    // `Collect::children`); no slot is taken twice.
                    ($(unwrap_child(NAME, $i, joined(unsafe { slots.$i.take() })),)+)
                };
                Task::with_frame(body, Cow::Borrowed(NAME), location)
            }
        }

        impl<$($F, $T),+> __CollectAllSettledTuple for ($($F,)+)
        where
            $($F: Future<Output = $T> + Send + 'static, $T: Send + 'static,)+
        {
            type Output = ($(Result<$T, JoinError>,)+);

            #[track_caller]
            fn __collect_all_settled(self) -> Task<Self::Output> {
                const NAME: &str = "collect_all_settled";
                let location = Location::caller();
                let ($($f,)+) = self;
                let body = async move {
                    // No failure record: a failure never cancels the siblings.
                    let collect =
                        Collect::start(($(Slot::new($f, NAME, location, |_| false),)+), false);
                    run(&collect).await;
                    let slots = collect.children();
                    // SAFETY: `run` returned: every child is done and its slot is ours (see
                    // `Collect::children`); no slot is taken twice.
                    ($(joined(unsafe { slots.$i.take() }),)+)
                };
                Task::with_frame(body, Cow::Borrowed(NAME), location)
            }
        }

        impl<E: Send + 'static, $($F, $T),+> __TryCollectAllTuple for ($($F,)+)
        where
            $($F: Future<Output = Result<$T, E>> + Send + 'static, $T: Send + 'static,)+
        {
            type Output = ($($T,)+);
            type Error = E;

            #[track_caller]
            fn __try_collect_all(self) -> Task<Result<Self::Output, E>> {
                const NAME: &str = "try_collect_all";
                let location = Location::caller();
                let ($($f,)+) = self;
                let body = async move {
                    let collect =
                        Collect::start(($(Slot::new($f, NAME, location, Result::is_err),)+), true);
                    run(&collect).await;
                    let slots = collect.children();
                    if let Some(first) = collect.first_failure() {
                        $(if first == $i {
                            // SAFETY: `run` returned: every child is done and its slot is ours (see
                            // `Collect::children`); no slot is taken twice.
                            match unsafe { slots.$i.take() } {
                                Some(Ok(Err(error))) => return Err(error),
                                Some(Err(payload)) => resume_unwind(payload),
                                _ => {}
                            }
                        })+
                        unreachable!("the first failure of {NAME} is an Err or a panic");
                    }
                    // SAFETY: `run` returned: every child is done and its slot is ours (see
                    // `Collect::children`); no slot is taken twice.
                    Ok(($(unwrap_child(NAME, $i, joined(unsafe { slots.$i.take() }))
                        .unwrap_or_else(|_| unreachable!("no child of {NAME} failed")),)+))
                };
                Task::with_frame(body, Cow::Borrowed(NAME), location)
            }
        }
    )+};
}

impl_tuples! {
    (F0 T0 f0 0)
    (F0 T0 f0 0, F1 T1 f1 1)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6,
     F7 T7 f7 7)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6,
     F7 T7 f7 7, F8 T8 f8 8)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6,
     F7 T7 f7 7, F8 T8 f8 8, F9 T9 f9 9)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6,
     F7 T7 f7 7, F8 T8 f8 8, F9 T9 f9 9, F10 T10 f10 10)
    (F0 T0 f0 0, F1 T1 f1 1, F2 T2 f2 2, F3 T3 f3 3, F4 T4 f4 4, F5 T5 f5 5, F6 T6 f6 6,
     F7 T7 f7 7, F8 T8 f8 8, F9 T9 f9 9, F10 T10 f10 10, F11 T11 f11 11)
}

/// Runs up to 12 futures (or tasks) of different types concurrently (in parallel on a
/// [`ThreadPool`](crate::ThreadPool)) and gives their outputs as a tuple, in argument order
/// (folly's `collectAll`).
///
/// The result is a lazy [`Task`](crate::Task) named `collect_all`: nothing starts until it is
/// awaited. The semantics are those of [`collect_all_range`](crate::collect_all_range): each
/// child gets the caller's cancellation token merged with the collect's own; the first child to
/// panic, in time, cancels the others, and its panic is resumed once all have finished;
/// dropping the collect drops the unfinished children.
///
/// ```
/// let (n, s) = coro::block_wait(coro::collect_all!(async { 6 * 7 }, async { "six by seven" }));
/// assert_eq!((n, s), (42, "six by seven"));
/// ```
#[macro_export]
macro_rules! collect_all {
    ($($fut:expr),+ $(,)?) => {
        $crate::__CollectAllTuple::__collect_all((
            $(::core::future::IntoFuture::into_future($fut),)+
        ))
    };
}

/// Like [`collect_all!`](crate::collect_all), for children that return `Result<_, E>` (one `E`
/// for all): a lazy [`Task`](crate::Task) of `Result<(A, B, ..), E>`. This is Rust's
/// *try-join* (`futures::try_join!` with cancellation), not folly's `collectAllTry`: the first
/// child to fail, by returning `Err` or by panicking, cancels the others; once all have
/// finished, that `Err` is returned (or that panic resumed), and the other children's outcomes
/// are dropped. folly's `collectAllTry`, which keeps every child's outcome and cancels nothing,
/// is [`collect_all_settled!`](crate::collect_all_settled). See
/// [`try_collect_all_range`](crate::try_collect_all_range).
///
/// ```
/// let ok = coro::try_collect_all!(async { Ok::<_, String>(1) }, async { Ok(true) });
/// assert_eq!(coro::block_wait(ok), Ok((1, true)));
///
/// let failed = coro::try_collect_all!(async { Ok(1) }, async { Err::<bool, _>("no") });
/// assert_eq!(coro::block_wait(failed), Err("no"));
/// ```
#[macro_export]
macro_rules! try_collect_all {
    ($($fut:expr),+ $(,)?) => {
        $crate::__TryCollectAllTuple::__try_collect_all((
            $(::core::future::IntoFuture::into_future($fut),)+
        ))
    };
}

/// Runs up to 12 futures (or tasks) of different types concurrently and gives each one's
/// outcome, in argument order: a lazy [`Task`](crate::Task) of
/// `(Result<A, JoinError>, Result<B, JoinError>, ..)` (folly's `collectAllTry`).
///
/// A child that panics gives `Err(JoinError::Panicked)` with its payload (and message), and
/// never cancels its siblings: each runs with the caller's cancellation token, to its end.
/// Dropping the collect drops the unfinished children. The range form is
/// [`collect_all_settled_range`](crate::collect_all_settled_range).
///
/// ```
/// let (a, b) = coro::block_wait(coro::collect_all_settled!(
///     async { 1 },
///     async {
///         panic!("backend down");
///         #[allow(unreachable_code)]
///         "unreachable"
///     },
/// ));
/// assert_eq!(a.unwrap(), 1);
/// assert!(b.unwrap_err().to_string().contains("backend down"));
/// ```
#[macro_export]
macro_rules! collect_all_settled {
    ($($fut:expr),+ $(,)?) => {
        $crate::__CollectAllSettledTuple::__collect_all_settled((
            $(::core::future::IntoFuture::into_future($fut),)+
        ))
    };
}
