//! [`Task`]: a lazy, named unit of async work that runs inline in its awaiter.

use super::context::{TaskContext, enter_context_if_changed, with_context};
use super::recycle;
use super::stack::with_stack;
use crate::cancel::CancellationToken;
use crate::trace::frame_chain::{Frame, FrameNode};
use coro_executor::JoinError;
use std::alloc::Layout;
use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, Location, catch_unwind};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// A lazy unit of async work (folly's `Task<T>`).
///
/// Creating a task runs nothing. Awaiting it runs it *inline*, in the awaiter's poll, on the
/// awaiter's executor: no queueing, no hop. It then inherits the awaiter's cancellation token
/// (unless [`with_cancellation`](Self::with_cancellation) gave it one) and task-locals, and its
/// frame (name and creation site) is linked under the awaiter's for
/// [`trace::current_stack`](crate::trace::current_stack) and
/// [`trace::dump_all`](crate::trace::dump_all). To run it elsewhere, or now, use
/// [`schedule_on`](Self::schedule_on).
///
/// Deep chains are fine: polling and dropping switch to a fresh stack segment when the current
/// one runs low, so 100,000 nested tasks need no special care. A task's body (its future, frame
/// and context) is allocated from free lists that each thread keeps of the bodies it dropped,
/// by size, up to 256 KiB a thread (released when the thread exits): a call graph of small
/// tasks does not go through the global allocator at every level.
///
/// ```
/// use coro::Task;
///
/// fn add(a: u32, b: u32) -> Task<u32> {
///     Task::new(async move { a + b }).named("add")
/// }
///
/// let total = futures::executor::block_on(Task::new(async {
///     add(1, 2).await + add(3, 4).await
/// }));
/// assert_eq!(total, 10);
/// ```
#[must_use = "a Task does nothing until it is awaited or started"]
pub struct Task<T> {
    /// The body, pinned in a block of this thread's task-body free lists (`recycle`), which
    /// the task owns: dropped and freed in `Drop`, on a fresh stack segment if needed.
    inner: NonNull<Framed<dyn Future<Output = T> + Send>>,
}

// SAFETY: a `Task` owns its body as a `Box` would; the body is `Send` (the future is, and the
// frame and context are), and nothing else points into it between polls.
unsafe impl<T> Send for Task<T> {}

/// Moves `body` into a block of this thread's free lists, type-erased.
fn new_body<T, F>(body: Framed<F>) -> NonNull<Framed<dyn Future<Output = T> + Send>>
where
    F: Future<Output = T> + Send + 'static,
{
    let block = recycle::allocate(Layout::new::<Framed<F>>()).cast::<Framed<F>>();
    // SAFETY: `allocate` returned a block for `Framed<F>`'s layout (never zero-sized: it holds a
    // frame), not in use by anything else.
    unsafe { block.as_ptr().write(body) };
    let erased: *mut Framed<dyn Future<Output = T> + Send> = block.as_ptr();
    // SAFETY: a pointer to a live value, unsized in place.
    unsafe { NonNull::new_unchecked(erased) }
}

/// Drops the body a [`new_body`] made and returns its block to this thread's free lists, also
/// if the body's destructor panics.
///
/// # Safety
///
/// `body` came from [`new_body`], is not used again, and nothing else points into it.
unsafe fn drop_body<U: ?Sized>(body: NonNull<U>) {
    /// Frees the block once the value in it is dropped, on unwinding too.
    struct FreeBlock(NonNull<u8>, Layout);
    impl Drop for FreeBlock {
        #[inline(always)]
        fn drop(&mut self) {
            // SAFETY: the block `new_body` allocated for this layout; its value is dropped.
            unsafe { recycle::free(self.0, self.1) };
        }
    }
    // SAFETY: the value is alive until the `drop_in_place` below.
    let layout = Layout::for_value(unsafe { body.as_ref() });
    let _free = FreeBlock(body.cast(), layout);
    // SAFETY: alive, owned by the caller, dropped once; pinned values are dropped in place.
    unsafe { std::ptr::drop_in_place(body.as_ptr()) };
}

