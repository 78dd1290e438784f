//! Tasks, the engine's bottom layer: what a task is, whichever executor runs it.
//!
//! "Task" here always means an executor task: a future spawned on an executor, scheduled
//! through its [`Runnable`] and awaited through its [`JoinHandle`]. (coro's `Task<T>` is a lazy
//! coroutine value, which becomes part of an executor task when awaited or spawned; async-task's
//! own `Task` handle is called `RawTask` here, and only the `JoinHandle` holds one.)
//!
//! A task is one allocation (async-task's) holding its [`TaskHeader`] and its future, wrapped
//! so that it catches panics and leaves its task list before its future is dropped. Nothing
//! here imports the executors above (the pool, user executors through `ExecutorHandle`) or
//! trace publication; the header points at a trace cell, plain data from `crate::trace`.
//!
//! One concept per file, in the order a task lives:
//! - `header`: the per-task header (id, state, trace cell, owner) and task states;
//! - `owner`: the header's type-erased reference to the executor that schedules the task;
//! - `list`: a sharded list of live tasks (shutdown drops what it holds, snapshots read it);
//! - `registry`: every list of the process, for snapshots;
//! - `root`: what a layer above keeps beside the future it spawns ([`TaskRoot`]);
//! - `runnable`: the [`Runnable`] and how a task is built around a future;
//! - `current`: the task being polled on this thread;
//! - `panic`: panics caught where a task runs, and the outcome that holds one;
//! - `join`: the [`JoinHandle`] and [`JoinError`].

pub(crate) mod current;
pub(crate) mod header;
mod join;
mod list;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_list;
pub(crate) mod owner;
mod panic;
pub(crate) mod registry;
mod root;
mod runnable;

pub use header::{TaskHeader, TaskState};
pub use join::{JoinError, JoinHandle};
pub(crate) use list::{TaskList, set_shard_hint, shard_hint};
pub(crate) use panic::drop_catching;
pub use panic::{PanicPayload, panic_message};
pub(crate) use root::Rooted;
pub use root::TaskRoot;
pub use runnable::Runnable;
pub(crate) use runnable::build;
