//! Stress test of the `coro-executor` engine.
//!
//! For `CORO_STRESS_SECS` seconds (default 3), several outside threads at once, and the tasks
//! themselves, spawn scripted tasks on two pools that mix `yield_now()` loops, `time::sleep` of
//! 0-3 ms, waits on `futures::channel::oneshot` channels completed by another thread,
//! `spawn_blocking`, nested spawns (through `coro_executor::spawn`, `ThreadPool::spawn` and
//! `ExecutorHandle::spawn`, some onto the other pool), panics, `JoinHandle::cancel()` of running,
//! sleeping and idle tasks, and detached handles.
//!
//! Every spawned future (and every blocking closure) owns a drop guard with a unique id. A
//! ledger records, per id, how often it was dropped and whether the task reached its side
//! effect, and checks at the end that every future was dropped exactly once, that every kept
//! handle resolved with the outcome its task was scripted to have (value, panic message, or
//! `Cancelled`), that every detached task that was scripted to complete did so, that tasks only
//! ran (and their futures were only dropped) on workers of their own pool, and that the pools
//! came back to quiescence (`live_tasks == 0`, empty queues) with consistent `metrics()` before
//! `shutdown()`. `cancel()` consumes the handle, so a cancelled task is checked through its
//! guard instead: dropped exactly once, and never past its scripted hang. A second test shuts
//! pools down while their tasks are mid-flight (sleeping, yielding, waiting on channels or on
//! blocking work) and while outside threads keep spawning: every kept handle must resolve
//! `Cancelled` or its scripted outcome.
//!
//! The schedule is random but reproducible: the seed comes from `CORO_STRESS_SEED` or the clock
//! and is printed first. Every wait of a test thread is bounded, so a lost wake-up fails the test
//! with a message saying what hung. A long run:
//! `CORO_STRESS_SECS=600 cargo test -p coro-executor --release --test stress -- --nocapture`.
#![cfg(not(loom))]

use coro_executor::time::sleep;
use coro_executor::{ExecutorHandle, JoinError, JoinHandle, PoolMetrics, ThreadPool, yield_now};
use futures::channel::oneshot;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, Once, OnceLock, PoisonError, mpsc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Bound of every single wait of a test thread: a lost wake-up fails the test, never hangs CI.
const WAIT: Duration = Duration::from_secs(30);
/// Outside (non-pool) threads spawning at once in the mixed test.
const OUTSIDE_THREADS: usize = 4;
/// Workers of the mixed test's pool: more than the 2 cores of CI, so that workers are preempted
/// in the middle of scheduler operations, which widens every race window.
const WORKERS: usize = 4;
/// Bound of the blocking pool, small so that blocking work also queues.
const MAX_BLOCKING: usize = 6;
/// Prefix of every scripted panic message (the panic hook keeps them off stderr).
const PANIC_PREFIX: &str = "scripted panic in task";

// ---------------------------------------------------------------------------------------------
// Configuration, randomness, bounded waits
// ---------------------------------------------------------------------------------------------

/// How long each test mixes its workload: `CORO_STRESS_SECS`, 3 s by default.
fn stress_duration() -> Duration {
    let secs: f64 = match std::env::var("CORO_STRESS_SECS") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CORO_STRESS_SECS={s:?} is not a number of seconds")),
        Err(_) => 3.0,
    };
    Duration::from_secs_f64(secs.max(0.0))
}

/// The seed of the whole run: `CORO_STRESS_SEED`, or derived from the clock.
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| match std::env::var("CORO_STRESS_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CORO_STRESS_SEED={s:?} is not an unsigned integer")),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0x5EED, |d| d.as_nanos() as u64),
    })
}

/// xorshift64*: small, fast, and reproducible from a seed.
struct Rng(u64);

impl Rng {
    /// An independent stream `stream` of the run's seed (splitmix64 of the pair).
    fn new(seed: u64, stream: u64) -> Rng {
        let mut z = seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Wakes the thread that is blocked in [`block_on_timeout`].
struct ThreadWaker(thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// `block_on` with a deadline: polls `fut` on this thread and panics, saying `what()` hung, if it
/// is not ready within `limit`. Needs no timer of the crate under test.
fn block_on_timeout<F: Future>(
    fut: F,
    limit: Duration,
    what: impl FnOnce() -> String,
) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    let deadline = Instant::now() + limit;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        let now = Instant::now();
        if now >= deadline {
            panic!("hung: {} did not resolve within {limit:?}", what());
        }
        thread::park_timeout(deadline - now);
    }
}

/// Polls `cond` every millisecond until it holds; panics, saying `what()` hung, after `limit`.
fn wait_until(limit: Duration, what: impl FnOnce() -> String, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() >= deadline {
            panic!("hung: {} (waited {limit:?})", what());
        }
        thread::sleep(Duration::from_millis(1));
    }
}

/// A named thread whose result is collected with a bounded wait.
struct Bounded<T> {
    name: String,
    rx: mpsc::Receiver<T>,
    thread: thread::JoinHandle<()>,
}

fn spawn_bounded<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Bounded<T> {
    let (tx, rx) = mpsc::channel();
    let thread = thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("could not start a test thread");
    Bounded { name, rx, thread }
}

impl<T> Bounded<T> {
    /// Whether the thread has ended (returned or panicked).
    fn finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// The thread's result; re-raises its panic; panics if it does not finish within `limit`.
    fn join(self, limit: Duration) -> T {
        match self.rx.recv_timeout(limit) {
            Ok(value) => {
                let _ = self.thread.join();
                value
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("hung: thread {} did not finish within {limit:?}", self.name)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => match self.thread.join() {
                Err(payload) => std::panic::resume_unwind(payload),
                Ok(()) => panic!("thread {} ended without a result", self.name),
            },
        }
    }
}

/// Shuts `pool` down on a helper thread; panics if `shutdown()` does not return within `WAIT`.
fn shutdown_bounded(pool: ThreadPool, what: &str) {
    spawn_bounded(format!("shutdown {what}"), move || pool.shutdown()).join(WAIT);
}

/// The text of a panic payload made by `panic!`.
fn payload_text(payload: &(dyn Any + Send)) -> Option<&str> {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&'static str>().copied())
}

/// Keeps the (thousands of) scripted panics off stderr; any other panic is reported as usual.
fn quiet_scripted_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let scripted =
                payload_text(info.payload()).is_some_and(|m| m.starts_with(PANIC_PREFIX));
            if !scripted {
                default(info);
            }
        }));
    });
}

