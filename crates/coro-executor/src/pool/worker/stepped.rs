//! A worker stepped by a simulation (`pool/sim.rs`): [`SimWorker`], whose ticks a driver takes
//! one at a time on its own thread, and the park and wake-up that stand in for the worker's
//! sleep there. Not in the loom and shuttle models, which have no simulation.

use super::{CURRENT, Worker};
use crate::pool::queue::Local;
use crate::pool::shared::Shared;
use crate::task::Runnable;
use std::ptr;
use std::sync::Arc;

/// A logical worker of a simulation (`sim.rs`): a [`Worker`] whose ticks a driver takes one at a
/// time on its own thread, making it the thread's current worker for each.
pub(in crate::pool) struct SimWorker {
    worker: Box<Worker>,
}

impl SimWorker {
    pub(in crate::pool) fn new(
        shared: Arc<Shared>,
        index: usize,
        local: Local<Runnable>,
    ) -> SimWorker {
        SimWorker {
            worker: Box::new(Worker::new(shared, index, local, false)),
        }
    }

    /// Runs `f` as this worker's thread would: with it current (what tasks schedule lands on
    /// its queues) and its task-list shard; the thread is no worker again afterwards, also on
    /// unwind.
    pub(in crate::pool) fn enter<R>(&self, f: impl FnOnce(&Worker) -> R) -> R {
        struct Leave;
        impl Drop for Leave {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(ptr::null()));
            }
        }
        CURRENT.with(|c| c.set(&*self.worker));
        crate::task::set_shard_hint(self.worker.index);
        let leave = Leave;
        let result = f(&self.worker);
        drop(leave);
        result
    }

    /// Whether this worker's parker holds a wake-up token (a sleeping worker is then stepped).
    pub(in crate::pool) fn is_notified(&self) -> bool {
        self.worker.remote().parker.is_notified()
    }

    /// Drops what its queues hold, at the simulation's shutdown (as a worker thread's exit).
    pub(in crate::pool) fn drain(&self) {
        self.worker.drain();
    }
}

impl Worker {
    /// [`park`](Self::park) for a logical worker of a simulation: the idle bookkeeping, without
    /// the sleep (the simulation's driver steps this worker again once its parker holds a
    /// token, see [`sim_wake`](Self::sim_wake)). No IO poll and no timer keeping: the driver
    /// fires the timers itself when every worker sleeps.
    pub(in crate::pool) fn sim_park(&self) {
        let was_searching = std::mem::replace(&mut self.core.borrow_mut().is_searching, false);
        self.remote().counters.parks.add(1);
        if self.shared.idle.park(self.index, was_searching, false) {
            self.shared.notify_if_work_pending();
        }
    }

    /// The end of [`sleep`](Self::sleep) for a logical worker of a simulation whose parker
    /// holds a token: takes it and returns whether the worker is awake (chosen by a notifier,
    /// then as a searcher, or the pool shut down), as `sleep` decides after its wait.
    pub(in crate::pool) fn sim_wake(&self) -> bool {
        self.remote().parker.take_token();
        if self.shared.is_shutdown() {
            return true;
        }
        if self.shared.idle.unpark_confirmed(self.index) {
            self.core.borrow_mut().is_searching = true;
            return true;
        }
        false
    }
}
