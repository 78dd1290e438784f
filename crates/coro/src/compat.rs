//! Crates bound to tokio's reactor, inside coro tasks (feature `tokio-compat`).
//!
//! Some crates create tokio sockets or timers themselves (reqwest, sqlx, redis' `tokio-comp`,
//! tonic's default transport): called from a coro task they panic with "there is no reactor
//! running". [`tokio()`] wraps such a future so that it is polled inside the context of one shared
//! tokio runtime, whose single thread drives tokio's IO and timers. The coro task itself keeps
//! running on its own executor, with its own stack, cancellation and task-locals: only
//! readiness crosses over.
//!
//! Rule: the bridge runtime is one per process, started on first use (a thread named
//! `coro-tokio-compat`), never shut down; a future already inside a tokio runtime's context
//! uses that runtime instead.
//!
//! What it costs, against running the same crate on tokio: one extra thread; every readiness
//! event or timer a wrapped future waits on is noticed on that thread and wakes the coro task
//! from outside its pool (a remote queue push and, if every worker sleeps, a worker wake-up),
//! where a tokio task would be woken by the worker that polled the OS; tasks the crate spawns
//! itself (`tokio::spawn`, such as a connection's driver) run on that one thread. Where the
//! crate lets the caller supply the socket, the `tokio-io` feature runs it on coro's own IO
//! driver instead, with none of these costs (see [`crate::net`]).

use pin_project::{pin_project, pinned_drop};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};

/// The name of the bridge runtime's thread.
const THREAD_NAME: &str = "coro-tokio-compat";

/// The shared tokio runtime: a current-thread runtime whose IO and timer drivers (and the tasks
/// spawned on it) are driven by one thread that does nothing else.
static RUNTIME: LazyLock<tokio::runtime::Handle> = LazyLock::new(|| {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_name(THREAD_NAME)
        .build()
        .expect("coro::compat: building the tokio runtime for the tokio bridge");
    let handle = runtime.handle().clone();
    std::thread::Builder::new()
        .name(THREAD_NAME.into())
        .spawn(move || runtime.block_on(std::future::pending::<()>()))
        .expect("coro::compat: starting the tokio bridge's thread");
    handle
});

/// Runs `fut`, a future that needs tokio's reactor or timers, inside a coro task.
///
/// Every poll of `fut` happens in the context of the shared tokio runtime (started lazily; see
/// the [module docs](self) for what it costs), on the thread of the coro task that awaits the
/// wrapper, so the task keeps its executor, cancellation token, task-locals and async stack,
/// and resumes on its own executor. Dropping the wrapper (or cancelling the task, which drops
/// it) drops `fut` inside the runtime's context too; a panic in `fut` is the awaiting task's
/// panic, as with any future.
///
/// Only what happens inside `fut` sees the runtime: an argument evaluated before the call is
/// outside it. An `async fn` (tokio's `TcpStream::connect`, redis' commands) does its work
/// when polled, so `compat::tokio(stream_connect(addr))` is fine; a plain function that finds
/// the runtime when called (`tokio::time::sleep`, `tokio::spawn`) must be called inside:
/// `compat::tokio(async { tokio::time::sleep(d).await })`.
///
/// ```
/// use std::time::Duration;
///
/// #[coro::main(worker_threads = 2)]
/// async fn main() {
///     // tokio's own sleep panics in a coro task without the bridge ("no reactor running").
///     // It looks for the runtime when called: make the call inside the wrapped future.
///     coro::compat::tokio(async { tokio::time::sleep(Duration::from_millis(5)).await }).await;
///     // tokio's own sockets: a tokio listener and a tokio client, both through the bridge.
///     let listener = coro::compat::tokio(tokio::net::TcpListener::bind("127.0.0.1:0"))
///         .await
///         .unwrap();
///     let addr = listener.local_addr().unwrap();
///     let client = coro::spawn(coro::compat::tokio(tokio::net::TcpStream::connect(addr)));
///     let (_accepted, peer) = coro::compat::tokio(listener.accept()).await.unwrap();
///     assert_eq!(peer, client.await.unwrap().unwrap().local_addr().unwrap());
/// }
/// ```
pub fn tokio<F: Future>(fut: F) -> TokioCompat<F> {
    TokioCompat {
        fut: ManuallyDrop::new(fut),
    }
}

/// The future [`tokio()`] returns: `fut`, polled and dropped inside a tokio runtime's context.
///
/// ```
/// # coro::block_wait(async {
/// let wrapped: coro::compat::TokioCompat<_> = coro::compat::tokio(async {
///     tokio::runtime::Handle::current().spawn(async { 7 }).await.unwrap()
/// });
/// assert_eq!(wrapped.await, 7); // tokio::spawn works inside: it runs on the bridge's thread
/// # });
/// ```
#[pin_project(PinnedDrop)]
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct TokioCompat<F> {
    #[pin]
    fut: ManuallyDrop<F>,
}

impl<F: Future> Future for TokioCompat<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _context = enter();
        // SAFETY: pin projection through `ManuallyDrop`: the future is never moved out of it
        // (it is only dropped in place, in `drop` below), so pinning it is sound.
        let fut = unsafe { self.project().fut.map_unchecked_mut(|f| &mut **f) };
        fut.poll(cx)
    }
}

#[pinned_drop]
impl<F> PinnedDrop for TokioCompat<F> {
    fn drop(self: Pin<&mut Self>) {
        let _context = enter();
        // SAFETY: `fut` is dropped exactly once, here, in place (it was pinned and is never
        // used again: this is the wrapper's destructor).
        unsafe { ManuallyDrop::drop(self.project().fut.get_unchecked_mut()) };
    }
}

impl<F> std::fmt::Debug for TokioCompat<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioCompat").finish_non_exhaustive()
    }
}

/// Enters the shared runtime's context, unless this thread is already in a tokio runtime's.
fn enter() -> Option<tokio::runtime::EnterGuard<'static>> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => None,
        Err(_) => Some(RUNTIME.enter()),
    }
}
