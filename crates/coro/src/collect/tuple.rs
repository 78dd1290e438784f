//! [`collect_all!`](crate::collect_all) and [`try_collect_all!`](crate::try_collect_all): a
//! fixed set of children of different types, gathered into a tuple.
//!
//! The macros turn their arguments into a tuple of futures and call a hidden trait implemented
//! for tuples of up to 12 futures. Each child's output is boxed as `dyn Any` so that the
//! children fit one `Vec` for the range machinery, and unboxed into its place afterwards.

use super::range::{all, try_all};
use crate::Task;
use std::any::Any;
use std::borrow::Cow;
use std::future::Future;
use std::panic::Location;
use std::pin::Pin;

type AnyBox = Box<dyn Any + Send>;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

fn boxed<F>(fut: F) -> BoxFuture<AnyBox>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Box::pin(async move { Box::new(fut.await) as AnyBox })
}

fn try_boxed<F, T, E>(fut: F) -> BoxFuture<Result<AnyBox, E>>
where
    F: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    Box::pin(async move { fut.await.map(|value| Box::new(value) as AnyBox) })
}

fn unbox<T: 'static>(value: Option<AnyBox>) -> T {
    *value
        .expect("one output per child")
        .downcast::<T>()
        .expect("each output is unboxed as its own type")
}

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

macro_rules! impl_tuples {
    ($(($($F:ident $T:ident $f:ident),+))+) => {$(
        impl<$($F, $T),+> __CollectAllTuple for ($($F,)+)
        where
            $($F: Future<Output = $T> + Send + 'static, $T: Send + 'static,)+
        {
            type Output = ($($T,)+);

            #[track_caller]
            fn __collect_all(self) -> Task<Self::Output> {
                let ($($f,)+) = self;
                let futs = vec![$(boxed($f)),+];
                let body = async move {
                    let mut outputs = all("collect_all", futs).await.into_iter();
                    ($(unbox::<$T>(outputs.next()),)+)
                };
                Task::with_frame(body, Cow::Borrowed("collect_all"), Location::caller())
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
                let ($($f,)+) = self;
                let futs = vec![$(try_boxed($f)),+];
                let body = async move {
                    let mut outputs = try_all("try_collect_all", futs).await?.into_iter();
                    Ok(($(unbox::<$T>(outputs.next()),)+))
                };
                Task::with_frame(body, Cow::Borrowed("try_collect_all"), Location::caller())
            }
        }
    )+};
}

impl_tuples! {
    (F0 T0 f0)
    (F0 T0 f0, F1 T1 f1)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6, F7 T7 f7)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6, F7 T7 f7, F8 T8 f8)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6, F7 T7 f7, F8 T8 f8,
     F9 T9 f9)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6, F7 T7 f7, F8 T8 f8,
     F9 T9 f9, F10 T10 f10)
    (F0 T0 f0, F1 T1 f1, F2 T2 f2, F3 T3 f3, F4 T4 f4, F5 T5 f5, F6 T6 f6, F7 T7 f7, F8 T8 f8,
     F9 T9 f9, F10 T10 f10, F11 T11 f11)
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
/// for all): a lazy [`Task`](crate::Task) of `Result<(A, B, ..), E>` (folly's `collectAllTry`
/// plus early exit).
///
/// The first child to fail, by returning `Err` or by panicking, cancels the others; once all
/// have finished, that `Err` is returned (or that panic resumed). See
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
