//! The timer driver: a [`Wheel`] of wakers behind a mutex, and the `coro-timer` thread that
//! sleeps until the next expiry and wakes what is due.
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
//! The counters live in fixed-size chunks that are allocated once and leaked, which gives each
//! `Sleep` a plain `&'static AtomicU64` (no `Arc`, no `unsafe`). Chunks are only allocated when
//! the slab grows, so this costs 8 bytes per slab node for the lifetime of the driver, which is
//! the process for the global one.
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
use crate::loom::sync::atomic::{AtomicU64, Ordering};
use crate::loom::sync::{Condvar, Mutex, MutexGuard};

/// `sleep_until` while the driver is not waiting on the condvar: no registration is earlier.
const AWAKE: u64 = 0;
/// `sleep_until` while the driver waits with an empty wheel.
const NEVER: u64 = u64::MAX;
/// Units of wheel work (entries fired or moved) per lock hold: bounds how long a registering
/// thread can wait for the driver (about 1024 x 100 ns).
const BATCH: usize = 1024;
/// Generation counters per leaked chunk (small under loom: each loom atomic is tracked).
const GEN_CHUNK: usize = if cfg!(loom) { 4 } else { 1024 };
/// Ticks are capped here (about 36 million years) so wheel arithmetic cannot overflow.
const MAX_TICK: u64 = 1 << 60;

/// A timer driver. Only the global one (see [`global`]) exists outside tests.
pub(crate) struct Driver {
    /// Tick 0. Deadlines are rounded up to whole ticks after it, the clock down.
    origin: Instant,
    inner: Mutex<Inner>,
    /// The driver thread waits here; registrations of an earlier deadline notify it.
    cond: Condvar,
}

/// State guarded by `Driver::inner`.
pub(crate) struct Inner {
    wheel: Wheel<Waker>,
    gens: Generations,
    /// The tick the driver thread is waiting for, `AWAKE` if it is not waiting, `NEVER` if it
    /// waits for a notification only.
    sleep_until: u64,
    thread: ThreadState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ThreadState {
    /// Driven explicitly by tests; never spawns a thread.
    #[cfg_attr(not(test), allow(dead_code))]
    Manual,
    /// The thread is spawned by the first registration.
    NotStarted,
    Started,
}

/// One generation counter per wheel key, in leaked chunks (see the module docs).
struct Generations {
    chunks: Vec<&'static [AtomicU64]>,
}

impl Generations {
    fn cell(&mut self, key: u32) -> &'static AtomicU64 {
        let (chunk, index) = (key as usize / GEN_CHUNK, key as usize % GEN_CHUNK);
        while self.chunks.len() <= chunk {
            let new: Box<[AtomicU64]> = (0..GEN_CHUNK).map(|_| AtomicU64::new(0)).collect();
            self.chunks.push(Box::leak(new));
        }
        &self.chunks[chunk][index]
    }
}

/// Marks the entry owning `cell` as freed. Must be called with the driver's lock held (the
/// counter has a single writer at a time, so load + store is an increment).
fn bump(cell: &AtomicU64) {
    cell.store(cell.load(Ordering::Relaxed) + 1, Ordering::Release);
}

/// A `Sleep`'s handle on its wheel entry.
#[derive(Debug)]
pub(crate) struct Registration {
    key: u32,
    generation: u64,
    cell: &'static AtomicU64,
}

