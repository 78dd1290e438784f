//! Task-local values that children inherit.
//!
//! The values in scope form an immutable linked list shared by every task that inherited it
//! (`Locals`, part of the task's context in `task/context.rs`): `scope` prepends one node for
//! the duration of its future, starting a child copies one pointer, and a lookup walks the
//! (short) list. Nothing is copied per value, and a child's own `scope` builds on its copy of
//! the pointer, so it can never leak back to its parent.

use crate::task::context::{TaskContext, current_context, enter_context, with_context};
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Declares task-local keys: `coro::task_local! { static NAME: Type; }`.
///
/// Values are set for the duration of a future with [`LocalKey::scope`] and read with
/// [`LocalKey::with`], [`LocalKey::try_with`] or [`LocalKey::get`]. Unlike tokio's task-locals,
/// they are inherited: child tasks, `schedule_on` children and spawned tasks see the values in
/// scope where they were started.
///
/// ```
/// coro::task_local! {
///     /// The id of the request being served.
///     static REQUEST_ID: u64;
/// }
///
/// let seen = futures::executor::block_on(REQUEST_ID.scope(7, async { REQUEST_ID.get() }));
/// assert_eq!(seen, 7);
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $(#[$attr])*
        $vis static $name: $crate::LocalKey<$t> = $crate::LocalKey::__new(stringify!($name));
        $crate::task_local!($($rest)*);
    };
}

/// A task-local key, declared with [`task_local!`](crate::task_local).
///
/// ```
/// coro::task_local! {
///     static TENANT: &'static str;
/// }
///
/// let key: &'static coro::LocalKey<&'static str> = &TENANT;
/// let seen = coro::block_wait(key.scope("acme", async { TENANT.get() }));
/// assert_eq!(seen, "acme");
/// assert!(TENANT.try_with(|t| *t).is_err()); // outside any scope
/// ```
pub struct LocalKey<T: 'static> {
    name: &'static str,
    /// Non-zero-sized so that every key static has its own address, which is its identity.
    _unique: u8,
    _marker: PhantomData<fn() -> T>,
}

/// The error of [`LocalKey::try_with`] outside a scope of that key.
///
/// ```
/// coro::task_local! { static UNSET: u32; }
/// let err = UNSET.try_with(|v| *v).unwrap_err();
/// assert!(err.to_string().contains("UNSET"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessError {
    name: &'static str,
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task-local `{}` is not set here: read it inside `{}.scope(value, future)` or a task started there",
            self.name, self.name
        )
    }
}

impl std::error::Error for AccessError {}

impl<T: Send + Sync + 'static> LocalKey<T> {
    #[doc(hidden)]
    pub const fn __new(name: &'static str) -> Self {
        LocalKey {
            name,
            _unique: 0,
            _marker: PhantomData,
        }
    }

    fn id(&'static self) -> usize {
        self as *const Self as usize
    }

    /// Runs `fut` with this key set to `value`; tasks started inside inherit it.
    ///
    /// ```
    /// coro::task_local! { static DEPTH: u32; }
    ///
    /// let inner = DEPTH.scope(1, async { DEPTH.scope(2, async { DEPTH.get() }).await + DEPTH.get() });
    /// assert_eq!(futures::executor::block_on(inner), 3);
    /// ```
    pub fn scope<F: Future>(&'static self, value: T, fut: F) -> Scope<F> {
        Scope {
            key: self.id(),
            value: Some(Box::new(value)),
            ctx: None,
            future: fut,
        }
    }

    /// Calls `f` with the value in scope. Panics outside a scope of this key, naming it; see
    /// [`try_with`](Self::try_with) for a fallible version.
    ///
    /// ```
    /// coro::task_local! { static NAME: String; }
    /// let len = futures::executor::block_on(NAME.scope("abc".into(), async { NAME.with(|n| n.len()) }));
    /// assert_eq!(len, 3);
    /// ```
    #[track_caller]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// Calls `f` with the value in scope, or returns [`AccessError`] outside a scope of this key.
    ///
    /// ```
    /// coro::task_local! { static USER: u32; }
    /// assert!(USER.try_with(|u| *u).is_err());
    /// ```
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        with_context(|ctx| {
            let value = ctx.and_then(|c| c.locals.get(self.id()));
            match value.and_then(|v| v.downcast_ref::<T>()) {
                Some(v) => Ok(f(v)),
                None => Err(AccessError { name: self.name }),
            }
        })
    }

    /// A clone of the value in scope. Panics outside a scope of this key.
    ///
    /// ```
    /// coro::task_local! { static LIMIT: usize; }
    /// assert_eq!(futures::executor::block_on(LIMIT.scope(10, async { LIMIT.get() })), 10);
    /// ```
    #[track_caller]
    pub fn get(&'static self) -> T
    where
        T: Clone,
    {
        self.with(T::clone)
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey")
            .field("name", &self.name)
            .finish()
    }
}

/// The future returned by [`LocalKey::scope`].
///
/// ```
/// coro::task_local! {
///     static DEPTH: u32;
/// }
///
/// let scoped: coro::Scope<_> = DEPTH.scope(1, async { DEPTH.get() + 1 });
/// assert_eq!(coro::block_wait(scoped), 2);
/// ```
#[must_use = "futures do nothing unless awaited"]
pub struct Scope<F> {
    key: usize,
    value: Option<Box<dyn Any + Send + Sync>>,
    /// The context inside the scope, built on first poll from the context current then.
    ctx: Option<TaskContext>,
    future: F,
}

impl<F: Future> Future for Scope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned (never moved out; `Scope` has no Drop impl);
        // the other fields are not pinned and only accessed by `&mut`.
        let this = unsafe { self.get_unchecked_mut() };
        if this.ctx.is_none() {
            let mut ctx = current_context();
            let value = this.value.take().expect("value present until first poll");
            ctx.locals = ctx.locals.with(this.key, value);
            this.ctx = Some(ctx);
        }
        let _guard = enter_context(this.ctx.as_ref().expect("set above"));
        // SAFETY: `future` is structurally pinned: `Scope` never moves it out and has no Drop
        // impl, and `self` is pinned, so re-pinning the field is sound.
        unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx)
    }
}

impl<F> fmt::Debug for Scope<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").finish_non_exhaustive()
    }
}
