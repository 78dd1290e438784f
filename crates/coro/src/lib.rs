//! `coro` brings folly::coro's programming model to Rust: lazy tasks with executor affinity,
//! async stack traces, cooperative cancellation, `collect_all` barriers, shared promises and a
//! fair async shared mutex, on a Go-style multi-threaded work-stealing executor.
//!
//! # A tour
//!
//! The tour goes from a first program to the request handler of a DAG service, one concept per
//! step. Each step's example runs as a test.
//!
//! ## 1. A first program
//!
//! `#[coro::main]` builds a [`ThreadPool`] (per-worker run queues, work stealing, a blocking
//! pool, timers), installs the panic hook that prints async stacks, and runs the async body on
//! it. `#[coro::task]` turns an `async fn` into a function returning a lazy, named [`Task`].
//!
//! ```
//! #[coro::task]
//! async fn greet(name: &'static str) -> String {
//!     format!("hello, {name}")
//! }
//!
//! #[coro::main(worker_threads = 2)]
//! async fn main() {
//!     assert_eq!(greet("world").await, "hello, world");
//! }
//! ```
//!
//! ## 2. Tasks and where they run
//!
//! Creating a [`Task`] runs nothing. Awaiting it runs it inline in the awaiter, as a child
//! frame that inherits the awaiter's executor, cancellation token and task-locals: no queue, no
//! hop. [`spawn`] runs one in parallel; [`Task::schedule_on`] binds one to an executor, and code
//! in a task always runs on its own executor, whoever wakes it. [`block_wait`] waits from
//! synchronous code.
//!
//! Two things are called a task, and the docs keep them apart: a [`Task`] (capital T) is a lazy
//! coroutine value, which runs wherever it is awaited; an *executor task* (lower case, "a
//! spawned task") is what an executor schedules and a [`JoinHandle`]
//! awaits: [`spawn`], [`TaskWithExecutor::start`] and an awaited [`TaskWithExecutor`] each make one, and it
//! is what a task dump lists. A `Task` awaited inline is a frame of its awaiter's executor task.
//!
//! ```
//! use coro::Task;
//!
//! fn fetch(id: u32) -> Task<String> {
//!     Task::new(async move { format!("user {id}") }).named("fetch")
//! }
//!
//! let pool = coro::ThreadPool::new(2).unwrap();
//! let page = Task::new(async {
//!     let a = coro::spawn(fetch(1)); // runs in parallel on the pool
//!     let b = fetch(2).await; // runs inline, here
//!     format!("{}, {b}", a.await.unwrap())
//! })
//! .schedule_on(&pool);
//! assert_eq!(coro::block_wait(page), "user 1, user 2");
//! ```
//!
//! ## 3. Gathering dependencies
//!
//! [`collect_all!`] awaits several children concurrently (in parallel on a pool) and returns
//! their results in order; the `collect_all_*` and `collect_any*` functions do the same for
//! ranges, windows, first-wins races and streams. The first failure cancels the siblings, and
//! dropping a collect drops its children: no orphans.
//!
//! ```
//! # coro::block_wait(async {
//! let (profile, friends) = coro::collect_all!(
//!     async { "ada" },
//!     async { vec!["grace", "alan"] },
//! )
//! .await;
//! assert_eq!((profile, friends.len()), ("ada", 2));
//! # });
//! ```
//!
//! ## 4. Sharing work and guarding state
//!
//! [`sync`] has what requests share: [`Task::shared`] runs a computation once for any number of
//! awaiters, a [`SharedPromise`](sync::SharedPromise) hands one value to many, and
//! [`SharedMutexFair`](sync::SharedMutexFair) is folly's fair reader-writer lock, with
//! upgradable reads for check-then-fill caches.
//!
//! ```
//! use coro::sync::SharedMutexFair;
//! use std::sync::Arc;
//!
//! let cache = Arc::new(SharedMutexFair::new(std::collections::HashMap::new()));
//! let profile = coro::Task::new(async { "ada".to_string() }).shared();
//! let value = coro::block_wait({
//!     let cache = cache.clone();
//!     async move {
//!         let entry = cache.upgradable_read().await;
//!         if let Some(hit) = entry.get(&1) {
//!             return String::clone(hit);
//!         }
//!         let loaded = profile.await; // one computation, however many ask
//!         entry.upgrade().await.insert(1, loaded.clone());
//!         loaded
//!     }
//! });
//! assert_eq!(value, "ada");
//! assert_eq!(cache.try_read().unwrap().len(), 1);
//! ```
//!
//! ## 5. Cancelling what is no longer needed
//!
//! Cancellation is cooperative ([`cancel`]): a task's token flows to the tasks it awaits and
//! spawns; [`time::sleep`] returns early when it fires, [`cancel::cancellable`] makes any wait
//! stop, and [`time::timeout`] cancels the operation's token at the deadline and drops it.
//!
//! ```
//! use std::time::Duration;
//!
//! # coro::block_wait(async {
//! let slow = coro::time::sleep(Duration::from_secs(60));
//! let outcome = coro::time::timeout(Duration::from_millis(5), slow).await;
//! assert_eq!(outcome, Err(coro::time::Elapsed));
//! # });
//! ```
//!
//! ## 6. Background work with a bound
//!
//! An [`AsyncScope`] owns the tasks it spawns: bounded, it refuses ([`ScopeError::Full`]) or
//! queues ([`AsyncScope::spawn_wait`]) past its capacity; `join` waits for all of them, and
//! dropping it drops them.
//!
//! ```
//! # coro::block_wait(async {
//! let refresh = coro::AsyncScope::bounded(1);
//! let first = refresh.spawn(async { 1 }).unwrap();
//! assert!(matches!(refresh.spawn(async { 2 }), Err(coro::ScopeError::Full)));
//! assert_eq!(first.await.unwrap(), 1);
//! refresh.join().await;
//! # });
//! ```
//!
//! ## 7. Knowing where every task waits
//!
//! [`trace::current_stack`] is the chain of tasks awaiting one another; [`trace::dump_all`]
//! lists every live task of every executor with its state and async stack, from any thread,
//! without stopping anything. [`task_local!`] declares values that child tasks inherit.
//!
//! ```
//! #[coro::task]
//! async fn load_profile() -> String {
//!     coro::trace::current_stack().to_string()
//! }
//!
//! let stack = coro::block_wait(coro::Task::new(async { load_profile().await }).named("request"));
//! assert!(stack.contains("at load_profile (") && stack.contains("at request ("));
//! ```
//!
//! ## 8. A request handler as a DAG
//!
//! Put together: a handler gathers its dependencies with `collect_all!`, where the feed needs
//! the friends list that the handler also returns (one [`Task::shared`] computation for both),
//! under a deadline that cancels the whole DAG. `examples/service.rs` in the repository serves
//! this over HTTP, with a cache, request sharing and a task dump endpoint; on SIGTERM or Ctrl-C
//! ([`signal`]: `tokio::signal`'s API, woken through the pool's IO driver) it drains its
//! requests in flight and exits.
//!
//! ```
//! use coro::Task;
//! use coro::time::{sleep, timeout};
//! use std::time::Duration;
//!
//! #[coro::task]
//! async fn backend(what: &'static str, ms: u64) -> Vec<String> {
//!     sleep(Duration::from_millis(ms)).await.ok(); // Err(Cancelled) once the deadline fires
//!     vec![format!("{what} ({ms} ms)")]
//! }
//!
//! #[coro::task]
//! async fn user_page(id: u32) -> Vec<String> {
//!     let friends = backend("friends", 3).shared();
//!     let feed = {
//!         let friends = friends.clone();
//!         Task::new(async move {
//!             let friends = friends.await; // waits for the same friends computation
//!             backend("feed", 2).await.into_iter().chain(friends).collect::<Vec<_>>()
//!         })
//!         .named("feed")
//!     };
//!     let (profile, friends, feed) =
//!         coro::collect_all!(backend("profile", 4), friends, feed).await;
//!     let mut page = vec![format!("user {id}")];
//!     page.extend(profile.into_iter().chain(friends).chain(feed));
//!     page
//! }
//!
//! #[coro::main(worker_threads = 2)]
//! async fn main() {
//!     let page = timeout(Duration::from_secs(5), user_page(7)).await.expect("in time");
//!     assert_eq!(page.len(), 5);
//!     assert!(page[4].starts_with("friends"));
//! }
//! ```
//!
//! ## 9. Outcomes: nothing finished is lost
//!
//! folly's outcome model: [`Task::settle`] turns a task's panic into a value
//! (`Err(JoinError::Panicked)`), [`collect_all_settled!`] keeps every child's outcome and
//! cancels nobody, [`time::timeout_no_discard`] waits for the operation it cancelled and keeps
//! its result, [`cancel::detach_on_cancel`] stops waiting at once and lets the operation finish
//! on its own, and [`retry`] retries with an exponential, jittered backoff that cancellation
//! cuts short.
//!
//! ```
//! use coro::retry::{Backoff, retry_with_backoff};
//! use std::time::Duration;
//!
//! # coro::block_wait(async {
//! let (profile, ads) = coro::collect_all_settled!(
//!     async { "ada" },
//!     coro::Task::new(async { panic!("ads backend down") as &str }),
//! )
//! .await;
//! assert_eq!(profile.unwrap(), "ada");
//! assert!(ads.unwrap_err().to_string().contains("ads backend down")); // the page still renders
//!
//! let mut attempts = 0;
//! let policy = Backoff::builder().initial_delay(Duration::from_millis(1)).build();
//! let fetched = retry_with_backoff(policy, || {
//!     attempts += 1;
//!     let attempt = attempts;
//!     async move { if attempt < 3 { Err("busy") } else { Ok("feed") } }
//! })
//! .await;
//! assert_eq!(fetched, Ok("feed"));
//! # });
//! ```
//!
//! ## 10. Streaming: channels, generators and select
//!
//! [`channel`] gives Go's `chan` to tasks: bounded (0 is a rendezvous), unbounded and oneshot,
//! MPMC, FIFO, cancel-safe both ways. [`stream::generator`] is folly's `AsyncGenerator`: a lazy
//! stream with its own async frame that sees its consumer's cancellation; [`stream::buffered`]
//! runs a stream's items as children on the pool, results in order. [`select!`] waits on the
//! first of several futures and cancels the others, fairly unless `biased;`.
//!
//! ```
//! use coro::stream::generator;
//! use futures::StreamExt;
//! use std::time::Duration;
//!
//! # coro::block_wait(async {
//! let (tx, rx) = coro::channel::bounded(8);
//! let producer = coro::spawn(async move {
//!     let mut squares = generator(|co| async move {
//!         for i in 1..=4u32 {
//!             co.yield_(i * i).await;
//!         }
//!     });
//!     while let Some(v) = squares.next().await {
//!         tx.send(v).await.unwrap();
//!     }
//! });
//! let mut sum = 0;
//! loop {
//!     coro::select! {
//!         got = rx.recv() => match got {
//!             Ok(v) => sum += v,
//!             Err(_closed_and_drained) => break,
//!         },
//!         _ = coro::time::sleep(Duration::from_secs(5)) => panic!("the producer stalled"),
//!     }
//! }
//! assert_eq!(sum, 1 + 4 + 9 + 16);
//! producer.await.unwrap();
//! # });
//! ```
//!
//! ## 11. Using tokio's ecosystem
//!
//! A handler's dependencies are databases, caches and other services, whose Rust clients are
//! written for tokio. They run inside coro tasks in one of two ways:
//!
//! - **Natively, on coro's own IO driver** (feature `tokio-io`): coro::net's streams implement
//!   tokio's `AsyncRead` / `AsyncWrite`, so a crate that takes a stream from its caller runs
//!   with no tokio runtime at all. Connect with [`net::TcpStream::connect`], hand the stream
//!   over, and `spawn` the connection future the crate gives back.
//! - **Through the bridge** (feature `tokio-compat`): `compat::tokio(fut)` polls `fut` inside
//!   the context of one shared tokio runtime thread, for crates that create tokio sockets or
//!   timers themselves. The task keeps its executor, stack and cancellation; it costs a thread
//!   and a cross-thread wake per readiness event (`compat`'s docs say more).
//!
//! | crate | on coro | how | shown by |
//! |---|---|---|---|
//! | hyper 1.x | native | `coro_hyper::serve`, `CoroIo`, `CoroExecutor`, `CoroTimer` | `crates/coro-hyper/tests/` |
//! | hyper-util's client | native | `coro_hyper::client()` (feature `client`; https with `rustls`) | `crates/coro-hyper/tests/http/client.rs` |
//! | tonic | native | server: routes served by `coro_hyper::serve` behind `coro_hyper::GrpcDeadline` (a client's deadline cancels the handler's token); client: `tonic::client::Grpc` over hyper-util's client on `CoroConnector` | `crates/coro-ecosystem-tests/tests/tonic.rs` |
//! | tokio-postgres | native (`tokio-io`) | `Config::connect_raw(coro_stream, NoTls)`, the connection `spawn`ed; no `runtime` feature needed | `crates/coro-ecosystem-tests/tests/tokio_io.rs` |
//! | tokio-rustls, anything on `TokioIo` | native (`tokio-io`) | pass a coro::net stream where a tokio stream is taken | `crates/coro-ecosystem-tests/tests/tokio_io.rs` (the traits) |
//! | redis (`tokio-comp`) | bridge | `compat::tokio(client.get_multiplexed_async_connection())`, then each command through `compat::tokio` | `crates/coro-ecosystem-tests/tests/tokio_compat.rs` |
//! | reqwest | bridge | `compat::tokio(async { client.get(url).send().await })` | `crates/coro-ecosystem-tests/tests/reqwest_compat.rs` |
//! | sqlx (`runtime-tokio`, `postgres`) | bridge | `compat::tokio(PgPoolOptions::new().connect(url))`, then each query through `compat::tokio`; sqlx opens its own sockets, so it cannot use coro's | `crates/coro-ecosystem-tests/tests/tokio_compat.rs` |
//!
//! Porting a tokio handler: `tokio::spawn` → [`spawn`], `tokio::join!` → [`collect_all!`],
//! `tokio::time::{sleep, timeout}` → [`time::sleep`], [`time::timeout`] (cancellation-aware),
//! `tokio::net` → [`net`], `tokio::signal` → `coro::signal`. A future that calls a tokio-only
//! function *when it is created* (`tokio::time::sleep(d)`, `tokio::spawn(f)`) must be created
//! inside the bridge: `compat::tokio(async { tokio::time::sleep(d).await })`.
//!
//! ```no_run
//! # #[cfg(feature = "tokio-io")] {
//! // A DAG child that reads a user from PostgreSQL over coro's own sockets.
//! #[coro::task]
//! async fn user_name(port: u16, id: i32) -> Result<String, tokio_postgres::Error> {
//!     let stream = coro::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
//!     let mut config = tokio_postgres::Config::new();
//!     config.user("postgres").dbname("postgres");
//!     let (client, connection) = config.connect_raw(stream, tokio_postgres::NoTls).await?;
//!     let _driver = coro::spawn(connection); // runs the protocol while `client` is used
//!     let row = client.query_one("SELECT name FROM users WHERE id = $1", &[&id]).await?;
//!     Ok(row.get(0))
//! }
//! # }
//! ```
//!
//! # folly::coro → coro
//!
//! | folly::coro | coro | where coro differs |
//! |---|---|---|
//! | `Task<T>`, `co_await task` | [`Task<T>`](Task), `task.await` | the same: lazy, runs inline in the awaiter |
//! | `co_withExecutor(ex, task)` / `scheduleOn` | [`Task::schedule_on`] | |
//! | `co_withExecutor(ex, task).start()` | [`TaskWithExecutor::start`] | gives a [`JoinHandle`] |
//! | `co_viaIfAsync` | (always) | a task always resumes on its own executor, whoever wakes it |
//! | `blockingWait` | [`block_wait`] | panics on a pool's worker instead of deadlocking |
//! | `co_withExecutor(ex, t).start()` detached | [`spawn`] | spawned tasks inherit the caller's cancellation token and task-locals; folly's do not |
//! | `co_current_executor` | [`current_executor`] | |
//! | `co_current_cancellation_token` | [`current_cancellation_token`] | |
//! | `co_withCancellation(token, task)` | [`Task::with_cancellation`] | the first token set wins; no implicit merge |
//! | `co_reschedule_on_current_executor` | [`yield_now`] | |
//! | `co_awaitTry(task)` | [`Task::settle`] | a panic is `Err(JoinError::Panicked)` |
//! | `CancellationSource`, `CancellationToken`, `CancellationCallback` | [`cancel::CancellationSource`], [`cancel::CancellationToken`], [`cancel::CancellationCallback`] | |
//! | `cancellation_token_merge` | [`cancel::CancellationToken::merge`] | |
//! | `co_safe_point` | [`cancel::safe_point`] | a `Result`, not an early return |
//! | `OperationCancelled` | [`cancel::Cancelled`] | an error value, not an exception |
//! | `detachOnCancel` | [`cancel::detach_on_cancel`] | a caller already cancelled does not start the op |
//! | `sleep` | [`time::sleep`] | returns `Err(Cancelled)` when cancelled |
//! | `timeout` | [`time::timeout`] | |
//! | `timeoutNoDiscard` | [`time::timeout_no_discard`] | "ended cancelled" is read from the output ([`cancel::CancelledOutcome`]) |
//! | `retryN` | [`retry::retry_n`] | cancellation between attempts returns the last error |
//! | `retryWithExponentialBackoff` | [`retry::retry_with_backoff`] | full jitter (uniform in `[0, cap]`), not a log-normal factor |
//! | `collectAll(a, b)` | [`collect_all!`] | |
//! | `collectAllTry(a, b)` | [`collect_all_settled!`] | |
//! | `collectAllRange` | [`collect_all_range`] | |
//! | `collectAllTryRange` | [`collect_all_settled_range`] | |
//! | `collectAllWindowed` | [`collect_all_windowed`] | |
//! | `collectAllTryWindowed` | [`collect_all_windowed_settled`] | |
//! | (Rust's try-join) | [`try_collect_all!`], [`try_collect_all_range`] | the first `Err` cancels the rest; not `collectAllTry` |
//! | `collectAny` | [`collect_any`] | |
//! | `collectAnyWithoutException` | [`try_collect_any`] | the first `Ok` wins; all `Err`: the last in time |
//! | `collectAnyNoDiscard` | [`collect_any_no_discard`] | `None` for a child dropped before it produced anything |
//! | `makeUnorderedAsyncGenerator` | [`collect_all_unordered`] | a `Stream`; the first panic is resumed after every finished output |
//! | `AsyncScope` | [`AsyncScope`] | also a bounded pool ([`AsyncScope::bounded`]) |
//! | `SharedPromise` | [`sync::SharedPromise`] | |
//! | `FutureSplitter` / shared tasks | [`Task::shared`], [`sync::SharedTask`] | |
//! | `SharedMutexFair` | [`sync::SharedMutexFair`] | |
//! | `Mutex`, `Baton` | [`sync::Mutex`], [`sync::Baton`] | |
//! | `fibers::Semaphore` | [`sync::Semaphore`] | FIFO; a small request waits behind a larger queued one |
//! | `AsyncGenerator`, `co_yield` | [`stream::generator`], `co.yield_(v).await` | a `futures_core::Stream` |
//! | `AsyncPipe` | [`stream::pipe`] | |
//! | `BoundedQueue`, `UnboundedQueue` | [`channel::bounded`], [`channel::unbounded`] | MPMC; `bounded(0)` is Go's unbuffered chan |
//! | `RequestContext` | [`task_local!`] | values are inherited by child tasks |
//! | (tokio's `tokio::signal`) | [`signal::ctrl_c`], [`signal::unix::signal`] | woken through the pool's IO driver: no thread |
//! | async stack traces (`getAsyncStackTraceStr`) | [`trace::current_stack`], [`trace::dump_all`] | every live task, from any thread |
//! | `Executor::KeepAlive`, `CPUThreadPoolExecutor`, `InlineExecutor`, `ManualExecutor` | [`ExecutorHandle`], [`ThreadPool`], [`executor::InlineExecutor`], [`executor::ManualExecutor`] | a Go-style work-stealing pool |