impl Registration {
    /// The wheel key (for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// Whether the driver has fired (freed) this entry. `true` is final and exact without the
    /// lock; `false` may be stale unless the lock is held.
    pub(crate) fn has_fired(&self) -> bool {
        self.cell.load(Ordering::Acquire) != self.generation
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
                let timeout = at.saturating_duration_since(Instant::now());
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
    fn new(thread: ThreadState) -> Self {
        Self {
            origin: Instant::now(),
            inner: Mutex::new(Inner {
                wheel: Wheel::new(),
                gens: Generations { chunks: Vec::new() },
                sleep_until: AWAKE,
                thread,
            }),
            cond: Condvar::new(),
        }
    }

    /// A driver without a thread, driven by explicit [`Driver::fire_due`] / [`Driver::park`]
    /// calls. Leaked, because `Sleep` holds `&'static Driver`.
    #[cfg(test)]
    pub(crate) fn new_manual() -> &'static Self {
        Box::leak(Box::new(Self::new(ThreadState::Manual)))
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
        let since = Instant::now().saturating_duration_since(self.origin);
        u64::try_from(since.as_millis())
            .unwrap_or(MAX_TICK)
            .min(MAX_TICK)
    }

    /// Number of pending timers.
    pub(crate) fn pending(&self) -> usize {
        self.lock().wheel.len()
    }

    /// Registers `waker` to be woken at `tick`. `Err(waker)` if the driver has already passed
    /// `tick` (the timer is expired; the caller drops the waker outside the lock).
    pub(crate) fn register(&'static self, tick: u64, waker: Waker) -> Result<Registration, Waker> {
        let mut inner = self.lock();
        let key = inner.wheel.insert(tick, waker)?;
        let cell = inner.gens.cell(key);
        let generation = cell.load(Ordering::Relaxed);
        let notify = self.lower_sleep_until(&mut inner, tick);
        let spawn = inner.thread == ThreadState::NotStarted;
        if spawn {
            inner.thread = ThreadState::Started;
        }
        drop(inner);
        if notify {
            self.cond.notify_one();
        }
        let registration = Registration {
            key,
            generation,
            cell,
        };
        if spawn {
            if let Err(error) = self.spawn_thread() {
                let mut inner = self.lock();
                inner.thread = ThreadState::NotStarted;
                let waker = inner.wheel.cancel(key);
                bump(cell);
                drop(inner);
                drop(waker);
                panic!("failed to spawn the coro-timer thread: {error}");
            }
        }
        Ok(registration)
    }

    /// Called under the lock after filing an entry at `tick`: if the driver waits for a later
    /// tick, it must be woken. Returns whether to notify (done after unlocking, so the driver
    /// does not wake up only to block on the mutex; a notify that arrives after the driver woke
    /// for another reason is a harmless spurious wake-up).
    fn lower_sleep_until(&self, inner: &mut Inner, tick: u64) -> bool {
        if tick < inner.sleep_until {
            // Lowering it makes later registrations of even later deadlines skip the notify.
            inner.sleep_until = tick;
            true
        } else {
            false
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
            bump(reg.cell);
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
                let notify = self.lower_sleep_until(&mut inner, tick);
                drop(inner);
                if notify {
                    self.cond.notify_one();
                }
            }
            Err(waker) => {
                bump(reg.cell);
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

    /// The driver thread's body.
    fn run(&self) -> ! {
        let clock = SystemClock;
        let mut buf = Vec::with_capacity(BATCH);
        loop {
            self.fire_due(self.now_tick(), &mut buf);
            self.park(&clock);
        }
    }

    #[cfg(not(loom))]
    fn spawn_thread(&'static self) -> std::io::Result<()> {
        // `crate::loom::thread` has no `Builder`, which naming the thread needs. Under loom the
        // driver thread is never spawned (models use `Driver::new_manual`), so this is the only
        // place that cannot go through `crate::loom`.
        std::thread::Builder::new()
            .name("coro-timer".into())
            .spawn(move || self.run())
            .map(drop)
    }

    #[cfg(loom)]
    fn spawn_thread(&'static self) -> std::io::Result<()> {
        crate::loom::thread::spawn(move || self.run());
        Ok(())
    }
}

/// The process-wide driver, created on first use; its thread starts on the first registration.
///
/// `std`'s `OnceLock` rather than a `crate::loom` type: loom has no equivalent, and the global is
/// never touched in loom models (they build their own `Driver`).
pub(crate) fn global() -> &'static Driver {
    static GLOBAL: OnceLock<Driver> = OnceLock::new();
    GLOBAL.get_or_init(|| Driver::new(ThreadState::NotStarted))
}

/// The number of timers currently registered in the global timer wheel.
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
/// use std::pin::pin;
/// use std::task::{Context, Waker};
/// use std::time::Duration;
/// use coro_executor::time::{pending_timers, sleep};
///
/// let before = pending_timers();
/// let mut timer = pin!(sleep(Duration::from_secs(60)));
/// // Registration happens on the first poll.
/// assert!(timer.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
/// assert!(pending_timers() >= 1);
/// drop(timer); // dropping a pending `Sleep` frees its entry at once
/// # let _ = before;
/// ```
pub fn pending_timers() -> usize {
    global().pending()
}

#[cfg(all(test, loom))]
mod tests {
    use super::*;
    use crate::loom::sync::atomic::AtomicBool;
    use crate::loom::thread;
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Simulated time: the clock stands at `now`; a wait for a target at or before
    /// `times_out_by` stands for a `wait_timeout` that expires in time on its own, any other wait
    /// only ends with a notification (loom's `wait_timeout` never times out anyway).
    struct ModelClock {
        now: u64,
        times_out_by: u64,
    }

