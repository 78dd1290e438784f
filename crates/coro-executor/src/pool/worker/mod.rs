//! A worker thread: its loop, its private state, and scheduling from inside it.
//!
//! The loop is Go's `schedule()`/`findRunnable()` in miniature:
//! 1. every 61st tick, the global queue first (so it is never starved by local work);
//! 2. the next slot, at most 3 times in a row while the local queue holds tasks (a task and the
//!    one it wakes ping-pong without queueing, but cannot keep the queue waiting);
//! 3. the local queue, then the global queue;
//! 4. searching: steal half of a random victim's queue or take from its posted offer, then the
//!    global queue, for a bounded number of passes (one); then a victim's next slot, if its
//!    owner stayed in the same poll through a short grace period (Go's `runqsteal` with
//!    `stealRunNextG`); a searcher that found nothing lingers: it searches again, while
//!    another worker is awake, for as long as lingering saves wake-ups (Go's spinning threads;
//!    `linger.rs`): a push that finds a searcher wakes nobody, and each such push a linger sees
//!    keeps it going, up to 50 µs; it parks after a run of passes that saw none, a run that
//!    halves after each linger that saw none (down to one pass) and doubles after one that
//!    saw some or when the worker is woken again within 50 µs of parking;
//! 5. park, rescanning every queue first if this worker was the last searcher or the last awake.
//!
//! Every task pushed onto a worker's queue or next slot wakes a parked worker if nobody is
//! searching (Go's `wakep` after `runqput`); a helper (`handoff.rs`) runs the same loop but
//! exits where a worker would park.

#[cfg(all(test, any(loom, shuttle)))]
pub(super) mod model;
#[cfg(not(any(loom, shuttle)))]
mod stepped;

#[cfg(not(any(loom, shuttle)))]
pub(super) use stepped::SimWorker;

use super::drivers::{self, PollToken};
use super::linger::{self, Linger};
use super::offer::{Offer, OfferPtr};
use super::queue::{self, Local};
use super::shared::{Remote, Shared, wait_next_slot_grace};
use crate::task::Runnable;
use std::cell::{Cell, RefCell};
use std::ptr;
use std::sync::Arc;

/// Every this many ticks a worker takes from the global queue before its own (Go uses 61: a
/// prime, so it does not fall into step with periodic work).
const GLOBAL_QUEUE_INTERVAL: u32 = 61;
/// How many times in a row the next slot may be served before the local queue, if it holds
/// anything, gets a turn.
const MAX_NEXT_STREAK: u8 = 3;

/// Passes over all victims a searching worker makes before it parks (the bounded spin). One,
/// as tokio's searchers make: a worker that keeps searching picks up tasks woken on the other
/// core, so a contended lock's hand-offs cross cores, and no engine bench gained from a second
/// pass (benches/README.md, "Sync", has the runs).
pub(crate) const SEARCH_PASSES: usize = 1;

/// The worker's private state. Borrowed only in short stretches, never across `Runnable::run`,
/// so a task that schedules another from inside its poll finds it free.
struct Core {
    local: Local<Runnable>,
    tick: u32,
    next_streak: u8,
    is_searching: bool,
    /// How long this searcher searches on after finding nothing (`linger.rs`).
    linger: Linger,
    rng: u64,
}

pub(crate) struct Worker {
    shared: Arc<Shared>,
    /// `Arc::as_ptr(&shared)`, kept so that the schedule path compares a task's pool with this
    /// worker's without computing it (the address of an `Arc`'s value is an offset from the
    /// `Arc`'s pointer, one instruction on every wake-up).
    shared_ptr: *const Shared,
    /// A helper on a spare slot (`handoff.rs`): it never searches as the idle bookkeeping
    /// counts searchers, and exits where a worker would park.
    helper: bool,
    index: usize,
    core: RefCell<Core>,
}

coro_loom::thread_local_const! {
    /// The worker running on this thread, if any.
    static CURRENT: Cell<*const Worker> = Cell::new(ptr::null());
}

/// The seed of a worker's victim choice: OS randomness, or in a simulation the seed's stream.
fn seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    if let Some(seed) = drivers::draw("worker rng seed") {
        return seed | 1;
    }
    RandomState::new().hash_one(std::thread::current().id()) | 1
}