#![deny(missing_docs)]
// The `coro_untraced` build (for measuring what tracing costs) leaves trace bookkeeping unused.
#![cfg_attr(coro_untraced, allow(dead_code))]

pub mod cancel;
pub mod channel;
mod collect;
#[cfg(all(feature = "tokio-compat", not(any(loom, shuttle))))]
pub mod compat;
mod local;
// The IO driver it stands on is left out of the loom and shuttle builds.
#[cfg(all(unix, not(any(loom, shuttle))))]
pub mod net;
pub mod retry;
// Deliveries reach tasks through the IO driver, left out of the loom and shuttle builds.
#[cfg(all(unix, not(any(loom, shuttle))))]
pub mod signal;
mod task;
pub mod time;
pub mod trace;

#[doc(hidden)]
pub mod __private {
    pub use crate::private::{block_wait_timeout, select_all_disabled, select_start};
}
mod private;
mod scope;
// The models build the engine without its simulation (see coro-executor's `sim`).
#[cfg(not(any(loom, shuttle)))]
pub mod sim;
pub mod stream;
pub mod sync;

/// The engine: thread pools, executors, join handles, the blocking pool and timers.
///
/// This is the `coro-executor` crate, re-exported whole.
///
/// ```
/// let pool = coro::executor::ThreadPool::new(2).unwrap();
/// assert_eq!(pool.worker_threads(), 2);
/// ```
pub use coro_executor as executor;