    impl Clock for ModelClock {
        fn now_tick(&self, _: &Driver) -> u64 {
            self.now
        }
        fn wait<'a>(
            &self,
            driver: &'a Driver,
            guard: MutexGuard<'a, Inner>,
            target: u64,
        ) -> MutexGuard<'a, Inner> {
            if target <= self.times_out_by {
                guard
            } else {
                driver.cond.wait(guard).unwrap()
            }
        }
    }

    /// The driver loop of the model: park until the computed target is tick 5 or earlier, i.e.
    /// until a real `wait_timeout` would end in time for the early timer by itself.
    fn park_until_target_reaches(driver: &Driver, tick: u64) {
        let clock = ModelClock {
            now: 0,
            times_out_by: tick,
        };
        while driver.park(&clock) > tick {}
    }

    /// The driver parks on a late deadline while another thread registers an earlier one. If
    /// the registration could slip between the driver computing its target and waiting, the
    /// driver would block forever (a loom deadlock) instead of reaching the early timer.
    #[test]
    fn loom_earlier_registration_wakes_parked_driver() {
        loom::model(|| {
            let driver = Driver::new_manual();
            let late = driver.register(1000, Waker::noop().clone()).unwrap();
            let flag = Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(flag.clone());
            let registrant = thread::spawn(move || driver.register(5, waker).unwrap());
            park_until_target_reaches(driver, 5);
            let mut buf = Vec::new();
            assert_eq!(driver.fire_due(5, &mut buf), 1);
            assert!(flag.0.load(Ordering::SeqCst));
            let early = registrant.join().unwrap();
            assert!(early.has_fired());
            assert!(!late.has_fired());
            assert_eq!(driver.pending(), 1);
        });
    }

    /// Two registrations race with the parked driver: a later one (which lowers `sleep_until`
    /// and notifies) must not make the driver miss the notification of the earliest one.
    #[test]
    fn loom_two_registrations_race_parked_driver() {
        loom::model(|| {
            let driver = Driver::new_manual();
            driver.register(1000, Waker::noop().clone()).unwrap();
            let middle =
                thread::spawn(move || driver.register(700, Waker::noop().clone()).unwrap());
            let early = thread::spawn(move || driver.register(5, Waker::noop().clone()).unwrap());
            park_until_target_reaches(driver, 5);
            let mut buf = Vec::new();
            assert_eq!(driver.fire_due(5, &mut buf), 1);
            assert!(early.join().unwrap().has_fired());
            assert!(!middle.join().unwrap().has_fired());
            assert_eq!(driver.pending(), 2);
        });
    }
}
