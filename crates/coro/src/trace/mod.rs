//! Async stack traces: every task has a frame (name and creation site), linked to
//! its awaiter's while it runs.
//!
//! - `frame_chain`: [`Frame`] and the per-thread chain of frames being polled;
//! - `root_trace`: a root task's trace cell and publishing its stack where it suspends;
//! - `dump`: [`dump_all`] and its tree rendering;
//! - `signal`: [`dump_on_signal`], the dump written to stderr on a signal (Unix);
//! - `snapshot`: [`Snapshot`], every task and pool with statistics, for consoles; `take`:
//!   [`snapshot`], which takes one;
//! - `warnings`: the [`Warning`]s a snapshot proves; `verdicts`: how it finds them (deadlocks,
//!   long polls, starving tasks).

mod dump;
pub(crate) mod frame_chain;
pub(crate) mod root_trace;
mod signal;
mod snapshot;
mod take;
mod verdicts;
mod warnings;

pub use coro_executor::trace::{TaskSnapshot, TaskState};
pub use dump::{TaskDump, dump_all};
pub use frame_chain::Frame;
pub use signal::{DEFAULT_DUMP_SIGNAL, SignalDump, dump_on_signal};
pub use snapshot::{PoolSnapshot, Snapshot, TaskInfo, WaitTarget, WorkerSnapshot};
pub use take::snapshot;
pub use warnings::{STARVING_AFTER, Warning};

use std::fmt;
use std::sync::Once;

/// A chain of async frames, innermost first, out to the root task.
///
/// ```
/// let stack = coro::block_wait(coro::Task::new(async {
///     coro::Task::new(async { coro::trace::current_stack() }).named("inner").await
/// }).named("outer"));
/// let names: Vec<_> = stack.frames().iter().map(|f| f.name()).collect();
/// assert_eq!(names, ["inner", "outer"]);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AsyncStack {
    frames: Vec<Frame>,
}

impl AsyncStack {
    /// The frames, innermost first.
    ///
    /// ```
    /// assert!(coro::trace::current_stack().frames().is_empty()); // not inside a task
    /// ```
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    pub(crate) fn from_frames(frames: Vec<Frame>) -> Self {
        AsyncStack { frames }
    }
}

impl fmt::Display for AsyncStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for frame in &self.frames {
            writeln!(f, "  at {frame}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for AsyncStack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.frames).finish()
    }
}

/// The async stack of the code running now: the chain of tasks awaiting one another, from the
/// innermost (the task calling this) out to the root task. Empty outside tasks.
///
/// ```
/// let depth = coro::block_wait(coro::Task::new(async {
///     coro::Task::new(async { coro::trace::current_stack().frames().len() }).await
/// }));
/// assert_eq!(depth, 2);
/// ```
pub fn current_stack() -> AsyncStack {
    let mut frames = Vec::new();
    frame_chain::walk_current(|f| frames.push(f.clone()));
    AsyncStack::from_frames(frames)
}

/// Makes a panic inside a task print the task's async stack after the usual panic message.
/// Installing it more than once has no further effect; `#[coro::main]` installs it.
///
/// ```
/// coro::trace::install_panic_hook();
/// let result = std::panic::catch_unwind(|| {
///     coro::block_wait(coro::Task::new(async { panic!("boom") }).named("exploder"))
/// });
/// assert!(result.is_err()); // stderr shows "boom" and "at exploder (...)"
/// ```
pub fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            let stack = current_stack();
            if !stack.frames().is_empty() {
                eprintln!("async stack (innermost first):\n{stack}");
            }
        }));
    });
}
