//! The timer driver: a [`Wheel`] of wakers behind a mutex, and who sleeps until its next expiry
//! and wakes what is due: the `coro-timer` thread for the global driver (timers polled outside
//! any pool), or, for a pool's own driver, the pool's parked workers themselves.
//!
//! # A pool's driver: timers share the workers' park
//!
//! A pool's timers are kept by one of its parked workers, the *keeper* (Go keeps timers per P
//! and a parked M sleeps in the netpoller until the next one; tokio's driver parks with the
//! next deadline as its timeout). Under the lock, a worker about to sleep becomes the keeper if
//! there is none ([`Driver::keep`]), computes the next expiry `T`, publishes it in
//! `sleep_until`, and sleeps (in the OS poll or on its condvar) for at most until `T`; on waking
//! it gives the role up ([`Driver::leave`]). A registration earlier than `sleep_until` lowers it
//! and wakes the keeper (or, with no keeper, a parked worker, which becomes one). This is the
//! thread protocol below with the keeper in the thread's place, so the same argument says no
//! wake-up is lost: the keeper computes `T` and publishes it in one critical section, and its
//! wake-up is a sticky unpark, which ends a sleep that starts after it too.
//!
//! Busy workers fire what is due themselves, on the ticks where they poll the global queue, so
//! timers do not wait for a worker to idle; the monitor does so when no worker got to them
//! (every worker in a long poll). When the pool shuts down its driver is closed: every pending
//! timer is woken, and a `Sleep` that finds its driver closed before its deadline registers
//! again with the global driver (it is never completed early).
//!
//! # Protocol
//!
//! Everything in [`Inner`] is guarded by `Driver::inner`. The thread loops:
//!
//! 1. [`Driver::fire_due`]: under the lock, advance the wheel by at most [`BATCH`] units of work
//!    (entries fired or cascaded), taking the due wakers out (and marking each entry fired, see
//!    *Generations*); release the lock; wake them; repeat until nothing more is due. Wakers are only ever woken **or dropped** with the lock released: waking may run
//!    a task inline and dropping may free one, and either may poll, create or drop a `Sleep`,
//!    which takes this lock (`std`'s mutex is not re-entrant).
//! 2. [`Driver::park`]: under the lock, compute the wheel's next expiry `T`, publish it in
//!    `sleep_until` and `wait_timeout` on the condvar until `T` (which atomically releases the
//!    lock); on return set `sleep_until = AWAKE`.
//!
//! A registration inserts under the lock, and if its tick is earlier than `sleep_until` it
//! lowers `sleep_until` and notifies the condvar. No wake-up can be lost: the driver computes
//! `T` and starts waiting in one critical section, so a registration either happens before it
//! (and is part of `T`) or after the driver is waiting (and sees the `sleep_until` it must beat).
//! While the driver is awake `sleep_until == AWAKE`, so registrations do not notify; the driver
//! will recompute `T` before it waits again.
//!
//! # Generations: lock-free "has it fired?"
//!
//! Each wheel key `k` has a counter `gens[k]`, an atomic that is only written under the lock and
//! is incremented exactly when entry `k` is freed, by firing or by cancellation. A `Sleep`
//! remembers `(k, g)` with `g` read at insertion. Only the owning `Sleep` ever cancels or resets
//! its entry, so while it has not done so, "`gens[k] != g`" means exactly "the entry fired"
//! (by the driver, or inside the owner's own `reset` to an already-passed tick, which is meant
//! to read as fired).
//! Counters only grow (64 bits never wrap in practice), so once a `Sleep` sees a different value
//! the answer is final and needs no lock: polling a fired `Sleep` and dropping it take no lock.
//! A stale read can only err towards "not fired", and that path re-checks under the lock. The
//! `Release` store when firing pairs with the `Acquire` load in [`Registration::has_fired`], so
//! the driver's clock reading that justified firing happens-before the `Sleep` reports ready.
//!
//! The counters live in fixed-size chunks owned by the driver: a chunk never moves once
//! allocated (the `Vec` holds boxes, and only its list of boxes grows), so a `Registration` keeps
//! a pointer to its counter, valid while its owner keeps the driver alive. Chunks are only
//! allocated when the slab grows and are freed with the driver (a pool's at the pool's end; the
//! global one lives for the process), so this costs 8 bytes per slab node for the lifetime of
//! the driver.
//!
//! Memory per pending timer: 32 bytes of wheel node (see `wheel.rs`) + 8 bytes of generation
//! counter = **40 bytes**, plus amortised `Vec` growth slack of the slab. Neither shrinks: the
//! driver keeps the memory of its peak number of timers.
//!
//! # Throughput
//!
//! One thread fires every timer, so expiries per second are bounded by that thread: measured on
//! the 2-core dev VM (release), about 1.5-3 million per second with cheap wakers. Up to about
//! 100k expiries spread over 500 ms, timers are woken at most ~4 ms after their deadline; a
//! burst of 1M within 500 ms saturates the thread and is woken up to ~120 ms late.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{OnceLock, PoisonError};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::wheel::Wheel;
use crate::loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::loom::sync::{Condvar, Mutex, MutexGuard};
use std::ptr::NonNull;