/// The pool whose worker this thread is, if any.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    CURRENT.with(|c| {
        let worker = c.get();
        // SAFETY: `CURRENT` points at the `Worker` on this thread's stack in `run` for exactly as
        // long as that frame is live; it is cleared before the frame ends.
        (!worker.is_null()).then(|| unsafe { (*worker).shared.clone() })
    })
}

/// Runs `f` with the pool whose worker this thread is, if any, without cloning it.
pub(crate) fn with_current_shared<R>(f: impl FnOnce(Option<&Arc<Shared>>) -> R) -> R {
    let worker = CURRENT.with(Cell::get);
    // SAFETY: `CURRENT` points at this thread's running `Worker` for exactly as long as its
    // frame is live (cleared before it ends); `f` runs on this thread, inside that frame.
    f(unsafe { worker.as_ref() }.map(|worker| &worker.shared))
}

/// Runs `f` with the pool and index of the worker running on this thread, if any.
pub(crate) fn with_current_worker<R>(f: impl FnOnce(&Arc<Shared>, usize) -> R) -> Option<R> {
    let worker = CURRENT.with(Cell::get);
    // SAFETY: `CURRENT` points at this thread's running `Worker` for exactly as long as its
    // frame is live (cleared before it ends); `f` runs on this thread, inside that frame.
    unsafe { worker.as_ref() }.map(|worker| f(&worker.shared, worker.index))
}

/// What one [`Worker::tick`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tick {
    Ran,
    TookOffer,
    Nothing,
}

/// What a search found.
enum Found {
    Task(Runnable),
    /// An offer posted by a busy worker, to take from.
    Offer(Arc<dyn Offer>),
}

/// Where a task scheduled by the running task goes on its worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Spawned or woken: the next slot (the displaced task goes to the back).
    Next,
    /// It woke itself while running (it yielded): the back of the queue.
    Yielded,
    /// Spawned to run beside the spawner: the back of the queue, where an idle worker that is
    /// woken for it can steal it at once (the next slot is stolen from only once its owner
    /// stays in one poll through a grace period).
    Stealable,
}

/// Schedules `runnable` on the current worker if it belongs to pool `shared`; gives it back
/// otherwise (the caller then uses the global queue). `shared` is only compared, never
/// dereferenced: the worker's own reference keeps its pool alive.
pub(crate) fn schedule_local(
    shared: *const Shared,
    runnable: Runnable,
    placement: Placement,
) -> Result<(), Runnable> {
    CURRENT.with(|c| {
        let worker = c.get();
        if worker.is_null() {
            return Err(runnable);
        }
        // SAFETY: non-null, `CURRENT` points at this thread's running `Worker`, whose frame
        // outlives this closure (it is cleared before the frame ends).
        let worker = unsafe { &*worker };
        if !ptr::eq(worker.shared_ptr, shared) {
            return Err(runnable);
        }
        worker.schedule_local(runnable, placement)
    })
}

/// Runs worker `index` of `shared` on the current thread until the pool shuts down.
pub(crate) fn run(shared: Arc<Shared>, index: usize, local: Local<Runnable>) {
    run_as(shared, index, local, false);
}

/// Runs a helper on spare slot `index` of `shared` until it finds no work (or the pool shuts
/// down), then gives the slot back.
pub(crate) fn run_helper(shared: Arc<Shared>, index: usize) {
    let local = shared.helpers.take_local(index);
    let local = run_as(shared.clone(), index, local, true);
    shared.helpers.finished(index, local);
}

/// Runs slot `index` on this thread, as a worker or a helper; returns its queue's owner end.
fn run_as(
    shared: Arc<Shared>,
    index: usize,
    local: Local<Runnable>,
    helper: bool,
) -> Local<Runnable> {
    run_worker(Worker::new(shared, index, local, helper), |_| {})
}

/// Makes `worker` this thread's, runs `start` and then its loop until the pool shuts down (a
/// helper: until it finds nothing), drains it, and returns its queue's owner end.
fn run_worker(worker: Worker, start: impl FnOnce(&Worker)) -> Local<Runnable> {
    CURRENT.with(|c| c.set(&worker));
    crate::task::set_shard_hint(worker.index);
    crate::trace::set_worker_index(worker.index);
    /// Clears `CURRENT` even if the loop unwinds, so no dangling pointer survives the frame.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(ptr::null()));
        }
    }
    let reset = Reset;
    start(&worker);
    worker.run();
    drop(reset);
    worker.drain();
    worker.core.into_inner().local
}