// ---------------------------------------------------------------------------------------------
// The ledger: per-id drop counts and side effects
// ---------------------------------------------------------------------------------------------

/// Low two bits of an id's flags: how often its guard was dropped (saturating at 3).
const DROPS: u8 = 0b11;
/// The id was handed out (its guard exists or existed).
const REGISTERED: u8 = 1 << 2;
/// The task must reach its side effect (it is scripted to complete and nothing may stop it).
const EXPECT_EFFECT: u8 = 1 << 3;
/// The task must never reach its side effect (it panics, or hangs until cancelled).
const FORBID_EFFECT: u8 = 1 << 4;
/// The task reached its side effect.
const EFFECT: u8 = 1 << 5;
/// Ids per chunk of the ledger. A chunk whose ids have all been dropped is checked and freed, so
/// a 10-minute run does not keep one byte per task forever.
const CHUNK: u64 = 4096;

struct Chunk {
    flags: Box<[u8]>,
    dropped: u64,
}

#[derive(Default)]
struct Table {
    chunks: HashMap<u64, Chunk>,
    /// Chunks already checked and freed: every id in them was dropped exactly once.
    retired: HashSet<u64>,
}

/// What went wrong with id `id`, if anything, judging by its final `flags`.
fn check_final(id: u64, flags: u8) -> Option<String> {
    if flags & REGISTERED == 0 {
        return Some(format!("id {id} was never registered"));
    }
    match flags & DROPS {
        1 => {}
        0 => {
            return Some(format!(
                "the future of id {id} was never dropped (leaked or still alive)"
            ));
        }
        n => return Some(format!("the future of id {id} was dropped {n} times")),
    }
    if flags & EXPECT_EFFECT != 0 && flags & EFFECT == 0 {
        return Some(format!(
            "task {id} was scripted to complete but never reached its side effect"
        ));
    }
    None
}

/// Event counters, for the summary line and the metrics cross-checks.
#[derive(Default)]
struct Stats {
    spawned_outside: AtomicU64,
    spawned_inside: AtomicU64,
    blocking: AtomicU64,
    /// Tasks whose future returned a value (side effect reached).
    completed: AtomicU64,
    /// Tasks that reached their scripted panic.
    panicked: AtomicU64,
    /// `cancel()` of tasks scripted to hang until cancelled (they must never complete).
    cancelled: AtomicU64,
    /// `cancel()` of tasks that may be completing at that moment.
    cancel_raced: AtomicU64,
    detached: AtomicU64,
    yields: AtomicU64,
    sleeps: AtomicU64,
    oneshots: AtomicU64,
    /// Kept handles that resolved with the scripted value / panic / `Cancelled`.
    handle_values: AtomicU64,
    handle_panics: AtomicU64,
    handle_cancels: AtomicU64,
    /// Spawns through the handle of a pool that had shut down (dropped at once).
    after_shutdown: AtomicU64,
}

struct Ledger {
    next_id: AtomicU64,
    table: Mutex<Table>,
    /// Guards created and not yet dropped.
    alive: AtomicI64,
    /// Task outputs created and not yet dropped.
    outputs_alive: AtomicI64,
    errors: Mutex<Vec<String>>,
    error_count: AtomicU64,
    /// Lets `YieldForever` loops end if a test fails (a cancelled one that ends is an error).
    stop: AtomicBool,
    stats: Stats,
}