/// A future with a frame and the context it inherits: the body of every `Task` (boxed). (A
/// spawned plain future keeps the same two beside it instead, in its root: `spawn_root.rs`.)
pub(crate) struct Framed<F: ?Sized> {
    frame: FrameNode,
    /// Before the task starts: only its own token, if `with_cancellation` gave it one. From
    /// its start (first polled, started or spawned): the context it runs in.
    ctx: TaskContext,
    // The task's `STARTED`, `FINISHED` and `OWN_TOKEN` flags live in the frame node's spare
    // bits (`FrameNode::flags`): a byte of their own cost a word with padding, and a smaller
    // body stays in a smaller size class, which measurably matters for deep chains.
    future: F,
}

const STARTED: u8 = 1;
const FINISHED: u8 = 2;
const OWN_TOKEN: u8 = 4;
const _: () = assert!((STARTED | FINISHED | OWN_TOKEN) & !crate::trace::frame_chain::FLAGS == 0);

impl<T: Send + 'static> Task<T> {
    /// Wraps `fut` in a task named after the future's type, created here.
    ///
    /// ```
    /// let task = coro::Task::new(async { 1 });
    /// assert_eq!(futures::executor::block_on(task), 1);
    /// ```
    #[track_caller]
    pub fn new<F>(fut: F) -> Task<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        Self::with_frame(
            fut,
            Cow::Borrowed(std::any::type_name::<F>()),
            Location::caller(),
        )
    }

    pub(crate) fn with_frame<F>(
        fut: F,
        name: Cow<'static, str>,
        location: &'static Location<'static>,
    ) -> Task<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        Task {
            inner: new_body(Framed::new(fut, name, location)),
        }
    }

    /// A task whose frame is a copy of `frame` (a wrapper that stands for another task).
    pub(crate) fn with_frame_of<F>(fut: F, frame: Frame) -> Task<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        Task {
            inner: new_body(Framed {
                frame: FrameNode::new(frame),
                ctx: TaskContext::default(),
                future: fut,
            }),
        }
    }

    /// Names the task in async stack traces and task dumps.
    ///
    /// ```
    /// let name = futures::executor::block_on(coro::Task::new(async {
    ///     coro::trace::current_stack().frames()[0].name().to_owned()
    /// }).named("load_profile"));
    /// assert_eq!(name, "load_profile");
    /// ```
    pub fn named(mut self, name: impl Into<Cow<'static, str>>) -> Task<T> {
        self.inner_mut().frame.set_name(name.into());
        self
    }

    /// Gives the task its own cancellation token instead of inheriting its awaiter's. The first
    /// token set wins: a later `with_cancellation` is ignored, and the awaiter's token is not
    /// merged in (merge explicitly with [`CancellationToken::merge`] if both should count).
    ///
    /// ```
    /// use coro::cancel::CancellationSource;
    ///
    /// let source = CancellationSource::new();
    /// source.request_cancellation();
    /// let task = coro::Task::new(async { coro::current_cancellation_token().is_cancellation_requested() });
    /// assert!(futures::executor::block_on(task.with_cancellation(source.token())));
    /// ```
    pub fn with_cancellation(mut self, token: CancellationToken) -> Task<T> {
        self.inner_mut().set_own_token(token);
        self
    }

    /// The task with its panic caught (folly's `co_awaitTry`): awaiting the result gives
    /// `Ok(value)`, or `Err(JoinError::Panicked(payload))` if the task panicked, instead of
    /// unwinding through the awaiter. The payload keeps the panic's message (the error's
    /// `Display` shows it). Still lazy, under the same frame (name and creation site) and with
    /// the same cancellation token, if it was given one.
    ///
    /// ```
    /// let failed = coro::Task::new(async { panic!("backend down") as u32 }).settle();
    /// let error = coro::block_wait(failed).unwrap_err();
    /// assert!(error.is_panic());
    /// assert!(error.to_string().contains("backend down"));
    ///
    /// assert_eq!(coro::block_wait(coro::Task::new(async { 7 }).settle()).unwrap(), 7);
    /// ```
    pub fn settle(mut self) -> Task<Result<T, JoinError>> {
        let frame = self.frame().clone();
        let own_token = self.inner_mut().own_token();
        let settled = Task::with_frame_of(Settle { task: Some(self) }, frame);
        match own_token {
            Some(token) => settled.with_cancellation(token),
            None => settled,
        }
    }
}