/// `sleep_until` while the driver is not waiting on the condvar: no registration is earlier.
const AWAKE: u64 = 0;
/// `sleep_until` while the driver waits with an empty wheel.
const NEVER: u64 = u64::MAX;
/// Units of wheel work (entries fired or moved) per lock hold: bounds how long a registering
/// thread can wait for the driver (about 1024 x 100 ns).
const BATCH: usize = 1024;
/// Generation counters per chunk (small under loom: each loom atomic is tracked).
const GEN_CHUNK: usize = if cfg!(loom) { 4 } else { 1024 };
/// Ticks are capped here (about 36 million years) so wheel arithmetic cannot overflow.
const MAX_TICK: u64 = 1 << 60;

/// A timer driver: the global one (see [`global`]), or a pool's (see [`Driver::for_pool`]).
pub(crate) struct Driver {
    /// Tick 0. Deadlines are rounded up to whole ticks after it, the clock down.
    origin: Instant,
    inner: Mutex<Inner>,
    /// The driver thread waits here; registrations of an earlier deadline notify it.
    cond: Condvar,
    /// A lower bound of the earliest pending tick ([`NEVER`] if none is pending): busy workers
    /// read it without the lock to see whether anything is due. Lowered by registrations,
    /// recomputed by whoever fires.
    earliest: AtomicU64,
    /// A pool's driver: closed at the pool's shutdown, see the module docs.
    closed: AtomicBool,
    /// A pool's driver: how a registration earlier than `sleep_until` reaches the pool.
    kick: Option<Box<dyn Fn(Kick) + Send + Sync>>,
}

/// Whom a registration on a pool's driver must wake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kick {
    /// The keeper, worker `usize`: it sleeps past the new deadline.
    Keeper(usize),
    /// Any parked worker: nobody keeps the timers right now.
    Anyone,
}

/// What [`Driver::keep`] tells a worker about to sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(any(loom, shuttle), allow(dead_code))]
pub(crate) enum Keep {
    /// Another worker keeps the timers (or the driver is closed): sleep without a timeout.
    Other,
    /// This worker keeps them: sleep for at most this long (`None`: no timer is pending).
    Wait(Option<Duration>),
    /// A timer is due already: fire it rather than sleep.
    Due,
}

/// Why [`Driver::register`] did not file a timer; the waker comes back to be dropped outside
/// the lock.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The driver has already passed the tick: the timer is expired.
    Expired(Waker),
    /// The pool of this driver has shut down: register with another driver.
    Closed(Waker),
}

/// State guarded by `Driver::inner`.
pub(crate) struct Inner {
    wheel: Wheel<Waker>,
    gens: Generations,
    /// The tick the driver thread is waiting for, `AWAKE` if it is not waiting, `NEVER` if it
    /// waits for a notification only.
    sleep_until: u64,
    thread: ThreadState,
    /// A pool's driver: the worker keeping its timers, if one does.
    keeper: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    /// Driven explicitly by tests; never spawns a thread.
    #[cfg_attr(not(test), allow(dead_code))]
    Manual,
    /// The thread is spawned by the first registration.
    NotStarted,
    Started,
    /// A pool's driver: its workers keep it, no thread.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    Pool,
}

/// One generation counter per wheel key, in chunks that never move and live as long as the
/// driver (see the module docs).
struct Generations {
    chunks: Vec<Box<[AtomicU64]>>,
}

impl Generations {
    fn cell(&mut self, key: u32) -> &AtomicU64 {
        let (chunk, index) = (key as usize / GEN_CHUNK, key as usize % GEN_CHUNK);
        while self.chunks.len() <= chunk {
            self.chunks
                .push((0..GEN_CHUNK).map(|_| AtomicU64::new(0)).collect());
        }
        &self.chunks[chunk][index]
    }
}

