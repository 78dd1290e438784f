//! Streams: sequences of values produced asynchronously, as
//! [`futures_core::Stream`]s.
//!
//! A [`generator`] is folly's `AsyncGenerator`: an async body that hands values to its consumer
//! one at a time with `co.yield_(v).await`, suspending until the consumer takes each. Like a
//! folly generator it is lazy, runs inside its consumer's poll (with the consumer's
//! cancellation token and task-locals, under an async frame of its own), and is destroyed at its
//! suspension point when the consumer drops it. [`buffered`] maps a stream's items to futures
//! that run as children on the pool, a bounded number at a time, and yields their outputs in
//! input order (folly's `collectAllWindowed` as a stream; futures' `StreamExt::buffered` with
//! each future a task of its own). A [`pipe`] is folly's `AsyncPipe`: a stream fed by a writer
//! that never waits, for producing values from callbacks and synchronous code.
//!
//! - `generator`: [`generator`], [`Generator`], [`Co`] and its [`Yield`] future;
//! - `buffered`: [`buffered`] and its stream, [`Buffered`];
//! - `pipe`: [`pipe`], [`PipeWriter`] and [`PipeStream`] (on an unbounded [`channel`](crate::channel)).
//!
//! ```
//! use coro::stream::{buffered, generator};
//! use futures::StreamExt;
//!
//! let ids = generator(|co| async move {
//!     for id in 1..=3u32 {
//!         co.yield_(id).await;
//!     }
//! });
//! let pages = buffered(ids, 2, |id| async move { format!("page {id}") });
//! let pool = coro::ThreadPool::new(2).unwrap();
//! let all = coro::block_wait(coro::Task::new(pages.collect::<Vec<_>>()).schedule_on(&pool));
//! assert_eq!(all, ["page 1", "page 2", "page 3"]);
//! ```

mod buffered;
mod generator;
mod pipe;

pub use buffered::{Buffered, buffered};
pub use generator::{Co, Generator, Yield, generator};
pub use pipe::{PipeStream, PipeWriter, pipe};
