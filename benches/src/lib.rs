//! Benchmarks for coro; the code lives in `benches/` (see `README.md`).
//!
//! Cargo needs a library or binary target in every package, so this empty library exists only
//! to hold the `[[bench]]` targets. Run them with
//! `cargo bench -p coro-benches --bench rt_multi_threaded`.
