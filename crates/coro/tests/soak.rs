//! Soak test: random DAGs of coro work, driven from several OS threads at once for
//! `CORO_SOAK_SECS` seconds (default 5, so that `cargo test` stays short; CI runs it for 60 s,
//! see `.ci/run`), checking that nothing hangs (every round, so every
//! waiter in it, completes within a deadline), that every leaf task started is finished or
//! dropped once its round is over (no orphans), that every task the soak hands to the runtime is
//! accounted for, that the invariants guarded by the locks and channels hold, and that no memory
//! leaks (a counting global allocator, hence its own test binary).
//!
//! Each round builds a DAG from a seeded xorshift PRNG: nested `collect_all_range`,
//! `collect_all!`, `try_collect_all_range` and `collect_any`, `SharedTask`s shared between
//! branches, `SharedPromise` fan-outs (one fulfilled, one broken), `SharedMutexFair`, `Mutex`
//! and `Semaphore` critical sections, 0-2 ms sleeps, short timeouts, explicit cancellations,
//! `AsyncScope` children, `schedule_on` hops and planned panics in some leaves; and beside
//! subtrees: producer/consumer pipelines over `coro::channel::bounded(k)` (k = 0, 1, 2 or 4:
//! rendezvous included) whose sends and receives race timeouts and cancellation in `select!`
//! (every value sent is received exactly once, or its send failed and gave it back, or the send
//! was dropped before completing and the value was never received; a oneshot reports back), and
//! `Barrier`/`Latch` rendezvous (exactly one leader per generation, no one passes early, a wait
//! dropped before its generation completes takes its arrival back). Some leaves do IO: a
//! `coro::net` TCP round trip over loopback (bind, connect, accept in a spawned task that echoes,
//! a write of up to 64 KiB, a half-close, a read to the end) that must bring the same bytes
//! back, and whose connect or accept may be cancelled with the leaf.
//!
//! Accounting: every task the soak hands to the runtime (`coro::spawn`, `Task::start` and
//! `block_wait` of the round's root, `schedule_on` hops, `AsyncScope` children, collect
//! children) is wrapped to count it spawned, then completed, cancelled (dropped unfinished) or
//! panicked; after each round (and at the end) spawned == completed + cancelled + panicked.
//! The time from spawn to first poll of the queued ones (all but collect children, which start
//! inline, and bounded-scope children, which wait for room first) gives the longest queue wait
//! and its 99th percentile. VmRSS and VmHWM (peak RSS) are read at the start, middle and end;
//! from `CORO_SOAK_SECS=120` on ("long mode") the end's must be within 1.5x the middle's. A
//! panic that was not planned fails the soak even in a task nobody awaits. The last lines
//! printed are a markdown table of the figures (RELIABILITY.md holds those of real runs). Every
//! second the watchdog takes a `coro::trace::snapshot()`, which must report no `Deadlock` and
//! no `LostWake` on this healthy work.
//!
//! Run: `CORO_SOAK_SECS=60 cargo test -p coro --release --test soak -- --nocapture` (CI's
//! run; `CORO_SOAK_WORKERS=n` fixes the pool's workers, otherwise 2-4 from the seed). The
//! 10-minute runs of RELIABILITY.md:
//! `CORO_SOAK_SECS=600 CORO_SOAK_WORKERS=2 cargo test -p coro --release --test soak -- --nocapture`
//! and the same with `CORO_SOAK_WORKERS=4`. Every failure names the seed; replay the same DAG
//! shapes with `CORO_SOAK_SEED=<seed>` (the interleavings are up to the scheduler).

use coro::cancel::{CancellationSource, CancellationToken, cancellable};
use coro::channel;
use coro::sync::{
    Barrier, Latch, Mutex, Semaphore, SharedFuture, SharedMutexFair, SharedPromise, SharedTask,
};
use coro::time::{sleep, timeout};
use coro::{AsyncScope, JoinError, JoinHandle, Task, ThreadPool};
use futures::FutureExt;
use pin_project::{pin_project, pinned_drop};
use std::alloc::{GlobalAlloc, Layout, System};
use std::any::Any;
use std::future::{Future, IntoFuture};
use std::ops::DerefMut;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{
    AtomicBool, AtomicIsize, AtomicU8, AtomicU64, AtomicUsize, Ordering::SeqCst,
};
use std::task::Poll;
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
/// From this many seconds on, the soak is in long mode: memory must stay flat.
const LONG_SECS: u64 = 120;
/// Long mode: the end's VmRSS and VmHWM may be at most this much over the middle's (a ratio).
const FLAT_RATIO: f64 = 1.5;

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
    TASKS_SPAWNED,
    TASKS_COMPLETED,
    TASKS_CANCELLED,
    TASKS_PANICKED,
    QUEUE_WAITS,
    MAX_QUEUE_WAIT_US,
    PIPELINES,
    CHAN_SENT,
    CHAN_RECEIVED,
    CHAN_SEND_FAILED,
    CHAN_SEND_DROPPED,
    CHAN_RECV_TIMEOUTS,
    CHAN_EARLY_CLOSES,
    CHAN_CONSUMERS_CANCELLED,
    RENDEZVOUS,
    BARRIER_GENERATIONS,
    BARRIER_PROBES,
    RENDEZVOUS_TIMEOUTS,
    IO_ECHOES,
    UNPLANNED_PANICS,
);

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, SeqCst);
}

