//! Soak test: random DAGs of coro work, driven from several OS threads at once for
//! `CORO_SOAK_SECS` seconds (default 60), checking that nothing hangs (every round, so every
//! waiter in it, completes within a deadline), that every leaf task started is finished or
//! dropped once its round is over (no orphans), that the invariants guarded by the locks hold,
//! and that no memory leaks (a counting global allocator, hence its own test binary).
//!
//! Each round builds a DAG from a seeded xorshift PRNG: nested `collect_all_range`,
//! `collect_all!`, `try_collect_all_range` and `collect_any`, `SharedTask`s shared between
//! branches, `SharedPromise` fan-outs (one fulfilled, one broken), `SharedMutexFair`, `Mutex`
//! and `Semaphore` critical sections, 0-2 ms sleeps, short timeouts, explicit cancellations,
//! `AsyncScope` children, `schedule_on` hops and planned panics in some leaves.
//!
//! Run: `cargo test -p coro --release --test soak -- --nocapture`
//! (`CORO_SOAK_SECS=5` for a quick local run). Every failure names the seed; replay the same
//! DAG shapes with `CORO_SOAK_SEED=<seed>` (the interleavings are up to the scheduler).

use coro::cancel::{CancellationSource, CancellationToken, cancellable};
use coro::sync::{Mutex, Semaphore, SharedFuture, SharedMutexFair, SharedPromise, SharedTask};
use coro::time::{sleep, timeout};
use coro::{AsyncScope, JoinError, JoinHandle, Task, ThreadPool};
use futures::FutureExt;
use std::alloc::{GlobalAlloc, Layout, System};
use std::any::Any;
use std::ops::DerefMut;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Counting allocator: live allocations and live bytes.

struct Counting;

static LIVE_ALLOCS: AtomicIsize = AtomicIsize::new(0);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counting only touches
// atomics, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE_ALLOCS.fetch_add(1, SeqCst);
            LIVE_BYTES.fetch_add(layout.size() as isize, SeqCst);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            LIVE_ALLOCS.fetch_add(1, SeqCst);
            LIVE_BYTES.fetch_add(layout.size() as isize, SeqCst);
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, SeqCst);
        }
        new
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_ALLOCS.fetch_sub(1, SeqCst);
        LIVE_BYTES.fetch_sub(layout.size() as isize, SeqCst);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------------------------------------
// PRNG and configuration.

/// xorshift64: tiny, seedable, good enough to pick shapes.
#[derive(Clone, Debug)]
struct Rng(u64);

