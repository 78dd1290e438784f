//! The engine's view of the std/loom/shuttle switch (the `coro-loom` crate), and where its
//! concurrency models live.
//!
//! Run them (and only them) with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro-executor --lib --release --target-dir target/loom -- loom_
//! RUSTFLAGS="--cfg shuttle" \
//!     cargo test -p coro-executor --lib --release --target-dir target/shuttle -- loom_
//! ```
//!
//! Under `--cfg loom` every primitive behind `crate::loom` (and concurrent-queue's atomics) is
//! loom's, so the models explore the code that ships, not a copy: the park/notify models run
//! the pool's own `Worker` (`worker::run_model`). Loom runs model threads as coroutines on one
//! OS thread, so the engine's thread-locals (the current worker, the running task, the task
//! list's shard hint) are declared with `coro_loom::thread_local_const!`, which gives each model
//! thread its own under either checker.
//!
//! Under `--cfg shuttle` every primitive behind `crate::loom` is shuttle's instead, and every
//! model runs unchanged (`crate::loom::model` picks the checker; shuttle too runs model
//! threads as coroutines on one OS thread, so a model's own std thread-locals are still shared
//! by its threads and private to its test). Shuttle runs each model for `SHUTTLE_ITERATIONS`
//! schedules under a uniformly random scheduler and as many under PCT (default 5000 each, CI's
//! count; `.ci/long` runs 1,000,000), seeded by `SHUTTLE_SEED` (fixed by default, so a run is
//! reproducible); a failure prints its schedule, which `SHUTTLE_REPLAY=<schedule>` replays (see
//! `crate::loom::model`). What shuttle adds:
//! - sequential consistency: shuttle runs every atomic operation in one total order, so the
//!   `fence(SeqCst)`s of the idle/notify protocol (`Idle::notify_should_wake` against
//!   `Shared::notify_if_work_pending`) and of the task list's unlisting (`TaskList::remove`
//!   against `TaskList::visit`), which loom only approximates (it runs `SeqCst` accesses as
//!   `AcqRel`, and its `fence(SeqCst)` is a join of views), are modelled as sequentially
//!   consistent: the Dekker pairs' logic is checked with the guarantee the code relies on,
//!   with no false alarm and no missed interleaving from the approximation;
//! - no preemption bound: a schedule may switch threads at every atomic operation, lock and
//!   yield, however many times (loom's CI run allows 2 preemptions).
//!
//! What it does not do, which is why loom stays: it does not model orderings weaker than
//! `SeqCst` (a missing Acquire/Release goes unseen), it samples schedules rather than
//! enumerating them (so the *exhaustive* models below are exhaustive under loom only), and it
//! does not check `UnsafeCell` accesses: where a model says that loom fails an access racing
//! another (queue slots, the offer slot's pointer, `loom_tasks_remove_waits_for_visitor`'s
//! task data), under shuttle only the values the model asserts on can catch the race. The deps
//! built without the cfg (concurrent-queue's global queue, async-task's task state) keep std's
//! atomics under shuttle, so each of their operations is one step there.
//!
//! The models live beside the code they check, one file per subject: `<area>/loom_<subject>.rs`
//! (the run queue, parker, park/notify protocol, offers and shutdown order in `pool/`, the task
//! list in `task/`, a snapshot against a poll in `trace/`, timers in `time/`). They use no loom API beyond this module's, so each runs
//! under both checkers, except the timer models, which drive loom's simulated clock and stay
//! loom-only.
//!
//! A failing model either panics with the broken assertion or reports `deadlock` (a lost
//! wake-up: every thread blocked); loom's deadlock panic aborts the test binary, so run a single
//! model by name to see which (shuttle's fails only that model's test).

pub(crate) use coro_loom::*;