// ---------------------------------------------------------------------------------------------
// Task accounting and queue waits.

/// One round's tasks handed to the runtime, by how they ended.
#[derive(Default)]
struct TaskCounts {
    spawned: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    panicked: AtomicU64,
}

impl TaskCounts {
    /// Spawned minus ended: 0 once every task has ended.
    fn unsettled(&self) -> i64 {
        let ended =
            self.completed.load(SeqCst) + self.cancelled.load(SeqCst) + self.panicked.load(SeqCst);
        self.spawned.load(SeqCst) as i64 - ended as i64
    }

    fn describe(&self) -> String {
        format!(
            "tasks spawned {}, completed {}, cancelled {}, panicked {}",
            self.spawned.load(SeqCst),
            self.completed.load(SeqCst),
            self.cancelled.load(SeqCst),
            self.panicked.load(SeqCst)
        )
    }
}

/// How a tracked task was handed to the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// `coro::spawn`.
    Spawn,
    /// The round's root: `Task::start` or `block_wait` of a `TaskWithExecutor`.
    Start,
    /// `AsyncScope::spawn`.
    Scope,
    /// `AsyncScope::spawn_wait` of a bounded scope (waits for room before it is spawned).
    BoundedScope,
    /// `schedule_on` the current executor.
    Hop,
    /// A child of a collect (polled inline first).
    Collect,
}

impl Via {
    /// Whether the time from spawn to first poll is time spent queued.
    fn queued(self) -> bool {
        matches!(self, Via::Spawn | Via::Start | Via::Scope | Via::Hop)
    }
}

/// Queue-wait histogram: 8 buckets per power of two of (microseconds + 1).
const QW_BUCKETS: usize = 64 * 8;
static QUEUE_WAIT_HIST: [AtomicU64; QW_BUCKETS] = [const { AtomicU64::new(0) }; QW_BUCKETS];

fn qw_bucket(us: u64) -> usize {
    let x = us.saturating_add(1);
    let e = 63 - x.leading_zeros() as u64;
    let m = if e >= 3 {
        (x >> (e - 3)) & 7
    } else {
        (x << (3 - e)) & 7
    };
    (e * 8 + m) as usize
}

/// The largest wait (microseconds) that falls in `bucket` (within 1/8 of a power of two).
fn qw_bucket_upper(bucket: usize) -> u64 {
    let (e, m) = (bucket as u64 / 8, bucket as u64 % 8);
    (((9 + m) << e) >> 3).saturating_sub(1)
}

fn record_queue_wait(waited: Duration) {
    let us = waited.as_micros() as u64;
    QUEUE_WAIT_HIST[qw_bucket(us)].fetch_add(1, SeqCst);
    MAX_QUEUE_WAIT_US.fetch_max(us, SeqCst);
    bump(&QUEUE_WAITS);
}

/// The 99th percentile of the queue waits so far (microseconds, rounded up to its bucket).
fn queue_wait_p99() -> u64 {
    let counts: Vec<u64> = QUEUE_WAIT_HIST.iter().map(|b| b.load(SeqCst)).collect();
    let total: u64 = counts.iter().sum();
    let target = total - total / 100;
    let mut seen = 0;
    for (bucket, n) in counts.iter().enumerate() {
        seen += n;
        if seen >= target && seen > 0 {
            return qw_bucket_upper(bucket);
        }
    }
    0
}

/// A task handed to the runtime, counted: spawned when made, then completed, panicked (its poll
/// unwound) or cancelled (dropped unfinished); its first poll records its queue wait.
#[pin_project(PinnedDrop)]
struct Tracked<F> {
    #[pin]
    inner: F,
    round: Arc<Round>,
    via: Via,
    created: Instant,
    polled: bool,
    ended: bool,
}

fn track<F: IntoFuture>(round: &Arc<Round>, via: Via, fut: F) -> Tracked<F::IntoFuture> {
    round.tasks.spawned.fetch_add(1, SeqCst);
    bump(&TASKS_SPAWNED);
    Tracked {
        inner: fut.into_future(),
        round: round.clone(),
        via,
        created: Instant::now(),
        polled: false,
        ended: false,
    }
}

impl<F: Future> Future for Tracked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if !*this.polled {
            *this.polled = true;
            if this.via.queued() {
                record_queue_wait(this.created.elapsed());
            }
        }
        let inner = this.inner;
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                *this.ended = true;
                this.round.tasks.completed.fetch_add(1, SeqCst);
                bump(&TASKS_COMPLETED);
                Poll::Ready(v)
            }
            Err(p) => {
                *this.ended = true;
                this.round.tasks.panicked.fetch_add(1, SeqCst);
                bump(&TASKS_PANICKED);
                resume_unwind(p)
            }
        }
    }
}

