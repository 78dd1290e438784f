//! [`Builder`]: configures and runs one simulation (or two, to check determinism), and turns
//! how it ended into the test's result or a failure report.
//!
//! Rule: every failure panics with one report: what failed, `CORO_SIM_SEED=<n>` to replay it,
//! and the async stacks of the simulation's live tasks. The seed comes from `seed()`, else from
//! `CORO_SIM_SEED`, else from the OS (then printed before the run, so it is never lost).

use super::check::first_difference;
use super::hosts::{HostSpec, names};
use super::net::{host, world};
use super::sim_only::SimOnly;
use coro_executor::JoinHandle;
use coro_executor::sim::{Decision, SimError, Simulation};
use std::future::Future;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The environment variable that sets the seed of every simulation that is not given one.
pub(super) const SEED_VAR: &str = "CORO_SIM_SEED";

/// Configures a deterministic simulation and runs it (see the [module docs](super)).
///
/// ```
/// let total = coro::sim::Builder::new().seed(7).workers(3).run(async {
///     let parts: Vec<_> = (0..4u64).map(|i| coro::spawn(async move { i * 10 })).collect();
///     let mut total = 0;
///     for part in parts {
///         total += part.await.unwrap();
///     }
///     total
/// });
/// assert_eq!(total, 60);
/// ```
#[derive(Clone, Debug)]
pub struct Builder {
    seed: Option<u64>,
    workers: usize,
    check_determinism: bool,
    max_steps: Option<u64>,
    poll_limit: Option<Duration>,
    hosts: Vec<HostSpec>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

/// How one run ended, with what the report needs.
struct Outcome<T> {
    result: Result<T, String>,
    log: Vec<Decision>,
    fingerprint: u64,
}

impl Builder {
    /// A simulation of 2 logical workers, seeded from `CORO_SIM_SEED` or else at random.
    ///
    /// ```
    /// assert_eq!(coro::sim::Builder::new().run(async { 1 }), 1);
    /// ```
    pub fn new() -> Builder {
        Builder {
            seed: None,
            workers: 2,
            check_determinism: false,
            max_steps: None,
            poll_limit: None,
            hosts: Vec::new(),
        }
    }

    /// The seed: every scheduling decision and seeded draw follows from it. Default:
    /// `CORO_SIM_SEED` if set, else a random seed, printed to stderr before the run.
    ///
    /// ```
    /// let draw = |seed| coro::sim::Builder::new().seed(seed).run(async { coro::sim::random_u64() });
    /// assert_eq!(draw(11), draw(11));
    /// assert_ne!(draw(11), draw(12));
    /// ```
    pub fn seed(mut self, seed: u64) -> Builder {
        self.seed = Some(seed);
        self
    }

    /// The number of logical workers (default 2): the pool's workers, all stepped on the
    /// calling thread.
    ///
    /// ```
    /// let workers = coro::sim::Builder::new().seed(1).workers(4).run(async {
    ///     coro::current_executor().is_some()
    /// });
    /// assert!(workers);
    /// ```
    pub fn workers(mut self, n: usize) -> Builder {
        assert!(
            n >= 1,
            "coro::sim::Builder::workers(0): a simulation needs at least 1 logical worker"
        );
        self.workers = n;
        self
    }

    /// With `true`, [`run_with`](Self::run_with) runs the simulation twice with the same seed
    /// and compares the two sequences of scheduling decisions; on a difference it panics
    /// naming the first decision that differs, with the stacks of the tasks involved. (A run
    /// needs a fresh future each time: [`run`](Self::run) refuses the check.)
    ///
    /// ```
    /// let out = coro::sim::Builder::new().seed(3).check_determinism(true).run_with(|| async {
    ///     let a = coro::spawn(async { 1 });
    ///     a.await.unwrap() + 1
    /// });
    /// assert_eq!(out, 2);
    /// ```
    pub fn check_determinism(mut self, yes: bool) -> Builder {
        self.check_determinism = yes;
        self
    }

    /// The most scheduling steps (task polls and worker wake-ups) a run may take before it
    /// fails as a livelock, "a task that never stops yielding" (default: 50 million, a few
    /// seconds of wall time).
    ///
    /// ```
    /// let spin = std::panic::catch_unwind(|| {
    ///     coro::sim::Builder::new().seed(1).max_steps(1000).run(async {
    ///         loop {
    ///             coro::yield_now().await;
    ///         }
    ///     })
    /// });
    /// assert!(spin.is_err());
    /// ```
    pub fn max_steps(mut self, steps: u64) -> Builder {
        self.max_steps = Some(steps);
        self
    }

