//! State shared by a pool's workers and everyone who schedules onto it.

use super::helper_threads::Helpers;
use super::idle::Idle;
use super::metrics::WorkerCounters;
use super::offer::OfferSlot;
use super::park::Parker;
use super::queue;
use super::stall::StallConfig;
use crate::blocking::BlockingPool;
use crate::loom::sync::atomic::{AtomicBool, AtomicPtr, Ordering::*, fence};
use crate::task::owner::{OwnerHead, OwnerRef};
use crate::task::{Runnable, TaskHeader, TaskList};
use concurrent_queue::ConcurrentQueue;
use std::ptr::{self, NonNull};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Gives back the reference a pool task's [`OwnerRef`] holds (made by `Shared::owner_ref`).
///
/// # Safety
/// `head` is the head of a `Shared` and carries one reference from `Arc::into_raw`.
unsafe fn release_owner(head: NonNull<OwnerHead>) {
    // SAFETY: per the contract; `Shared` is `repr(C)` with the head first, so the addresses
    // are the same.
    drop(unsafe { Arc::from_raw(head.as_ptr().cast_const().cast::<Shared>()) });
}

/// What the pool's other threads use of its monitor thread: the parker it sleeps on while
/// every worker is parked, and the thread itself, whose timed sleeps shutdown cuts short.
pub(crate) struct Monitor {
    pub(super) parker: Parker,
    pub(super) thread: OnceLock<std::thread::Thread>,
}

impl Monitor {
    pub(crate) fn new() -> Monitor {
        Monitor {
            parker: Parker::new(),
            thread: OnceLock::new(),
        }
    }

    /// Wakes the monitor from its sleep while every worker is parked (a worker was woken).
    pub(crate) fn wake(&self) {
        self.parker.unpark();
    }

