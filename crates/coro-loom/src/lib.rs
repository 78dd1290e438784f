//! Internal to coro: one switch between `std`, `loom` and `shuttle` for every synchronisation
//! primitive of `coro-executor` and `coro`. Not a public API: nothing here is meant for users,
//! and it may change with any release.
//!
//! Concurrency code imports `coro_loom::...` (in `coro-executor`: `crate::loom::...`, a private
//! re-export) instead of `std::sync::...`, so that the models built with `RUSTFLAGS="--cfg loom"`
//! (or `--cfg shuttle`) explore the same code that ships. `UnsafeCell` is wrapped so that every build
//! uses loom's closure-based access API.
//!
//! Two checkers, because neither covers the other:
//! - loom (`--cfg loom`) explores interleavings exhaustively up to a preemption bound and models
//!   the weak orderings (Relaxed/Acquire/Release), but only approximates sequential consistency:
//!   it runs `SeqCst` loads, stores and read-modify-writes as `AcqRel` (a documented limitation)
//!   and a `fence(SeqCst)` as a join of every such fence's view, not the C++ rules in full.
//!   The idle/notify protocol and the task list's unlisting are Dekker pairs that rest on
//!   exactly those;
//! - shuttle (`--cfg shuttle`) samples schedules at random, with no preemption bound, and runs
//!   every atomic operation in one total order, i.e. as `SeqCst`; so a `fence(SeqCst)` gets the
//!   total order it promises (shuttle makes the fence itself a no-op: every access around it is
//!   already sequentially consistent). It does not model weaker orderings, nor check
//!   `UnsafeCell` accesses for races: loom does both.
//!
//! `model` and `model_exhaustive` (in those two builds only) run one model under whichever
//! checker the build has.

// The shim offers the full set, whichever subset the crates use at the moment; its re-exports
// of std, loom and shuttle carry their own docs.
#![allow(unused_imports, dead_code, missing_docs)]

#[cfg(all(loom, shuttle))]
compile_error!("`--cfg loom` and `--cfg shuttle` are two separate builds: pass one of them");

/// `std::cell::UnsafeCell` with loom's access API (every build but loom's).
#[cfg(not(loom))]
mod cell {
    /// `std::cell::UnsafeCell` with loom's access API.
    #[derive(Debug)]
    pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(not(any(loom, shuttle)))]
mod imp {
    pub mod sync {
        pub use std::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub mod atomic {
            pub use std::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub mod thread {
        pub use std::thread::{JoinHandle, Thread, ThreadId, current, spawn, yield_now};
    }

    pub use std::thread_local;

    pub use super::cell::UnsafeCell;

    /// A hint inside spin loops; loom needs an explicit yield instead.
    #[inline(always)]
    pub fn spin_loop() {
        std::hint::spin_loop();
    }
}

#[cfg(loom)]
mod imp {
    pub mod sync {
        pub use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub mod atomic {
            pub use loom::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub mod thread {
        pub use loom::thread::{JoinHandle, Thread, ThreadId, current, spawn, yield_now};
    }

    pub use loom::thread_local;

    pub use loom::cell::UnsafeCell;

    pub fn spin_loop() {
        loom::thread::yield_now();
    }

    /// Runs the model `f` under loom with the environment's settings (`LOOM_MAX_PREEMPTIONS`,
    /// ...), allowing long single-threaded setups (filling a 256-slot ring is ~1500 loom
    /// operations).
    pub fn model<F>(f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        check(loom::model::Builder::new(), f);
    }

    /// [`model`] without a preemption bound, whatever `LOOM_MAX_PREEMPTIONS` says: every
    /// interleaving, for models small enough to explore them all in a fraction of a second.
    pub fn model_exhaustive<F>(f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = None;
        check(builder, f);
    }

    /// Runs `f` under `builder`, with room for long single-threaded setups (see [`model`]).
    fn check<F>(mut builder: loom::model::Builder, f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        builder.max_branches = builder.max_branches.max(20_000);
        builder.check(f);
    }
}

/// Shuttle's primitives. Shuttle has all that the crate uses but `UnsafeCell` (a plain cell, as
/// in the std build: shuttle runs every model thread as a coroutine on the test's OS thread and
/// switches only inside its own primitives, so an access is never torn, and shuttle checks no
/// cell accesses anyway; loom does). `fence` is shuttle's, a no-op that is sound there because
/// shuttle runs every atomic operation as `SeqCst`. Deps built without the cfg (concurrent-queue,
/// async-task) keep std's atomics: their operations contain no switch point, so each runs as one
/// atomic step, which is a linearisable queue's contract.
#[cfg(all(shuttle, not(loom)))]
mod imp {
    pub mod sync {
        pub use shuttle::sync::{Arc, Condvar, Mutex, MutexGuard};

        pub mod atomic {
            pub use shuttle::sync::atomic::{
                AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
            };
        }
    }

    pub mod thread {
        pub use shuttle::thread::{JoinHandle, Thread, ThreadId, current, spawn, yield_now};
    }

    pub use shuttle::thread_local;

    pub use super::cell::UnsafeCell;

    /// Shuttle switches threads only inside its primitives: a spin loop must yield to it.
    pub fn spin_loop() {
        shuttle::thread::yield_now();
    }