impl Ledger {
    fn new() -> Arc<Ledger> {
        Arc::new(Ledger {
            next_id: AtomicU64::new(0),
            table: Mutex::new(Table::default()),
            alive: AtomicI64::new(0),
            outputs_alive: AtomicI64::new(0),
            errors: Mutex::new(Vec::new()),
            error_count: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            stats: Stats::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a failed check (tasks cannot fail the test themselves: a panic in a detached task
    /// would go unseen).
    fn error(&self, message: String) {
        self.error_count.fetch_add(1, SeqCst);
        let mut errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        if errors.len() < 40 {
            errors.push(message);
        }
    }

    fn failed(&self) -> bool {
        self.error_count.load(SeqCst) > 0
    }

    /// A guard with a fresh id and the given expectation (`EXPECT_EFFECT`, `FORBID_EFFECT` or 0).
    fn guard(self: &Arc<Self>, expectation: u8) -> Guard {
        let id = self.next_id.fetch_add(1, SeqCst);
        let problem = {
            let mut table = self.lock();
            let chunk = id / CHUNK;
            if table.retired.contains(&chunk) {
                Some(format!("id {id} registered in a retired chunk"))
            } else {
                let entry = table.chunks.entry(chunk).or_insert_with(|| Chunk {
                    flags: vec![0; CHUNK as usize].into_boxed_slice(),
                    dropped: 0,
                });
                entry.flags[(id % CHUNK) as usize] = REGISTERED | expectation;
                None
            }
        };
        if let Some(problem) = problem {
            self.error(problem);
        }
        self.alive.fetch_add(1, SeqCst);
        Guard {
            ledger: self.clone(),
            id,
            home: None,
        }
    }

    /// Task `id` reached its side effect (it is about to return its value).
    fn effect(&self, id: u64) {
        let problem = {
            let mut table = self.lock();
            match table.chunks.get_mut(&(id / CHUNK)) {
                None => Some(format!(
                    "task {id} had its side effect after its chunk retired"
                )),
                Some(chunk) => {
                    let flags = &mut chunk.flags[(id % CHUNK) as usize];
                    let problem = if *flags & EFFECT != 0 {
                        Some(format!("task {id} had its side effect twice"))
                    } else if *flags & FORBID_EFFECT != 0 {
                        Some(format!(
                            "task {id} completed although it was scripted to panic or to hang \
                             until cancelled (a cancel() was lost?)"
                        ))
                    } else if *flags & DROPS != 0 {
                        Some(format!("task {id} ran after its future was dropped"))
                    } else {
                        None
                    };
                    *flags |= EFFECT;
                    problem
                }
            }
        };
        if let Some(problem) = problem {
            self.error(problem);
        }
    }

    /// The guard of `id` is being dropped.
    fn dropped(&self, id: u64) {
        let mut problems = Vec::new();
        {
            let mut table = self.lock();
            let index = id / CHUNK;
            match table.chunks.get_mut(&index) {
                None => problems.push(format!(
                    "the future of id {id} was dropped again after every id of its chunk had \
                     been dropped once (double drop)"
                )),
                Some(chunk) => {
                    let flags = &mut chunk.flags[(id % CHUNK) as usize];
                    let drops = *flags & DROPS;
                    if drops >= 1 {
                        problems.push(format!(
                            "the future of id {id} was dropped {} times",
                            drops + 1
                        ));
                    }
                    if drops < DROPS {
                        *flags += 1;
                    }
                    chunk.dropped += 1;
                    if chunk.dropped == CHUNK {
                        let chunk = table.chunks.remove(&index).expect("just found");
                        table.retired.insert(index);
                        for (i, &flags) in chunk.flags.iter().enumerate() {
                            problems.extend(check_final(index * CHUNK + i as u64, flags));
                        }
                    }
                }
            }
        }
        self.alive.fetch_sub(1, SeqCst);
        for problem in problems {
            self.error(problem);
        }
    }

    /// How often the guard of `id` has been dropped so far.
    fn drops_of(&self, id: u64) -> u8 {
        let table = self.lock();
        match table.chunks.get(&(id / CHUNK)) {
            Some(chunk) => chunk.flags[(id % CHUNK) as usize] & DROPS,
            None if table.retired.contains(&(id / CHUNK)) => 1,
            None => 0,
        }
    }

    /// Checks every id handed out so far (see [`check_final`]) and returns the recorded errors.
    fn verify(&self) -> (u64, Vec<String>) {
        let upto = self.next_id.load(SeqCst);
        let mut problems = Vec::new();
        let mut count = 0u64;
        {
            let table = self.lock();
            for index in 0..upto.div_ceil(CHUNK) {
                if table.retired.contains(&index) {
                    continue;
                }
                let Some(chunk) = table.chunks.get(&index) else {
                    count += 1;
                    problems.push(format!("no id of chunk {index} was ever registered"));
                    continue;
                };
                for (i, &flags) in chunk.flags.iter().enumerate() {
                    let id = index * CHUNK + i as u64;
                    if id >= upto {
                        break;
                    }
                    if let Some(problem) = check_final(id, flags) {
                        count += 1;
                        if problems.len() < 40 {
                            problems.push(problem);
                        }
                    }
                }
            }
        }
        let errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        count += self.error_count.load(SeqCst);
        problems.splice(0..0, errors.iter().cloned());
        (count, problems)
    }

    /// Panics with every problem found, naming `what` and the seed.
    fn assert_clean(&self, what: &str) {
        let (count, problems) = self.verify();
        assert!(
            count == 0,
            "{what}: {count} problem(s) (seed {}, replay with CORO_STRESS_SEED={}):\n  {}",
            seed(),
            seed(),
            problems.join("\n  ")
        );
    }
}

/// Owned by every spawned future and blocking closure: its drop is what the ledger counts.
struct Guard {
    ledger: Arc<Ledger>,
    id: u64,
    /// The pool on whose workers the future must be dropped, when that is checked: in the mixed
    /// test a task's future is dropped on its executor whether it completes, panics or is
    /// cancelled (`JoinHandle::cancel`: "dropped ... on its executor").
    home: Option<ExecutorHandle>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(home) = &self.home {
            if ExecutorHandle::current_pool().as_ref() != Some(home) {
                self.ledger.error(format!(
                    "the future of task {} was dropped on thread {:?}, not on a worker of its \
                     pool",
                    self.id,
                    thread::current().name()
                ));
            }
        }
        self.ledger.dropped(self.id);
    }
}

/// A task's return value. It carries a token too, so that outputs are dropped exactly once as
/// well (by the handle's owner, or by the executor for detached and cancelled tasks).
struct Out {
    id: u64,
    value: u64,
    _token: OutputToken,
}

struct OutputToken(Arc<Ledger>);

impl OutputToken {
    fn new(ledger: &Arc<Ledger>) -> OutputToken {
        ledger.outputs_alive.fetch_add(1, SeqCst);
        OutputToken(ledger.clone())
    }
}

impl Drop for OutputToken {
    fn drop(&mut self) {
        self.0.outputs_alive.fetch_sub(1, SeqCst);
    }
}

fn expected_value(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x00C0_FFEE
}

fn blocking_value(id: u64) -> u64 {
    id.wrapping_mul(3).wrapping_add(1)
}

fn oneshot_value(id: u64) -> u64 {
    id ^ 0xABCD_EF01
}

fn panic_text(id: u64) -> String {
    format!("{PANIC_PREFIX} {id}")
}

// ---------------------------------------------------------------------------------------------
// Scripts
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The mixed workload: nothing is cut short except by an explicit `cancel()`.
    Mixed,
    /// The pool is shut down under the tasks' feet: any task may end up `Cancelled`.
    Shutdown,
}

#[derive(Debug)]
enum Step {
    /// `yield_now()` this many times.
    Yield(u32),
    /// `sleep` this many milliseconds (0-3).
    Sleep(u64),
    /// Wait on a oneshot that the completer thread fills (after a random delay).
    Oneshot,
    /// `coro_executor::spawn_blocking` a closure that sleeps this many microseconds, and await it.
    Blocking(u64),
    /// Spawn a child task from inside this one (and await, detach or cancel it), on this
    /// task's pool or, if the child's plan says `foreign`, on the other pool.
    Child(Box<Plan>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hang {
    /// `std::future::pending()`: idle, woken by nothing.
    Pending,
    /// A 10 s sleep: registered in the timer wheel.
    LongSleep,
    /// Yields until the ledger's stop flag: always running or queued.
    YieldForever,
    /// A oneshot whose sender is kept but never used.
    SilentOneshot,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Return `expected_value(id)`.
    Value,
    /// `panic!("{PANIC_PREFIX} {id}")`.
    Panic,
    /// Never finish on its own.
    Hang(Hang),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    /// The spawner keeps the handle and checks what it resolves to.
    Await,
    /// The handle is dropped at once.
    Detach,
    /// The task hangs; the spawner cancels it after a short random delay.
    Cancel,
    /// The task may be completing; the spawner cancels it after a short random delay.
    CancelRacy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// `ThreadPool::spawn` from outside, `coro_executor::spawn` from inside.
    Direct,
    /// `ExecutorHandle::spawn`.
    Handle,
}

#[derive(Debug)]
struct Plan {
    steps: Vec<Step>,
    ending: Ending,
    fate: Fate,
    via: Via,
    /// A child spawned on the other pool (through its `ExecutorHandle`, from this pool's worker):
    /// its spawn, its wake-ups and its completion cross pools.
    foreign: bool,
}

impl Plan {
    /// What the ledger must see of this task's side effect.
    fn expectation(&self, phase: Phase) -> u8 {
        match (self.ending, self.fate, phase) {
            (Ending::Panic | Ending::Hang(_), _, _) => FORBID_EFFECT,
            (Ending::Value, Fate::Await | Fate::Detach, Phase::Mixed) => EXPECT_EFFECT,
            (Ending::Value, _, _) => 0,
        }
    }
}

fn random_hang(rng: &mut Rng) -> Hang {
    match rng.below(4) {
        0 => Hang::Pending,
        1 => Hang::LongSleep,
        2 => Hang::YieldForever,
        _ => Hang::SilentOneshot,
    }
}

/// A random script; children nest at most 3 deep.
fn gen_plan(rng: &mut Rng, depth: u32, phase: Phase) -> Plan {
    let fate = match rng.below(100) {
        0..45 => Fate::Await,
        45..70 => Fate::Detach,
        70..85 => Fate::Cancel,
        _ => Fate::CancelRacy,
    };
    let ending = if fate == Fate::Cancel || (phase == Phase::Shutdown && rng.chance(20)) {
        Ending::Hang(random_hang(rng))
    } else if rng.chance(12) {
        Ending::Panic
    } else {
        Ending::Value
    };
    let count = rng.below(if depth == 0 { 6 } else { 4 });
    let steps = (0..count)
        .map(|_| match rng.below(100) {
            0..30 => Step::Yield(1 + rng.below(16) as u32),
            30..55 => Step::Sleep(rng.below(4)),
            55..72 => Step::Oneshot,
            72..82 => Step::Blocking(if rng.chance(50) { 0 } else { rng.below(400) }),
            _ if depth < 3 => {
                let mut child = gen_plan(rng, depth + 1, phase);
                child.foreign = rng.chance(30);
                Step::Child(Box::new(child))
            }
            _ => Step::Yield(1),
        })
        .collect();
    let via = if rng.chance(50) {
        Via::Direct
    } else {
        Via::Handle
    };
    Plan {
        steps,
        ending,
        fate,
        via,
        foreign: false,
    }
}

// ---------------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------------

type Job = (oneshot::Sender<u64>, u64);

/// What every task of a test (or round) shares.
struct Ctx {
    ledger: Arc<Ledger>,
    /// The two pools tasks run on; a task's `home` indexes this.
    pools: [ExecutorHandle; 2],
    completer: mpsc::Sender<Job>,
    /// Senders of `SilentOneshot` hangs: kept alive, never used.
    silent: Mutex<Vec<oneshot::Sender<u64>>>,
    phase: Phase,
}

impl Ctx {
    /// The guard of a task of `plan` that will run on pool `home`.
    fn task_guard(&self, plan: &Plan, home: usize) -> Guard {
        let mut guard = self.ledger.guard(plan.expectation(self.phase));
        if self.phase == Phase::Mixed {
            guard.home = Some(self.pools[home].clone());
        }
        guard
    }

    /// A task only ever runs on a worker of its own pool (pools are isolated).
    fn check_pool(&self, id: u64, home: usize, when: &str) {
        if ExecutorHandle::current_pool().as_ref() != Some(&self.pools[home]) {
            self.ledger.error(format!(
                "task {id} of pool {home} ran {when} on thread {:?}, not on a worker of its pool",
                thread::current().name()
            ));
        }
    }
}

/// The completer thread: fills each oneshot it is sent after a random delay of up to
/// `max_delay_us`, in no particular order. Ends when every `Ctx` (sender) is gone.
fn start_completer(mut rng: Rng, max_delay_us: u64) -> (mpsc::Sender<Job>, Bounded<u64>) {
    let (tx, rx) = mpsc::channel::<Job>();
    let thread = spawn_bounded("stress-completer".into(), move || {
        let mut held: Vec<(Instant, oneshot::Sender<u64>, u64)> = Vec::new();
        let mut completed = 0u64;
        loop {
            let now = Instant::now();
            let mut i = 0;
            while i < held.len() {
                if held[i].0 <= now {
                    let (_, sender, value) = held.swap_remove(i);
                    // The receiver may be gone: its task was cancelled or shut down.
                    let _ = sender.send(value);
                    completed += 1;
                } else {
                    i += 1;
                }
            }
            let next = held.iter().map(|h| h.0).min();
            let timeout = next.map_or(Duration::from_millis(5), |t| {
                t.saturating_duration_since(now)
            });
            match rx.recv_timeout(timeout) {
                Ok((sender, value)) => {
                    let delay = if rng.chance(30) {
                        0
                    } else {
                        rng.below(max_delay_us + 1)
                    };
                    held.push((Instant::now() + Duration::from_micros(delay), sender, value));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    for (_, sender, value) in held.drain(..) {
                        let _ = sender.send(value);
                        completed += 1;
                    }
                    return completed;
                }
            }
        }
    });
    (tx, thread)
}

type BoxedTask = Pin<Box<dyn Future<Output = Out> + Send + 'static>>;

/// The future of a scripted task that owns `guard` and runs on pool `home`.
fn task(ctx: Arc<Ctx>, guard: Guard, plan: Plan, home: usize) -> BoxedTask {
    Box::pin(async move {
        let id = guard.id;
        // Moves the whole guard into the future (a closure-style capture of `guard.id` alone
        // would leave it behind).
        let _guard = guard;
        ctx.check_pool(id, home, "first");
        for step in plan.steps {
            run_step(&ctx, step, id, home).await;
        }
        ctx.check_pool(id, home, "last");
        match plan.ending {
            Ending::Value => {}
            Ending::Panic => {
                ctx.ledger.stats.panicked.fetch_add(1, Relaxed);
                panic!("{}", panic_text(id));
            }
            Ending::Hang(hang) => run_hang(&ctx, hang).await,
        }
        ctx.ledger.effect(id);
        ctx.ledger.stats.completed.fetch_add(1, Relaxed);
        Out {
            id,
            value: expected_value(id),
            _token: OutputToken::new(&ctx.ledger),
        }
    })
}

async fn run_step(ctx: &Arc<Ctx>, step: Step, id: u64, home: usize) {
    let ledger = &ctx.ledger;
    let stats = &ledger.stats;
    match step {
        Step::Yield(n) => {
            for _ in 0..n {
                yield_now().await;
                stats.yields.fetch_add(1, Relaxed);
            }
        }
        Step::Sleep(ms) => {
            let duration = Duration::from_millis(ms);
            let start = Instant::now();
            sleep(duration).await;
            let slept = start.elapsed();
            if slept < duration {
                ledger.error(format!(
                    "task {id}: sleep({duration:?}) completed early, after {slept:?}"
                ));
            }
            stats.sleeps.fetch_add(1, Relaxed);
        }
        Step::Oneshot => {
            let (tx, rx) = oneshot::channel();
            if ctx.completer.send((tx, oneshot_value(id))).is_err() {
                ledger.error(format!("task {id}: the completer thread is gone"));
                return;
            }
            match rx.await {
                Ok(v) if v == oneshot_value(id) => {
                    stats.oneshots.fetch_add(1, Relaxed);
                }
                other => ledger.error(format!("task {id}: oneshot resolved {other:?}")),
            }
        }
        Step::Blocking(micros) => {
            let guard = ledger.guard(blocking_expectation(ctx.phase));
            let bid = guard.id;
            let handle = coro_executor::spawn_blocking(move || blocking_body(guard, micros));
            stats.blocking.fetch_add(1, Relaxed);
            match handle.await {
                Ok(v) if v == blocking_value(bid) => {}
                Err(JoinError::Cancelled) if ctx.phase == Phase::Shutdown => {}
                other => ledger.error(format!(
                    "task {id}: spawn_blocking {bid} resolved {:?}",
                    other.map_err(|e| e.to_string())
                )),
            }
        }
        Step::Child(plan) => spawn_child(ctx, *plan, home).await,
    }
}

async fn run_hang(ctx: &Ctx, hang: Hang) {
    match hang {
        Hang::Pending => std::future::pending::<()>().await,
        Hang::LongSleep => sleep(Duration::from_secs(10)).await,
        Hang::YieldForever => {
            while !ctx.ledger.stop.load(Relaxed) {
                yield_now().await;
                ctx.ledger.stats.yields.fetch_add(1, Relaxed);
            }
        }
        Hang::SilentOneshot => {
            let (tx, rx) = oneshot::channel::<u64>();
            ctx.silent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(tx);
            let _ = rx.await;
        }
    }
}

fn blocking_expectation(phase: Phase) -> u8 {
    match phase {
        // A blocking closure always runs: dropping its handle only detaches it.
        Phase::Mixed => EXPECT_EFFECT,
        // Shutdown drops the closures that have not started.
        Phase::Shutdown => 0,
    }
}

/// The body of every blocking closure: owns its guard, runs on a blocking thread.
fn blocking_body(guard: Guard, micros: u64) -> u64 {
    let on_blocking_thread = thread::current()
        .name()
        .is_some_and(|n| n.contains("-blocking-"));
    if !on_blocking_thread {
        guard.ledger.error(format!(
            "blocking closure {} ran on thread {:?}",
            guard.id,
            thread::current().name()
        ));
    }
    if micros > 0 {
        thread::sleep(Duration::from_micros(micros));
    }
    guard.ledger.effect(guard.id);
    blocking_value(guard.id)
}

/// A handle that is cancelled when dropped: a cancel target must be cancelled even when its
/// spawner is itself cancelled or dropped before it gets to `cancel_now`.
struct CancelOnDrop(Option<JoinHandle<Out>>);

impl CancelOnDrop {
    fn cancel_now(mut self) {
        if let Some(handle) = self.0.take() {
            handle.cancel();
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.cancel();
        }
    }
}

/// Spawns `plan` from inside a task of pool `home` and does with the handle what the plan says.
async fn spawn_child(ctx: &Arc<Ctx>, plan: Plan, home: usize) {
    let ledger = &ctx.ledger;
    let (fate, ending, via, foreign) = (plan.fate, plan.ending, plan.via, plan.foreign);
    let child_home = if foreign { 1 - home } else { home };
    let guard = ctx.task_guard(&plan, child_home);
    let id = guard.id;
    let fut = task(ctx.clone(), guard, plan, child_home);
    let handle = match (via, foreign) {
        (_, true) => ctx.pools[child_home].spawn(fut),
        (Via::Direct, false) => coro_executor::spawn(fut),
        (Via::Handle, false) => ctx.pools[home].spawn(fut),
    };
    ledger.stats.spawned_inside.fetch_add(1, Relaxed);
    match fate {
        Fate::Await => {
            let result = handle.await;
            check_outcome(
                ledger,
                id,
                ending,
                result,
                ctx.phase == Phase::Shutdown,
                "child",
            );
        }
        Fate::Detach => {
            handle.detach();
            ledger.stats.detached.fetch_add(1, Relaxed);
        }
        Fate::Cancel | Fate::CancelRacy => {
            let handle = CancelOnDrop(Some(handle));
            match id % 3 {
                0 => {}
                1 => yield_now().await,
                _ => sleep(Duration::from_millis(1)).await,
            }
            handle.cancel_now();
            count_cancel(ledger, fate);
        }
    }
}

fn count_cancel(ledger: &Ledger, fate: Fate) {
    let counter = match fate {
        Fate::Cancel => &ledger.stats.cancelled,
        _ => &ledger.stats.cancel_raced,
    };
    counter.fetch_add(1, Relaxed);
}

/// Checks what a kept handle of task `id` resolved to against its script.
fn check_outcome(
    ledger: &Ledger,
    id: u64,
    ending: Ending,
    result: Result<Out, JoinError>,
    cancel_ok: bool,
    who: &str,
) {
    let stats = &ledger.stats;
    match (ending, result) {
        (Ending::Value, Ok(out)) if out.id == id && out.value == expected_value(id) => {
            stats.handle_values.fetch_add(1, Relaxed);
        }
        (Ending::Panic, Err(JoinError::Panicked(payload)))
            if payload_text(&*payload) == Some(panic_text(id).as_str()) =>
        {
            stats.handle_panics.fetch_add(1, Relaxed);
        }
        (_, Err(JoinError::Cancelled)) if cancel_ok => {
            stats.handle_cancels.fetch_add(1, Relaxed);
        }
        (ending, other) => {
            let got = match other {
                Ok(out) => format!("Ok(id {}, value {:#x})", out.id, out.value),
                Err(e) => format!("Err({e:?})"),
            };
            ledger.error(format!(
                "{who}: the handle of task {id} (scripted {ending:?}) resolved {got}"
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Outside threads
// ---------------------------------------------------------------------------------------------

/// Handles an outside thread keeps, and the cancels it has scheduled.
#[derive(Default)]
struct Kept {
    tasks: Vec<(u64, Ending, JoinHandle<Out>)>,
    blocking: Vec<(u64, JoinHandle<u64>)>,
    cancels: Vec<(Instant, Fate, CancelOnDrop)>,
}

impl Kept {
    /// Spawns one scripted task from outside the pools (on pool 0 mostly, else on pool 1),
    /// through `pools[home]` if given, else through its handle. Returns its id and home.
    fn spawn(&mut self, ctx: &Arc<Ctx>, pools: &[&ThreadPool], rng: &mut Rng) -> (u64, usize) {
        let home = usize::from(rng.chance(25));
        let plan = gen_plan(rng, 0, ctx.phase);
        let guard = ctx.task_guard(&plan, home);
        let id = guard.id;
        let (fate, ending, via) = (plan.fate, plan.ending, plan.via);
        let fut = task(ctx.clone(), guard, plan, home);
        let handle = match (via, pools.get(home)) {
            (Via::Direct, Some(pool)) => pool.spawn(fut),
            _ => ctx.pools[home].spawn(fut),
        };
        ctx.ledger.stats.spawned_outside.fetch_add(1, Relaxed);
        match fate {
            Fate::Await => self.tasks.push((id, ending, handle)),
            Fate::Detach => {
                drop(handle);
                ctx.ledger.stats.detached.fetch_add(1, Relaxed);
            }
            Fate::Cancel | Fate::CancelRacy => {
                let at = Instant::now() + Duration::from_micros(rng.below(3000));
                self.cancels.push((at, fate, CancelOnDrop(Some(handle))));
            }
        }
        (id, home)
    }

    /// Cancels the handles whose time has come (all of them with `all`).
    fn fire_cancels(&mut self, ledger: &Ledger, all: bool) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.cancels.len() {
            if all || self.cancels[i].0 <= now {
                let (_, fate, handle) = self.cancels.swap_remove(i);
                handle.cancel_now();
                count_cancel(ledger, fate);
            } else {
                i += 1;
            }
        }
    }

    /// Awaits every kept handle (each wait bounded) and checks its outcome.
    fn drain(&mut self, ctx: &Ctx, who: &str) {
        let cancel_ok = ctx.phase == Phase::Shutdown;
        for (id, ending, handle) in self.tasks.drain(..) {
            let result = block_on_timeout(handle, WAIT, || {
                format!("{who}: the JoinHandle of task {id} (scripted {ending:?})")
            });
            check_outcome(&ctx.ledger, id, ending, result, cancel_ok, who);
        }
        for (id, handle) in self.blocking.drain(..) {
            let result = block_on_timeout(handle, WAIT, || {
                format!("{who}: the JoinHandle of spawn_blocking {id}")
            });
            match result {
                Ok(v) if v == blocking_value(id) => {}
                Err(JoinError::Cancelled) if cancel_ok => {}
                other => ctx.ledger.error(format!(
                    "{who}: spawn_blocking {id} resolved {:?}",
                    other.map_err(|e| e.to_string())
                )),
            }
        }
    }
}

/// An outside thread of the mixed test: spawns (and spawns blocking work), detaches, cancels
/// and awaits until `deadline`.
fn outside_mixed(ctx: Arc<Ctx>, pools: [Arc<ThreadPool>; 2], index: usize, deadline: Instant) {
    let who = format!("outside thread {index}");
    let mut rng = Rng::new(seed(), 1 + index as u64);
    let mut kept = Kept::default();
    let mut drain_at = 16 + rng.below(64) as usize;
    let direct = [&*pools[0], &*pools[1]];
    while Instant::now() < deadline && !ctx.ledger.failed() {
        if rng.chance(5) {
            let guard = ctx.ledger.guard(EXPECT_EFFECT);
            let id = guard.id;
            let micros = if rng.chance(50) { 0 } else { rng.below(500) };
            let pool = direct[usize::from(rng.chance(25))];
            let handle = pool.spawn_blocking(move || blocking_body(guard, micros));
            ctx.ledger.stats.blocking.fetch_add(1, Relaxed);
            if rng.chance(70) {
                kept.blocking.push((id, handle));
            } else {
                handle.detach();
            }
        } else {
            kept.spawn(&ctx, &direct, &mut rng);
        }
        kept.fire_cancels(&ctx.ledger, false);
        if kept.tasks.len() >= drain_at {
            kept.drain(&ctx, &who);
            drain_at = 16 + rng.below(64) as usize;
        }
        if rng.chance(3) {
            thread::sleep(Duration::from_micros(rng.below(300)));
        }
    }
    kept.fire_cancels(&ctx.ledger, true);
    kept.drain(&ctx, &who);
}

fn sum(m: &PoolMetrics, f: impl Fn(&coro_executor::WorkerMetrics) -> u64) -> u64 {
    m.workers.iter().map(f).sum()
}

/// Whether `pool` is quiescent: no live task, nothing queued anywhere.
fn quiescent(pool: &ThreadPool) -> bool {
    let m = pool.metrics();
    m.live_tasks == 0
        && m.global_queue_depth == 0
        && m.workers.iter().all(|w| w.local_queue_depth == 0)
        && m.blocking_queue_depth == 0
}

/// Per-pool invariants of the counters; `name` says which pool.
fn check_metrics(name: &str, m: &PoolMetrics, max_blocking: usize) {
    let workers = m.workers.len();
    for (i, w) in m.workers.iter().enumerate() {
        assert!(
            w.polls >= w.next_slot_polls + w.global_first_polls,
            "{name} worker {i}: more polls from the next slot and the global queue than polls: \
             {w:?}"
        );
        assert!(
            w.global_polls >= w.global_first_polls,
            "{name} worker {i}: {w:?}"
        );
        assert!(
            w.stolen_tasks >= w.steal_operations,
            "{name} worker {i}: a steal took no task: {w:?}"
        );
    }
    assert!(
        m.max_searching_workers <= workers.div_ceil(2),
        "{name}: {} workers searched at once, more than half of {workers}: {m:?}",
        m.max_searching_workers
    );
    assert!(
        m.blocking_threads <= max_blocking,
        "{name}: {} blocking threads, above the bound {max_blocking}",
        m.blocking_threads
    );
}

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[test]
fn stress_mixed_workload_accounts_for_every_task() {
    quiet_scripted_panics();
    let duration = stress_duration();
    println!(
        "stress (mixed): seed {} (replay with CORO_STRESS_SEED={}), {duration:?}, pools of \
         {WORKERS} and 2 workers, {OUTSIDE_THREADS} outside threads",
        seed(),
        seed()
    );
    let started = Instant::now();
    let build = |workers, name: &str| {
        Arc::new(
            ThreadPool::builder()
                .worker_threads(workers)
                .thread_name(name)
                .max_blocking_threads(MAX_BLOCKING)
                .build()
                .unwrap(),
        )
    };
    let pools = [build(WORKERS, "stress-a"), build(2, "stress-b")];
    let ledger = Ledger::new();
    let (completer, completer_thread) = start_completer(Rng::new(seed(), 1000), 2000);
    let ctx = Arc::new(Ctx {
        ledger: ledger.clone(),
        pools: [pools[0].handle(), pools[1].handle()],
        completer,
        silent: Mutex::new(Vec::new()),
        phase: Phase::Mixed,
    });
    let deadline = started + duration;
    let outside: Vec<_> = (0..OUTSIDE_THREADS)
        .map(|index| {
            let (ctx, pools) = (ctx.clone(), pools.clone());
            spawn_bounded(format!("stress-outside-{index}"), move || {
                outside_mixed(ctx, pools, index, deadline)
            })
        })
        .collect();

    // Watch the pools while the outside threads work.
    let mut max_live = 0;
    while Instant::now() < deadline && !ledger.failed() && !outside.iter().any(Bounded::finished) {
        for (pool, name) in pools.iter().zip(["pool a", "pool b"]) {
            let m = pool.metrics();
            max_live = max_live.max(m.live_tasks);
            check_metrics(name, &m, MAX_BLOCKING);
        }
        thread::sleep(Duration::from_millis(20));
    }
    for thread in outside {
        thread.join(WAIT * 4);
    }
    ledger.stop.store(ledger.failed(), SeqCst);

    // Quiescence: every task finished or was cancelled, every queue is empty.
    wait_until(
        WAIT,
        || {
            format!(
                "the pools never became quiescent: a: {:?}, b: {:?}, {} futures alive; first \
                 problems: {:?}",
                pools[0].metrics(),
                pools[1].metrics(),
                ledger.alive.load(SeqCst),
                ledger.verify().1.iter().take(5).collect::<Vec<_>>()
            )
        },
        || ledger.alive.load(SeqCst) == 0 && pools.iter().all(|p| quiescent(p)),
    );
    let metrics = [pools[0].metrics(), pools[1].metrics()];
    for (m, name) in metrics.iter().zip(["pool a", "pool b"]) {
        assert_eq!(m.live_tasks, 0, "{name}: {m:?}");
        check_metrics(name, m, MAX_BLOCKING);
    }
    let stats = &ledger.stats;
    let completed = stats.completed.load(SeqCst);
    let panicked = stats.panicked.load(SeqCst);
    let yields = stats.yields.load(SeqCst);
    let polls: u64 = metrics.iter().map(PoolMetrics::total_polls).sum();
    let to_back: u64 = metrics
        .iter()
        .map(|m| sum(m, |w| w.yielded_to_back) + m.helpers.yielded_to_back)
        .sum();
    assert!(
        polls >= completed + panicked + yields,
        "{polls} polls for {completed} completed and {panicked} panicked tasks and {yields} \
         yields: {metrics:?}"
    );
    assert!(
        to_back >= yields,
        "{yields} yields but only {to_back} tasks went to the back of a queue: {metrics:?}"
    );
    assert_eq!(
        ledger.outputs_alive.load(SeqCst),
        0,
        "task outputs not dropped exactly once"
    );

    for (pool, name) in pools.into_iter().zip(["pool a", "pool b"]) {
        let pool = Arc::try_unwrap(pool).expect("the outside threads have dropped the pools");
        shutdown_bounded(pool, name);
    }
    assert_eq!(ledger.alive.load(SeqCst), 0, "futures alive after shutdown");
    ledger.stop.store(true, SeqCst);
    drop(ctx);
    let oneshots_completed = completer_thread.join(WAIT);
    ledger.assert_clean("mixed workload");
    assert!(
        (stats.handle_values.load(SeqCst) > 0 && stats.handle_panics.load(SeqCst) > 0)
            || duration < Duration::from_millis(200),
        "the workload exercised too little"
    );

    println!(
        "stress summary (mixed): seed={} secs={:.1} ids={} spawned_outside={} spawned_inside={} \
         blocking={} completed={} panicked={} cancelled={} cancel_raced={} detached={} \
         handles_ok={}+{}p yields={} sleeps={} oneshots={}/{} polls={} stolen={} parks={} \
         max_live={}",
        seed(),
        started.elapsed().as_secs_f64(),
        ledger.next_id.load(SeqCst),
        stats.spawned_outside.load(SeqCst),
        stats.spawned_inside.load(SeqCst),
        stats.blocking.load(SeqCst),
        completed,
        panicked,
        stats.cancelled.load(SeqCst),
        stats.cancel_raced.load(SeqCst),
        stats.detached.load(SeqCst),
        stats.handle_values.load(SeqCst),
        stats.handle_panics.load(SeqCst),
        yields,
        stats.sleeps.load(SeqCst),
        stats.oneshots.load(SeqCst),
        oneshots_completed,
        polls,
        metrics.iter().map(PoolMetrics::total_stolen).sum::<u64>(),
        metrics.iter().map(|m| sum(m, |w| w.parks)).sum::<u64>(),
        max_live,
    );
}

/// Totals over the rounds of the shutdown test.
#[derive(Default, Debug)]
struct RoundTotals {
    rounds: u64,
    ids: u64,
    mid_flight: u64,
    values: u64,
    panics: u64,
    cancels: u64,
    after_shutdown: u64,
}

/// An outside thread of a shutdown round: spawns through the pools' handles until `stop`,
/// before, during and after the shutdowns; once pool `p` has shut down (`shut[p]`), each spawn on
/// it must drop its future before `spawn` returns. Then awaits everything it kept.
fn outside_shutdown(
    ctx: Arc<Ctx>,
    mut rng: Rng,
    who: String,
    stop: Arc<AtomicBool>,
    shut: Arc<[AtomicBool; 2]>,
) {
    let mut kept = Kept::default();
    while !stop.load(SeqCst) {
        let shut_before = [shut[0].load(SeqCst), shut[1].load(SeqCst)];
        let (id, home) = kept.spawn(&ctx, &[], &mut rng);
        if shut_before[home] {
            let drops = ctx.ledger.drops_of(id);
            if drops != 1 {
                ctx.ledger.error(format!(
                    "{who}: task {id} spawned through the handle of shut-down pool {home} was \
                     dropped {drops} times by the time spawn returned (expected once, at once)"
                ));
            }
            ctx.ledger.stats.after_shutdown.fetch_add(1, Relaxed);
        }
        kept.fire_cancels(&ctx.ledger, false);
        thread::sleep(Duration::from_micros(rng.below(400)));
    }
    kept.fire_cancels(&ctx.ledger, true);
    kept.drain(&ctx, &who);
}

/// One round: two pools with tasks in every state (and children across the pools) are shut
/// down, one after the other, while outside threads spawn on both.
fn shutdown_round(round: u64, rng: &mut Rng, totals: &mut RoundTotals) {
    let workers = [1 + rng.below(4) as usize, 1 + rng.below(2) as usize];
    let build = |workers: usize, name: String| {
        ThreadPool::builder()
            .worker_threads(workers)
            .thread_name(name)
            .max_blocking_threads(3)
            .build()
            .unwrap()
    };
    let pool_a = build(workers[0], format!("stress-r{round}a"));
    let pool_b = build(workers[1], format!("stress-r{round}b"));
    let ledger = Ledger::new();
    let (completer, completer_thread) = start_completer(Rng::new(rng.next(), round), 4000);
    let ctx = Arc::new(Ctx {
        ledger: ledger.clone(),
        pools: [pool_a.handle(), pool_b.handle()],
        completer,
        silent: Mutex::new(Vec::new()),
        phase: Phase::Shutdown,
    });
    let who = format!("shutdown round {round} (workers {workers:?})");
    let stop = Arc::new(AtomicBool::new(false));
    let shut = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let outside: Vec<_> = (0..2)
        .map(|i| {
            let (ctx, stop, shut) = (ctx.clone(), stop.clone(), shut.clone());
            let (rng, who) = (
                Rng::new(rng.next(), i),
                format!("{who}, outside thread {i}"),
            );
            spawn_bounded(format!("stress-r{round}-outside-{i}"), move || {
                outside_shutdown(ctx, rng, who, stop, shut)
            })
        })
        .collect();

    let mut kept = Kept::default();
    for _ in 0..20 + rng.below(120) {
        kept.spawn(&ctx, &[&pool_a, &pool_b], rng);
    }
    for _ in 0..rng.below(4) {
        let guard = ledger.guard(0);
        let id = guard.id;
        let micros = 500 + rng.below(2500);
        let pool = if rng.chance(50) { &pool_a } else { &pool_b };
        let handle = pool.spawn_blocking(move || blocking_body(guard, micros));
        kept.blocking.push((id, handle));
    }
    thread::sleep(Duration::from_micros(rng.below(8000)));
    kept.fire_cancels(&ledger, false);
    totals.mid_flight += (pool_a.metrics().live_tasks + pool_b.metrics().live_tasks) as u64;

    shutdown_bounded(pool_a, &format!("{who}, pool a"));
    shut[0].store(true, SeqCst);
    thread::sleep(Duration::from_micros(rng.below(3000)));
    shutdown_bounded(pool_b, &format!("{who}, pool b"));
    shut[1].store(true, SeqCst);
    thread::sleep(Duration::from_millis(1));
    stop.store(true, SeqCst);
    for thread in outside {
        thread.join(WAIT * 2);
    }
    kept.fire_cancels(&ledger, true);
    kept.drain(&ctx, &who);

    // Both pools have shut down and nobody spawns any more: nothing may be alive.
    wait_until(
        WAIT,
        || {
            format!(
                "{who}: {} futures still alive after shutdown; first problems: {:?}",
                ledger.alive.load(SeqCst),
                ledger.verify().1.iter().take(5).collect::<Vec<_>>()
            )
        },
        || ledger.alive.load(SeqCst) == 0,
    );
    ledger.stop.store(true, SeqCst);
    assert_eq!(
        ledger.outputs_alive.load(SeqCst),
        0,
        "{who}: task outputs not dropped exactly once"
    );
    drop(ctx);
    completer_thread.join(WAIT);
    ledger.assert_clean(&who);

    let stats = &ledger.stats;
    totals.rounds += 1;
    totals.ids += ledger.next_id.load(SeqCst);
    totals.values += stats.handle_values.load(SeqCst);
    totals.panics += stats.handle_panics.load(SeqCst);
    totals.cancels += stats.handle_cancels.load(SeqCst);
    totals.after_shutdown += stats.after_shutdown.load(SeqCst);
}

#[test]
fn stress_shutdown_while_tasks_are_mid_flight() {
    quiet_scripted_panics();
    let duration = stress_duration();
    println!(
        "stress (shutdown): seed {} (replay with CORO_STRESS_SEED={}), {duration:?}",
        seed(),
        seed()
    );
    let started = Instant::now();
    let mut rng = Rng::new(seed(), 2000);
    let mut totals = RoundTotals::default();
    // At least 3 rounds, however short the duration.
    while totals.rounds < 3 || started.elapsed() < duration {
        shutdown_round(totals.rounds, &mut rng, &mut totals);
    }
    assert!(totals.cancels > 0, "no handle saw Cancelled: {totals:?}");
    println!(
        "stress summary (shutdown): seed={} secs={:.1} rounds={} ids={} live_at_shutdown={} \
         handles: values={} panics={} cancelled={} spawned_after_shutdown={}",
        seed(),
        started.elapsed().as_secs_f64(),
        totals.rounds,
        totals.ids,
        totals.mid_flight,
        totals.values,
        totals.panics,
        totals.cancels,
        totals.after_shutdown,
    );
}
