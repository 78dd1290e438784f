//! The simulated host a task runs on.
//!
//! Rule: a host is a task-local that children inherit: [`Builder::host`](crate::sim::Builder::host)
//! starts each host's future inside its scope, and the simulation's main future runs on host 0,
//! "main". Every socket a task opens belongs to its host; a task outside every scope counts as
//! "main".

use std::future::Future;

crate::task_local! {
    /// The index of the simulated host the task runs on.
    static HOST: usize;
}

/// The host the current task runs on.
pub(crate) fn current() -> usize {
    HOST.try_with(|h| *h).unwrap_or(0)
}

/// Runs `fut` on host `index`: it, and every task it starts, belongs to that host.
pub(crate) fn on<F: Future>(index: usize, fut: F) -> impl Future<Output = F::Output> {
    HOST.scope(index, fut)
}
