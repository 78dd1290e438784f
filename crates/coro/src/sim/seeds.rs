//! [`run_seeds`]: the same simulated test under many seeds, stopping at the first failure.
//!
//! Rule: `CORO_SIM_SEED`, when set, overrides the range (a replay runs exactly the failing
//! seed); otherwise each seed of the range runs in turn, and the first failure's report (which
//! names its seed) is the panic.

use super::builder::{Builder, seed_from_env};
use std::future::Future;
use std::ops::Range;

/// Runs the simulation `f` makes once per seed in `seeds` (2 logical workers each), in order;
/// the first failure panics with its report, which says `CORO_SIM_SEED=<n>`. With
/// `CORO_SIM_SEED` set, runs that seed only.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// static RUNS: AtomicUsize = AtomicUsize::new(0);
/// coro::sim::run_seeds(0..20, || async {
///     RUNS.fetch_add(1, Ordering::Relaxed);
///     let child = coro::spawn(async { coro::sim::random_u64() % 10 });
///     assert!(child.await.unwrap() < 10);
/// });
/// # let replay = std::env::var("CORO_SIM_SEED").is_ok();
/// assert!(replay || RUNS.load(Ordering::Relaxed) == 20);
/// ```
#[track_caller]
pub fn run_seeds<F>(seeds: Range<u64>, f: impl Fn() -> F)
where
    F: Future<Output = ()> + 'static,
{
    if let Some(seed) = seed_from_env() {
        Builder::new().seed(seed).run_with(&f);
        return;
    }
    for seed in seeds {
        Builder::new().seed(seed).run_with(&f);
    }
}