impl Worker {
    fn new(shared: Arc<Shared>, index: usize, local: Local<Runnable>, helper: bool) -> Worker {
        Worker {
            shared_ptr: Arc::as_ptr(&shared),
            shared,
            helper,
            index,
            core: RefCell::new(Core {
                local,
                tick: 0,
                next_streak: 0,
                is_searching: false,
                linger: Linger::new(),
                rng: seed(),
            }),
        }
    }

    fn remote(&self) -> &Remote {
        &self.shared.remotes[self.index]
    }

    fn run(&self) {
        while !self.shared.is_shutdown() {
            match self.tick(|_| {}) {
                Tick::Ran | Tick::TookOffer => {}
                // Nothing left behind the poll it stood in for: the helper's job is done.
                Tick::Nothing if self.helper => return,
                Tick::Nothing if self.lingers() => {}
                Tick::Nothing => self.park(),
            }
        }
    }

    /// One tick of the loop: runs one task (its own, or one found by searching; `before_run`
    /// sees it first), takes from an offer, or finds nothing. A simulation steps its logical
    /// workers tick by tick (`sim.rs`); the loop above is the same ticks back to back.
    #[inline(always)]
    pub(super) fn tick(&self, before_run: impl FnOnce(&Runnable)) -> Tick {
        if let Some(task) = self.next_task() {
            before_run(&task);
            self.run_task(task);
            return Tick::Ran;
        }
        match self.search() {
            Some(Found::Task(task)) => {
                before_run(&task);
                self.run_task(task);
                Tick::Ran
            }
            Some(Found::Offer(offer)) => {
                self.take_offer(offer);
                Tick::TookOffer
            }
            None => Tick::Nothing,
        }
    }

    /// Drops every task left in this worker's queues at shutdown. Runs after `CURRENT` is
    /// cleared, so tasks scheduled by the destructors go to the global queue, which shutdown
    /// drains once the workers are joined.
    fn drain(&self) {
        loop {
            let task = self
                .remote()
                .take_next()
                .or_else(|| self.core.borrow_mut().local.pop());
            match task {
                // Dropped outside the borrow: the future's destructor may schedule other tasks.
                Some(task) => drop(task),
                None => break,
            }
        }
    }

    fn next_task(&self) -> Option<Runnable> {
        let mut core = self.core.borrow_mut();
        let counters = &self.remote().counters;
        core.tick = core.tick.wrapping_add(1);
        let remote = self.remote();
        if core.tick % GLOBAL_QUEUE_INTERVAL == 0 {
            drop(core);
            drivers::look_while_busy(&self.shared);
            core = self.core.borrow_mut();
            if let Some(task) = self.pop_global(&mut core) {
                counters.global_first_polls.add(1);
                if remote.has_next() && !core.is_searching {
                    // The next-slot task now waits behind another poll, where a searcher
                    // would not expect it (see `Shared::next_slot_held_up`): announce it.
                    drop(core);
                    self.shared.notify_parked();
                }
                return Some(task);
            }
        }
        if remote.has_next() {
            // The cap is for the queue's sake: with nothing queued, moving the task through
            // the queue would only cost a push and a pop (a quarter of all polls of a
            // ping-pong; the global queue still gets its turn every 61st tick).
            if core.next_streak < MAX_NEXT_STREAK || core.local.is_empty() {
                if let Some(task) = remote.take_next() {
                    core.next_streak = core.next_streak.saturating_add(1);
                    counters.next_slot_polls.add(1);
                    return Some(task);
                }
            } else if let Some(task) = remote.take_next() {
                // The streak is used up: the woken task queues behind the others.
                counters.next_slot_capped.add(1);
                self.push_back(&mut core, task);
            }
        }
        core.next_streak = 0;
        if let Some(task) = core.local.pop() {
            return Some(task);
        }
        self.pop_global(&mut core)
    }

