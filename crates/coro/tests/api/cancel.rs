//! Cancellation primitives: sources, tokens, merging, callbacks, waiting.

use coro::cancel::{CancellationCallback, CancellationSource, CancellationToken};
use coro::{Task, block_wait};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

fn counter() -> (Arc<AtomicUsize>, impl FnOnce() + Send + 'static) {
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    (count, move || {
        c.fetch_add(1, SeqCst);
    })
}

#[test]
fn request_cancellation_reports_the_call_that_did_it() {
    let source = CancellationSource::new();
    let token = source.token();
    assert!(!token.is_cancellation_requested());
    assert!(source.request_cancellation());
    assert!(!source.request_cancellation());
    assert!(token.is_cancellation_requested() && source.is_cancellation_requested());
}

#[test]
fn tokens_are_equal_by_shared_state() {
    let (a, b) = (CancellationSource::new(), CancellationSource::new());
    assert_eq!(a.token(), a.token());
    assert_ne!(a.token(), b.token());
    assert_eq!(CancellationToken::none(), CancellationToken::default());
}

#[test]
fn can_be_cancelled_turns_false_when_every_source_is_gone() {
    let source = CancellationSource::new();
    let clone = source.clone();
    let token = source.token();
    drop(source);
    assert!(
        token.can_be_cancelled(),
        "a clone of the source is still alive"
    );
    drop(clone);
    assert!(!token.can_be_cancelled());
    let cancelled = CancellationSource::new();
    let token = cancelled.token();
    cancelled.request_cancellation();
    drop(cancelled);
    assert!(token.can_be_cancelled(), "stays true once requested");
}

#[test]
fn merge_ignores_uncancellable_tokens_and_duplicates() {
    let (a, b) = (CancellationSource::new(), CancellationSource::new());
    assert_eq!(
        CancellationToken::merge([a.token(), CancellationToken::none()]),
        a.token()
    );
    assert_eq!(CancellationToken::merge([a.token(), a.token()]), a.token());
    assert_eq!(CancellationToken::merge([]), CancellationToken::none());
    let dead = CancellationSource::new().token(); // its source is already gone
    assert_eq!(CancellationToken::merge([dead, b.token()]), b.token());
    let merged = CancellationToken::merge([a.token(), b.token()]);
    assert_ne!(merged, a.token());
    assert!(merged.can_be_cancelled());
    a.request_cancellation();
    assert!(merged.is_cancellation_requested());
}

#[test]
fn a_merged_token_cannot_be_cancelled_once_all_inputs_are_dead() {
    let (a, b) = (CancellationSource::new(), CancellationSource::new());
    let merged = CancellationToken::merge([a.token(), b.token()]);
    drop(a);
    assert!(merged.can_be_cancelled());
    drop(b);
    assert!(!merged.can_be_cancelled());
}

#[test]
fn callbacks_run_once_on_the_requesting_thread() {
    let source = CancellationSource::new();
    let ran_on = Arc::new(Mutex::new(Vec::new()));
    let r = ran_on.clone();
    let _cb = CancellationCallback::new(&source.token(), move || {
        r.lock().unwrap().push(std::thread::current().id())
    });
    let requester = std::thread::spawn(move || {
        source.request_cancellation();
        source.request_cancellation();
        std::thread::current().id()
    })
    .join()
    .unwrap();
    assert_eq!(*ran_on.lock().unwrap(), [requester]);
}

#[test]
fn a_callback_on_a_cancelled_token_runs_inside_new() {
    let source = CancellationSource::new();
    source.request_cancellation();
    let (count, f) = counter();
    let _cb = CancellationCallback::new(&source.token(), f);
    assert_eq!(count.load(SeqCst), 1);
}

#[test]
fn dropping_a_callback_deregisters_it() {
    let source = CancellationSource::new();
    let (count, f) = counter();
    drop(CancellationCallback::new(&source.token(), f));
    source.request_cancellation();
    assert_eq!(count.load(SeqCst), 0);
}

#[test]
fn dropping_a_callback_waits_while_it_runs_on_another_thread() {
    let source = CancellationSource::new();
    let started = Arc::new(Barrier::new(2));
    let finished = Arc::new(AtomicUsize::new(0));
    let (s, f) = (started.clone(), finished.clone());
    let cb = CancellationCallback::new(&source.token(), move || {
        s.wait();
        std::thread::sleep(Duration::from_millis(100));
        f.store(1, SeqCst);
    });
    let requester = std::thread::spawn(move || source.request_cancellation());
    started.wait();
    drop(cb);
    assert_eq!(
        finished.load(SeqCst),
        1,
        "drop returned while the callback was still running"
    );
    requester.join().unwrap();
}

#[test]
fn a_callback_may_drop_itself() {
    let source = CancellationSource::new();
    let slot: Arc<Mutex<Option<CancellationCallback>>> = Arc::new(Mutex::new(None));
    let (s, (count, f)) = (slot.clone(), counter());
    let cb = CancellationCallback::new(&source.token(), move || {
        f();
        drop(s.lock().unwrap().take());
    });
    *slot.lock().unwrap() = Some(cb);
    source.request_cancellation(); // would deadlock if the self-drop waited for itself
    assert_eq!(count.load(SeqCst), 1);
}

#[test]
fn cancelled_completes_when_requested_and_never_for_none() {
    let source = CancellationSource::new();
    let token = source.token();
    let waiter = std::thread::spawn(move || block_wait(token.cancelled()));
    std::thread::sleep(Duration::from_millis(20));
    source.request_cancellation();
    waiter.join().unwrap();
    let mut never = std::pin::pin!(CancellationToken::none().cancelled());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(std::future::Future::poll(never.as_mut(), &mut cx).is_pending());
}

#[test]
fn tokens_flow_from_a_task_to_its_children_first_token_wins() {
    let (outer, inner) = (CancellationSource::new(), CancellationSource::new());
    let inner_token = inner.token();
    let (inherited, own) = block_wait(
        Task::new(async move {
            let inherited = Task::new(async { coro::current_cancellation_token() }).await;
            let own = Task::new(async { coro::current_cancellation_token() })
                .with_cancellation(inner_token)
                .await;
            (inherited, own)
        })
        .with_cancellation(outer.token()),
    );
    assert_eq!(inherited, outer.token());
    assert_eq!(
        own,
        inner.token(),
        "an explicit token is not merged with the awaiter's"
    );
}
