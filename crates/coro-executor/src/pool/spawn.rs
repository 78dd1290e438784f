//! Spawning onto a pool, and the schedule function every pool task is built with: from one of
//! the pool's workers a task goes where the placement says (`worker::schedule_local`), from
//! anywhere else to the global queue. A new task is queued by its spawner directly, never
//! through its schedule function (which would only find this pool again through the header).
//!
//! # The spawn path, and where it is going
//!
//! Today `coro::spawn` reaches its task's first poll like this (one allocation, async-task's):
//! 1. coro (`task/spawn.rs`) finds the current executor (`task/context.rs`, else the engine's
//!    `ExecutorHandle::with_current_pool`) and calls `spawn_root` (`task/root.rs`), which calls
//!    the engine's `ExecutorHandle::spawn_with` with a closure that makes the root future.
//! 2. The engine (`executor.rs`, here) makes the header (`task/header.rs`: id block, owner
//!    reference to the pool, `task/owner.rs`) and lists the task (`task/list.rs`): under the
//!    shard's lock it takes a slot and calls `task::build` (`task/runnable.rs`), which has
//!    async-task allocate the task and run the maker inside the allocation.
//! 3. Up again: coro's closure, still under that lock, reads the user's future out of
//!    `spawn`'s frame, wraps it in its frame (`task/lazy.rs`, `Framed`: name, location, flags,
//!    context), captures the context (cancellation token and task-locals, `task/context.rs`)
//!    and returns the root (`Root`: executor, `RootTrace` trace cell, body).
//! 4. Back here, the task is queued on the spawning worker (`worker.rs`), which wakes another
//!    if none is searching (`idle.rs`, `park.rs`).
//! 5. First poll: async-task's `run` polls `Tracked` (`task/runnable.rs`: current task and
//!    state, `task/current.rs`; panics caught, `task/panic.rs`), which polls coro's `Root`: it
//!    enters the executor, attaches its trace cell to the header (down again:
//!    `trace::attach`) and links its frame as the outermost, and polls the framed body, which
//!    enters its frame (already linked: no call down to look for a cell) and context.
//!
//! What the task carries, and why: async-task's header (state, awaiter, vtable); the
//! `TaskHeader` (id, trace pointer, state and wait slot, `last` publication mark, owner);
//! `Tracked`'s list key and header pointer; and the Task layer's root: its trace cell (root
//! frame pointer, parent id, published stack), its frame (name, location, awaiter link with
//! the task's flags) and its context (token, locals).
//!
//! Where it is going, so that the path runs one way (coro builds what the task needs, the
//! engine allocates and queues it, nothing calls back up) in one allocation no larger than
//! smol's for the same future:
//! - coro hands the engine plain values instead of a maker: the frame (name and location),
//!   the captured context as one word, and the parent. The engine reads the future into the
//!   allocation itself, in its own `build` closure, so the in-place construction that keeps
//!   large futures from being copied at each layer stays, but the code that runs inside the
//!   allocation (and under the list's lock) is the engine's alone.
//! - The Task layer's root state moves into the engine's task, next to `Tracked`: the trace
//!   cell (whose root pointer then has a fixed place to point at, and can go), the frame node,
//!   and the context word, which the engine keeps but never reads. `Root` and `RootTrace`
//!   then disappear, and with them the first poll's call down to attach the cell: the header
//!   points at the cell when the task is built.
//! - The list's lock covers only taking the slot: the task is built around a reserved slot,
//!   then published with a store that shutdown's `close` cannot miss (a `closed` flag and a
//!   fence on both sides, as unlisting already pairs with visitors), so no caller's code runs
//!   under it; the list's loom model gains the reserved state.
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

    /// Spawns the future `make` returns (made in place, see [`task::build`]); spawned by a
    /// worker of this pool, it first goes where `placement` says.
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
        // Everything the task needs from the pool is made before the list's lock: under it, only
        // the slot is taken and the task allocated around it.
        let header = TaskHeader::with_owner(Some(self.owner_ref()));
        let spawned =
            self.tasks
                .insert(task::shard_hint(), (make, header), |key, (make, header)| {
                    let (runnable, task) = task::build(key, make, header, WithInfo(schedule));
                    let header = std::ptr::NonNull::from(runnable.metadata());
                    (Some(runnable.waker()), header, (runnable, task))
                });
        match spawned {
            Ok((runnable, task)) => {
                // Queued here, not through `runnable.schedule()`: the schedule function would
                // find this pool again through the header and mark the task scheduled, which a
                // new header already is (and a new task has no statistics block to count in).
                if let Err(runnable) =
                    worker::schedule_local(Arc::as_ptr(self), runnable, placement)
                {
                    self.schedule_remote(runnable);
                }
                JoinHandle::new(task)
            }
            Err((make, _header)) => {
                // Shut down: the task is dropped unrun and its handle resolves Cancelled.
                let (runnable, task) = task::build_unlisted(make(), |_| {});
                drop(runnable);
                JoinHandle::new(task)
            }
        }
    }
}
