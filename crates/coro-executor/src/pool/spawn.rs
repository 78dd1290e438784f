//! Spawning onto a pool, and the schedule function every pool task is built with: from one of
//! the pool's workers a task goes where the placement says (`worker::schedule_local`), from
//! anywhere else to the global queue.

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
        let spawned = self.tasks.insert(task::shard_hint(), make, |key, make| {
            let header = TaskHeader::with_owner(Some(self.owner_ref()));
            let (runnable, task) = task::build(key, make, header, WithInfo(schedule));
            let header = std::ptr::NonNull::from(runnable.metadata());
            (Some(runnable.waker()), header, (runnable, task))
        });
        match spawned {
            Ok((runnable, task)) => {
                if placement == Placement::Next {
                    runnable.schedule();
                } else {
                    // What the schedule function does, with the placement asked for.
                    runnable.metadata().mark_scheduled();
                    if let Err(runnable) =
                        worker::schedule_local(Arc::as_ptr(self), runnable, placement)
                    {
                        self.schedule_remote(runnable);
                    }
                }
                JoinHandle::new(task)
            }
            Err(make) => {
                // Shut down: the task is dropped unrun and its handle resolves Cancelled.
                let (runnable, task) = task::build_unlisted(make(), |_| {});
                drop(runnable);
                JoinHandle::new(task)
            }
        }
    }
}