#[pinned_drop]
impl<F> PinnedDrop for Tracked<F> {
    fn drop(self: Pin<&mut Self>) {
        if !self.ended {
            self.round.tasks.cancelled.fetch_add(1, SeqCst);
            bump(&TASKS_CANCELLED);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory and machine figures.

/// VmRSS and VmHWM (peak RSS) of this process, in kB (0 where /proc is not there).
fn mem_status() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mib(kb: u64) -> String {
    format!("{:.1}", kb as f64 / 1024.0)
}

/// The load averages (1, 5, 15 min), as /proc/loadavg gives them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".into())
}

/// The current UTC date and time, `YYYY-MM-DD HH:MM` (civil-from-days, no dependency).
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3_600,
        rem % 3_600 / 60
    )
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
        eprintln!("soak: invariant violated: {what}");
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
    /// The tasks of this round handed to the runtime.
    tasks: TaskCounts,
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
    Echo,
    Panic,
}

fn pick_leaf(rng: &mut Rng, panics: bool) -> LeafKind {
    if panics && rng.chance(1, 25) {
        return LeafKind::Panic;
    }
    match rng.below(11) {
        0 | 1 => LeafKind::Pause,
        2 => LeafKind::FairWrite,
        3 => LeafKind::FairRead,
        4 => LeafKind::FairUpgrade,
        5 => LeafKind::Mutex,
        6 => LeafKind::Semaphore,
        7 | 8 => LeafKind::Promise,
        9 => LeafKind::BrokenPromise,
        _ => LeafKind::Echo,
    }
}

/// Whether an IO error is a cancellation of the task (a cancel-aware connect or accept).
fn io_cancelled(e: &std::io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.is::<coro::cancel::Cancelled>())
}