impl<T> Task<T> {
    fn inner_mut(&mut self) -> &mut Framed<dyn Future<Output = T> + Send> {
        // SAFETY: the task owns its body (see `inner`); only the unpinned fields (frame, ctx,
        // flags) are touched through this reference; `future` is only reached through
        // `Framed::poll_framed`, which pins it again.
        unsafe { self.inner.as_mut() }
    }

    /// The body, pinned: it never moves out of its block.
    fn inner_pinned(&mut self) -> Pin<&mut Framed<dyn Future<Output = T> + Send>> {
        // SAFETY: the task owns its body, which stays in its block until `Drop` drops it there.
        unsafe { Pin::new_unchecked(self.inner.as_mut()) }
    }

    /// The frame of this task (name and creation site).
    pub(crate) fn frame(&self) -> &Frame {
        // SAFETY: the task owns its body (see `inner`), alive until `Drop`.
        unsafe { self.inner.as_ref() }.frame()
    }

    /// The node of this task's frame.
    pub(crate) fn frame_node(&self) -> &FrameNode {
        // SAFETY: the task owns its body (see `inner`), alive until `Drop`.
        &unsafe { self.inner.as_ref() }.frame
    }

    /// Captures the context the task starts with (see [`Framed::capture_context`]).
    pub(crate) fn capture_context(&mut self) {
        self.inner_mut().capture_context();
    }
}

impl<F> Framed<F> {
    pub(crate) fn new(
        future: F,
        name: Cow<'static, str>,
        location: &'static Location<'static>,
    ) -> Self {
        Framed {
            frame: FrameNode::new(Frame::new(name, location)),
            ctx: TaskContext::default(),
            future,
        }
    }
}

impl<F: ?Sized> Framed<F> {
    /// The frame of this task (name and creation site).
    pub(crate) fn frame(&self) -> &Frame {
        &self.frame.frame
    }

    /// `STARTED`, `FINISHED`, `OWN_TOKEN`.
    #[inline]
    fn flags(&self) -> u8 {
        self.frame.flags()
    }

    /// Gives the task its own token, unless it has one or has started (`Task::with_cancellation`).
    pub(crate) fn set_own_token(&mut self, token: CancellationToken) {
        if self.flags() & (STARTED | OWN_TOKEN) == 0 {
            self.ctx.token = token;
            self.frame.add_flags(OWN_TOKEN);
        }
    }
}

impl<F: ?Sized> Framed<F> {
    /// The token `with_cancellation` gave the task, if it has not started yet.
    fn own_token(&self) -> Option<CancellationToken> {
        (self.flags() & (STARTED | OWN_TOKEN) == OWN_TOKEN).then(|| self.ctx.token.clone())
    }
}

/// The body of [`Task::settle`]: polls the task in the frame and context of the settled task,
/// which carries the task's own, catching a panic.
struct Settle<T> {
    /// `None` once it finished (or panicked).
    task: Option<Task<T>>,
}

impl<T> Future for Settle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = self
            .task
            .as_mut()
            .expect("a settled coro Task was polled after it completed");
        let polled = catch_unwind(AssertUnwindSafe(|| task.inner_pinned().poll_unframed(cx)));
        let outcome = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(value)) => Ok(value),
            Err(payload) => Err(JoinError::Panicked(payload)),
        };
        // Dropped here, in the settled task's frame, like any finished child.
        self.task = None;
        Poll::Ready(outcome)
    }
}

