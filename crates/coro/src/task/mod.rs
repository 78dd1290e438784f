//! Tasks: the lazy [`Task`], the executor it runs on, and how it is spawned and waited for.
//!
//! - `lazy`: [`Task`], lazy and run inline by its awaiter, and `Framed`, its body;
//! - `with_executor`: [`TaskWithExecutor`], a task bound to an executor (two hops);
//! - `spawn_root`: what a task runs as when spawned on an executor;
//! - `spawn`: `spawn`, `spawn_blocking`, `yield_now`, `current_executor`,
//!   `current_cancellation_token`;
//! - `block_wait`: waiting from synchronous code;
//! - `stack`: fresh stack segments for deep task chains;
//! - `recycle`: the per-thread free lists that Task bodies are allocated from;
//! - `context`: the thread-local view of the running task (executor, token, locals).

mod block_wait;
pub(crate) mod context;
mod lazy;
mod recycle;
mod spawn;
pub(crate) mod spawn_root;
mod stack;
mod with_executor;

pub use block_wait::block_wait;
pub use lazy::Task;
pub(crate) use lazy::poll_in_frame;
pub use spawn::{current_cancellation_token, current_executor, spawn, spawn_blocking, yield_now};
pub use with_executor::TaskWithExecutor;
