//! Seeded randomness for code under test: [`random_u64`], [`buggify`] and [`is_simulated`].
//!
//! Rule: inside a simulation every value comes from the seed's stream (and is logged as a
//! decision); outside, from the OS, and a fault point never fires.

use super::state;

/// Whether the current thread runs a deterministic simulation ([`Simulation`](super::Simulation)).
///
/// ```
/// use coro_executor::sim::{Simulation, is_simulated};
///
/// assert!(!is_simulated());
/// let mut sim = Simulation::new(1, 1);
/// let inside = sim.handle().spawn(async { is_simulated() });
/// sim.run_until(|| inside.is_finished()).unwrap();
/// assert!(futures::executor::block_on(inside).unwrap());
/// ```
#[inline]
pub fn is_simulated() -> bool {
    state::is_active()
}

/// A random `u64`: drawn from the seed inside a simulation (the same seed gives the same
/// values), from OS randomness outside.
///
/// ```
/// use coro_executor::sim::{Simulation, random_u64};
///
/// fn draws(seed: u64) -> u64 {
///     let mut sim = Simulation::new(seed, 2);
///     let task = sim.handle().spawn(async { random_u64() });
///     sim.run_until(|| task.is_finished()).unwrap();
///     futures::executor::block_on(task).unwrap()
/// }
/// assert_eq!(draws(5), draws(5));
/// assert_ne!(random_u64(), random_u64());
/// ```
pub fn random_u64() -> u64 {
    state::draw("random_u64").unwrap_or_else(|| {
        use std::hash::{BuildHasher, RandomState};
        RandomState::new().hash_one(std::time::SystemTime::now())
    })
}

/// A seeded fault point: inside a simulation, true with `probability` (drawn from the seed);
/// outside a simulation, always false, so fault-injection code can stay in production builds.
///
/// ```
/// use coro_executor::sim::{Simulation, buggify};
///
/// assert!(!buggify(1.0)); // never outside a simulation
/// let mut sim = Simulation::new(3, 1);
/// let task = sim.handle().spawn(async { (0..1000).filter(|_| buggify(0.25)).count() });
/// sim.run_until(|| task.is_finished()).unwrap();
/// let fired = futures::executor::block_on(task).unwrap();
/// assert!((150..350).contains(&fired), "{fired}");
/// ```
pub fn buggify(probability: f64) -> bool {
    assert!(
        (0.0..=1.0).contains(&probability),
        "buggify(probability): {probability} is not a probability; pass a value in 0.0..=1.0"
    );
    state::with(|sim| {
        let draw = sim.draw("buggify");
        // The top 53 bits as a uniform value in [0, 1).
        ((draw >> 11) as f64 / (1u64 << 53) as f64) < probability
    })
    .unwrap_or(false)
}