    use shuttle::scheduler::{
        PctScheduler, RandomScheduler, ReplayScheduler, Schedule, Scheduler, Task, TaskId,
    };

    /// Schedules per model and scheduler when `SHUTTLE_ITERATIONS` is not set: CI's count (the
    /// long mode, `.ci/long`, sets its own).
    pub const DEFAULT_ITERATIONS: usize = 5000;

    /// The schedulers' seed when `SHUTTLE_SEED` is not set: fixed, so that a run is reproducible.
    pub const DEFAULT_SEED: u64 = 0x636f_726f_5f73_6875; // "coro_shu"

    /// The PCT runs' bug depth: each run makes `PCT_DEPTH - 1` priority changes at random steps,
    /// so a bug that needs two preemptions at the right places (loom's CI bound) has a fair
    /// chance in every run, however long the schedule.
    const PCT_DEPTH: usize = 3;

    /// Runs the model `f` under shuttle: `SHUTTLE_ITERATIONS` schedules (default
    /// [`DEFAULT_ITERATIONS`]) under a uniformly random scheduler, then as many under PCT
    /// (random priorities, [`PCT_DEPTH`] - 1 random priority changes: it finds a thread delayed
    /// through many steps far more often), both seeded by `SHUTTLE_SEED` (default
    /// [`DEFAULT_SEED`]). A failure prints its `failing schedule`; running the one model again
    /// with `SHUTTLE_REPLAY=<that schedule>` replays it alone. (The same seed and count also
    /// replay the whole run.)
    pub fn model<F>(f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let mut config = shuttle::Config::new();
        // Shuttle warns once that it runs Relaxed/Acquire/Release as SeqCst: known, and the point
        // of this checker (loom covers the weak orderings).
        config.silence_warnings = true;
        // Model threads build pools, queues and task lists: more room than shuttle's 60 KiB.
        config.stack_size = 256 * 1024;
        let f = std::sync::Arc::new(f);
        let run = |scheduler: Box<dyn Scheduler + Send>| {
            let f = f.clone();
            shuttle::Runner::new(scheduler, config.clone()).run(move || f());
        };
        if let Ok(schedule) = std::env::var("SHUTTLE_REPLAY") {
            return run(Box::new(ReplayScheduler::new_from_encoded(schedule.trim())));
        }
        let iterations = env_or("SHUTTLE_ITERATIONS", DEFAULT_ITERATIONS);
        let seed = env_or("SHUTTLE_SEED", DEFAULT_SEED);
        run(Box::new(RandomScheduler::new_from_seed(seed, iterations)));
        run(Box::new(Pct {
            inner: PctScheduler::new_from_seed(seed, PCT_DEPTH, iterations),
            executions: 0,
            chose: false,
        }));
    }

    /// [`model`]: a random scheduler has no preemption bound to lift, every schedule is a
    /// possible draw.
    pub fn model_exhaustive<F>(f: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        model(f);
    }

    /// Shuttle's PCT scheduler, which calibrates on its first schedule (oldest thread first) and
    /// panics ("test closure did not exercise any concurrency") if that one never had two
    /// threads to choose from: it then has no step to put a priority change at. Such a model
    /// (one that spawns and joins at once, or spawns nothing) ends its PCT run there; the random
    /// run covers it.
    struct Pct {
        inner: PctScheduler,
        executions: usize,
        /// Some step of the schedules so far had two runnable threads.
        chose: bool,
    }

    impl Scheduler for Pct {
        fn new_execution(&mut self) -> Option<Schedule> {
            if self.executions == 1 && !self.chose {
                return None;
            }
            self.executions += 1;
            self.inner.new_execution()
        }

        fn next_task(
            &mut self,
            runnable: &[&Task],
            current: Option<TaskId>,
            is_yielding: bool,
        ) -> Option<TaskId> {
            self.chose |= runnable.len() > 1;
            self.inner.next_task(runnable, current, is_yielding)
        }

        fn next_u64(&mut self) -> u64 {
            self.inner.next_u64()
        }
    }

    /// The environment variable `name` parsed, or `default` if it is not set.
    fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
        match std::env::var(name) {
            Ok(value) => value
                .trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}={value:?} is not a valid number")),
            Err(_) => default,
        }
    }
}

pub use imp::*;

/// Declares a thread-local with a `const` initialiser: `std::thread_local!` in a normal build;
/// under `--cfg loom` or `--cfg shuttle` the checker's own `thread_local!`, one value per model
/// thread (model threads are coroutines on one OS thread, so a std thread-local would be shared
/// by all of them).
///
/// ```
/// coro_loom::thread_local_const! {
///     /// A counter per thread.
///     static COUNT: std::cell::Cell<u32> = std::cell::Cell::new(0);
/// }
/// COUNT.with(|c| c.set(c.get() + 1));
/// assert_eq!(COUNT.with(std::cell::Cell::get), 1);
/// ```
#[macro_export]
macro_rules! thread_local_const {
    ($(#[$attr:meta])* static $name:ident: $ty:ty = $init:expr;) => {
        #[cfg(not(any(loom, shuttle)))]
        ::std::thread_local! { $(#[$attr])* static $name: $ty = const { $init }; }
        #[cfg(any(loom, shuttle))]
        $crate::thread_local! { $(#[$attr])* static $name: $ty = $init; }
    };
}