impl<F: Future + ?Sized> Framed<F> {
    /// Polls the future in the current frame and context, which the caller set up for this
    /// task (a wrapper that carries the task's frame and context itself, as `settle`'s does).
    fn poll_unframed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is only ever reached through a pinned
        // projection like the one below; the other fields are plain data, not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        this.start();
        assert!(
            this.flags() & FINISHED == 0,
            "a coro Task was polled after it completed"
        );
        // SAFETY: `self` is pinned and `future` structurally pinned, so it does not move.
        let poll = unsafe { Pin::new_unchecked(&mut this.future) }.poll(cx);
        if poll.is_ready() {
            this.frame.add_flags(FINISHED);
        }
        poll
    }
}

impl<F: Future + ?Sized> Framed<F> {
    /// Captures the context the task starts with, if it has not started yet: the current one,
    /// with the task's own token if it was given one.
    pub(crate) fn capture_context(&mut self) {
        self.start();
    }

    /// [`capture_context`](Self::capture_context); true if this call captured the current
    /// context as it is (inside a task, no token of its own), so that it is current already.
    // Inlined into the poll of every Task level, where it runs once per task: out of line, the
    // compiler kept the thread-local access in a call of its own (about 20 instructions a
    // level; `tracing_instructions chain`).
    #[inline(always)]
    fn start(&mut self) -> bool {
        let flags = self.flags();
        if flags & STARTED != 0 {
            return false;
        }
        self.frame.add_flags(STARTED);
        let own_token = flags & OWN_TOKEN != 0;
        with_context(|parent| {
            let Some(parent) = parent else {
                return false;
            };
            if !own_token {
                self.ctx.token.clone_from(&parent.token);
            }
            self.ctx.locals.clone_from(&parent.locals);
            !own_token
        })
    }

    /// Polls the future inside this frame and context.
    pub(crate) fn poll_framed(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is only ever reached through this pinned
        // projection; the other fields are plain data, not pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // A task that starts in exactly its awaiter's context (the common case) need not
        // switch to it, nor compare it with the current one.
        let inherited = this.start();
        assert!(
            this.flags() & FINISHED == 0,
            "a coro Task was polled after it completed"
        );
        // SAFETY: `future` is structurally pinned and does not move while `self` is pinned.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let ctx = (!inherited).then_some(&this.ctx);
        let poll = poll_in_frame(&this.frame, ctx, future, cx);
        if poll.is_ready() {
            this.frame.add_flags(FINISHED);
        }
        poll
    }
}

/// Polls `future` as a task's body: in context `ctx` (`None`: the caller made it current) and
/// frame `frame` (linked under the current one), on a fresh stack segment if this one runs low;
/// a poll that returns `Pending` publishes the stack from here if nothing deeper did.
pub(crate) fn poll_in_frame<F: Future + ?Sized>(
    frame: &FrameNode,
    ctx: Option<&TaskContext>,
    future: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    // Most tasks run in exactly their awaiter's context: then there is nothing to switch.
    let _ctx = ctx.and_then(enter_context_if_changed);
    let _frame = frame.enter();
    let poll = with_stack(move || future.poll(cx));
    if poll.is_pending() {
        // Still the innermost frame here: if nothing deeper suspended, this is where the task
        // waits.
        crate::trace::root_trace::publish_suspension(frame);
    }
    poll
}

impl<T> Future for Task<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.inner_pinned().poll_framed(cx)
    }
}

impl<T> Drop for Task<T> {
    fn drop(&mut self) {
        let inner = self.inner;
        // SAFETY: the body is dropped exactly once, here, and never used afterwards.
        let drop_inner = move || unsafe { drop_body(inner) };
        if self.inner_mut().flags() & FINISHED != 0 {
            // What is left of a finished future holds no unfinished children: no recursion.
            drop_inner();
        } else {
            // A deep chain of unfinished tasks drops recursively; give it room as polling does.
            with_stack(drop_inner);
        }
    }
}

impl<T> fmt::Debug for Task<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task").field("frame", self.frame()).finish()
    }
}
