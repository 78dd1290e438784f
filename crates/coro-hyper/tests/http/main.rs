//! coro-hyper's tests, one module per former test file, in one test binary: each file of its own
//! binary compiled hyper's and coro's generic code again and linked every dependency again. Run
//! one file's tests with `cargo test -p coro-hyper --test http graceful::` (the module path
//! prefixes every test's name).
//!
//! Rule: a test belongs here only if it leaves the process as it found it and looks at nothing
//! but its own servers and clients, since the tests of every module here run side by side in one
//! process. Tests stay in a binary of their own (`tests/*.rs`) when they change something
//! process-wide (accept_errors.rs lowers the descriptor limit) or count every task of the
//! process (tls_bad_input.rs).

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod client;
mod graceful;
mod http1;
mod http2;
mod sim_net;
mod sim_timer;
mod tls;
