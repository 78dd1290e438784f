//! Loom models of the cancellation protocol (`state.rs`): requesting cancellation racing the
//! registration, deregistration and waiting that other threads do.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro --lib --release --target-dir target/loom -- loom_
//! ```
//!
//! - `loom_request_races_register_and_drop`: a callback registered and then dropped on one
//!   thread while another requests cancellation runs at most once, and never after its drop
//!   has returned (the drop waits for a callback running elsewhere).
//! - `loom_request_before_register_runs_inline`: a callback registered after the request
//!   returned runs inside `new`.
//! - `loom_request_races_waiter`: a `cancelled()` future racing the request always completes
//!   (no lost wake-up), whichever registers first.

use super::{CancellationCallback, CancellationSource};
use coro_loom::sync::Arc;
use coro_loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use coro_loom::thread;

#[test]
fn loom_request_races_register_and_drop() {
    loom::model(|| {
        let source = CancellationSource::new();
        let token = source.token();
        let requester = thread::spawn(move || {
            source.request_cancellation();
        });
        let runs = Arc::new(AtomicUsize::new(0));
        let running = Arc::new(AtomicBool::new(false));
        let (r, busy) = (runs.clone(), running.clone());
        let callback = CancellationCallback::new(&token, move || {
            busy.store(true, SeqCst);
            r.fetch_add(1, SeqCst);
            busy.store(false, SeqCst);
        });
        drop(callback);
        assert!(
            !running.load(SeqCst),
            "the callback was still running after its drop returned"
        );
        let runs_at_drop = runs.load(SeqCst);
        requester.join().unwrap();
        assert!(runs_at_drop <= 1);
        assert_eq!(
            runs.load(SeqCst),
            runs_at_drop,
            "the callback ran after it was dropped"
        );
    });
}

#[test]
fn loom_request_before_register_runs_inline() {
    loom::model(|| {
        let source = CancellationSource::new();
        let token = source.token();
        let requester = thread::spawn(move || {
            source.request_cancellation();
        });
        requester.join().unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let _callback = CancellationCallback::new(&token, move || r.store(true, SeqCst));
        assert!(
            ran.load(SeqCst),
            "a callback on a cancelled token must run inside new"
        );
    });
}

#[test]
fn loom_request_races_waiter() {
    loom::model(|| {
        let source = CancellationSource::new();
        let token = source.token();
        let requester = thread::spawn(move || {
            source.request_cancellation();
        });
        loom::future::block_on(token.cancelled());
        assert!(token.is_cancellation_requested());
        requester.join().unwrap();
    });
}