/// Marks the entry owning `cell` as freed. Must be called with the driver's lock held (the
/// counter has a single writer at a time, so load + store is an increment).
fn bump(cell: &AtomicU64) {
    cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Release);
}

/// A `Sleep`'s handle on its wheel entry. Its owner keeps the driver alive (the global one
/// lives for the process, a pool's is held by an `Arc`), which keeps `cell` valid.
#[derive(Debug)]
pub(crate) struct Registration {
    key: u32,
    /// Whether the waiting task's wait on this timer is registered for task snapshots (kept
    /// by the `Sleep`; here, in the room beside `key`, so that a `Sleep` stays 64 bytes).
    pub(crate) traced: bool,
    generation: u64,
    cell: NonNull<AtomicU64>,
}

// SAFETY: `cell` points at an atomic in a chunk of its driver's generations, which never moves
// or is freed while the driver lives, and the owner of a registration keeps its driver alive
// (the type's docs); an atomic may be read from any thread.
unsafe impl Send for Registration {}
// SAFETY: shared, a `Registration` only loads its `cell`'s atomic (which outlives it, see the
// `Send` impl) and reads its plain fields; atomics may be read from any thread.
unsafe impl Sync for Registration {}

impl Registration {
    /// The wheel key (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// Whether the driver has fired (freed) this entry. `true` is final and exact without the
    /// lock; `false` may be stale unless the lock is held.
    pub(crate) fn has_fired(&self) -> bool {
        self.cell().load(Ordering::Acquire) != self.generation
    }

    fn cell(&self) -> &AtomicU64 {
        // SAFETY: valid while the driver lives, which the owner guarantees (see the type).
        unsafe { self.cell.as_ref() }
    }
}

/// How the driver reads time and waits for it; the real clock, or a simulated one in loom models.
pub(crate) trait Clock {
    /// The current tick (rounded down).
    fn now_tick(&self, driver: &Driver) -> u64;
    /// Waits on the driver's condvar until notified or until tick `target` (`NEVER`: no limit).
    fn wait<'a>(
        &self,
        driver: &'a Driver,
        guard: MutexGuard<'a, Inner>,
        target: u64,
    ) -> MutexGuard<'a, Inner>;
}

/// The monotonic system clock.
struct SystemClock;

impl Clock for SystemClock {
    fn now_tick(&self, driver: &Driver) -> u64 {
        driver.now_tick()
    }

    fn wait<'a>(
        &self,
        driver: &'a Driver,
        guard: MutexGuard<'a, Inner>,
        target: u64,
    ) -> MutexGuard<'a, Inner> {
        let wake_at = (target != NEVER)
            .then(|| driver.origin.checked_add(Duration::from_millis(target)))
            .flatten();
        match wake_at {
            // At `wake_at` the floor of the clock reaches `target`. An early return (spurious,
            // or timer rounding) is harmless: the loop just parks again.
            Some(at) => {
                let timeout = at.saturating_duration_since(super::clock::now());
                match driver.cond.wait_timeout(guard, timeout) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                }
            }
            None => driver
                .cond
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner),
        }
    }
}

impl Driver {
    fn new(thread: ThreadState, kick: Option<Box<dyn Fn(Kick) + Send + Sync>>) -> Self {
        Self {
            origin: super::clock::now(),
            inner: Mutex::new(Inner {
                wheel: Wheel::new(),
                gens: Generations { chunks: Vec::new() },
                // A pool's driver has no keeper yet: the first registration must find one.
                sleep_until: if kick.is_some() { NEVER } else { AWAKE },
                thread,
                keeper: None,
            }),
            cond: Condvar::new(),
            earliest: AtomicU64::new(NEVER),
            closed: AtomicBool::new(false),
            kick,
        }
    }

