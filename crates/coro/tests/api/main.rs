//! coro's behaviour tests, one module per former test file, in one test binary: each file of
//! its own binary compiled coro's generic code again and linked every dependency again, which
//! made the tests most of a cold `cargo test`. Run one file's tests with
//! `cargo test -p coro --test api channel::` (the module path prefixes every test's name).
//!
//! Rule: a test belongs here only if it leaves the process as it found it and looks at nothing
//! but its own work, since the tests of every module here run side by side in one process.
//! Tests stay in a binary of their own (`tests/*.rs`, `tests/sim/`) when they install a
//! `#[global_allocator]` (allocations.rs, soak.rs), set or count something process-wide (panic
//! hooks: callback_panics.rs, trace.rs's child; signal handlers: signal.rs; the process's
//! threads: net_threads.rs; every task of the process: snapshot.rs, trace.rs), compile with
//! trybuild (macros.rs), or bound the wall time of CPU-bound work that busy neighbours would
//! stretch (collect.rs's and parallel.rs's children running in parallel).

#[path = "../support/mod.rs"]
mod support;

mod cancel;
mod channel;
mod collect_any;
mod detach_on_cancel;
mod latch_barrier;
mod locals;
mod net;
mod outcomes;
mod retry;
mod scope;
mod select;
mod semaphore;
mod shared;
mod shared_mutex;
mod stream;
mod task;
mod time;
mod timeout_no_discard;
