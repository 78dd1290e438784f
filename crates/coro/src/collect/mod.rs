//! Collect: run many children concurrently and gather their outcomes.
//!
//! - `children`: the machinery every collect shares: spawning a child under the collect's
//!   cancellation token, catching its panic, recording the first failure in time, and the
//!   [`Children`] set that drops unfinished children when the collect is dropped (no orphans);
//! - `slot`: a child in place in its collect's shared state, polled there by its owner;
//! - `launch`: how the all-children collects run their children: in place, inline until each
//!   first suspends, the unstarted rest offered to idle workers so CPU-bound children run in
//!   parallel;
//! - `awaiter`: the collect's chain of frames, which the children it drives as tasks of their
//!   own continue their stacks into;
//! - `range`: [`collect_all_range`] and [`try_collect_all_range`];
//! - `settled`: [`collect_all_settled_range`], which never cancels siblings;
//! - `windowed`: [`collect_all_windowed`] and [`collect_all_windowed_settled`], at most
//!   `max_in_flight` children at once;
//! - `any`: [`collect_any`], [`try_collect_any`] and [`collect_any_no_discard`], where the first
//!   child to finish decides and the rest are cancelled and awaited;
//! - `unordered`: [`collect_all_unordered`], a stream of the outputs in completion order;
//! - `tuple`: the [`collect_all!`](crate::collect_all),
//!   [`try_collect_all!`](crate::try_collect_all) and
//!   [`collect_all_settled!`](crate::collect_all_settled) macros, for children of different
//!   types.

mod any;
mod awaiter;
pub(crate) mod children;
mod launch;
mod range;
mod settled;
mod slot;
mod tuple;
mod unordered;
mod windowed;

pub use any::{collect_any, collect_any_no_discard, try_collect_any};
pub use range::{collect_all_range, try_collect_all_range};
pub use settled::collect_all_settled_range;
pub use tuple::{__CollectAllSettledTuple, __CollectAllTuple, __TryCollectAllTuple};
pub use unordered::collect_all_unordered;
pub use windowed::{collect_all_windowed, collect_all_windowed_settled};