    /// Takes a task from the global queue, plus a fair share of what is left there into the local
    /// queue (Go's `globrunqget`). One at a time would starve the global queue behind a worker
    /// whose local queue never empties (tasks yielding in a loop): it would get one task per 61
    /// ticks. A batch also lets other workers steal from us rather than contend on the global
    /// queue.
    fn pop_global(&self, core: &mut Core) -> Option<Runnable> {
        let inject = &self.shared.inject;
        let task = inject.pop().ok()?;
        let counters = &self.remote().counters;
        let share = inject.len() / self.shared.workers + 1;
        let batch = share
            .min(core.local.free_slots() / 2)
            .min(queue::CAPACITY / 2);
        let mut moved = 0;
        while moved < batch {
            let Ok(extra) = inject.pop() else { break };
            // Within the free room measured above, so this never overflows.
            self.push_back(core, extra);
            moved += 1;
        }
        counters.global_polls.add(1 + moved as u64);
        if moved > 0 && !core.is_searching {
            self.shared.notify_parked();
        }
        Some(task)
    }

    fn run_task(&self, task: Runnable) {
        {
            let mut core = self.core.borrow_mut();
            core.linger.found_work();
            if core.is_searching {
                core.is_searching = false;
                // The last searcher to find work wakes another: where there was one task there
                // may be more, and nobody else is looking.
                if self.shared.idle.stop_searching() {
                    self.shared.notify_parked();
                }
            }
        }
        let remote = self.remote();
        remote.counters.polls.add(1);
        if self.shared.stall.is_none() {
            task.run();
            return;
        }
        // Stall reports are on: publish what runs, for the monitor to name it (`stall.rs`).
        remote.set_running(task.metadata());
        task.run();
        remote.set_running(ptr::null());
    }