/// A TCP round trip over loopback: `data` is written to a connection whose other end (served
/// by a task of its own) echoes it back, then read to the end.
async fn echo_round_trip(round: &Arc<Round>, data: &[u8]) -> std::io::Result<Vec<u8>> {
    use futures::{AsyncReadExt, AsyncWriteExt};
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // Both ends in this task, so that nothing waits in `accept` after a failed connect.
    let ((accepted, _), stream) =
        futures::try_join!(listener.accept(), coro::net::TcpStream::connect(addr))?;
    // The echo ends when this end closes, or is dropped with a cancelled leaf.
    let server = coro::spawn(track(round, Via::Spawn, async move {
        let (mut rd, mut wr) = accepted.into_split();
        futures::io::copy(&mut rd, &mut wr).await?;
        wr.close().await
    }));
    let (mut rd, mut wr) = stream.into_split();
    let mut back = Vec::with_capacity(data.len());
    // Written and read at once: a reply larger than the socket buffers would otherwise stall.
    let (written, read) = futures::join!(
        async {
            wr.write_all(data).await?;
            wr.close().await
        },
        rd.read_to_end(&mut back)
    );
    written?;
    read?;
    server
        .await
        .map_err(|e| std::io::Error::other(format!("the echo task: {e}")))??;
    Ok(back)
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
            LeafKind::Echo => {
                let len = 1 + rng.below(64 * 1024) as usize;
                let data: Vec<u8> = (0..len).map(|i| (seed as usize + i) as u8).collect();
                match echo_round_trip(&round, &data).await {
                    Ok(back) if back == data => bump(&IO_ECHOES),
                    Ok(back) => locks.violation(format!(
                        "echo: {} bytes sent, {} came back, or changed",
                        data.len(),
                        back.len()
                    )),
                    Err(e) if io_cancelled(&e) => bump(&CANCELS_OBSERVED),
                    Err(e) => locks.violation(format!("echo failed: {e}")),
                }
            }
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

/// Node `id`: a subtree of `depth - 1` and, made after it from `rng`, a side activity (a channel
/// pipeline, a rendezvous), run as the two children of a collect; a panic in either cancels
/// the other.
fn beside<O>(
    rng: &mut Rng,
    depth: u32,
    ctx: &mut Ctx,
    id: u64,
    side: fn(&mut Rng, &Arc<Round>) -> O,
) -> Task<u64>
where
    O: Future<Output = ()> + Send + 'static,
{
    let round = ctx.round.clone();
    let child_id = ctx.next_id + 1;
    let child = node(rng, depth - 1, ctx);
    let side = side(rng, &round);
    Task::new(async move {
        let (v, ()) = coro::collect_all!(
            track(&round, Via::Collect, child),
            track(&round, Via::Collect, side)
        )
        .await;
        assert_eq!(v, child_id);
        id
    })
}

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
    let round = ctx.round.clone();
    match rng.below(12) {
        0 => {
            let kids = children(rng, ctx, 5);
            let (ids, tasks): (Vec<u64>, Vec<_>) = kids.into_iter().unzip();
            Task::new(async move {
                let tracked = tasks.into_iter().map(|t| track(&round, Via::Collect, t));
                let got = coro::collect_all_range(tracked).await;
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
                let got = coro::collect_all!(
                    track(&round, Via::Collect, a),
                    track(&round, Via::Collect, b),
                    track(&round, Via::Collect, c)
                )
                .await;
                assert_eq!(got, (a_id, b_id, c_id), "collect_all! results out of order");
                id
            })
        }
        2 => {
            let kids = children(rng, ctx, 4);
            let fails: Vec<bool> = kids.iter().map(|_| rng.chance(1, 8)).collect();
            let ids: Vec<u64> = kids.iter().map(|k| k.0).collect();
            Task::new(async move {
                let wrapped: Vec<_> = kids
                    .into_iter()
                    .zip(fails.clone())
                    .map(|((_, task), fail)| {
                        track(&round, Via::Collect, async move {
                            let v = task.await;
                            if fail { Err(v) } else { Ok(v) }
                        })
                    })
                    .collect();
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
                let tracked = tasks.into_iter().map(|t| track(&round, Via::Collect, t));
                let (i, v) = coro::collect_any(tracked).await;
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
                let (v, ()) = coro::collect_all!(
                    track(&round, Via::Collect, child.with_cancellation(token)),
                    track(&round, Via::Collect, async move {
                        // Not cancellation-aware on purpose: the request always happens.
                        coro::executor::time::sleep(delay).await;
                        source.request_cancellation();
                        bump(&CANCELS_REQUESTED);
                    })
                )
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
                        scope
                            .spawn_wait(track(&round, Via::BoundedScope, task))
                            .await
                    } else {
                        scope.spawn(track(&round, Via::Scope, task))
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
                let hop = Task::new(track(&round, Via::Hop, child));
                let v = hop.schedule_on(here.clone()).await;
                assert_eq!(v, child_id);
                assert!(coro::current_executor() == Some(here), "affinity lost");
                id
            })
        }
        // A subtree beside a channel pipeline: a panic in the subtree cancels the pipeline.
        8 => beside(rng, depth, ctx, id, pipeline),
        // A subtree beside a Barrier/Latch rendezvous.
        9 => beside(rng, depth, ctx, id, rendezvous),
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
// Channels and rendezvous.

/// What a producer's attempt to send one value came to.
const UNTRIED: u8 = 0;
const SENT: u8 = 1;
/// The send failed (channel closed) and gave the value back.
const FAILED: u8 = 2;
/// The send was dropped before completing (a timeout, `select!`, cancellation).
const DROPPED: u8 = 3;

fn outcome_name(outcome: u8) -> &'static str {
    match outcome {
        UNTRIED => "never sent",
        SENT => "sent",
        FAILED => "failed and given back",
        _ => "dropped before completing",
    }
}

/// A pipeline's ledger: per value, how its send ended and how many times it was received.
struct Ledger {
    outcome: Vec<AtomicU8>,
    received: Vec<AtomicU8>,
}

/// A timeout branch's sleep: not cancellation-aware (a cancelled sleep would be ready at once,
/// and a select in a loop would spin), never shorter than 50 us (a 0 us sleep is ready at once
/// as well).
fn tick(rng: &mut Rng, max_us: u64) -> coro::executor::time::Sleep {
    coro::executor::time::sleep(Duration::from_micros(50 + rng.below(max_us)))
}

/// A producer/consumer pipeline over `bounded(cap)`: 1-3 producers (`coro::spawn`) send
/// distinct values, plainly, under a `timeout`, or in a `select!` against a timer and the
/// cancellation token; 1-3 consumers (collect children) receive in a `select!` against a timer
/// and the token. Consumer 0 is the drainer: it never gives up (on cancellation, or after a
/// planned number of values, it closes the channel and drains it), so the channel always ends
/// closed and empty. Then every value sent must have been received exactly once, and every
/// other value (send failed, send dropped, never sent) never.
fn pipeline(rng: &mut Rng, round: &Arc<Round>) -> impl Future<Output = ()> + Send + use<> {
    let cap = [0, 0, 1, 2, 4][rng.below(5) as usize];
    let producers = 1 + rng.below(3);
    let consumers = 1 + rng.below(3);
    let per = 1 + rng.below(16);
    let close_after = rng.chance(1, 4).then(|| rng.below(producers * per + 1));
    let panic_at =
        (round.panics && rng.chance(1, 8)).then(|| (rng.below(producers), rng.below(per)));
    let seed = rng.fork();
    let round = round.clone();
    async move {
        let mut rng = Rng::new(seed);
        let total = (producers * per) as usize;
        let ledger = Arc::new(Ledger {
            outcome: (0..total).map(|_| AtomicU8::new(UNTRIED)).collect(),
            received: (0..total).map(|_| AtomicU8::new(0)).collect(),
        });
        let what = format!(
            "channel::bounded({cap}), {producers} producers x {per} values, {consumers} consumers"
        );
        let (tx, rx) = channel::bounded::<u64>(cap);
        let (report_tx, report_rx) = channel::oneshot::<u64>();
        let handles: Vec<_> = (0..producers)
            .map(|p| {
                let (tx, ledger, locks) = (tx.clone(), ledger.clone(), round.locks.clone());
                let mut rng = Rng::new(rng.fork());
                let what = what.clone();
                coro::spawn(track(&round, Via::Spawn, async move {
                    let token = coro::current_cancellation_token();
                    for i in 0..per {
                        if panic_at == Some((p, i)) {
                            panic!("{PLANNED} in producer {p}");
                        }
                        let v = p * per + i;
                        let limit = Duration::from_micros(50 + rng.below(1_500));
                        let (outcome, back, stop) = match rng.below(4) {
                            0 => match tx.send(v).await {
                                Ok(()) => (SENT, None, false),
                                Err(e) => (FAILED, Some(e.into_inner()), false),
                            },
                            1 => match timeout(limit, tx.send(v)).await {
                                Ok(Ok(())) => (SENT, None, false),
                                Ok(Err(e)) => (FAILED, Some(e.into_inner()), false),
                                Err(_) => (DROPPED, None, false),
                            },
                            _ => coro::select! {
                                r = tx.send(v) => match r {
                                    Ok(()) => (SENT, None, false),
                                    Err(e) => (FAILED, Some(e.into_inner()), false),
                                },
                                _ = coro::executor::time::sleep(limit) => (DROPPED, None, false),
                                _ = token.cancelled() => (DROPPED, None, true),
                            },
                        };
                        if outcome == FAILED && back != Some(v) {
                            locks.violation(format!("{what}: send({v}) failed giving {back:?}"));
                        }
                        ledger.outcome[v as usize].store(outcome, SeqCst);
                        if stop {
                            break;
                        }
                        if rng.chance(1, 4) {
                            pause(&mut rng).await;
                        }
                    }
                }))
            })
            .collect();
        drop(tx);
        let mut report_tx = Some(report_tx);
        let consumer_tasks: Vec<_> = (0..consumers)
            .map(|c| {
                let (rx, ledger) = (rx.clone(), ledger.clone());
                let mut rng = Rng::new(rng.fork());
                let report = if c == 0 { report_tx.take() } else { None };
                track(&round, Via::Collect, async move {
                    let drainer = c == 0;
                    let token = coro::current_cancellation_token();
                    let mut closed = false;
                    let mut got = 0;
                    loop {
                        if drainer && !closed && close_after.is_some_and(|n| got >= n) {
                            rx.close();
                            closed = true;
                            bump(&CHAN_EARLY_CLOSES);
                        }
                        let r = coro::select! {
                            r = rx.recv() => Some(r),
                            _ = tick(&mut rng, 1_500) => {
                                bump(&CHAN_RECV_TIMEOUTS);
                                None
                            }
                            _ = token.cancelled(), if !closed => {
                                // The others give up their receivers; whatever was handed to
                                // them and not taken must still reach the drainer.
                                if !drainer {
                                    bump(&CHAN_CONSUMERS_CANCELLED);
                                    break;
                                }
                                rx.close();
                                closed = true;
                                bump(&CHAN_EARLY_CLOSES);
                                None
                            }
                        };
                        match r {
                            Some(Ok(v)) => {
                                ledger.received[v as usize].fetch_add(1, SeqCst);
                                got += 1;
                                if rng.chance(1, 4) {
                                    pause(&mut rng).await;
                                }
                            }
                            Some(Err(channel::RecvError)) => break,
                            None => {}
                        }
                    }
                    if let Some(report) = report {
                        // Fails only if the pipeline is gone (dropped while this child was
                        // being polled on another worker); then nobody checks the figures.
                        let _ = report.send(got);
                    }
                    got
                })
            })
            .collect();
        drop(rx);
        let got: Vec<u64> = coro::collect_all_range(consumer_tasks).await;
        let reported = report_rx.await;
        let mut producer_panic = None;
        for handle in handles {
            match handle.await {
                Ok(()) => {}
                Err(JoinError::Panicked(p)) => producer_panic = Some(p),
                Err(JoinError::Cancelled) => round
                    .locks
                    .violation(format!("{what}: a producer was cancelled")),
            }
        }
        // Every producer and consumer has ended: the ledger is complete.
        let locks = &round.locks;
        let what = format!(
            "{what} (consumers got {got:?}, a producer panicked: {}, cancelled: {}, \
             early close after {close_after:?} values)",
            producer_panic.is_some(),
            coro::current_cancellation_token().is_cancellation_requested()
        );
        if reported != Ok(got[0]) {
            locks.violation(format!(
                "{what}: the oneshot reported {reported:?}, the drainer got {}",
                got[0]
            ));
        }
        let mut counts = [0u64; 4];
        let mut wrong = Vec::new();
        for v in 0..total {
            let outcome = ledger.outcome[v].load(SeqCst);
            let received = ledger.received[v].load(SeqCst);
            counts[outcome as usize] += 1;
            if received != u8::from(outcome == SENT) {
                wrong.push(format!(
                    "value {v} was {} and received {received} times",
                    outcome_name(outcome)
                ));
            }
        }
        if !wrong.is_empty() {
            locks.violation(format!("{what}: {}", wrong.join("; ")));
        }
        let received: u64 = got.iter().sum();
        if received != counts[SENT as usize] {
            locks.violation(format!(
                "{what}: {} values sent, {received} received",
                counts[SENT as usize]
            ));
        }
        bump(&PIPELINES);
        CHAN_SENT.fetch_add(counts[SENT as usize], SeqCst);
        CHAN_RECEIVED.fetch_add(received, SeqCst);
        CHAN_SEND_FAILED.fetch_add(counts[FAILED as usize], SeqCst);
        CHAN_SEND_DROPPED.fetch_add(counts[DROPPED as usize], SeqCst);
        if let Some(p) = producer_panic {
            resume_unwind(p);
        }
    }
}

/// A rendezvous of 2-4 collect children: maybe a probe (one arrives at the barrier alone and
/// leaves, the others held back by a latch until it has, so the barrier must take the arrival
/// back), then 1-3 generations of a `Barrier` (participant 0 maybe waiting in a `select!`
/// against a timer, on one pinned wait), then a `Latch` counted down or arrived at, which the
/// node waits for in a `select!` loop against a timer.
fn rendezvous(rng: &mut Rng, round: &Arc<Round>) -> impl Future<Output = ()> + Send + use<> {
    let n = 2 + rng.below(3) as usize;
    let generations = 1 + rng.below(3) as usize;
    let probe = rng.chance(1, 2);
    let patient = rng.chance(1, 2);
    let seed = rng.fork();
    let round = round.clone();
    async move {
        let mut rng = Rng::new(seed);
        let what = format!("Barrier::new({n}), {generations} generations");
        let barrier = Arc::new(Barrier::new(n));
        let probed = Arc::new(Latch::new(usize::from(probe)));
        let finished = Arc::new(Latch::new(n));
        let arrivals = Arc::new(AtomicUsize::new(0));
        let leaders = Arc::new(AtomicUsize::new(0));
        let parts: Vec<_> = (0..n)
            .map(|i| {
                let (barrier, probed, finished) =
                    (barrier.clone(), probed.clone(), finished.clone());
                let (arrivals, leaders, locks) =
                    (arrivals.clone(), leaders.clone(), round.locks.clone());
                let what = what.clone();
                let mut rng = Rng::new(rng.fork());
                track(&round, Via::Collect, async move {
                    if i == 0 && probe {
                        let passed = if rng.chance(1, 2) {
                            coro::select! {
                                biased;
                                _ = barrier.wait() => true,
                                default => false,
                            }
                        } else {
                            coro::select! {
                                _ = barrier.wait() => true,
                                _ = tick(&mut rng, 300) => false,
                            }
                        };
                        if passed {
                            locks.violation(format!("{what}: a probe passed alone"));
                        }
                        bump(&BARRIER_PROBES);
                        probed.count_down();
                    } else {
                        probed.wait().await;
                    }
                    for g in 0..generations {
                        pause(&mut rng).await;
                        arrivals.fetch_add(1, SeqCst);
                        let result = if i == 0 && patient {
                            let mut wait = std::pin::pin!(barrier.wait());
                            loop {
                                coro::select! {
                                    r = wait.as_mut() => break r,
                                    _ = tick(&mut rng, 800) => bump(&RENDEZVOUS_TIMEOUTS),
                                }
                            }
                        } else {
                            barrier.wait().await
                        };
                        if result.is_leader() {
                            leaders.fetch_add(1, SeqCst);
                        }
                        let seen = arrivals.load(SeqCst);
                        if seen < n * (g + 1) {
                            locks.violation(format!(
                                "{what}: passed generation {g} after {seen} arrivals"
                            ));
                        }
                    }
                    pause(&mut rng).await;
                    if rng.chance(1, 2) {
                        finished.count_down();
                    } else {
                        finished.arrive_and_wait().await;
                        if !finished.try_wait() {
                            locks.violation(format!("{what}: passed a closed latch"));
                        }
                    }
                })
            })
            .collect();
        let gate = {
            let finished = finished.clone();
            track(&round, Via::Collect, async move {
                loop {
                    coro::select! {
                        _ = finished.wait() => break,
                        _ = tick(&mut rng, 1_000) => bump(&RENDEZVOUS_TIMEOUTS),
                    }
                }
            })
        };
        let ((), _) = coro::collect_all!(gate, coro::collect_all_range(parts)).await;
        let locks = &round.locks;
        if finished.remaining() != 0 {
            locks.violation(format!(
                "{what}: the latch opened with {} count-downs to go",
                finished.remaining()
            ));
        }
        let leaders = leaders.load(SeqCst);
        if leaders != generations {
            locks.violation(format!(
                "{what}: {leaders} leaders in {generations} generations"
            ));
        }
        bump(&RENDEZVOUS);
        BARRIER_GENERATIONS.fetch_add(generations as u64, SeqCst);
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
        tasks: TaskCounts::default(),
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
    let tracker = round.clone();
    let root = Task::new(async move {
        let fulfiller = coro::spawn(track(&tracker, Via::Spawn, async move {
            coro::executor::time::sleep(delay).await;
            promise.set_value(value).expect("promise fulfilled twice");
            assert_eq!(promise.pending(), 0);
            assert!(promise.set_value(value).is_err());
        }));
        let breaker = coro::spawn(track(&tracker, Via::Spawn, async move {
            coro::executor::time::sleep(broken_delay).await;
            drop(broken_promise);
        }));
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
    });
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
    let task = Task::new(track(&round, Via::Start, root))
        .named("soak-round")
        .schedule_on(pool);
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
    // Every leaf started must be settled, and every task handed to the runtime must have
    // ended (spawned == completed + cancelled + panicked); some may still be being dropped on
    // other workers.
    let waited = Instant::now();
    while round.settled.load(SeqCst) != round.started.load(SeqCst) || round.tasks.unsettled() != 0 {
        if waited.elapsed() > SETTLE_GRACE {
            panic!(
                "{}: {} leaves started, {} settled; {} (difference {}); \
                 {SETTLE_GRACE:?} after the round ended\n{}",
                round.label,
                round.started.load(SeqCst),
                round.settled.load(SeqCst),
                round.tasks.describe(),
                round.tasks.unsettled(),
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
    check_unplanned(&round.label);
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
/// The first panic that was not planned, with where it happened.
static FIRST_UNPLANNED: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Silences the planned panics (thousands of them) and keeps every other panic loud; those are
/// also counted, since one in a task nobody awaits (a child still being polled on another worker
/// when its parent was dropped) would otherwise go unnoticed.
fn install_quiet_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = payload_message(info.payload());
        if message.contains(PLANNED) {
            return;
        }
        if UNPLANNED_PANICS.fetch_add(1, SeqCst) == 0 {
            let thread = std::thread::current();
            *FIRST_UNPLANNED.lock().unwrap_or_else(|e| e.into_inner()) = format!(
                "thread {:?} panicked at {}: {message}",
                thread.name().unwrap_or("?"),
                info.location().map_or("?".into(), |l| l.to_string())
            );
        }
        default(info);
    }));
}

/// Panics (naming `label`) if any panic that was not planned has happened.
fn check_unplanned(label: &str) {
    let unplanned = UNPLANNED_PANICS.load(SeqCst);
    assert_eq!(
        unplanned,
        0,
        "{label}: {unplanned} panics that were not planned (in this round or one beside it); \
         the first: {}",
        FIRST_UNPLANNED.lock().unwrap_or_else(|e| e.into_inner())
    );
}

#[test]
fn soak() {
    let secs = env_u64("CORO_SOAK_SECS").unwrap_or(5);
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
    // Live allocations, less the statistics blocks that threads keep as spares for reuse while
    // statistics are on (the soak's snapshots turn them on): a bounded cache, not a leak.
    let live_allocs = || LIVE_ALLOCS.load(SeqCst) - coro::executor::trace::spare_blocks() as isize;
    // The soak's snapshots keep the statistics on, and with them their ticker thread: start it
    // before counting, as the warm-up started everything else that lives until the end.
    let _ = coro::trace::snapshot();
    let (allocs_before, bytes_before) = (live_allocs(), LIVE_BYTES.load(SeqCst));
    let warm_rounds = ROUNDS.swap(0, SeqCst);
    for counter in [&NODES, &LEAVES_STARTED, &LEAVES_SETTLED, &ROUND_PANICS] {
        counter.store(0, SeqCst);
    }
    // The accounting, the queue waits, the channel and IO figures are the soak's own.
    for counter in [
        &TASKS_SPAWNED,
        &TASKS_COMPLETED,
        &TASKS_CANCELLED,
        &TASKS_PANICKED,
        &QUEUE_WAITS,
        &MAX_QUEUE_WAIT_US,
        &PIPELINES,
        &CHAN_SENT,
        &CHAN_RECEIVED,
        &CHAN_SEND_FAILED,
        &CHAN_SEND_DROPPED,
        &RENDEZVOUS,
        &IO_ECHOES,
    ] {
        counter.store(0, SeqCst);
    }
    for bucket in &QUEUE_WAIT_HIST {
        bucket.store(0, SeqCst);
    }
    let mem_start = mem_status();

    // The soak.
    let mut rng = Rng::new(seed);
    let workers_from_seed = 2 + rng.below(3) as usize;
    let workers = match env_u64("CORO_SOAK_WORKERS") {
        Some(0) => panic!("CORO_SOAK_WORKERS must be at least 1"),
        Some(n) => n as usize,
        None => workers_from_seed,
    };
    let drivers = 3 + rng.below(2);
    println!("soak: {workers} workers, {drivers} driver threads");
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
    let mut last_snapshot = Instant::now();
    let mut snapshots = 0u64;
    let mut mem_middle = None;
    while !threads.is_empty() {
        std::thread::sleep(Duration::from_millis(20));
        // The console's verdicts on healthy work: a snapshot every second, never a deadlock
        // or a lost wake-up.
        if last_snapshot.elapsed() >= Duration::from_secs(1) {
            last_snapshot = Instant::now();
            snapshots += 1;
            let snap = coro::trace::snapshot();
            let wrong: Vec<_> = snap
                .warnings
                .iter()
                .filter(|w| {
                    matches!(
                        w,
                        coro::trace::Warning::Deadlock { .. }
                            | coro::trace::Warning::LostWake { .. }
                    )
                })
                .collect();
            assert!(
                wrong.is_empty(),
                "CORO_SOAK_SEED={seed}: a snapshot reported {wrong:?} on healthy work:\n{snap}"
            );
        }
        if mem_middle.is_none() && epoch.elapsed() >= Duration::from_secs(secs) / 2 {
            mem_middle = Some(mem_status());
        }
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
            let (rss, hwm) = mem_status();
            println!(
                "soak: {}s: {}queue_wait_p99_us={} vmrss_kb={rss} vmhwm_kb={hwm}",
                epoch.elapsed().as_secs(),
                figures(),
                queue_wait_p99()
            );
        }
    }
    let elapsed = epoch.elapsed();
    println!("soak: {snapshots} snapshots, no deadlock or lost wake-up reported");
    let soak_rounds = ROUNDS.load(SeqCst);
    let mem_end = mem_status();
    let mem_middle = mem_middle.unwrap_or(mem_end);
    let load = load_average();
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
    check_unplanned(&format!("CORO_SOAK_SEED={seed}"));
    let spawned = TASKS_SPAWNED.load(SeqCst);
    let (completed, cancelled, panicked) = (
        TASKS_COMPLETED.load(SeqCst),
        TASKS_CANCELLED.load(SeqCst),
        TASKS_PANICKED.load(SeqCst),
    );
    let difference = spawned as i64 - (completed + cancelled + panicked) as i64;
    let (queue_waits, max_queue_wait_us, p99_queue_wait_us) = (
        QUEUE_WAITS.load(SeqCst),
        MAX_QUEUE_WAIT_US.load(SeqCst),
        queue_wait_p99(),
    );
    println!(
        "soak: tasks spawned {spawned}, completed {completed}, cancelled {cancelled}, \
         panicked {panicked}; difference {difference} (must be 0)\n\
         soak: queue wait (spawn to first poll) of {queue_waits} queued tasks: longest {:.3} ms, \
         p99 <= {:.3} ms\n\
         soak: VmRSS start {} / middle {} / end {} MiB; VmHWM (peak RSS) start {} / middle {} / \
         end {} MiB; load average at the end {load}",
        max_queue_wait_us as f64 / 1e3,
        p99_queue_wait_us as f64 / 1e3,
        mib(mem_start.0),
        mib(mem_middle.0),
        mib(mem_end.0),
        mib(mem_start.1),
        mib(mem_middle.1),
        mib(mem_end.1),
    );
    assert_eq!(
        difference, 0,
        "CORO_SOAK_SEED={seed}: tasks unaccounted for: spawned {spawned}, completed {completed}, \
         cancelled {cancelled}, panicked {panicked}"
    );
    if secs >= LONG_SECS {
        let flat = |middle: u64, end: u64| end as f64 <= middle as f64 * FLAT_RATIO;
        assert!(
            flat(mem_middle.0, mem_end.0) && flat(mem_middle.1, mem_end.1),
            "CORO_SOAK_SEED={seed}: memory not flat (long mode: the end at most {FLAT_RATIO}x the \
             middle): VmRSS start {} / middle {} / end {} kB, VmHWM start {} / middle {} / end {} kB",
            mem_start.0,
            mem_middle.0,
            mem_end.0,
            mem_start.1,
            mem_middle.1,
            mem_end.1,
        );
    }

    // Leak check. Tolerance: the global timer driver keeps the memory of its peak number of
    // pending timers until the process ends (its slab and its generation chunks, one per 1024
    // slab nodes, only grow; see coro-executor/src/time/driver.rs; a pool's driver frees both
    // with the pool), and the soak's peak can exceed the warm-up's by a few chunks; std's
    // lazily initialised globals are all created by the warm-up. Everything per round, per
    // task and per pool (thousands of each) must be gone, so a leak of any of them shows far
    // beyond this.
    const TOLERANCE: isize = 8;
    let waited = Instant::now();
    let (allocs_after, bytes_after) = loop {
        let _ = coro::trace::dump_all(); // prunes the registry of dead pools
        let now = (live_allocs(), LIVE_BYTES.load(SeqCst));
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
    // The summary, as a markdown table (RELIABILITY.md holds the rows of real runs).
    println!(
        "\n| date | secs | workers | drivers | seed | rounds | tasks spawned | completed | \
         cancelled | panicked | difference | longest queue wait | p99 queue wait | \
         VmRSS start / middle / end (MiB) | VmHWM start / middle / end (MiB) | \
         channel values sent = received | TCP echoes | live allocations after | load at end |\n\
         | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | \
         --- | --- | ---: | ---: | ---: | --- |\n\
         | {} | {:.0} | {workers} | {drivers} | {seed} | {soak_rounds} | {spawned} | {completed} | \
         {cancelled} | {panicked} | {difference} | {:.3} ms | {:.3} ms | {} / {} / {} | \
         {} / {} / {} | {} | {} | {:+} | {load} |",
        utc_now(),
        elapsed.as_secs_f64(),
        max_queue_wait_us as f64 / 1e3,
        p99_queue_wait_us as f64 / 1e3,
        mib(mem_start.0),
        mib(mem_middle.0),
        mib(mem_end.0),
        mib(mem_start.1),
        mib(mem_middle.1),
        mib(mem_end.1),
        CHAN_SENT.load(SeqCst),
        IO_ECHOES.load(SeqCst),
        allocs_after - allocs_before,
    );
    assert!(
        allocs_after - allocs_before <= TOLERANCE,
        "CORO_SOAK_SEED={seed}: {} allocations leaked ({allocs_before} live before, \
         {allocs_after} after; tolerance {TOLERANCE})",
        allocs_after - allocs_before
    );
}