    /// A pool's driver, kept by its workers; `kick` wakes the keeper or any parked worker.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn for_pool(kick: Box<dyn Fn(Kick) + Send + Sync>) -> Self {
        Self::new(ThreadState::Pool, Some(kick))
    }

    /// A driver without a thread, driven by explicit [`Driver::fire_due`] / [`Driver::park`]
    /// calls. Leaked, because `Sleep` holds `&'static Driver`.
    #[cfg(test)]
    pub(crate) fn new_manual() -> &'static Self {
        Box::leak(Box::new(Self::new(ThreadState::Manual, None)))
    }

    /// Tick 0 (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn origin_for_tests(&self) -> Instant {
        self.origin
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The wheel is only mutated by our own code, which does not panic halfway through an
        // update (user code, i.e. wakers, never runs under the lock), so a poisoned lock still
        // guards consistent state.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tick of `deadline`, rounded **up**: firing at this tick is never early.
    pub(crate) fn tick_for(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.origin);
        let ms = since.as_nanos().div_ceil(1_000_000);
        u64::try_from(ms).unwrap_or(MAX_TICK).min(MAX_TICK)
    }

    /// The current tick, rounded **down**: `origin + now_tick ms <= Instant::now()`.
    fn now_tick(&self) -> u64 {
        let since = super::clock::now().saturating_duration_since(self.origin);
        u64::try_from(since.as_millis())
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK)
    }

    /// Number of pending timers.
    pub(crate) fn pending(&self) -> usize {
        self.lock().wheel.len()
    }

    /// Registers `waker` to be woken at `tick`. Refused, with the waker, if the driver has
    /// already passed `tick` (the timer is expired) or is closed (the caller drops the waker
    /// outside the lock, or registers elsewhere).
    pub(crate) fn register(&self, tick: u64, waker: Waker) -> Result<Registration, Refused> {
        let mut inner = self.lock();
        if self.closed.load(Ordering::Relaxed) {
            return Err(Refused::Closed(waker));
        }
        let key = inner.wheel.insert(tick, waker).map_err(Refused::Expired)?;
        let cell = NonNull::from(inner.gens.cell(key));
        // SAFETY: just made from a reference into the driver's generations.
        let generation = unsafe { cell.as_ref() }.load(Ordering::Relaxed);
        if tick < self.earliest.load(Ordering::Relaxed) {
            self.earliest.store(tick, Ordering::Relaxed);
        }
        let notify = self.lower_sleep_until(&mut inner, tick);
        let spawn = inner.thread == ThreadState::NotStarted;
        if spawn {
            inner.thread = ThreadState::Started;
        }
        drop(inner);
        if let Some(notify) = notify {
            self.notify(notify);
        }
        let registration = Registration {
            key,
            traced: false,
            generation,
            cell,
        };
        if spawn {
            if let Err(error) = spawn_thread() {
                let mut inner = self.lock();
                inner.thread = ThreadState::NotStarted;
                let waker = inner.wheel.cancel(key);
                bump(registration.cell());
                drop(inner);
                drop(waker);
                panic!("failed to spawn the coro-timer thread: {error}");
            }
        }
        Ok(registration)
    }

    /// Called under the lock after filing an entry at `tick`: if whoever waits for the wheel
    /// waits for a later tick, it must be woken. Returns whom to notify (done after unlocking,
    /// so the waiter does not wake up only to block on the mutex; a notify that arrives after
    /// it woke for another reason is a harmless spurious wake-up).
    fn lower_sleep_until(&self, inner: &mut Inner, tick: u64) -> Option<Kick> {
        if tick < inner.sleep_until {
            // Lowering it makes later registrations of even later deadlines skip the notify.
            inner.sleep_until = tick;
            Some(inner.keeper.map_or(Kick::Anyone, Kick::Keeper))
        } else {
            None
        }
    }

    /// Wakes whoever waits for the wheel: the driver thread, or for a pool's driver the keeper
    /// (or any parked worker when there is none).
    fn notify(&self, kick: Kick) {
        match &self.kick {
            Some(pool) => pool(kick),
            None => self.cond.notify_one(),
        }
    }

    /// Re-polls a registration: `Ready` if it has fired, otherwise makes `waker` the one that
    /// will be woken and returns `Pending`.
    pub(crate) fn poll_registered(&self, reg: &Registration, waker: &Waker) -> Poll<()> {
        let inner = self.lock();
        if reg.has_fired() {
            return Poll::Ready(());
        }
        if inner.wheel.value(reg.key).will_wake(waker) {
            return Poll::Pending;
        }
        // Clone outside the lock: `clone` is executor code. The entry may fire meanwhile; then
        // the old waker gets the wake-up and we report `Ready` instead.
        drop(inner);
        let new = waker.clone();
        let mut inner = self.lock();
        let old = if reg.has_fired() {
            Err(new)
        } else {
            Ok(inner.wheel.replace(reg.key, new))
        };
        drop(inner);
        match old {
            Ok(old) => {
                drop(old);
                Poll::Pending
            }
            Err(new) => {
                drop(new);
                Poll::Ready(())
            }
        }
    }

    /// Removes a registration unless it has fired. The lock is skipped when it has.
    pub(crate) fn deregister(&self, reg: &Registration) {
        if reg.has_fired() {
            return;
        }
        let mut inner = self.lock();
        let waker = if reg.has_fired() {
            None
        } else {
            let waker = inner.wheel.cancel(reg.key);
            bump(reg.cell());
            Some(waker)
        };
        drop(inner);
        drop(waker);
    }

    /// Moves a registration to `tick`, keeping its waker. Returns `false` if it had already
    /// fired (the caller must register afresh on its next poll). If `tick` has already passed
    /// the entry fires right here (its waker is woken), so the registration reads as fired.
    pub(crate) fn reset(&self, reg: &Registration, tick: u64) -> bool {
        if reg.has_fired() {
            return false;
        }
        let mut inner = self.lock();
        if reg.has_fired() {
            return false;
        }
        match inner.wheel.reset(reg.key, tick) {
            Ok(()) => {
                if tick < self.earliest.load(Ordering::Relaxed) {
                    self.earliest.store(tick, Ordering::Relaxed);
                }
                let notify = self.lower_sleep_until(&mut inner, tick);
                drop(inner);
                if let Some(notify) = notify {
                    self.notify(notify);
                }
            }
            Err(waker) => {
                bump(reg.cell());
                drop(inner);
                waker.wake();
            }
        }
        true
    }

    /// Fires every timer due at tick `now`: works through the wheel in batches of at most
    /// [`BATCH`] units of work per lock hold, collecting the due wakers, and wakes them with the
    /// lock released. `buf` is scratch space (empty on entry and exit). Returns the number fired.
    pub(crate) fn fire_due(&self, now: u64, buf: &mut Vec<Waker>) -> usize {
        debug_assert!(buf.is_empty());
        let mut fired = 0;
        loop {
            let mut guard = self.lock();
            let Inner { wheel, gens, .. } = &mut *guard;
            let done = wheel.advance(now, BATCH, |key, waker| {
                bump(gens.cell(key));
                buf.push(waker);
            });
            if done {
                let next = wheel.next_expiration().unwrap_or(NEVER);
                self.earliest.store(next, Ordering::Relaxed);
            }
            drop(guard);
            fired += buf.len();
            for waker in buf.drain(..) {
                // A panicking waker must not kill the thread every timer depends on.
                let _ = catch_unwind(AssertUnwindSafe(|| waker.wake()));
            }
            if done {
                return fired;
            }
        }
    }

    /// Waits until the next expiry or an earlier registration. Returns at once if something is
    /// already due at `clock`'s current tick. Returns the target tick it computed.
    pub(crate) fn park(&self, clock: &impl Clock) -> u64 {
        let mut inner = self.lock();
        let target = inner.wheel.next_expiration().unwrap_or(NEVER);
        if target <= clock.now_tick(self) {
            return target;
        }
        inner.sleep_until = target;
        let mut inner = clock.wait(self, inner, target);
        inner.sleep_until = AWAKE;
        target
    }

    /// Whether a timer may be due (a cheap check without the lock, for busy workers: it may
    /// say yes when nothing is, never no when something was due before the last firing).
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn may_be_due(&self) -> bool {
        let earliest = self.earliest.load(Ordering::Relaxed);
        earliest != NEVER && earliest <= self.now_tick()
    }

    /// The deadline of the earliest pending timer, if any: where a simulation's virtual clock
    /// jumps to when every task is idle.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let tick = self.lock().wheel.next_expiration()?;
        self.origin.checked_add(Duration::from_millis(tick))
    }

    /// Fires every timer due now (see [`fire_due`](Self::fire_due)).
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn fire_due_now(&self) -> usize {
        let mut buf = Vec::new();
        self.fire_due(self.now_tick(), &mut buf)
    }

    /// A pool's worker `index` is about to sleep: it becomes the keeper of the timers unless
    /// another worker is, and learns how long it may sleep (see the module docs).
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn keep(&self, index: usize) -> Keep {
        match self.keep_at(index, &SystemClock) {
            None => Keep::Other,
            Some(NEVER) => Keep::Wait(None),
            Some(target) if target <= self.now_tick() => Keep::Due,
            Some(target) => {
                let at = self.origin.checked_add(Duration::from_millis(target));
                Keep::Wait(at.map(|at| at.saturating_duration_since(super::clock::now())))
            }
        }
    }

    /// [`keep`](Self::keep) on `clock`: `None` if another worker keeps the timers, else the
    /// tick to sleep until ([`NEVER`]: until woken), which is due at once if it is not after
    /// `clock`'s current tick.
    fn keep_at(&self, index: usize, clock: &impl Clock) -> Option<u64> {
        let mut inner = self.lock();
        if self.closed.load(Ordering::Relaxed) {
            return None;
        }
        match inner.keeper {
            Some(keeper) if keeper != index => return None,
            _ => inner.keeper = Some(index),
        }
        let target = inner.wheel.next_expiration().unwrap_or(NEVER);
        if target > clock.now_tick(self) {
            inner.sleep_until = target;
        }
        Some(target)
    }

    /// Worker `index` woke up: if it kept the timers, nobody does now, so the next registration
    /// wakes a parked worker to keep them.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn leave(&self, index: usize) {
        let mut inner = self.lock();
        if inner.keeper == Some(index) {
            inner.keeper = None;
            inner.sleep_until = NEVER;
        }
    }

    /// The pool shut down: wakes every pending timer and refuses new ones. A `Sleep` woken
    /// here before its deadline registers again with the global driver.
    #[cfg_attr(any(loom, shuttle), allow(dead_code))]
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let mut buf = Vec::new();
        self.fire_due(MAX_TICK, &mut buf);
        self.lock().keeper = None;
    }

    /// Whether the pool of this driver has shut down (see [`close`](Self::close)).
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The driver thread's body.
    fn run(&self) -> ! {
        let clock = SystemClock;
        let mut buf = Vec::with_capacity(BATCH);
        loop {
            self.fire_due(self.now_tick(), &mut buf);
            self.park(&clock);
        }
    }
}