    /// How much wall time one poll may take (default 10 s) before the run is reported as stuck
    /// in a task that never yields (a loop without `.await`, a blocking call): a watchdog then
    /// prints the seed and the live tasks' stacks and aborts the process, since the
    /// simulation's thread cannot be unwound from outside.
    ///
    /// ```
    /// let quick = coro::sim::Builder::new()
    ///     .seed(1)
    ///     .poll_limit(std::time::Duration::from_secs(30))
    ///     .run(async { 3 });
    /// assert_eq!(quick, 3);
    /// ```
    pub fn poll_limit(mut self, limit: Duration) -> Builder {
        self.poll_limit = Some(limit);
        self
    }

    /// Adds a simulated host named `name`, which runs `f()` from the start of the run (made
    /// afresh for every run). Its tasks, and the tasks they start, belong to it: the sockets
    /// they open are its sockets, its address is [`net::lookup(name)`](super::net::lookup), and
    /// `name` resolves wherever `coro::net` takes an address. The future given to
    /// [`run`](Self::run) runs on the host `"main"`. A host's future that panics fails the run.
    ///
    /// # Panics
    ///
    /// If the name is taken (by another host, or `"main"`), empty, or contains `':'`.
    ///
    /// ```
    /// use futures::{AsyncReadExt, AsyncWriteExt};
    ///
    /// let reply = coro::sim::Builder::new()
    ///     .seed(8)
    ///     .host("echo", || async {
    ///         let listener = coro::net::TcpListener::bind("0.0.0.0:7").await.unwrap();
    ///         loop {
    ///             let (mut stream, _) = listener.accept().await.unwrap();
    ///             coro::spawn(async move {
    ///                 let mut buf = [0; 5];
    ///                 stream.read_exact(&mut buf).await.unwrap();
    ///                 stream.write_all(&buf).await.unwrap();
    ///             });
    ///         }
    ///     })
    ///     .run(async {
    ///         let mut stream = coro::net::TcpStream::connect("echo:7").await.unwrap();
    ///         assert_eq!(stream.peer_addr().unwrap().ip(), coro::sim::net::lookup("echo"));
    ///         stream.write_all(b"hello").await.unwrap();
    ///         let mut buf = [0; 5];
    ///         stream.read_exact(&mut buf).await.unwrap();
    ///         buf
    ///     });
    /// assert_eq!(&reply, b"hello");
    /// ```
    pub fn host<F: Future<Output = ()> + 'static>(
        mut self,
        name: &str,
        f: impl Fn() -> F + 'static,
    ) -> Builder {
        let host = HostSpec::new(name, f, &self.hosts);
        self.hosts.push(host);
        self
    }

