//! [`ThreadPoolBuilder`] and [`BuildError`].

use super::ThreadPool;
use super::helper_threads::Helpers;
use super::shared::{Options, Remote, Shared};
use super::stall::{StallConfig, StallHook, StallReport};
use super::{monitor, queue, worker};
use crate::blocking::BlockingPool;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Configures and builds a [`ThreadPool`].
///
/// ```
/// use std::time::Duration;
///
/// let pool = coro_executor::ThreadPool::builder()
///     .worker_threads(2)
///     .thread_name("api")
///     .max_blocking_threads(16)
///     .blocking_keep_alive(Duration::from_secs(1))
///     .build()
///     .unwrap();
/// assert_eq!(pool.worker_threads(), 2);
/// ```
#[derive(Clone)]
#[must_use = "a builder does nothing until .build() is called"]
pub struct ThreadPoolBuilder {
    pub(crate) worker_threads: Option<usize>,
    pub(crate) thread_name: String,
    pub(crate) max_blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) handoff_after: Duration,
    pub(crate) stall_threshold: Option<Duration>,
    pub(crate) on_stall: Option<StallHook>,
}

impl Default for ThreadPoolBuilder {
    fn default() -> Self {
        ThreadPoolBuilder {
            worker_threads: None,
            thread_name: "coro-worker".to_owned(),
            max_blocking_threads: 512,
            blocking_keep_alive: Duration::from_secs(10),
            handoff_after: super::helper_threads::DEFAULT_HANDOFF_AFTER,
            stall_threshold: None,
            on_stall: None,
        }
    }
}

impl ThreadPoolBuilder {
    /// A builder with the defaults: one worker per available core, threads named
    /// `coro-worker-{index}`, up to 512 blocking threads kept 10 s when idle.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPoolBuilder::new().build().unwrap();
    /// assert!(pool.worker_threads() >= 1);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of worker threads (at least 1).
    ///
    /// ```
    /// let err = coro_executor::ThreadPool::builder().worker_threads(0).build().unwrap_err();
    /// assert!(err.to_string().contains("at least 1"));
    /// ```
    pub fn worker_threads(mut self, n: usize) -> Self {
        self.worker_threads = Some(n);
        self
    }

    /// Prefix of the threads' names: workers are `{name}-{index}`, blocking threads
    /// `{name}-blocking-{n}`, the monitor (it wakes an idle worker for an
    /// [`Offer`](crate::Offer) that stays posted and hands off work held up behind a long poll)
    /// `{name}-monitor`, and the helpers it starts for that `{name}-helper-{n}`.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::builder().worker_threads(1).thread_name("io").build().unwrap();
    /// let name = futures::executor::block_on(pool.spawn(async {
    ///     std::thread::current().name().unwrap().to_owned()
    /// }));
    /// assert_eq!(name.unwrap(), "io-0");
    /// ```
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Most threads the blocking pool grows to (at least 1); more blocking tasks queue.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::builder().max_blocking_threads(1).build().unwrap();
    /// let a = pool.spawn_blocking(|| 1);
    /// let b = pool.spawn_blocking(|| 2); // waits for the single blocking thread
    /// assert_eq!(futures::executor::block_on(a).unwrap() + futures::executor::block_on(b).unwrap(), 3);
    /// ```
    pub fn max_blocking_threads(mut self, n: usize) -> Self {
        self.max_blocking_threads = n;
        self
    }

