//! The hooks the loom and shuttle models (`loom_protocol.rs`, `loom_offer.rs`) run this
//! module's [`Worker`] through: a worker loop started awake or asleep, and a thread standing
//! in for a worker inside a long poll.

use super::{CURRENT, Worker, run_worker};
use crate::pool::queue::Local;
use crate::pool::shared::Shared;
use crate::task::Runnable;
use std::ptr;
use std::sync::Arc;

/// How a worker starts in the models (`loom_protocol.rs`), which run this file's `Worker`.
#[derive(Clone, Copy)]
pub(in crate::pool) enum ModelStart {
    /// At the top of its loop, searching or not (the model's setup counted it as `Idle` would).
    Running { searching: bool },
    /// Asleep, at the wait that ends `park` (the model's setup did its `idle.park`).
    Asleep,
}

/// Runs worker `index` on this (model) thread as [`run`](super::run) does, starting as `start` says.
pub(in crate::pool) fn run_model(
    shared: Arc<Shared>,
    index: usize,
    local: Local<Runnable>,
    start: ModelStart,
) -> Local<Runnable> {
    run_worker(
        Worker::new(shared, index, local, false),
        |worker| match start {
            ModelStart::Running { searching } => worker.core.borrow_mut().is_searching = searching,
            ModelStart::Asleep => worker.sleep(None),
        },
    )
}

/// This (model) thread as worker `index`, inside a poll that outlasts the model: what it
/// schedules goes through [`schedule_local`](super::schedule_local) as from any running task, until this drops.
pub(in crate::pool) struct BusyWorker {
    worker: Box<Worker>,
}

impl BusyWorker {
    pub(in crate::pool) fn enter(
        shared: Arc<Shared>,
        index: usize,
        local: Local<Runnable>,
    ) -> BusyWorker {
        let worker = Box::new(Worker::new(shared, index, local, false));
        CURRENT.with(|c| c.set(&*worker));
        BusyWorker { worker }
    }

    /// The poll returns and the worker runs its next slot, as `next_task` would first; that
    /// poll outlasts the model too.
    pub(in crate::pool) fn run_next_slot(&self) {
        if let Some(task) = self.worker.remote().take_next() {
            self.worker.run_task(task);
        }
    }

    pub(in crate::pool) fn local_is_empty(&self) -> bool {
        self.worker.core.borrow().local.is_empty()
    }
}

impl Drop for BusyWorker {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}
