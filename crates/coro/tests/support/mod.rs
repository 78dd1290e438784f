//! Helpers shared by the integration tests: drop guards, panic messages, short durations.

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Sets its flag when dropped (also when the future holding it completes).
pub struct SetOnDrop(pub Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

/// Counts its drops.
pub struct CountDrop(pub Arc<AtomicUsize>);

impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// `fut`, counting into `suspended` the first time it returns `Pending` (so a test knows the
/// waiter is really waiting).
pub fn noting_suspension<F: Future>(
    fut: F,
    suspended: Arc<AtomicUsize>,
) -> impl Future<Output = F::Output> {
    let mut fut = Box::pin(fut);
    let mut noted = false;
    std::future::poll_fn(move |cx| {
        let poll = fut.as_mut().poll(cx);
        if poll.is_pending() && !noted {
            noted = true;
            suspended.fetch_add(1, SeqCst);
        }
        poll
    })
}

/// Waits (polling) until `cond` holds, panicking after 10 s.
pub fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
