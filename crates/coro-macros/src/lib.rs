//! Entry-point attribute macros for [coro](https://docs.rs/coro): `#[coro::main]`,
//! `#[coro::test]` and `#[coro::task]`.
//!
//! Use them through the `coro` crate, which re-exports them; this crate holds only their
//! expansion code.
