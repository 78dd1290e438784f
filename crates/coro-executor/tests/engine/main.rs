//! The engine's behaviour tests, one module per former test file, in one test binary: each file
//! of its own binary compiled the engine's generic code again and linked every dependency again.
//! Run one file's tests with `cargo test -p coro-executor --test engine shutdown::` (the module
//! path prefixes every test's name).
//!
//! Rule: a test belongs here only if it leaves the process as it found it and looks at nothing
//! but its own pools and tasks, since the tests of every module here run side by side in one
//! process. Tests stay in a binary of their own (`tests/*.rs`) when they install a
//! `#[global_allocator]` (memory.rs), set or count something process-wide (panic hooks:
//! callback_panics.rs, stress.rs; statistics: stats_block.rs; the global timer wheel and its
//! thread: timer.rs, timer_fairness.rs, pool_timers.rs), or measure timing that busy neighbours
//! would disturb (scheduling.rs's linger rates, stall.rs's poll lengths).

#[path = "../support/mod.rs"]
mod support;

mod blocking;
mod destructor_panics;
mod executors;
mod io;
mod join_handle;
mod offer;
mod pool;
mod publication;
mod shutdown;
