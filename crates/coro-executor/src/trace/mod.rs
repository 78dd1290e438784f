//! Task introspection: ids, states and published async stacks of live tasks, for task dumps.
//!
//! Every task spawned through an [`ExecutorHandle`](crate::ExecutorHandle) carries a small
//! header (id, the id of the task that spawned it, its state) and is listed where
//! [`snapshot_tasks`] can find it. A layer above (coro's `Task`) embeds a [`TraceCell`] in the
//! task's future and [`attach`]es it, then publishes the task's stack of frames into it when
//! the task suspends. Snapshots copy that under short locks that are never held while a task
//! runs, so they work at any time, from any thread, without stopping anything.

//!
//! One concept per file: `frame` (a frame of a stack), `cell` (a task's trace cell),
//! `publish` (attaching a cell, publishing where the task suspends), `task_snapshot` (copies for
//! dumps); `name` is a frame's compact name; `stats` the per-task counters for consoles,
//! their on/off switch and their clock, `block` the block outside the task that holds them;
//! `wait` what a suspended task waits on, and `wait_slot` its encoding in the
//! task's header. Frames and cells are plain data, below the task layer (`crate::task`, whose
//! header points at a cell); publication and snapshots work on tasks, above it.

mod block;
mod cell;
mod frame;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_publish;
#[cfg(all(test, any(loom, shuttle)))]
mod loom_stats;
mod name;
mod publish;
mod stats;
mod task_snapshot;
mod wait;
mod wait_slot;

pub use crate::pool::{PoolCensus, census};
pub use crate::task::{TaskHeader, TaskState};
pub(crate) use block::StatsBlock;
pub use block::spare_blocks;
pub(crate) use cell::OwnedCell;
pub use cell::TraceCell;
pub use frame::Frame;
pub use publish::{
    attach, attach_owned, current_task_id, note_relinked, publish_suspension, without_publishing,
};
pub(crate) use stats::{
    FirstPoll, PollCount, TaskStats, is_mark, set_worker_index, spawn_mark, tick,
};
pub use stats::{
    REQUEST_KEEPS_ON, StatsGuard, collect_stats, request_stats, stats_clock_slack, stats_enabled,
};
pub use task_snapshot::{TaskSnapshot, snapshot_tasks};
pub(crate) use task_snapshot::{snapshot_list, snapshot_of};
pub use wait::{
    LockKind, WaitOn, WaitRegistration, begin_wait, end_wait, wait_on, wait_until_polled,
};
#[cfg(not(coro_untraced))]
pub(crate) use wait_slot::poll_starts;

// What the files share, for their `use super::*`.
use crate::loom::sync::Mutex;
use crate::task::header::{OWNED_CELL, PUBLISHED, RELINKED, RUNNING, STATE_BYTE, UNKNOWN};
use cell::{AWAITED_BY_PARENT, ROOT_ONLY};
use name::FrameName;
use std::borrow::Cow;

use std::fmt;
use std::num::NonZeroU64;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::*};
