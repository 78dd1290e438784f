//! Internal, for coro's own tests and benches: throwaway servers of the real thing (Debian's
//! `postgresql` and `redis-server`), each started on a free port of 127.0.0.1 in a temporary
//! directory, and stopped (and its directory removed) when its handle drops, also when the
//! test that holds it panics.
//!
//! Rule: a server that is not installed is a skip, not a failure: `start()` prints
//! `skipped: postgres not installed` and returns `None`, so `cargo test` passes on a machine
//! without them. Set `CORO_TEST_SERVERS=require` (CI does) to make a missing server a panic, so
//! that a green CI always means the tests ran. A server that is installed but fails to start
//! is always a panic, with its log.
//!
//! ```no_run
//! let Some(redis) = coro_test_servers::Redis::start() else { return };
//! println!("redis on {}", redis.url());
//! ```

mod postgres;
mod process;
mod redis;

pub use postgres::Postgres;
pub use redis::Redis;
