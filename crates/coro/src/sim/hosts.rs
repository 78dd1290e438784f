//! [`HostSpec`]: a simulated host given to [`Builder::host`](super::Builder::host): its name
//! and how to start what runs on it.
//!
//! Rule: host 0 is "main" (the simulation's main future); the others follow in the order they
//! were added, and every name is given once. A host's future is made afresh for every run (a
//! determinism check runs twice) and starts with the run, inside its host's scope.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

type Start = Rc<dyn Fn() -> Pin<Box<dyn Future<Output = ()>>>>;

/// A named host and the future it runs.
#[derive(Clone)]
pub(super) struct HostSpec {
    pub(super) name: String,
    pub(super) start: Start,
}

impl fmt::Debug for HostSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostSpec")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl HostSpec {
    pub(super) fn new<F: Future<Output = ()> + 'static>(
        name: &str,
        f: impl Fn() -> F + 'static,
        taken: &[HostSpec],
    ) -> HostSpec {
        assert!(
            name != "main" && taken.iter().all(|h| h.name != name),
            "coro::sim::Builder::host({name:?}): a host of that name exists already (\"main\" is \
             the simulation's main future): give each host its own name"
        );
        assert!(
            !name.is_empty() && !name.contains(':'),
            "coro::sim::Builder::host({name:?}): a host name is not empty and has no ':' (it \
             resolves in \"name:port\")"
        );
        HostSpec {
            name: name.to_owned(),
            start: Rc::new(move || Box::pin(f())),
        }
    }
}

/// The names of every host of a run, "main" first.
pub(super) fn names(hosts: &[HostSpec]) -> Vec<String> {
    std::iter::once("main".to_owned())
        .chain(hosts.iter().map(|h| h.name.clone()))
        .collect()
}
