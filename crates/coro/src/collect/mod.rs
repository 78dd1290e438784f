//! Collect (DESIGN §7): run many children concurrently and gather their outcomes.
//!
//! - `children`: the machinery every collect shares: spawning a child under the collect's
//!   cancellation token, catching its panic, recording the first failure in time, and the
//!   [`Children`] set that drops unfinished children when the collect is dropped (no orphans);
//! - `range`: [`collect_all_range`] and [`try_collect_all_range`];
//! - `settled`: [`collect_all_settled_range`], which never cancels siblings;
//! - `windowed`: [`collect_all_windowed`], at most `max_in_flight` children at once;
//! - `tuple`: the [`collect_all!`](crate::collect_all) and
//!   [`try_collect_all!`](crate::try_collect_all) macros, for children of different types.

mod children;
mod range;
mod settled;
mod tuple;
mod windowed;

pub use range::{collect_all_range, try_collect_all_range};
pub use settled::collect_all_settled_range;
pub use tuple::{__CollectAllTuple, __TryCollectAllTuple};
pub use windowed::collect_all_windowed;