    /// How long an idle blocking thread waits for work before it exits.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = coro_executor::ThreadPool::builder()
    ///     .blocking_keep_alive(Duration::from_millis(50))
    ///     .build()
    ///     .unwrap();
    /// futures::executor::block_on(pool.spawn_blocking(|| ())).unwrap();
    /// // The idle blocking thread exits 50 ms later (the default would keep it 10 s).
    /// let start = Instant::now();
    /// while pool.metrics().blocking_threads > 0 {
    ///     assert!(start.elapsed() < Duration::from_secs(5));
    ///     std::thread::sleep(Duration::from_millis(5));
    /// }
    /// ```
    pub fn blocking_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.blocking_keep_alive = keep_alive;
        self
    }

    /// How long one poll may hold up its worker before the work queued behind it is handed to
    /// the others (default 10 ms, as Go's sysmon).
    ///
    /// The pool's monitor thread watches every worker. When one poll runs this long (a
    /// `std::thread::sleep`, a blocking call, a long computation) while tasks wait in that
    /// worker's next slot or queue, the monitor moves the next-slot task to the global queue
    /// and wakes a parked worker to steal the rest; if every worker is busy it starts a helper
    /// thread (at most one per worker at a time) that runs the waiting tasks and exits once it
    /// finds none. Nothing queued waits behind a blocking poll, and no `block_in_place` is
    /// needed. `Duration::MAX` turns handoff off.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = coro_executor::ThreadPool::builder()
    ///     .worker_threads(1)
    ///     .handoff_after(Duration::from_millis(5))
    ///     .build()
    ///     .unwrap();
    /// // One worker, blocked for 100 ms by its first task; the second runs meanwhile on a helper.
    /// let started = std::time::Instant::now();
    /// let blocked = pool.spawn(async {
    ///     let quick = coro_executor::spawn(async { std::time::Instant::now() });
    ///     std::thread::sleep(Duration::from_millis(100));
    ///     quick
    /// });
    /// let quick = futures::executor::block_on(blocked).unwrap();
    /// let ran_at = futures::executor::block_on(quick).unwrap();
    /// assert!(ran_at - started < Duration::from_millis(90));
    /// ```
    pub fn handoff_after(mut self, after: Duration) -> Self {
        self.handoff_after = after;
        self
    }

    /// Reports every poll that runs longer than `threshold`, once per poll: the task's name,
    /// its async stack (where it last suspended), how long the poll has run and on which worker
    /// (tokio's unstable long-poll detection, built in). Off by default; when off it costs
    /// nothing. Reports go to the hook set with [`on_stall`](Self::on_stall), by default one
    /// line on stderr per stall. A stall is noticed by the pool's monitor, within about twice
    /// the threshold.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let pool = coro_executor::ThreadPool::builder()
    ///     .worker_threads(1)
    ///     .stall_threshold(Duration::from_millis(100))
    ///     // The default hook prints this line on stderr; here it is sent to `rx` instead.
    ///     .on_stall(move |report| tx.send(report.to_string()).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let blocking = pool.spawn(async { std::thread::sleep(Duration::from_millis(300)) });
    /// futures::executor::block_on(blocking).unwrap();
    /// // "coro: task 12 `<untraced>` has run 101 ms in one poll on coro-worker-0"
    /// let line = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    /// assert!(line.starts_with("coro: task ") && line.ends_with(" in one poll on coro-worker-0"));
    /// ```
    pub fn stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall_threshold = Some(threshold);
        self
    }

    /// The hook that receives each [`StallReport`](crate::StallReport) (see
    /// [`stall_threshold`](Self::stall_threshold), which must be set too: `build` fails
    /// otherwise). It runs on the pool's monitor thread, which also hands off work held up
    /// behind long polls, so keep it short: log, count, or send the report elsewhere. A panic
    /// in it is caught and printed, and the monitor goes on.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    ///
    /// static STALLS: AtomicUsize = AtomicUsize::new(0);
    /// let pool = coro_executor::ThreadPool::builder()
    ///     .stall_threshold(Duration::from_millis(50))
    ///     .on_stall(|report| {
    ///         STALLS.fetch_add(1, Ordering::Relaxed);
    ///         eprintln!("stalled: {} for {:?}", report.task_name(), report.elapsed());
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let blocking = pool.spawn(async { std::thread::sleep(Duration::from_millis(300)) });
    /// futures::executor::block_on(blocking).unwrap();
    /// assert_eq!(STALLS.load(Ordering::Relaxed), 1, "one report for the one long poll");
    /// ```
    pub fn on_stall(mut self, hook: impl Fn(&StallReport) + Send + Sync + 'static) -> Self {
        self.on_stall = Some(std::sync::Arc::new(hook));
        self
    }

    /// The stall setting this builder describes; an error if a hook was given without a
    /// threshold.
    pub(crate) fn stall_config(&self) -> Result<Option<StallConfig>, BuildError> {
        match (self.stall_threshold, &self.on_stall) {
            (None, None) => Ok(None),
            (None, Some(_)) => Err(BuildError {
                kind: BuildErrorKind::StallHookWithoutThreshold,
            }),
            (Some(threshold), hook) => Ok(Some(StallConfig {
                threshold,
                hook: hook.clone().unwrap_or_else(super::stall::default_hook),
            })),
        }
    }

    /// Starts the pool's worker threads.
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::builder().worker_threads(3).build().unwrap();
    /// assert_eq!(pool.metrics().workers.len(), 3);
    /// ```
    pub fn build(self) -> Result<ThreadPool, BuildError> {
        ThreadPool::from_builder(self)
    }
}

impl fmt::Debug for ThreadPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPoolBuilder")
            .field("worker_threads", &self.worker_threads)
            .field("thread_name", &self.thread_name)
            .field("max_blocking_threads", &self.max_blocking_threads)
            .field("blocking_keep_alive", &self.blocking_keep_alive)
            .field("handoff_after", &self.handoff_after)
            .field("stall_threshold", &self.stall_threshold)
            .field("on_stall", &self.on_stall.as_ref().map(|_| "<hook>"))
            .finish()
    }
}

