//! Tasks.
//!
//! - `task`: [`Task`], lazy and run inline by its awaiter, and `Framed`, its body;
//! - `with_executor`: [`TaskWithExecutor`], a task bound to an executor (two hops);
//! - `root`: what a task runs as when spawned on an executor;
//! - `spawn`: `spawn`, `spawn_blocking`, `yield_now`, `current_executor`,
//!   `current_cancellation_token`;
//! - `block_wait`: waiting from synchronous code;
//! - `stack`: fresh stack segments for deep task chains;
//! - `recycle`: the per-thread free lists that Task bodies are allocated from;
//! - `context`: the thread-local view of the running task (executor, token, locals).

mod block_wait;
pub(crate) mod context;
mod recycle;
pub(crate) mod root;
mod spawn;
mod stack;
#[allow(clippy::module_inception)]
mod task;
mod with_executor;

pub use block_wait::block_wait;
pub use spawn::{current_cancellation_token, current_executor, spawn, spawn_blocking, yield_now};
pub use task::Task;
pub(crate) use task::poll_in_frame;
pub use with_executor::TaskWithExecutor;