    /// Takes from an offer found while searching. Whatever `take` spawns lands in this
    /// worker's next slot and runs next; the worker stays a searcher until then. A panic in
    /// `take` is the offer's own bug and must not kill the worker: it is caught and dropped.
    fn take_offer(&self, offer: Arc<dyn Offer>) {
        self.remote().counters.offers_taken.add(1);
        let taken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| offer.take()));
        drop(taken);
    }

    /// Looks for work elsewhere: other workers' queues, then their posted offers, then the
    /// global queue; last, a next slot whose owner stays in one poll through the grace period.
    fn search(&self) -> Option<Found> {
        let mut core = self.core.borrow_mut();
        if !core.is_searching && !self.helper {
            if !self.shared.idle.try_start_searching() {
                return None;
            }
            core.is_searching = true;
        }
        let remotes = &self.shared.remotes;
        let n = remotes.len();
        let counters = &self.remote().counters;
        // A victim whose next slot held a task, and its poll counter then.
        let mut held_next: Option<(usize, u64)> = None;
        for _ in 0..SEARCH_PASSES {
            let start = next_random(&mut core.rng) as usize % n;
            for i in 0..n {
                let victim = (start + i) % n;
                if victim == self.index {
                    continue;
                }
                if let Some((task, stolen)) = remotes[victim].steal.steal_into(&mut core.local) {
                    counters.steal_operations.add(1);
                    counters.stolen_tasks.add(stolen as u64);
                    return Some(Found::Task(task));
                }
                if held_next.is_none() && remotes[victim].has_next() {
                    held_next = Some((victim, remotes[victim].owner_polls()));
                }
                if let Some(offer) = remotes[victim].offer.get() {
                    return Some(Found::Offer(offer));
                }
            }
            if let Some(task) = self.pop_global(&mut core) {
                return Some(Found::Task(task));
            }
            std::hint::spin_loop();
        }
        let (victim, polls) = held_next?;
        // The owner usually woke that task just before finishing its poll and runs it next;
        // take it only if the owner is still in the same poll after the grace period.
        drop(core);
        let remote = &remotes[victim];
        // In a simulation the owner is between two steps, never inside a poll: whether it
        // finished its poll within the grace period is a race there, drawn from the seed.
        let owner_moved_on = drivers::draw("next-slot steal").map(|v| v & 1 == 0);
        if owner_moved_on.unwrap_or_else(|| {
            wait_next_slot_grace();
            remote.owner_polls() != polls
        }) {
            return None;
        }
        let task = remote.take_next()?;
        counters.steal_operations.add(1);
        counters.stolen_tasks.add(1);
        counters.next_slot_steals.add(1);
        Some(Found::Task(task))
    }

    /// After a search that found nothing: whether to search again rather than park, after a
    /// short pause (`linger.rs`), and a look at the OS if a socket wait asked for one. Only a searcher lingers (so at most half of the workers), and
    /// only while another worker is awake to queue work.
    fn lingers(&self) -> bool {
        let mut core = self.core.borrow_mut();
        if !core.is_searching || !self.shared.idle.others_unparked() {
            core.linger.end();
            return false;
        }
        if !core.linger.another_pass(self.shared.idle.absorbed()) {
            return false;
        }
        drop(core);
        self.remote().counters.linger_passes.add(1);
        if self.shared.idle.take_look_at_io() {
            drivers::look_at_io(&self.shared);
        }
        linger::pause();
        true
    }

    fn park(&self) {
        let was_searching = {
            let mut core = self.core.borrow_mut();
            core.linger.parking();
            std::mem::replace(&mut core.is_searching, false)
        };
        self.remote().counters.parks.add(1);
        // With sockets to poll for, one idle worker waits in the OS instead of sleeping.
        let mut poll = drivers::try_poll_io(&self.shared);
        if self
            .shared
            .idle
            .park(self.index, was_searching, poll.is_some())
        {
            self.shared.notify_if_work_pending();
        }
        if poll.is_none() {
            poll = self.poll_io_while_parked();
        }
        self.sleep(poll);
    }

    /// The poll token for a worker counted parked that did not get it on its way in: taken by a
    /// poll that may not wait (a busy worker's, the monitor's), so it tries again, and that
    /// poll's give-back sees it parked and wakes it if this fails (`drivers::retry_poll_io`).
    fn poll_io_while_parked(&self) -> Option<PollToken<'_>> {
        let poll = drivers::retry_poll_io(&self.shared);
        if poll.is_some() {
            self.shared.idle.now_polling(self.index);
        }
        poll
    }

    /// The wait at the end of [`park`](Self::park), with the idle bookkeeping done: sleeps
    /// (waiting in the OS with `poll`, the poll token, if it has it) until the pool shuts down
    /// or this worker is really chosen (then as a searcher, as whoever woke it counted it).
    fn sleep(&self, poll: Option<PollToken<'_>>) {
        let mut poll = poll;
        loop {
            let mut woke_itself = false;
            // Keeps the pool's timers while asleep, unless another parked worker does: then
            // it sleeps only until the next deadline.
            let Some(timeout) = drivers::keep_timers(&self.shared, self.index, || self.awake())
            else {
                return;
            };
            match poll.take() {
                Some(token) => drivers::park_polling(&self.remote().parker, token, timeout, || {
                    // IO events: this worker wakes their tasks onto its own queue, so it takes
                    // itself off the idle list first, awake and not searching.
                    if let Some(monitor) = self.shared.idle.unpark_self(self.index) {
                        woke_itself = true;
                        if monitor {
                            self.shared.monitor.wake();
                        }
                    }
                }),
                None => match timeout {
                    Some(timeout) => self.remote().parker.park_timeout(timeout),
                    None => self.remote().parker.park(),
                },
            }
            drivers::leave_timers(&self.shared, self.index);
            if self.shared.is_shutdown() || woke_itself {
                return;
            }
            if self.shared.idle.unpark_confirmed(self.index) {
                // Whoever woke us counted us as a searcher.
                let mut core = self.core.borrow_mut();
                core.is_searching = true;
                core.linger.woken();
                return;
            }
            // Still parked: wait in the OS again if nobody else does.
            poll = self.poll_io_while_parked();
        }
    }

    /// Timers fell due as this worker was about to sleep: it fires them, so it takes itself off
    /// the idle list first (their tasks land on its queue).
    fn awake(&self) {
        match self.shared.idle.unpark_self(self.index) {
            Some(monitor) => {
                if monitor {
                    self.shared.monitor.wake();
                }
            }
            // A notifier chose this worker meanwhile: it counts as a searcher.
            None => self.core.borrow_mut().is_searching = true,
        }
    }

    fn schedule_local(&self, runnable: Runnable, placement: Placement) -> Result<(), Runnable> {
        // The core is free whenever a task runs; it is borrowed here only if a runnable is dropped
        // from inside the worker's own bookkeeping, and then the global queue takes it.
        let Ok(mut core) = self.core.try_borrow_mut() else {
            return Err(runnable);
        };
        let remote = self.remote();
        match placement {
            Placement::Yielded => {
                // A task that woke itself yielded: it goes behind everything queued, never into
                // the next slot, or a yield loop would starve the queue.
                remote.counters.yielded_to_back.add(1);
                self.push_back(&mut core, runnable);
            }
            // Meant for another worker: where thieves look first.
            Placement::Stealable => self.push_back(&mut core, runnable),
            Placement::Next => {
                if let Some(displaced) = remote.put_next(runnable) {
                    self.push_back(&mut core, displaced);
                }
            }
        }
        // Go's `wakep` after `runqput`: whatever was pushed, wherever (the next slot too), a
        // parked worker is woken if nobody is searching; a searcher finds it, stealing from the
        // next slot once this poll outlasts the grace period. A searching worker will run what
        // it holds itself.
        if !core.is_searching {
            drop(core);
            self.shared.notify_parked();
        }
        Ok(())
    }

    fn push_back(&self, core: &mut Core, runnable: Runnable) {
        let inject = &self.shared.inject;
        let moved = core.local.push_back(runnable, &mut |task| {
            if let Err(closed) = inject.push(task) {
                drop(closed.into_inner());
            }
        });
        if moved > 1 {
            self.remote().counters.overflows.add(1);
        }
    }
}