/// splitmix64 finaliser: turns related seeds (seed, thread, round) into unrelated ones.
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(mix(seed, 0x5EED) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n` (n > 0; the modulo bias does not matter here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// A fresh seed for a child's own generator.
    fn fork(&mut self) -> u64 {
        self.next()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value:?} is not a number: {e}")),
    )
}

/// A round that takes longer than this counts as hung (some waiter was never woken).
const ROUND_DEADLINE: Duration = Duration::from_secs(10);
/// How long leaves being cancelled on other workers get to settle after their round's root
/// has completed (a SharedTask computation or an AsyncScope child dropped on another worker).
const SETTLE_GRACE: Duration = Duration::from_secs(2);
/// Permits of the shared semaphore.
const PERMITS: usize = 3;
/// Marker in the message of every planned panic.
const PLANNED: &str = "soak: planned panic";

// ---------------------------------------------------------------------------------------------
// Figures.

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        $(static $name: AtomicU64 = AtomicU64::new(0);)*
        fn figures() -> String {
            let mut s = String::new();
            $(s.push_str(&format!("{}={} ", stringify!($name).to_lowercase(), $name.load(SeqCst)));)*
            s
        }
    };
}

counters!(
    ROUNDS,
    FRESH_POOLS,
    NODES,
    LEAVES_STARTED,
    LEAVES_SETTLED,
    ROUND_PANICS,
    TIMEOUTS_ELAPSED,
    TIMEOUTS_OK,
    CANCELS_REQUESTED,
    CANCELS_OBSERVED,
    TRY_ERRS,
    ANY_RACES,
    SCOPE_CHILDREN,
    SCOPE_CANCELLED,
    SHARED_AWAITS,
    PROMISE_VALUES,
    BROKEN_PROMISES,
    LOCK_SECTIONS,
    MAX_SETTLE_WAIT_US,
);

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, SeqCst);
}

// ---------------------------------------------------------------------------------------------
// Shared state: the locks every round of every thread contends on, with their invariants.

struct Locks {
    /// Two copies of a counter: equal whenever no writer is inside.
    fair: SharedMutexFair<(u64, u64)>,
    mutex: Mutex<(u64, u64)>,
    /// Set while someone holds `mutex`.
    mutex_held: AtomicBool,
    sem: Semaphore,
    /// Permits of `sem` in use, counted by their holders.
    sem_in_use: AtomicUsize,
    /// Invariant violations seen (a leaf records one instead of panicking, so that it cannot
    /// be mistaken for a planned panic).
    violations: AtomicUsize,
    last_violation: std::sync::Mutex<String>,
}

impl Locks {
    fn new() -> Locks {
        Locks {
            fair: SharedMutexFair::new((0, 0)),
            mutex: Mutex::new((0, 0)),
            mutex_held: AtomicBool::new(false),
            sem: Semaphore::new(PERMITS),
            sem_in_use: AtomicUsize::new(0),
            violations: AtomicUsize::new(0),
            last_violation: std::sync::Mutex::new(String::new()),
        }
    }

    fn violation(&self, what: String) {
        self.violations.fetch_add(1, SeqCst);
        *self.last_violation.lock().unwrap() = what;
    }

    fn check_pair(&self, what: &str, pair: &(u64, u64)) {
        if pair.0 != pair.1 {
            self.violation(format!("{what}: copies differ: {pair:?}"));
        }
    }
}

/// Restores `(a, b)` to a consistent state when a write section ends, also when the section
/// is dropped halfway (timeouts and collect_any drop their losers mid-section).
struct Mend<'a, G: DerefMut<Target = (u64, u64)>> {
    guard: G,
    held: Option<&'a AtomicBool>,
}

impl<G: DerefMut<Target = (u64, u64)>> Drop for Mend<'_, G> {
    fn drop(&mut self) {
        let pair = &mut *self.guard;
        pair.1 = pair.0;
        if let Some(held) = self.held {
            held.store(false, SeqCst);
        }
    }
}

/// Returns its permits to the `sem_in_use` count when the section ends or is dropped.
struct InUse<'a>(&'a AtomicUsize, usize);

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// Rounds and leaves.

/// One round's bookkeeping.
struct Round {
    /// Printed in every failure.
    label: String,
    locks: Arc<Locks>,
    started: AtomicUsize,
    settled: AtomicUsize,
    /// The fulfilled promise's value.
    value: u64,
    panics: bool,
}

/// Counts a leaf as started when created (on the leaf's first poll) and as settled when
/// dropped: when the leaf finishes, panics, or is dropped unfinished.
struct LeafGuard(Arc<Round>);

impl LeafGuard {
    fn new(round: &Arc<Round>) -> LeafGuard {
        round.started.fetch_add(1, SeqCst);
        bump(&LEAVES_STARTED);
        LeafGuard(round.clone())
    }
}

impl Drop for LeafGuard {
    fn drop(&mut self) {
        self.0.settled.fetch_add(1, SeqCst);
        bump(&LEAVES_SETTLED);
    }
}

/// A short pause: nothing, a yield, or a 0-2 ms sleep (cancellation ends it early).
async fn pause(rng: &mut Rng) {
    match rng.below(4) {
        0 => {}
        1 => coro::yield_now().await,
        _ => {
            if sleep(Duration::from_micros(rng.below(2_001)))
                .await
                .is_err()
            {
                bump(&CANCELS_OBSERVED);
            }
        }
    }
}

/// What a leaf does.
#[derive(Clone, Copy, Debug)]
enum LeafKind {
    Pause,
    FairWrite,
    FairRead,
    FairUpgrade,
    Mutex,
    Semaphore,
    Promise,
    BrokenPromise,
    Panic,
}

fn pick_leaf(rng: &mut Rng, panics: bool) -> LeafKind {
    if panics && rng.chance(1, 25) {
        return LeafKind::Panic;
    }
    match rng.below(10) {
        0 | 1 => LeafKind::Pause,
        2 => LeafKind::FairWrite,
        3 => LeafKind::FairRead,
        4 => LeafKind::FairUpgrade,
        5 => LeafKind::Mutex,
        6 => LeafKind::Semaphore,
        7 | 8 => LeafKind::Promise,
        _ => LeafKind::BrokenPromise,
    }
}

/// A write section on `fair`: the copies are updated one at a time around a pause, so a
/// reader let in by mistake would see them differ.
async fn fair_write_section(
    locks: &Locks,
    mut guard: coro::sync::WriteGuard<'_, (u64, u64)>,
    rng: &mut Rng,
) {
    locks.check_pair("fair write", &guard);
    guard.0 += 1;
    let _mend = Mend { guard, held: None };
    pause(rng).await;
    bump(&LOCK_SECTIONS);
}

fn leaf(kind: LeafKind, id: u64, seed: u64, ctx: &Ctx) -> Task<u64> {
    let round = ctx.round.clone();
    let promise = ctx.promise.clone();
    let broken = ctx.broken.clone();
    Task::new(async move {
        let _guard = LeafGuard::new(&round);
        let mut rng = Rng::new(seed);
        let locks = &*round.locks;
        match kind {
            LeafKind::Pause => pause(&mut rng).await,
            LeafKind::FairWrite => {
                let guard = locks.fair.write().await;
                fair_write_section(locks, guard, &mut rng).await;
            }
            LeafKind::FairRead => {
                let guard = locks.fair.read().await;
                locks.check_pair("fair read", &guard);
                pause(&mut rng).await;
                locks.check_pair("fair read after pause", &guard);
                bump(&LOCK_SECTIONS);
            }
            LeafKind::FairUpgrade => {
                let guard = locks.fair.upgradable_read().await;
                locks.check_pair("upgradable read", &guard);
                pause(&mut rng).await;
                locks.check_pair("upgradable read after pause", &guard);
                if rng.chance(1, 2) {
                    let guard = guard.upgrade().await;
                    fair_write_section(locks, guard, &mut rng).await;
                } else {
                    bump(&LOCK_SECTIONS);
                }
            }
            LeafKind::Mutex => {
                let mut guard = locks.mutex.lock().await;
                if locks.mutex_held.swap(true, SeqCst) {
                    locks.violation("mutex: two holders at once".into());
                }
                locks.check_pair("mutex", &guard);
                guard.0 += 1;
                let _mend = Mend {
                    guard,
                    held: Some(&locks.mutex_held),
                };
                pause(&mut rng).await;
                bump(&LOCK_SECTIONS);
            }
            LeafKind::Semaphore => {
                let n = 1 + rng.below(2) as usize;
                let _permit = locks.sem.acquire(n).await;
                let in_use = locks.sem_in_use.fetch_add(n, SeqCst) + n;
                let _in_use = InUse(&locks.sem_in_use, n);
                if in_use > PERMITS {
                    locks.violation(format!("semaphore: {in_use} of {PERMITS} permits in use"));
                }
                pause(&mut rng).await;
                bump(&LOCK_SECTIONS);
            }
            LeafKind::Promise => {
                // Some futures are taken after a pause, maybe after the fulfilment.
                if rng.chance(1, 2) {
                    pause(&mut rng).await;
                }
                let future = promise.get_future();
                match cancellable(future).await {
                    Ok(Ok(v)) if v == round.value => bump(&PROMISE_VALUES),
                    Ok(other) => locks.violation(format!("promise gave {other:?}")),
                    Err(_) => bump(&CANCELS_OBSERVED),
                }
            }
            LeafKind::BrokenPromise => match cancellable(broken).await {
                Ok(Err(_)) => bump(&BROKEN_PROMISES),
                Ok(Ok(v)) => locks.violation(format!("broken promise gave {v}")),
                Err(_) => bump(&CANCELS_OBSERVED),
            },
            LeafKind::Panic => {
                pause(&mut rng).await;
                panic!("{PLANNED} in leaf {id}");
            }
        }
        id
    })
    .named("soak-leaf")
}

// ---------------------------------------------------------------------------------------------
// DAG construction.

/// What the nodes of one round share while being built.
struct Ctx {
    round: Arc<Round>,
    promise: Arc<SharedPromise<u64>>,
    /// A future of the promise that gets dropped unfulfilled.
    broken: SharedFuture<u64>,
    /// Computations shared between branches: (expected value, task).
    shared: Vec<(u64, SharedTask<u64>)>,
    next_id: u64,
    nodes: usize,
}

impl Ctx {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.nodes += 1;
        bump(&NODES);
        self.next_id
    }
}

const MAX_NODES: usize = 70;

/// Builds a node returning its own id (children's results are checked by their parent).
fn node(rng: &mut Rng, depth: u32, ctx: &mut Ctx) -> Task<u64> {
    let id = ctx.id();
    let leafy = depth == 0 || ctx.nodes >= MAX_NODES || rng.chance(1, 5);
    if leafy {
        if !ctx.shared.is_empty() && rng.chance(1, 6) {
            let (value, shared) = ctx.shared[rng.below(ctx.shared.len() as u64) as usize].clone();
            return Task::new(async move {
                let got = shared.await;
                assert_eq!(got, value, "a SharedTask gave the wrong value");
                bump(&SHARED_AWAITS);
                id
            });
        }
        let kind = pick_leaf(rng, ctx.round.panics);
        return leaf(kind, id, rng.fork(), ctx);
    }
    let children = |rng: &mut Rng, ctx: &mut Ctx, max: u64| -> Vec<(u64, Task<u64>)> {
        let n = 1 + rng.below(max);
        (0..n)
            .map(|_| {
                let expect = ctx.next_id + 1;
                (expect, node(rng, depth - 1, ctx))
            })
            .collect()
    };
    match rng.below(10) {
        0 => {
            let kids = children(rng, ctx, 5);
            let (ids, tasks): (Vec<u64>, Vec<_>) = kids.into_iter().unzip();
            Task::new(async move {
                let got = coro::collect_all_range(tasks).await;
                assert_eq!(got, ids, "collect_all_range results out of order");
                id
            })
        }
        1 => {
            let a_id = ctx.next_id + 1;
            let a = node(rng, depth - 1, ctx);
            let b_id = ctx.next_id + 1;
            let b = node(rng, depth - 1, ctx);
            let c_id = ctx.next_id + 1;
            let c = node(rng, depth - 1, ctx);
            Task::new(async move {
                let got = coro::collect_all!(a, b, c).await;
                assert_eq!(got, (a_id, b_id, c_id), "collect_all! results out of order");
                id
            })
        }
        2 => {
            let kids = children(rng, ctx, 4);
            let fails: Vec<bool> = kids.iter().map(|_| rng.chance(1, 8)).collect();
            let ids: Vec<u64> = kids.iter().map(|k| k.0).collect();
            let wrapped: Vec<_> = kids
                .into_iter()
                .zip(fails.clone())
                .map(|((_, task), fail)| async move {
                    let v = task.await;
                    if fail { Err(v) } else { Ok(v) }
                })
                .collect();
            Task::new(async move {
                match coro::try_collect_all_range(wrapped).await {
                    Ok(got) => {
                        assert!(
                            !fails.contains(&true),
                            "try_collect_all_range missed an Err"
                        );
                        assert_eq!(got, ids, "try_collect_all_range results out of order");
                    }
                    Err(e) => {
                        let i = ids.iter().position(|&x| x == e);
                        assert!(
                            i.is_some_and(|i| fails[i]),
                            "try_collect_all_range returned Err({e}) from a child that did not fail"
                        );
                        bump(&TRY_ERRS);
                    }
                }
                id
            })
        }
        3 => {
            let kids = children(rng, ctx, 4);
            let (ids, tasks): (Vec<u64>, Vec<_>) = kids.into_iter().unzip();
            Task::new(async move {
                let (i, v) = coro::collect_any(tasks).await;
                assert_eq!(v, ids[i], "collect_any paired the wrong index and value");
                bump(&ANY_RACES);
                id
            })
        }
        4 => {
            let child_id = ctx.next_id + 1;
            let child = node(rng, depth - 1, ctx);
            let limit = Duration::from_micros(rng.below(4_000));
            Task::new(async move {
                match timeout(limit, child).await {
                    Ok(v) => {
                        assert_eq!(v, child_id);
                        bump(&TIMEOUTS_OK);
                    }
                    Err(_) => bump(&TIMEOUTS_ELAPSED),
                }
                id
            })
        }
        5 => {
            let child_id = ctx.next_id + 1;
            let child = node(rng, depth - 1, ctx);
            let delay = Duration::from_micros(rng.below(2_500));
            Task::new(async move {
                let source = CancellationSource::new();
                let token =
                    CancellationToken::merge([coro::current_cancellation_token(), source.token()]);
                let (v, ()) = coro::collect_all!(child.with_cancellation(token), async move {
                    // Not cancellation-aware on purpose: the request always happens.
                    coro::executor::time::sleep(delay).await;
                    source.request_cancellation();
                    bump(&CANCELS_REQUESTED);
                })
                .await;
                assert_eq!(v, child_id);
                id
            })
        }
        6 => {
            let kids = children(rng, ctx, 4);
            let bounded = rng.chance(1, 2);
            let ending = rng.below(3);
            Task::new(async move {
                let scope = if bounded {
                    AsyncScope::bounded(2)
                } else {
                    AsyncScope::new()
                };
                let mut handles: Vec<(u64, JoinHandle<u64>)> = Vec::new();
                for (child_id, task) in kids {
                    let handle = if bounded {
                        scope.spawn_wait(task).await
                    } else {
                        scope.spawn(task)
                    };
                    handles.push((child_id, handle.expect("scope refused a child")));
                    bump(&SCOPE_CHILDREN);
                }
                match ending {
                    0 => scope.join().await,
                    1 => scope.cancel_and_join().await,
                    _ => drop(scope), // drops the unfinished children
                }
                for (child_id, handle) in handles {
                    match handle.await {
                        Ok(v) => assert_eq!(v, child_id),
                        Err(JoinError::Cancelled) => {
                            assert_eq!(ending, 2, "a joined scope child was cancelled");
                            bump(&SCOPE_CANCELLED);
                        }
                        // A child dropped with its scope reports a panic saying so
                        // (coro/src/scope.rs, `DROPPED`).
                        Err(JoinError::Panicked(p))
                            if ending == 2
                                && payload_message(&*p).contains("AsyncScope was dropped") =>
                        {
                            bump(&SCOPE_CANCELLED);
                        }
                        Err(JoinError::Panicked(p)) => resume_unwind(p),
                    }
                }
                id
            })
        }
        7 => {
            let child_id = ctx.next_id + 1;
            let child = node(rng, depth - 1, ctx);
            Task::new(async move {
                let here = coro::current_executor().expect("no current executor");
                let v = child.schedule_on(here.clone()).await;
                assert_eq!(v, child_id);
                assert!(coro::current_executor() == Some(here), "affinity lost");
                id
            })
        }
        _ => {
            let kids = children(rng, ctx, 3);
            Task::new(async move {
                for (child_id, task) in kids {
                    assert_eq!(task.await, child_id);
                }
                id
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Running rounds.

fn payload_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}

/// Builds one round's DAG and its root task (not started).
fn build_round(round_seed: u64, label: String, locks: &Arc<Locks>) -> (Arc<Round>, Task<u64>) {
    let mut rng = Rng::new(round_seed);
    let round = Arc::new(Round {
        label,
        locks: locks.clone(),
        started: AtomicUsize::new(0),
        settled: AtomicUsize::new(0),
        value: rng.next(),
        panics: rng.chance(1, 3),
    });
    let promise = Arc::new(SharedPromise::new());
    let broken_promise = SharedPromise::new();
    let mut ctx = Ctx {
        round: round.clone(),
        promise: promise.clone(),
        broken: broken_promise.get_future(),
        shared: Vec::new(),
        next_id: 0,
        nodes: 0,
    };
    for _ in 0..rng.below(4) {
        let depth = rng.below(2) as u32;
        let value = ctx.next_id + 1;
        let task = node(&mut rng, depth, &mut ctx).shared();
        ctx.shared.push((value, task));
    }
    let depth = 2 + rng.below(3) as u32;
    let root_id = ctx.next_id + 1;
    let dag = node(&mut rng, depth, &mut ctx);
    drop(ctx);
    let delay = Duration::from_micros(rng.below(3_000));
    let broken_delay = Duration::from_micros(rng.below(3_000));
    let value = round.value;
    let root = Task::new(async move {
        let fulfiller = coro::spawn(async move {
            coro::executor::time::sleep(delay).await;
            promise.set_value(value).expect("promise fulfilled twice");
            assert_eq!(promise.pending(), 0);
            assert!(promise.set_value(value).is_err());
        });
        let breaker = coro::spawn(async move {
            coro::executor::time::sleep(broken_delay).await;
            drop(broken_promise);
        });
        let out = AssertUnwindSafe(dag).catch_unwind().await;
        fulfiller.await.expect("the fulfiller failed");
        breaker.await.expect("the breaker failed");
        match out {
            Ok(v) => {
                assert_eq!(v, root_id);
                v
            }
            Err(p) => resume_unwind(p),
        }
    })
    .named("soak-round");
    (round, root)
}

/// What a driver thread publishes for the watchdog.
struct Slot {
    /// Milliseconds since `epoch` at which the current round started; 0 when between rounds.
    round_started_ms: AtomicU64,
    round_seed: AtomicU64,
    round_no: AtomicU64,
}

/// Runs one round to completion on `pool` and checks its accounting; panics naming the seed.
fn run_round(pool: &ThreadPool, locks: &Arc<Locks>, seed: u64, thread: u64, n: u64) {
    let round_seed = mix(mix(seed, thread), n);
    let label =
        format!("CORO_SOAK_SEED={seed} (thread {thread}, round {n}, round seed {round_seed:#x})");
    let (round, root) = build_round(round_seed, label, locks);
    let by_handle = round_seed & 1 == 0;
    let task = root.schedule_on(pool);
    let outcome: Result<u64, Box<dyn Any + Send>> = if by_handle {
        match coro::block_wait(task.start()) {
            Ok(v) => Ok(v),
            Err(JoinError::Panicked(p)) => Err(p),
            Err(JoinError::Cancelled) => panic!("{}: the round was cancelled", round.label),
        }
    } else {
        catch_unwind(AssertUnwindSafe(|| coro::block_wait(task)))
    };
    if let Err(p) = outcome {
        let message = payload_message(&*p);
        assert!(
            message.contains(PLANNED),
            "{}: unexpected panic: {message}",
            round.label
        );
        assert!(
            round.panics,
            "{}: a panic in a round without panics",
            round.label
        );
        bump(&ROUND_PANICS);
    }
    // Every leaf started must be settled; some may still be being dropped on other workers.
    let waited = Instant::now();
    while round.settled.load(SeqCst) != round.started.load(SeqCst) {
        if waited.elapsed() > SETTLE_GRACE {
            panic!(
                "{}: {} leaves started, only {} settled {SETTLE_GRACE:?} after the round ended\n{}",
                round.label,
                round.started.load(SeqCst),
                round.settled.load(SeqCst),
                coro::trace::dump_all()
            );
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    MAX_SETTLE_WAIT_US.fetch_max(waited.elapsed().as_micros() as u64, SeqCst);
    let violations = locks.violations.load(SeqCst);
    assert_eq!(
        violations,
        0,
        "{}: invariant violated: {}",
        round.label,
        locks.last_violation.lock().unwrap()
    );
    bump(&ROUNDS);
}

/// A driver thread: rounds on the shared pool, now and then on a fresh small pool.
fn drive(
    pool: Arc<ThreadPool>,
    locks: Arc<Locks>,
    seed: u64,
    thread: u64,
    slot: Arc<Slot>,
    epoch: Instant,
    until: Instant,
) {
    let mut rng = Rng::new(mix(seed, thread + 1000));
    let mut n = 0;
    while Instant::now() < until {
        slot.round_seed.store(mix(mix(seed, thread), n), SeqCst);
        slot.round_no.store(n, SeqCst);
        slot.round_started_ms
            .store(epoch.elapsed().as_millis() as u64 + 1, SeqCst);
        if rng.chance(1, 25) {
            let fresh = ThreadPool::builder()
                .worker_threads(1 + rng.below(2) as usize)
                .thread_name(format!("soak-fresh-{thread}"))
                .build()
                .expect("fresh pool");
            run_round(&fresh, &locks, seed, thread, n);
            if rng.chance(1, 2) {
                fresh.shutdown();
            } else {
                drop(fresh);
            }
            bump(&FRESH_POOLS);
        } else {
            run_round(&pool, &locks, seed, thread, n);
        }
        slot.round_started_ms.store(0, SeqCst);
        n += 1;
        // Leave the CPU some air between rounds (CI runs this on 2 shared cores).
        std::thread::sleep(Duration::from_micros(rng.below(300)));
    }
}

/// Silences the planned panics (thousands of them) and keeps every other panic loud.
fn install_quiet_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if payload_message(info.payload()).contains(PLANNED) {
            return;
        }
        default(info);
    }));
}

#[test]
fn soak() {
    let secs = env_u64("CORO_SOAK_SECS").unwrap_or(60);
    let seed = env_u64("CORO_SOAK_SEED").unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        mix(nanos, std::process::id() as u64) >> 16
    });
    println!("soak: CORO_SOAK_SEED={seed} CORO_SOAK_SECS={secs}");
    install_quiet_hook();

    // Warm-up: create once everything that stays alive for the process (the default pool, the
    // timer thread and its wheel, this thread's locals, the panic machinery), with rounds of
    // every kind on a temporary pool from this thread and a helper thread.
    {
        coro::block_wait(coro::spawn(async { coro::yield_now().await }))
            .expect("default pool warm-up");
        let pool = Arc::new(ThreadPool::new(2).expect("warm-up pool"));
        let locks = Arc::new(Locks::new());
        let warm_seed = mix(seed, 0xAAAA);
        for n in 0..20 {
            run_round(&pool, &locks, warm_seed, 99, n);
        }
        let helper = {
            let (pool, locks) = (pool.clone(), locks.clone());
            std::thread::spawn(move || {
                for n in 0..10 {
                    run_round(&pool, &locks, warm_seed, 98, n);
                }
            })
        };
        helper.join().expect("warm-up helper");
        Arc::into_inner(pool).expect("warm-up pool").shutdown();
        let _ = coro::trace::dump_all(); // also prunes the registry of dead pools
        std::thread::sleep(Duration::from_millis(20)); // let the last timers fire
    }
    let (allocs_before, bytes_before) = (LIVE_ALLOCS.load(SeqCst), LIVE_BYTES.load(SeqCst));
    let warm_rounds = ROUNDS.swap(0, SeqCst);
    for counter in [&NODES, &LEAVES_STARTED, &LEAVES_SETTLED, &ROUND_PANICS] {
        counter.store(0, SeqCst);
    }

    // The soak.
    let mut rng = Rng::new(seed);
    let workers = 2 + rng.below(3) as usize;
    let drivers = 3 + rng.below(2);
    let pool = Arc::new(
        ThreadPool::builder()
            .worker_threads(workers)
            .thread_name("soak")
            .build()
            .expect("soak pool"),
    );
    let locks = Arc::new(Locks::new());
    let epoch = Instant::now();
    let until = epoch + Duration::from_secs(secs);
    let slots: Vec<Arc<Slot>> = (0..drivers)
        .map(|_| {
            Arc::new(Slot {
                round_started_ms: AtomicU64::new(0),
                round_seed: AtomicU64::new(0),
                round_no: AtomicU64::new(0),
            })
        })
        .collect();
    let mut threads: Vec<_> = (0..drivers)
        .map(|t| {
            let (pool, locks, slot) = (pool.clone(), locks.clone(), slots[t as usize].clone());
            std::thread::Builder::new()
                .name(format!("soak-driver-{t}"))
                .spawn(move || drive(pool, locks, seed, t, slot, epoch, until))
                .expect("driver thread")
        })
        .collect();
    // Watchdog: every round must finish within ROUND_DEADLINE.
    let mut last_report = Instant::now();
    while !threads.is_empty() {
        std::thread::sleep(Duration::from_millis(20));
        let now_ms = epoch.elapsed().as_millis() as u64;
        for (t, slot) in slots.iter().enumerate() {
            let started = slot.round_started_ms.load(SeqCst);
            if started != 0 && now_ms.saturating_sub(started) > ROUND_DEADLINE.as_millis() as u64 {
                let dump = coro::trace::dump_all();
                panic!(
                    "round hung for over {ROUND_DEADLINE:?}: CORO_SOAK_SEED={seed} (thread {t}, \
                     round {}, round seed {:#x}); figures: {}\nlive tasks:\n{dump}",
                    slot.round_no.load(SeqCst),
                    slot.round_seed.load(SeqCst),
                    figures()
                );
            }
        }
        let mut i = 0;
        while i < threads.len() {
            if threads[i].is_finished() {
                if let Err(p) = threads.remove(i).join() {
                    eprintln!("soak failed, figures: {}", figures());
                    resume_unwind(p);
                }
            } else {
                i += 1;
            }
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            println!("soak: {}s: {}", epoch.elapsed().as_secs(), figures());
        }
    }
    let elapsed = epoch.elapsed();
    let soak_rounds = ROUNDS.load(SeqCst);
    println!("soak: pool metrics at the end: {:?}", pool.metrics());
    Arc::into_inner(pool)
        .expect("drivers hold no pool")
        .shutdown();
    assert_eq!(
        locks.violations.load(SeqCst),
        0,
        "CORO_SOAK_SEED={seed}: {}",
        locks.last_violation.lock().unwrap()
    );
    drop((locks, slots, threads)); // not to count as live below
    assert_eq!(
        LEAVES_STARTED.load(SeqCst),
        LEAVES_SETTLED.load(SeqCst),
        "CORO_SOAK_SEED={seed}: leaves unaccounted for"
    );
    assert!(soak_rounds > 0, "CORO_SOAK_SEED={seed}: no round ran");

    // Leak check. Tolerance: the global timer driver keeps the memory of its peak number of
    // pending timers (its slab only grows, and it leaks one generation chunk per 1024 slab
    // nodes, see coro-executor/src/time/driver.rs), and the soak's peak (several drivers at
    // once) can exceed the warm-up's by a few chunks; std's lazily initialised globals are
    // all created by the warm-up. Everything per round, per task and per pool (thousands of
    // each) must be gone, so a leak of any of them shows far beyond this.
    const TOLERANCE: isize = 8;
    let waited = Instant::now();
    let (allocs_after, bytes_after) = loop {
        let _ = coro::trace::dump_all(); // prunes the registry of dead pools
        let now = (LIVE_ALLOCS.load(SeqCst), LIVE_BYTES.load(SeqCst));
        if now.0 - allocs_before <= TOLERANCE || waited.elapsed() > Duration::from_secs(2) {
            break now;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    println!(
        "soak: seed={seed} secs={:.1} workers={workers} drivers={drivers} warm-up rounds={warm_rounds}\n\
         soak: {}\n\
         soak: live allocations {allocs_before} -> {allocs_after} ({:+}), live bytes {bytes_before} -> {bytes_after} ({:+})",
        elapsed.as_secs_f64(),
        figures(),
        allocs_after - allocs_before,
        bytes_after - bytes_before,
    );
    assert!(
        allocs_after - allocs_before <= TOLERANCE,
        "CORO_SOAK_SEED={seed}: {} allocations leaked ({allocs_before} live before, \
         {allocs_after} after; tolerance {TOLERANCE})",
        allocs_after - allocs_before
    );
}