pub use coro_macros::{main, task, test};

/// Waits on several futures at once, runs the branch of the first one ready, and drops (cancels)
/// the others: Go's `select`, with tokio's `select!` syntax.
///
/// ```text
/// coro::select! {
///     [biased;]                                  // poll in written order, not from a random start
///     pattern = future => body,                  // a body that is a `{ .. }` block needs no comma
///     pattern = future, if precondition => body, // a false precondition disables the branch
///     [default => body,]                         // nothing ready on the first poll round
///     [else => body,]                            // every branch disabled
/// }
/// ```
///
/// - The futures (anything [`IntoFuture`]: a [`Task`], a
///   [`JoinHandle`], a channel's `recv()`, an `async` block) are evaluated in written order and
///   pinned on the stack: no allocation. A branch whose precondition is `false` is disabled and
///   its future expression is not evaluated at all.
/// - Each poll polls every enabled branch once, starting at a random branch, so branches that
///   are always ready share the wins (Go's select); after `biased;` it starts at the first.
/// - The first output that matches its branch's pattern wins. One that does not match (an `Err`
///   for `Ok(v) = ..`, a `None` for `Some(v) = ..`) disables its branch, whose future is dropped
///   then, and the select keeps waiting on the others.
/// - Every future, the losers and the finished winner, is dropped before the winning body runs:
///   the body may use what the futures borrowed. The select's value is that body's value, so all
///   bodies have one type. Bodies run in the surrounding async code: `return`, `?`,
///   `break`/`continue` of an enclosing loop and `.await` in them act there.
/// - `default` runs when no branch is ready on the first poll round: the select never waits.
/// - `else` runs when every branch is disabled. Without `else`, `default` runs then if there is
///   one; otherwise the select panics, saying so.
/// - Dropping a loser cancels what it was doing: select over cancel-safe operations (receiving
///   from a channel, sleeping, waiting on a [`JoinHandle`]) when the select sits in a loop.
///
/// The select works in any async code: coro tasks and plain futures alike. It is a future
/// polled where it stands, so it is `Send` when its futures are.
///
/// The first ready branch wins; the others are dropped:
///
/// ```
/// use std::future::{pending, ready};
/// use std::time::Duration;
///
/// # coro::block_wait(async {
/// let winner = coro::select! {
///     _ = coro::time::sleep(Duration::from_secs(60)) => "timer",
///     v = ready("value") => v,
///     _ = pending::<()>() => "never",
/// };
/// assert_eq!(winner, "value");
/// # });
/// ```
///
/// `biased;` polls in written order (without it, either branch could win here):
///
/// ```
/// use std::future::ready;
///
/// # coro::block_wait(async {
/// let first = coro::select! {
///     biased;
///     a = ready(1) => a,
///     b = ready(2) => b,
/// };
/// assert_eq!(first, 1);
/// # });
/// ```
///
/// `default` makes a select that does not wait:
///
/// ```
/// use std::future::{pending, ready};
///
/// # coro::block_wait(async {
/// let nothing = coro::select! {
///     v = pending::<u32>() => v,
///     default => 0,
/// };
/// assert_eq!(nothing, 0);
/// let something = coro::select! {
///     v = ready(7) => v,
///     default => 0,
/// };
/// assert_eq!(something, 7);
/// # });
/// ```
///
/// A pattern the output does not match disables its branch; `else` runs when none is left:
///
/// ```
/// use std::time::Duration;
///
/// # coro::block_wait(async {
/// let got = coro::select! {
///     Ok(v) = async { Err::<u32, &str>("closed") } => v, // disabled: the select waits on
///     _ = coro::time::sleep(Duration::from_millis(1)) => 0, // the timer
/// };
/// assert_eq!(got, 0);
///
/// let got = coro::select! {
///     Some(v) = async { None::<u32> } => v,
///     else => u32::MAX,
/// };
/// assert_eq!(got, u32::MAX);
/// # });
/// ```
///
/// A precondition keeps a branch out without evaluating its future:
///
/// ```
/// use std::cell::Cell;
/// use std::future::ready;
///
/// # coro::block_wait(async {
/// let looked_up = Cell::new(false);
/// let use_cache = false;
/// let got = coro::select! {
///     v = {
///         looked_up.set(true);
///         ready("cached")
///     }, if use_cache => v,
///     v = ready("fetched") => v,
/// };
/// assert_eq!(got, "fetched");
/// assert!(!looked_up.get());
/// # });
/// ```
///
/// In a task on a pool: a reply raced against a deadline, in a loop.
///
/// ```
/// use coro::time::sleep;
/// use std::time::Duration;
///
/// #[coro::main(worker_threads = 2)]
/// async fn main() {
///     let mut replies = Vec::new();
///     for delay_ms in [1, 5_000] {
///         let reply = coro::spawn(async move {
///             sleep(Duration::from_millis(delay_ms)).await.ok();
///             "pong"
///         });
///         coro::select! {
///             Ok(v) = reply => replies.push(v),
///             _ = sleep(Duration::from_millis(200)) => {
///                 replies.push("timed out");
///                 break; // the dropped JoinHandle leaves the reply running, detached
///             }
///         }
///     }
///     assert_eq!(replies, ["pong", "timed out"]);
/// }
/// ```
pub use coro_macros::select;

pub use collect::{
    __CollectAllSettledTuple, __CollectAllTuple, __TryCollectAllTuple, collect_all_range,
    collect_all_settled_range, collect_all_unordered, collect_all_windowed,
    collect_all_windowed_settled, collect_any, collect_any_no_discard, try_collect_all_range,
    try_collect_any,
};
pub use coro_executor::{ExecutorHandle, JoinError, JoinHandle, ThreadPool, default_pool};
pub use local::{AccessError, LocalKey, Scope};
pub use scope::{AsyncScope, ScopeError, ScopeStatus};
pub use task::{
    Task, TaskWithExecutor, block_wait, current_cancellation_token, current_executor, spawn,
    spawn_blocking, yield_now,
};
