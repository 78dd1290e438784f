//! `coro::sim`'s tests, one module per former test file, in one test binary (see
//! `tests/api/main.rs` for why files share binaries). Run one file's tests with
//! `cargo test -p coro --test sim sim_soak::`; replay a seed with
//! `CORO_SIM_SEED=<n> cargo test -p coro --test sim <test name>`.
//!
//! Apart from `tests/api`: simulations step their logical workers on the test's own thread and
//! some bound their wall time (an hour of virtual sleeps in under a second), which the
//! multi-threaded stress tests there would stretch.

mod sim;
mod sim_net;
mod sim_soak;