/// Why a [`ThreadPool`] could not be built.
///
/// ```
/// let err = coro_executor::ThreadPool::new(0).unwrap_err();
/// let message = err.to_string(); // says what was wrong and how to fix it
/// assert!(message.contains("0 were requested") && message.contains("pass a positive count"));
/// ```
#[derive(Debug)]
pub struct BuildError {
    pub(crate) kind: BuildErrorKind,
}

#[derive(Debug)]
pub(crate) enum BuildErrorKind {
    NoWorkers,
    NoBlockingThreads,
    TooManyWorkers(usize),
    StallHookWithoutThreshold,
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BuildErrorKind::NoWorkers => f.write_str(
                "a thread pool needs at least 1 worker thread, but 0 were requested; \
                 pass a positive count, or use ThreadPool::builder().build() for one per core",
            ),
            BuildErrorKind::NoBlockingThreads => f.write_str(
                "max_blocking_threads must be at least 1, but 0 was requested; \
                 spawn_blocking would otherwise never run anything",
            ),
            BuildErrorKind::TooManyWorkers(n) => write!(
                f,
                "{n} worker threads were requested, more than the 65534 a pool supports; \
                 use fewer workers (one per core is usually best)"
            ),
            BuildErrorKind::StallHookWithoutThreshold => f.write_str(
                "on_stall was given a hook but no stall_threshold was set, so no stall would ever \
                 be reported; set .stall_threshold(duration) as well",
            ),
            BuildErrorKind::Spawn(e) => write!(f, "could not start a worker thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            BuildErrorKind::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

// The pool's constructors are defined here, beside the builder they go through, so that
// `mod.rs` (the pool) does not import this file, which builds it.
impl ThreadPool {
    /// A pool of `worker_threads` workers with default settings otherwise.
    ///
    /// ```
    /// let err = coro_executor::ThreadPool::new(0).unwrap_err();
    /// assert!(err.to_string().contains("at least 1 worker"));
    /// ```
    pub fn new(worker_threads: usize) -> Result<ThreadPool, BuildError> {
        Self::builder().worker_threads(worker_threads).build()
    }

    /// A builder for the other settings (thread names, the blocking pool).
    ///
    /// ```
    /// let pool = coro_executor::ThreadPool::builder().worker_threads(1).build().unwrap();
    /// assert_eq!(pool.worker_threads(), 1);
    /// ```
    pub fn builder() -> ThreadPoolBuilder {
        ThreadPoolBuilder::new()
    }

    /// Starts the pool `config` describes: its workers, then its monitor.
    fn from_builder(config: ThreadPoolBuilder) -> Result<ThreadPool, BuildError> {
        let workers = match config.worker_threads {
            Some(0) => {
                return Err(BuildError {
                    kind: BuildErrorKind::NoWorkers,
                });
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if workers > 65_534 {
            return Err(BuildError {
                kind: BuildErrorKind::TooManyWorkers(workers),
            });
        }
        let stall = config.stall_config()?;
        if config.max_blocking_threads == 0 {
            return Err(BuildError {
                kind: BuildErrorKind::NoBlockingThreads,
            });
        }
        // One queue per worker, then one per spare slot for handoff helpers (as many as workers).
        let (mut locals, remotes): (Vec<_>, Vec<_>) = (0..2 * workers)
            .map(|_| {
                let (local, steal) = queue::local();
                (local, Remote::new(steal))
            })
            .unzip();
        let spare_locals = locals.split_off(workers);
        let helpers = Helpers::new(workers, spare_locals, config.thread_name.clone());
        let blocking = BlockingPool::new(
            format!("{}-blocking", config.thread_name),
            config.max_blocking_threads,
            config.blocking_keep_alive,
        );
        let shared = Arc::new(Shared::with_spares(
            remotes.into_boxed_slice(),
            workers,
            helpers,
            blocking,
            Options {
                handoff_after: config.handoff_after,
                stall,
                thread_name: config.thread_name.clone(),
                sim_thread: None,
            },
        ));
        crate::task::registry::register(&shared.tasks);
        super::census::register(&shared);
        let mut pool = ThreadPool {
            shared: shared.clone(),
            threads: Vec::with_capacity(workers),
        };
        for (index, local) in locals.into_iter().enumerate() {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-{index}", config.thread_name))
                .spawn(move || worker::run(shared, index, local));
            match spawned {
                Ok(thread) => pool.threads.push(thread),
                // Dropping `pool` shuts down the workers already started.
                Err(e) => {
                    return Err(BuildError {
                        kind: BuildErrorKind::Spawn(e),
                    });
                }
            }
        }
        {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("{}-monitor", config.thread_name))
                .spawn(move || monitor::run(shared));
            match spawned {
                Ok(thread) => pool.threads.push(thread),
                Err(e) => {
                    return Err(BuildError {
                        kind: BuildErrorKind::Spawn(e),
                    });
                }
            }
        }
        Ok(pool)
    }
}
