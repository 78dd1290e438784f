//! [`ThreadPoolBuilder`] and [`BuildError`].

use super::ThreadPool;
use std::fmt;
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
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until .build() is called"]
pub struct ThreadPoolBuilder {
    pub(crate) worker_threads: Option<usize>,
    pub(crate) thread_name: String,
    pub(crate) max_blocking_threads: usize,
    pub(crate) blocking_keep_alive: Duration,
    pub(crate) handoff_after: Duration,
}

impl Default for ThreadPoolBuilder {
    fn default() -> Self {
        ThreadPoolBuilder {
            worker_threads: None,
            thread_name: "coro-worker".to_owned(),
            max_blocking_threads: 512,
            blocking_keep_alive: Duration::from_secs(10),
            handoff_after: super::handoff::DEFAULT_HANDOFF_AFTER,
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
    /// let pool = coro_executor::ThreadPool::builder()
    ///     .blocking_keep_alive(std::time::Duration::from_millis(50))
    ///     .build()
    ///     .unwrap();
    /// # drop(pool);
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

/// Why a [`ThreadPool`] could not be built.
///
/// ```
/// let err = coro_executor::ThreadPool::new(0).unwrap_err();
/// println!("{err}"); // says what was wrong and how to fix it
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
