//! [`Helpers`]: a pool's spare worker slots and the helper threads running on them (see
//! `handoff.rs` for when one starts).

use super::queue::Local;
use crate::task::Runnable;
use std::sync::Mutex;
use std::time::Duration;

/// The default of [`ThreadPoolBuilder::handoff_after`](crate::ThreadPoolBuilder::handoff_after):
/// Go's sysmon preempts a goroutine after the same 10 ms.
pub(crate) const DEFAULT_HANDOFF_AFTER: Duration = Duration::from_millis(10);

/// The spare worker slots of a pool and the helper threads running on them.
pub(crate) struct Helpers {
    /// Index of the first spare slot: the number of workers.
    first: usize,
    slots: Mutex<Slots>,
    thread_name: String,
}

struct Slots {
    /// The owner end of each spare slot's queue, while no helper holds it.
    locals: Vec<Option<Local<Runnable>>>,
    /// Which spare slots have a helper (started, not yet finished).
    busy: Vec<bool>,
    /// Helper threads started (joined at shutdown).
    threads: Vec<std::thread::JoinHandle<()>>,
    started: u64,
}

impl Helpers {
    /// Spare slots `first..first + locals.len()`, whose queues' owner ends are `locals`.
    pub(crate) fn new(first: usize, locals: Vec<Local<Runnable>>, thread_name: String) -> Helpers {
        let busy = vec![false; locals.len()];
        Helpers {
            first,
            slots: Mutex::new(Slots {
                locals: locals.into_iter().map(Some).collect(),
                busy,
                threads: Vec::new(),
                started: 0,
            }),
            thread_name,
        }
    }

    /// Starts a helper thread running `run(slot index)` on a free spare slot, unless every slot
    /// has one or `shut_down()` says the pool is shutting down. Returns whether one was started.
    pub(crate) fn start(
        &self,
        shut_down: impl FnOnce() -> bool,
        run: impl FnOnce(usize) + Send + 'static,
    ) -> bool {
        let mut slots = self.slots.lock().unwrap();
        // Checked under the lock that shutdown's `join_all` takes after setting the flag: no
        // helper starts once shutdown has collected the threads.
        if shut_down() {
            return false;
        }
        let Some(spare) = slots.busy.iter().position(|busy| !busy) else {
            return false;
        };
        let index = self.first + spare;
        let spawned = std::thread::Builder::new()
            .name(format!("{}-helper-{spare}", self.thread_name))
            .spawn(move || run(index));
        match spawned {
            Ok(thread) => {
                slots.busy[spare] = true;
                slots.threads.retain(|t| !t.is_finished());
                slots.threads.push(thread);
                slots.started += 1;
                true
            }
            // Out of threads: the stuck work waits for its worker, as it would without handoff.
            Err(_) => false,
        }
    }

    /// The owner end of spare slot `index`'s queue, for the helper just started on it.
    pub(crate) fn take_local(&self, index: usize) -> Local<Runnable> {
        self.slots.lock().unwrap().locals[index - self.first]
            .take()
            .expect("a spare slot's queue is held by at most one helper")
    }

    /// The helper on spare slot `index` exits: its (empty) queue end goes back to the slot.
    pub(crate) fn finished(&self, index: usize, local: Local<Runnable>) {
        let mut slots = self.slots.lock().unwrap();
        slots.locals[index - self.first] = Some(local);
        slots.busy[index - self.first] = false;
    }

    /// Helpers started since the pool was built.
    pub(crate) fn started(&self) -> u64 {
        self.slots.lock().unwrap().started
    }

    /// Whether a helper is running (the monitor then keeps watching, even with every worker
    /// parked).
    pub(crate) fn any_running(&self) -> bool {
        self.slots.lock().unwrap().busy.iter().any(|busy| *busy)
    }

    /// Joins every helper thread but the calling one (shutdown, after the monitor is joined, so
    /// no new one starts). Returns false if the calling thread is one of them (shutdown from
    /// inside a task a helper runs).
    pub(crate) fn join_all(&self) -> bool {
        let threads = std::mem::take(&mut self.slots.lock().unwrap().threads);
        let me = std::thread::current().id();
        let mut all_joined = true;
        for thread in threads {
            if thread.thread().id() == me {
                all_joined = false;
            } else {
                // A helper only panics on a bug in the pool itself; shutdown goes on regardless.
                let _ = thread.join();
            }
        }
        all_joined
    }
}