/// Starts the global driver's thread (the only driver with `ThreadState::NotStarted`).
#[cfg(not(loom))]
fn spawn_thread() -> std::io::Result<()> {
    // `crate::loom::thread` has no `Builder`, which naming the thread needs. Under loom the
    // driver thread is never spawned (models use `Driver::new_manual`), so this is the only
    // place that cannot go through `crate::loom`.
    std::thread::Builder::new()
        .name("coro-timer".into())
        .spawn(|| global().run())
        .map(drop)
}

#[cfg(loom)]
fn spawn_thread() -> std::io::Result<()> {
    crate::loom::thread::spawn(|| global().run());
    Ok(())
}

/// The process-wide driver, created on first use; its thread starts on the first registration.
///
/// `std`'s `OnceLock` rather than a `crate::loom` type: loom has no equivalent, and the global is
/// never touched in loom models (they build their own `Driver`).
pub(crate) fn global() -> &'static Driver {
    static GLOBAL: OnceLock<Driver> = OnceLock::new();
    GLOBAL.get_or_init(|| Driver::new(ThreadState::NotStarted, None))
}

/// Every pool's driver still alive, for [`pending_timers`].
static POOL_DRIVERS: std::sync::Mutex<Vec<std::sync::Weak<Driver>>> =
    std::sync::Mutex::new(Vec::new());