    /// Wakes the monitor from any sleep, so that it sees the pool shut down at once (a pool's
    /// drop joins it).
    pub(crate) fn wake_for_shutdown(&self) {
        self.parker.unpark();
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

/// What other threads may touch of one worker.
pub(crate) struct Remote {
    /// The stealing end of the worker's local queue.
    pub(crate) steal: queue::Steal<Runnable>,
    /// The next slot: the task most recently spawned or woken by the running task, run before
    /// the queue. An atomic pointer (a `Runnable` in raw form) so that thieves can take it.
    next: AtomicPtr<()>,
    pub(crate) parker: Parker,
    pub(crate) counters: WorkerCounters,
    /// Work the worker offers while it runs a stretch of work inline (`offer.rs`).
    pub(crate) offer: OfferSlot,
    /// The header of the task being polled, while stall reports are on (`stall.rs`); null
    /// otherwise and between polls.
    running: AtomicPtr<TaskHeader>,
}

/// How long a task must wait in the next slot of a worker that stays in one poll before a
/// searcher takes it (Go's `runqgrab` sleeps 3 µs before stealing `runnext`): the owner
/// usually woke that task just before finishing its poll, and runs it next.
#[cfg_attr(any(loom, shuttle), allow(dead_code))]
pub(crate) const NEXT_SLOT_GRACE: Duration = Duration::from_micros(3);

/// Waits [`NEXT_SLOT_GRACE`] (in a loom or shuttle model: lets the other threads move).
pub(crate) fn wait_next_slot_grace() {
    #[cfg(any(loom, shuttle))]
    crate::loom::thread::yield_now();
    #[cfg(not(any(loom, shuttle)))]
    // In a simulation no poll runs while another worker waits: there is nothing to wait for.
    if !crate::sim::state::is_active() {
        let start = std::time::Instant::now();
        while start.elapsed() < NEXT_SLOT_GRACE {
            std::hint::spin_loop();
        }
    }
}

impl Remote {
    /// The owner's poll counter: it moves whenever the owner starts a poll, so a value that
    /// stays the same over a while means one poll running that long.
    pub(crate) fn owner_polls(&self) -> u64 {
        self.counters.polls.get()
    }

    pub(crate) fn new(steal: queue::Steal<Runnable>) -> Remote {
        Remote {
            steal,
            next: AtomicPtr::new(ptr::null_mut()),
            parker: Parker::new(),
            counters: WorkerCounters::default(),
            offer: OfferSlot::new(),
            running: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// The header of the task this worker polls right now, if stall reports are on: only
    /// compared and looked up in the task list, never dereferenced directly.
    pub(crate) fn running_task(&self) -> *mut TaskHeader {
        self.running.load(Relaxed)
    }

    /// Publishes the task about to be polled (null after the poll). Relaxed: the monitor only
    /// uses it as a key into the task list, whose own synchronisation makes the read safe.
    pub(crate) fn set_running(&self, header: *const TaskHeader) {
        self.running.store(header.cast_mut(), Relaxed);
    }

    /// This slot's counters and queue depth, for [`PoolMetrics`](super::PoolMetrics).
    pub(crate) fn snapshot(&self) -> super::WorkerMetrics {
        self.counters
            .snapshot(self.steal.len() + self.has_next() as usize)
    }

    pub(crate) fn has_next(&self) -> bool {
        !self.next.load(Relaxed).is_null()
    }

    /// Takes the next-slot task. The owner calls it to run the task, a thief to steal it.
    pub(crate) fn take_next(&self) -> Option<Runnable> {
        if !self.has_next() {
            return None;
        }
        let raw = self.next.swap(ptr::null_mut(), Acquire);
        // SAFETY: a non-null value in `next` always came from `Runnable::into_raw` in
        // `put_next`, and the swap hands it to exactly one caller, so it is turned back into a
        // `Runnable` once.
        NonNull::new(raw).map(|raw| unsafe { Runnable::from_raw(raw) })
    }

    /// Puts a task in the next slot, returning the one it displaces. Only the slot's owner calls
    /// it (on its own thread), so a slot it sees empty stays empty until it fills it: thieves
    /// only take.
    pub(crate) fn put_next(&self, runnable: Runnable) -> Option<Runnable> {
        let raw = runnable.into_raw().as_ptr();
        if self.next.load(Relaxed).is_null() {
            // Empty (the common case: the owner ran what it held), and nobody else can fill it:
            // a plain store, not a locked swap. Release publishes the task to a thief's
            // Acquire swap.
            self.next.store(raw, Release);
            return None;
        }
        // Release publishes the task to a thief's Acquire swap; Acquire takes over the old one
        // (or finds it stolen meanwhile).
        let old = self.next.swap(raw, AcqRel);
        // SAFETY: the swap made us the only owner of the old pointer (a thief takes it with a
        // swap too), which came from `into_raw` of a `Runnable` put here.
        NonNull::new(old).map(|old| unsafe { Runnable::from_raw(old) })
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        drop(self.take_next());
    }
}

/// `repr(C)` with `owner` first: a task's header points at the pool through it (`task/owner.rs`).
#[repr(C)]
pub(crate) struct Shared {
    /// What a task's [`OwnerRef`] points at: the release function for its reference.
    owner: OwnerHead,
    /// One per worker (`0..workers`), then one per spare slot for handoff helpers.
    pub(crate) remotes: Box<[Remote]>,
    /// The number of workers: the remotes before the spare slots.
    pub(crate) workers: usize,
    /// The global queue: spawns from outside the pool, wake-ups from other threads, overflow.
    pub(crate) inject: ConcurrentQueue<Runnable>,
    /// Shared with the IO driver's kick, which asks it first whether a worker would be woken
    /// (without a reference to the pool, whose count every worker's kick would write).
    pub(crate) idle: Arc<Idle>,
    /// Shared with the registry, for task snapshots.
    pub(crate) tasks: Arc<TaskList>,
    pub(crate) blocking: BlockingPool,
    /// Wakes a parked worker for an offer that stays posted (`monitor.rs`).
    pub(crate) monitor: Monitor,
    /// Threads started on the spare slots for work stuck behind a long poll (`handoff.rs`).
    pub(crate) helpers: Helpers,
    /// How long a poll may hold up its worker's queue before the monitor hands the queue off.
    pub(crate) handoff_after: Duration,
    /// Stall reports, if on (`stall.rs`).
    pub(crate) stall: Option<StallConfig>,
    /// The prefix of the pool's thread names.
    pub(crate) thread_name: String,
    shutdown: AtomicBool,
    /// The IO driver, created when the first socket registers (`io/driver.rs`).
    #[cfg(not(any(loom, shuttle)))]
    io: std::sync::OnceLock<Arc<crate::io::driver::IoDriver>>,
    /// The pool's timers, kept by its parked workers; created by the first timer registered
    /// from one of its workers.
    #[cfg(not(any(loom, shuttle)))]
    timers: std::sync::OnceLock<Arc<crate::time::Driver>>,
    /// A simulation's pool (`sim.rs`): the one thread that runs all its logical workers.
    pub(crate) sim_thread: Option<std::thread::ThreadId>,
    /// A simulation's pool: the first wake-up that came from another thread, described.
    pub(crate) outside_wake: OnceLock<String>,
}

/// The settings of a pool that its shared state keeps.
pub(crate) struct Options {
    pub(crate) handoff_after: Duration,
    pub(crate) stall: Option<StallConfig>,
    pub(crate) thread_name: String,
    /// Set for a simulation's pool: the thread that runs it.
    pub(crate) sim_thread: Option<std::thread::ThreadId>,
}

impl Shared {
    /// The shared state of a pool whose workers are `remotes` (no spare slots: no helper can
    /// start), with the default handoff threshold: for the loom and shuttle models.
    #[cfg(all(test, any(loom, shuttle)))]
    pub(crate) fn new(remotes: Box<[Remote]>, blocking: BlockingPool) -> Shared {
        let workers = remotes.len();
        let options = Options {
            handoff_after: super::helper_threads::DEFAULT_HANDOFF_AFTER,
            stall: None,
            thread_name: String::new(),
            sim_thread: None,
        };
        let helpers = Helpers::new(workers, Vec::new(), String::new());
        Shared::with_spares(remotes, workers, helpers, blocking, options)
    }

    /// The shared state of a pool whose first `workers` remotes are workers and the rest the
    /// spare slots of `helpers`.
    pub(crate) fn with_spares(
        remotes: Box<[Remote]>,
        workers: usize,
        helpers: Helpers,
        blocking: BlockingPool,
        options: Options,
    ) -> Shared {
        Shared {
            // SAFETY: `release_owner` gives back what `owner_ref` makes.
            owner: unsafe { OwnerHead::new(release_owner) },
            remotes,
            workers,
            inject: ConcurrentQueue::unbounded(),
            idle: Arc::new(Idle::new(workers)),
            tasks: Arc::new(TaskList::new(workers)),
            blocking,
            monitor: Monitor::new(),
            helpers,
            handoff_after: options.handoff_after,
            stall: options.stall,
            thread_name: options.thread_name,
            shutdown: AtomicBool::new(false),
            #[cfg(not(any(loom, shuttle)))]
            io: std::sync::OnceLock::new(),
            #[cfg(not(any(loom, shuttle)))]
            timers: std::sync::OnceLock::new(),
            sim_thread: options.sim_thread,
            outside_wake: OnceLock::new(),
        }
    }

    /// The pool's IO driver, created on first use.
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn io_driver(
        self: &Arc<Self>,
    ) -> std::io::Result<&Arc<crate::io::driver::IoDriver>> {
        if let Some(driver) = self.io.get() {
            return Ok(driver);
        }
        let pool = Arc::downgrade(self);
        let idle = self.idle.clone();
        let driver = crate::io::driver::IoDriver::new(Box::new(move || {
            // A socket waits while nobody polls the OS: get a parked worker to (or a searcher to
            // look). Asked first without the pool: while every worker is busy (when this runs
            // most), no worker would be woken, and upgrading the pool's reference would write
            // its count, a line every kicking worker shares.
            if !idle.io_wait_should_wake() {
                return;
            }
            if let Some(pool) = pool.upgrade() {
                pool.notify_parked();
            }
        }))?;
        // A racing first registration may have won: use whichever got in.
        let _ = self.io.set(Arc::new(driver));
        if self.is_shutdown() {
            // Shutdown closed the driver before this one existed.
            self.io.get().expect("just set").close();
        }
        Ok(self.io.get().expect("just set"))
    }

    /// The pool's timer driver, created on first use.
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn timer_driver(self: &Arc<Self>) -> &Arc<crate::time::Driver> {
        if let Some(driver) = self.timers.get() {
            return driver;
        }
        let pool = Arc::downgrade(self);
        let driver = crate::time::Driver::for_pool(Box::new(move |kick| {
            let Some(pool) = pool.upgrade() else { return };
            match kick {
                // It sleeps past the new deadline: wake it (in the OS poll too).
                crate::time::Kick::Keeper(index) => pool.unpark_worker(index),
                // Nobody keeps the timers: a parked worker that wakes and finds nothing to do
                // becomes their keeper as it parks again.
                crate::time::Kick::Anyone => {
                    pool.notify_parked();
                }
            }
        }));
        // A racing first registration may have won: use whichever got in.
        if self.timers.set(Arc::new(driver)).is_ok() {
            crate::time::register_driver(self.timers.get().expect("just set"));
        }
        let driver = self.timers.get().expect("just set");
        if self.is_shutdown() {
            // Shutdown closed the timers before this driver existed.
            driver.close();
        }
        driver
    }

    /// The timer driver, if it exists (what parked workers keep, and busy ones check).
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn timers(&self) -> Option<&Arc<crate::time::Driver>> {
        self.timers.get()
    }

    /// The IO driver, if it exists and has sockets to poll for: what an idle worker waits on.
    #[cfg(not(any(loom, shuttle)))]
    pub(crate) fn io_to_poll(&self) -> Option<&Arc<crate::io::driver::IoDriver>> {
        self.io
            .get()
            .filter(|io| io.has_sources() && !self.is_shutdown())
    }

    /// Wakes worker `index` from its park, in the OS poll too.
    pub(crate) fn unpark_worker(&self, index: usize) {
        self.remotes[index].parker.unpark_with(|| {
            #[cfg(not(any(loom, shuttle)))]
            if let Some(io) = self.io.get() {
                io.notify();
            }
        });
    }

    /// The name of the thread of slot `index`: a worker's, or a helper's on a spare slot.
    pub(crate) fn thread_name(&self, index: usize) -> Option<String> {
        if self.thread_name.is_empty() {
            return None;
        }
        Some(if index < self.workers {
            format!("{}-{index}", self.thread_name)
        } else {
            format!("{}-helper-{}", self.thread_name, index - self.workers)
        })
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    /// A counted reference to this pool for a task's header.
    pub(super) fn owner_ref(self: &Arc<Self>) -> OwnerRef {
        let raw = Arc::into_raw(self.clone());
        // SAFETY: from `Arc::into_raw` of a `Shared` (`Send + Sync`, `repr(C)` with its head
        // first), released by `release_owner`, the head's function.
        unsafe { OwnerRef::from_raw(NonNull::from(&(*raw).owner)) }
    }

    /// Queues a task from outside the pool's workers (or a worker of another pool).
    pub(crate) fn schedule_remote(&self, runnable: Runnable) {
        if let Some(thread) = self.sim_thread {
            self.check_sim_thread(thread);
        }
        match self.inject.push(runnable) {
            // Once shutdown began nobody is to be woken: the workers are leaving, and shutdown
            // itself drops what is queued.
            Ok(()) if self.is_shutdown() => {}
            Ok(()) => {
                self.notify_parked();
            }
            // Closed at the end of shutdown (every task it knew of is dropped): dropping the
            // runnable drops the task, exactly once (not inside this wake, see `reaper.rs`).
            Err(closed) => super::reaper::drop_closed(closed.into_inner()),
        }
    }

    /// A simulation's pool is scheduled onto from thread `sim` only: a wake-up from another
    /// thread (one the test started) comes at a moment no seed decides. It is queued all the
    /// same (nothing is lost) and recorded, for the simulation to fail with.
    #[cold]
    fn check_sim_thread(&self, sim: std::thread::ThreadId) {
        let here = std::thread::current();
        if here.id() != sim {
            let _ = self.outside_wake.set(format!(
                "a task of the simulation was woken from thread {:?} ({:?}), outside the \
                 simulation; the moment of such a wake-up is not decided by the seed, so the run \
                 is not deterministic: do not start threads (or use std::sync primitives that \
                 other threads complete) in a simulated test",
                here.name().unwrap_or("unnamed"),
                here.id()
            ));
        }
    }

    /// Wakes a parked worker if the policy says one should help: nobody is searching and someone
    /// is parked. Returns whether one was woken.
    pub(crate) fn notify_parked(&self) -> bool {
        match self.idle.worker_to_notify() {
            Some(notify) => {
                self.unpark_worker(notify.worker);
                if notify.monitor {
                    self.monitor.wake();
                }
                true
            }
            None => false,
        }
    }

    /// The last worker to park looks at every queue once more: a task pushed while everyone
    /// counted on it (a searcher) to find that task must not be stranded.
    pub(crate) fn notify_if_work_pending(&self) {
        // Pairs with the fence in `Idle::notify_should_wake`: a pusher fences between its push
        // and its read of the idle state, and the parker fences between its update of that
        // state and these reads, so at least one of them sees the other (store buffering).
        fence(SeqCst);
        let queued = !self.inject.is_empty() || self.remotes.iter().any(|r| !r.steal.is_empty());
        if queued || self.next_slot_held_up() {
            self.notify_parked();
        }
    }

    /// Whether a task waits in a next slot whose owner stays in one poll through the grace
    /// period. A task in a next slot is its owner's to run as soon as the poll it is in ends;
    /// waking a worker for it pays only if that poll goes on (a searcher then steals it, see
    /// `Worker::search`), and waking one for every next slot of a worker that keeps its tasks
    /// ping-ponging would wake a worker just to park it again.
    fn next_slot_held_up(&self) -> bool {
        let held: Vec<(&Remote, u64)> = self
            .remotes
            .iter()
            .filter(|r| r.has_next())
            .map(|r| (r, r.owner_polls()))
            .collect();
        if held.is_empty() {
            return false;
        }
        wait_next_slot_grace();
        held.into_iter()
            .any(|(r, polls)| r.has_next() && r.owner_polls() == polls)
    }

    /// Starts shutdown (steps 1 to 3 of the order below): the workers, the monitor and the
    /// helpers stop at their next look, the drivers wake their waiters, and every thread is
    /// woken to see it. Returns false if shutdown had already begun.
    ///
    /// The shutdown order (`ThreadPool::drop` runs it; `finish_shutdown` is steps 5 to 8):
    /// 1. set the shutdown flag: workers, monitor and helpers exit at their next look; and the
    ///    task list refuses new tasks: a spawn from now on drops its future at once. The global
    ///    queue stays open: every task scheduled from here on, by any thread (woken by the
    ///    drivers' close, by a destructor in a worker's drain, by another thread), is queued
    ///    there for step 6, never dropped on a thread that shutdown does not wait for;
    /// 2. close the IO and timer drivers: the tasks waiting on them are woken, into the queue;
    /// 3. unpark every worker and the monitor;
    /// 4. (`ThreadPool::drop`) join the workers and the monitor, each worker dropping what its
    ///    own queues hold as it exits, then the helpers: no pool thread runs a task any more;
    /// 5. close the task list, taking every entry, and wake every task it still listed: each
    ///    is queued, unless it already was or its waker's thread is queueing it;
    /// 6. drop, on this thread, whatever is queued (and what those destructors queue in
    ///    turn), until every task that step 5 took is dropped ([`TaskList::dropping`] is 0):
    ///    the last ones may be on their way to the queue from another thread;
    /// 7. close the global queue (a task woken after this is one that finished or was never
    ///    listed: the reaper drops it) and drop what got in before;
    /// 8. shut down the blocking pool.
    ///
    /// From inside one of the pool's own tasks, that worker cannot be joined in step 4, and
    /// step 6 cannot wait for its tasks (the running one is among them): it drops what is
    /// queued and goes on; the worker drops its own queue once its poll returns.
    pub(crate) fn begin_shutdown(&self) -> bool {
        if self.shutdown.swap(true, AcqRel) {
            return false;
        }
        self.tasks.refuse_inserts();
        #[cfg(not(any(loom, shuttle)))]
        if let Some(io) = self.io.get() {
            io.close();
        }
        #[cfg(not(any(loom, shuttle)))]
        if let Some(timers) = self.timers.get() {
            timers.close();
        }
        for index in 0..self.remotes.len() {
            self.unpark_worker(index);
        }
        self.monitor.wake_for_shutdown();
        true
    }

    /// Ends shutdown once the pool's threads have exited (steps 5 to 8 of the order at
    /// [`begin_shutdown`](Self::begin_shutdown)): drops every task still alive, queued or
    /// parked on a waker nobody will call, and returns once each is dropped, unless
    /// `all_joined` is false (shutdown from inside a pool task, whose worker still runs).
    pub(crate) fn finish_shutdown(&self, all_joined: bool) {
        // 5.
        let wakers = self.tasks.close();
        for waker in wakers {
            // The task is idle, queued, or being queued by another thread: waking an idle one
            // queues it (on the global queue: this is not one of the pool's workers).
            waker.wake();
        }
        // 6.
        let mut idle_looks = 0;
        loop {
            if self.drop_queued() {
                idle_looks = 0;
            }
            if !all_joined || self.tasks.dropping() == 0 {
                break;
            }
            // A task woken on another thread just before step 5 is on its way to the queue.
            idle_looks += 1;
            wait_for_queueing(idle_looks);
        }
        // 7.
        self.inject.close();
        self.drop_queued();
        // 8.
        self.blocking.shutdown();
    }

    /// Drops every task in the global queue and the next slots. Returns whether there was any.
    fn drop_queued(&self) -> bool {
        let mut any = false;
        loop {
            let next = self.remotes.iter().find_map(Remote::take_next);
            match next.or_else(|| self.inject.pop().ok()) {
                // A destructor may queue more: looked for again.
                Some(runnable) => {
                    drop(runnable);
                    any = true;
                }
                None => return any,
            }
        }
    }
}

/// Lets the thread that is queueing a task woken just before shutdown closed the task list get
/// on: spins a few times, then yields, then sleeps briefly (`looks` counts the empty looks).
fn wait_for_queueing(looks: u32) {
    #[cfg(any(loom, shuttle))]
    {
        let _ = looks;
        crate::loom::thread::yield_now();
    }
    #[cfg(not(any(loom, shuttle)))]
    match looks {
        0..16 => std::hint::spin_loop(),
        16..64 => std::thread::yield_now(),
        _ => std::thread::sleep(Duration::from_micros(50)),
    }
}