/// xorshift64*: victim choice needs speed and spread, not quality.
fn next_random(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Runs `f` with `offer` posted on the current worker, so that idle workers can take from it
/// while this worker is busy with `f` (see [`Offer`](crate::Offer)), and revokes it when `f` returns or
/// panics. An offer this worker had posted already is hidden meanwhile (offers nest: an inner
/// stretch of work offers its own) and posted again afterwards.
///
/// Outside a [`ThreadPool`](crate::ThreadPool) worker, and on a pool of one worker, where
/// nobody could take it, nothing is posted: `f` just runs.
///
/// ```
/// use coro_executor::Offer;
/// use std::sync::Arc;
///
/// struct Nothing;
/// impl Offer for Nothing {
///     fn has_work(&self) -> bool {
///         false
///     }
///     fn take(self: Arc<Self>) {}
/// }
///
/// // Outside a pool there is nobody to offer to, and `f` runs all the same.
/// assert_eq!(coro_executor::offer_while(&Arc::new(Nothing), || 7), 7);
/// ```
pub fn offer_while<O: Offer, R>(offer: &Arc<O>, f: impl FnOnce() -> R) -> R {
    let pointer: *const O = Arc::as_ptr(offer);
    let pointer: *const dyn Offer = pointer;
    let posted = with_current_worker(|shared, index| {
        if shared.workers < 2 {
            return None;
        }
        let slot = &shared.remotes[index].offer;
        // SAFETY: `offer` is borrowed for this whole call, and the `Revoke` below takes the
        // pointer out of the slot before this call returns (or unwinds).
        let previous = unsafe { slot.replace(Some(OfferPtr(pointer))) };
        Some(Revoke {
            shared: Arc::as_ptr(shared),
            index,
            previous,
        })
    })
    .flatten();
    let result = f();
    drop(posted);
    result
}

/// Takes an offer back out of its slot (also on unwind), restoring the one it hid.
struct Revoke {
    /// The pool of the current worker, whose slot `index` is. The worker's frame (which keeps
    /// its pool alive) is further up this thread's stack than the `offer_while` that owns this,
    /// so it outlives it.
    shared: *const Shared,
    index: usize,
    previous: Option<OfferPtr>,
}

impl Drop for Revoke {
    fn drop(&mut self) {
        // SAFETY: the pool outlives this (see `shared`).
        let shared = unsafe { &*self.shared };
        // SAFETY: `previous` was posted by an enclosing `offer_while` on this thread, which is
        // still running (calls nest), so its `Arc` is still lent.
        unsafe {
            shared.remotes[self.index]
                .offer
                .replace(self.previous.take())
        };
    }
}