/// Lists a new pool's driver for [`pending_timers`] (dropping the entries of dead ones).
#[cfg_attr(any(loom, shuttle), allow(dead_code))]
pub(crate) fn register_driver(driver: &std::sync::Arc<Driver>) {
    let mut drivers = POOL_DRIVERS.lock().unwrap_or_else(PoisonError::into_inner);
    drivers.retain(|d| d.strong_count() > 0);
    drivers.push(std::sync::Arc::downgrade(driver));
}

/// The number of timers currently registered, in the global timer wheel and in every pool's.
///
/// A [`Sleep`](super::Sleep) is registered from its first `Pending` poll until it fires, is
/// dropped or is reset to an elapsed deadline; a `Sleep` that was never polled, or that found its
/// deadline already reached on the first poll, is not counted. Meant for tests and diagnostics:
/// the value can be stale as soon as it is returned.
///
/// # Example
///
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use std::time::Duration;
/// use coro_executor::time::{pending_timers, sleep};
///
/// let before = pending_timers();
/// let mut timer = Box::pin(sleep(Duration::from_secs(60)));
/// // Registration happens on the first poll.
/// assert!(timer.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
/// assert!(pending_timers() >= 1);
/// drop(timer); // dropping a pending `Sleep` frees its entry at once
/// assert_eq!(pending_timers(), before);
/// ```
pub fn pending_timers() -> usize {
    let pools: Vec<_> = POOL_DRIVERS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .collect();
    global().pending() + pools.iter().map(|d| d.pending()).sum::<usize>()
}

// Loom models of the driver: `loom_driver.rs`, a child module so that it can reach the
// driver's private state.
#[cfg(all(test, loom))]
#[path = "loom_driver.rs"]
mod loom_driver;