    /// Runs `f`, and everything it spawns, as the simulation, on this thread; returns its
    /// output. A failure (a panic in `f`, a deadlock, a livelock, a wake-up from another
    /// thread) panics with a report that names the seed as `CORO_SIM_SEED=<n>`.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let slept = coro::sim::Builder::new().seed(5).run(async {
    ///     let start = coro::time::Instant::now();
    ///     coro::time::sleep(Duration::from_secs(3600)).await.unwrap();
    ///     start.elapsed()
    /// });
    /// assert!(slept >= Duration::from_secs(3600)); // virtual: this took milliseconds
    /// ```
    #[track_caller]
    pub fn run<F: Future + 'static>(self, f: F) -> F::Output {
        assert!(
            !self.check_determinism,
            "coro::sim::Builder::check_determinism(true) runs the simulation twice and needs a \
             fresh future for each run: call .run_with(|| async {{ ... }}) instead of .run(fut)"
        );
        let seed = self.resolve_seed();
        let outcome = self.run_once(seed, f, false);
        self.finish(outcome)
    }

    /// As [`run`](Self::run), with the future made by `make`: called once, or twice with
    /// [`check_determinism`](Self::check_determinism).
    ///
    /// ```
    /// let n = coro::sim::Builder::new().seed(2).run_with(|| async { coro::spawn(async { 5 }).await.unwrap() });
    /// assert_eq!(n, 5);
    /// ```
    #[track_caller]
    pub fn run_with<F: Future + 'static>(self, make: impl Fn() -> F) -> F::Output {
        let seed = self.resolve_seed();
        if !self.check_determinism {
            let outcome = self.run_once(seed, make(), false);
            return self.finish(outcome);
        }
        let first = self.run_once(seed, make(), true);
        if first.result.is_err() {
            return self.finish(first);
        }
        let second = self.run_once(seed, make(), true);
        if first.fingerprint != second.fingerprint || first.log != second.log {
            let difference = first_difference(&first.log, &second.log);
            panic!(
                "coro::sim: the simulation is not deterministic: two runs of seed {seed} took \
                 different scheduling decisions ({SEED_VAR}={seed} replays it).\n{difference}\n\
                 Something outside the seed decided the order: a thread the test started, \
                 std::time, OS randomness, or iteration over a randomly seeded HashMap."
            );
        }
        self.finish(first)
    }

    fn resolve_seed(&self) -> u64 {
        if let Some(seed) = self.seed {
            return seed;
        }
        if let Some(seed) = seed_from_env() {
            return seed;
        }
        let seed = coro_executor::sim::random_u64();
        eprintln!("coro::sim: random seed {seed} (replay with {SEED_VAR}={seed})");
        seed
    }

    /// One run of `f` with `seed`: its output, or the failure report. The main task's frame
    /// names the caller of `run`.
    #[track_caller]
    fn run_once<F: Future + 'static>(&self, seed: u64, f: F, log: bool) -> Outcome<F::Output> {
        let mut sim = Simulation::with_stacks(seed, self.workers, log);
        if let Some(steps) = self.max_steps {
            sim.set_max_steps(steps);
        }
        if let Some(limit) = self.poll_limit {
            sim.set_poll_limit(limit);
        }
        let network = world::install(names(&self.hosts), sim.handle());
        let mut hosts: Vec<(String, JoinHandle<SimOnly<()>>)> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let run = host::on(i + 1, (spec.start)());
                let handle = crate::Task::new(SimOnly::new(run))
                    .named(spec.name.clone())
                    .schedule_on(sim.handle())
                    .start();
                (spec.name.clone(), handle)
            })
            .collect();
        let root: JoinHandle<SimOnly<F::Output>> = crate::Task::new(SimOnly::new(host::on(0, f)))
            .named("simulation main")
            .schedule_on(sim.handle())
            .start();
        let result = loop {
            let stopped =
                sim.run_until(|| root.is_finished() || hosts.iter().any(|(_, h)| h.is_finished()));
            if let Err(error) = stopped {
                break Err(self.report(&sim, &describe(&error)));
            }
            // A host that finished: fine, unless it failed.
            if let Some(at) = hosts.iter().position(|(_, h)| h.is_finished()) {
                let (name, handle) = hosts.swap_remove(at);
                if let Err(join_error) = poll_finished(handle) {
                    break Err(self.report(&sim, &format!("host {name:?} failed: {join_error}")));
                }
                continue;
            }
            break match poll_finished(root) {
                Ok(output) => Ok(output.into_inner()),
                Err(join_error) => Err(self.report(
                    &sim,
                    &format!("the simulation's main future failed: {join_error}"),
                )),
            };
        };
        // The network goes before the pool: sockets dropped with the pool's tasks find no
        // network to send their last segments on.
        drop(hosts);
        drop(network);
        let fingerprint = sim.fingerprint();
        let log = sim.take_log();
        Outcome {
            result,
            log,
            fingerprint,
        }
    }

    fn report(&self, sim: &Simulation, cause: &str) -> String {
        let seed = sim.seed();
        format!(
            "coro::sim: the simulation failed: {cause}\n\
             seed {seed}, {} logical workers, after {} steps and {:?} of virtual time; replay \
             it with {SEED_VAR}={seed}\n{}",
            self.workers,
            sim.steps(),
            sim.elapsed(),
            sim.dump()
        )
    }

    #[track_caller]
    fn finish<T>(&self, outcome: Outcome<T>) -> T {
        match outcome.result {
            Ok(output) => output,
            Err(report) => panic!("{report}"),
        }
    }
}

fn describe(error: &SimError) -> String {
    match error {
        SimError::OutsideWake(what) => what.clone(),
        other => other.to_string(),
    }
}

/// The output of a task that has finished.
fn poll_finished<T>(handle: JoinHandle<T>) -> Result<T, coro_executor::JoinError> {
    let mut handle = handle;
    let mut cx = Context::from_waker(Waker::noop());
    match std::pin::Pin::new(&mut handle).poll(&mut cx) {
        Poll::Ready(result) => result,
        Poll::Pending => unreachable!("polled only once the task has finished"),
    }
}

/// The seed `CORO_SIM_SEED` sets, if it is set; panics if it is not a number.
pub(super) fn seed_from_env() -> Option<u64> {
    let value = std::env::var(SEED_VAR).ok()?;
    match value.trim().parse() {
        Ok(seed) => Some(seed),
        Err(_) => panic!("{SEED_VAR}={value:?} is not a seed: set it to an unsigned integer"),
    }
}
