//! Helpers shared by the integration tests: bounded waits that turn a hang into a failure naming
//! what hung (never a performance assertion).

// Each test binary uses its own subset.
#![allow(dead_code)]

use coro_executor::{JoinError, JoinHandle};
use futures::executor::block_on;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Generous bound that turns a hang into a failure; never a performance assertion.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Awaits `handle` on a helper thread; fails the test, naming `what`, if it hangs.
pub fn wait<T: Send + 'static>(what: &str, handle: JoinHandle<T>) -> Result<T, JoinError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(block_on(handle));
    });
    rx.recv_timeout(TIMEOUT)
        .unwrap_or_else(|_| panic!("hung: {what} did not resolve within {TIMEOUT:?}"))
}

/// Polls `cond` until it holds; fails the test, naming `what`, if it never does.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "hung: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
