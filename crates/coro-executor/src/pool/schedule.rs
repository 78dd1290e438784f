//! Spawning onto a pool, and the schedule function every pool task is built with: from one of
//! the pool's workers a task goes where the placement says (`worker::schedule_local`), from
//! anywhere else to the global queue. A new task is built whole, then listed, then queued by
//! its spawner directly, never through its schedule function (which would only find this pool
//! again through the header).
//!
//! # The spawn path, and where it is going
//!
//! `coro::spawn` reaches its task's first poll like this, one way down (one allocation,
//! async-task's):
//! 1. coro (`task/spawn.rs`) finds the current executor (`task/context.rs`, else the engine's
//!    `ExecutorHandle::with_current_pool`) and builds what the task needs beside its future,
//!    its root (`task/spawn_root.rs`: the executor for a non-pool task, the trace cell, the frame
//!    with its name and location, the captured context: cancellation token and task-locals).
//!    It hands the root and a pointer to the future to the engine's `ExecutorHandle::spawn_root`.
//! 2. The engine (`executor.rs`, here) makes the header (`task/header.rs`: id block, owner
//!    reference to the pool, `task/owner.rs`) and has async-task allocate the task
//!    (`task::build`, `task/runnable.rs`) around the engine's own closure, which reads the
//!    future into the allocation beside the root (`task/root.rs`, `Rooted`). No code of coro's
//!    runs during the spawn.
//! 3. Then it lists the built task (`task/list.rs`): under the shard's lock, only a slot is
//!    taken, named in the header (the task's entry) and the header published in it.
//! 4. The task is queued on the spawning worker (`worker/mod.rs`), which wakes another if none is
//!    searching (`idle.rs`, `park.rs`).
//! 5. First poll: async-task's `run` polls `Tracked` (`task/runnable.rs`: current task and
//!    state, `task/current.rs`; panics caught, `task/panic.rs`), which polls the future through
//!    its root (`TaskRoot::poll_root`): coro's root enters the executor, attaches its trace cell
//!    to the header (down: `trace::attach`), links its frame as the outermost, and polls the
//!    future in that frame and context.
//!
//! What the task carries, and why: async-task's header (state, awaiter, vtable); the
//! `TaskHeader` (id, trace pointer, state and wait slot, `last` publication mark, owner, list
//! entry); `Tracked`'s header pointer; and the Task layer's root: its trace cell (root frame
//! pointer, parent id, published stack), its frame (name, location, awaiter link with flags)
//! and its context (token, locals).
//!
//! Where it is going, so that the task is no larger than smol's for the same future:
//! - The trace cell's root pointer has a fixed place to point at now (the root's frame, beside
//!   the cell): the header can point at the cell when the task is built, and the first poll's
//!   call down to attach it can go.
//! - The owner reference stops being counted per task (a read-modify-write on the pool's
//!   shared count at each spawn and another at each task's end, on whichever worker ends it),
//!   once shutdown from inside a pool task also waits for the tasks `close` took, so that the
//!   pool outlives every unfinished task of it.

use super::shared::Shared;
use super::worker::{self, Placement};
use crate::task::{self, JoinHandle, Runnable, TaskHeader};
use async_task::{ScheduleInfo, WithInfo};
use std::future::Future;
use std::sync::Arc;

/// The schedule function of every pool task. Zero-sized (the pool is the owner in the task's
/// header), so that async-task calls it without pinning the task with a temporary reference
/// first.
fn schedule(runnable: Runnable, info: ScheduleInfo) {
    let header = runnable.metadata();
    header.mark_scheduled();
    let placement = if info.woken_while_running {
        Placement::Yielded
    } else {
        Placement::Next
    };
    let pool = Shared::owner_of(header);
    if let Err(runnable) = worker::schedule_local(pool, runnable, placement) {
        schedule_from_outside(pool, runnable);
    }
}

/// `schedule` from a thread that is not one of the pool's workers. Out of line: it is the rare
/// path, and inlined it costs the common one a saved register.
#[cold]
#[inline(never)]
fn schedule_from_outside(pool: *const Shared, runnable: Runnable) {
    // In the models, other threads may run here: the wake-up has already marked the task
    // scheduled (async-task's std atomics, which neither checker sees), and its runnable is on
    // its way to the queue, where shutdown must not miss it (`loom_shutdown.rs`).
    #[cfg(any(loom, shuttle))]
    crate::loom::thread::yield_now();
    // Not on one of the pool's workers, whose own reference would keep the pool alive: hold one
    // while queueing, since a closed pool drops the runnable, and with it maybe the task and
    // its header's reference.
    // SAFETY: `pool` is alive: the task's header holds a reference to it, and the task is alive
    // (we hold its runnable).
    let shared = unsafe {
        Arc::increment_strong_count(pool);
        Arc::from_raw(pool)
    };
    shared.schedule_remote(runnable);
}

impl Shared {
    /// The pool of a pool task, from its header.
    #[inline]
    fn owner_of(header: &TaskHeader) -> *const Shared {
        // Only pool tasks carry an owner, always their pool's head (see `owner_ref`).
        header
            .owner()
            .expect("a pool task's header names its pool")
            .as_ptr()
            .cast::<Shared>()
    }

    /// Spawns `fut` as a task of this pool.
    pub(crate) fn spawn<F>(self: &Arc<Self>, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn_placed(move || fut, Placement::Next)
    }

    /// Runs blocking `f` on the blocking pool; in a simulation, as a task (one step of a
    /// logical worker), so that it runs at a moment the seed decides and on the simulation's
    /// thread.
    pub(crate) fn spawn_blocking<F, R>(self: &Arc<Self>, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        if self.sim_thread.is_some() {
            return self.spawn(async move { f() });
        }
        self.blocking.spawn(f)
    }

    /// Spawns the future `make` returns (made in place, see [`task::build`]; `make` is the
    /// engine's own: it moves or reads the spawned future into the task); spawned by a worker
    /// of this pool, it first goes where `placement` says.
    // Inlined into each spawn (it is generic, so each future type has its own copy anyway):
    // the call boundary cost a spawn about 25 instructions of moves and saved registers.
    #[inline(always)]
    pub(crate) fn spawn_placed<M, F>(
        self: &Arc<Self>,
        make: M,
        placement: Placement,
    ) -> JoinHandle<F::Output>
    where
        M: FnOnce() -> F,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // The task is built whole before the list's lock: under it, only a slot is taken and
        // the header published there.
        let header = TaskHeader::with_owner(Some(self.owner_ref()));
        let (runnable, task) = task::build(header, make, WithInfo(schedule));
        let waker = runnable.waker();
        let header = std::ptr::NonNull::from(runnable.metadata());
        match self.tasks.insert(task::shard_hint(), header, Some(waker)) {
            Ok(_) => {
                // Queued here, not through `runnable.schedule()`: the schedule function would
                // find this pool again through the header and mark the task scheduled, which a
                // new header already is (and a new task has no statistics block to count in).
                if let Err(runnable) =
                    worker::schedule_local(Arc::as_ptr(self), runnable, placement)
                {
                    self.schedule_remote(runnable);
                }
            }
            Err(waker) => {
                // Shut down: the task is dropped unrun (unlisted: its header has no entry) and
                // its handle resolves Cancelled. The waker goes first, while the runnable and
                // the handle still hold the task, so that its drop only counts a reference.
                drop(waker);
                drop(runnable);
            }
        }
        JoinHandle::new(task)
    }
}
