//! Scopes and bounded pools: `AsyncScope`.

use coro::cancel::{CancellationSource, Cancelled};
use coro::time::sleep;
use coro::{AsyncScope, ScopeError, ScopeStatus, Task, ThreadPool, block_wait};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

fn run<T: Send + 'static>(pool: &ThreadPool, fut: impl Future<Output = T> + Send + 'static) -> T {
    block_wait(Task::new(fut).schedule_on(pool))
}

/// Polls `cond` until it holds, failing after 5 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "timed out: {what}"
        );
        sleep(Duration::from_millis(1)).await.unwrap();
    }
}

/// A gate children wait on: `open` releases them.
#[derive(Clone, Default)]
struct Gate(Arc<AtomicBool>);

impl Gate {
    async fn wait(&self) {
        until("gate", || self.0.load(SeqCst)).await;
    }
    fn open(&self) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn spawn_fails_with_full_when_bounded_and_closed_after_close() {
    let pool = ThreadPool::new(2).unwrap();
    run(&pool, async {
        let scope = AsyncScope::bounded(1);
        let gate = Gate::default();
        let g = gate.clone();
        let first = scope.spawn(async move { g.wait().await }).unwrap();
        let err = scope.spawn(async {}).unwrap_err();
        assert_eq!(err, ScopeError::Full);
        assert!(err.to_string().contains("spawn_wait"), "{err}");
        gate.open();
        first.await.unwrap();
        scope.join().await;
        scope.spawn(async {}).unwrap().await.unwrap();
        scope.close();
        let err = scope.spawn(async {}).unwrap_err();
        assert_eq!(err, ScopeError::Closed);
        assert!(err.to_string().contains("closed"), "{err}");
        assert_eq!(
            scope.spawn_wait(async {}).await.unwrap_err(),
            ScopeError::Closed
        );
    });
}

#[test]
fn spawn_wait_waits_for_a_slot_and_admits_waiters_in_fifo_order() {
    let pool = ThreadPool::new(4).unwrap();
    run(&pool, async {
        let scope = Arc::new(AsyncScope::bounded(1));
        let gate = Gate::default();
        let g = gate.clone();
        scope.spawn(async move { g.wait().await }).unwrap().detach();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..3 {
            let (scope2, order2) = (scope.clone(), order.clone());
            waiters.push(coro::spawn(async move {
                let o = order2.clone();
                scope2
                    .spawn_wait(async move { o.lock().unwrap().push(i) })
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }));
            // Let waiter `i` queue before the next one starts.
            let s = scope.clone();
            until("waiter queued", move || s.status().waiting == i + 1).await;
        }
        sleep(Duration::from_millis(20)).await.unwrap();
        assert!(order.lock().unwrap().is_empty(), "a waiter ran while full");
        assert_eq!(
            scope.status(),
            ScopeStatus {
                running: 1,
                waiting: 3,
                capacity: Some(1)
            }
        );
        gate.open();
        for w in waiters {
            w.await.unwrap();
        }
        scope.join().await;
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    });
}

#[test]
fn raising_the_capacity_admits_waiters_at_once() {
    let pool = ThreadPool::new(4).unwrap();
    run(&pool, async {
        let scope = Arc::new(AsyncScope::bounded(1));
        let gate = Gate::default();
        let g = gate.clone();
        scope.spawn(async move { g.wait().await }).unwrap().detach();
        let started = Arc::new(AtomicUsize::new(0));
        let mut waiters = Vec::new();
        for _ in 0..2 {
            let (scope2, started2) = (scope.clone(), started.clone());
            waiters.push(coro::spawn(async move {
                scope2
                    .spawn_wait(async move { started2.fetch_add(1, SeqCst) })
                    .await
                    .unwrap()
                    .detach();
            }));
        }
        let s = scope.clone();
        until("two waiters", move || s.status().waiting == 2).await;
        scope.set_capacity(3);
        let st = started.clone();
        until("admitted after set_capacity", move || st.load(SeqCst) == 2).await;
        assert_eq!(scope.status().capacity, Some(3));
        gate.open();
        for w in waiters {
            w.await.unwrap();
        }
        scope.join().await;
        assert_eq!(
            scope.status(),
            ScopeStatus {
                running: 0,
                waiting: 0,
                capacity: Some(3)
            }
        );
    });
}

#[test]
fn status_counts_running_and_waiting() {
    let pool = ThreadPool::new(2).unwrap();
    run(&pool, async {
        let scope = Arc::new(AsyncScope::bounded(2));
        assert_eq!(
            scope.status(),
            ScopeStatus {
                running: 0,
                waiting: 0,
                capacity: Some(2)
            }
        );
        let gate = Gate::default();
        for _ in 0..2 {
            let g = gate.clone();
            scope.spawn(async move { g.wait().await }).unwrap().detach();
        }
        let s = scope.clone();
        let waiter = coro::spawn(async move { s.spawn_wait(async {}).await.unwrap().detach() });
        let s = scope.clone();
        until("queued", move || s.status().waiting == 1).await;
        assert_eq!(
            scope.status(),
            ScopeStatus {
                running: 2,
                waiting: 1,
                capacity: Some(2)
            }
        );
        gate.open();
        waiter.await.unwrap();
        scope.join().await;
        assert_eq!(scope.status().running, 0);
        assert_eq!(AsyncScope::new().status().capacity, None);
    });
}

#[test]
fn join_waits_for_children_spawned_while_joining() {
    let pool = ThreadPool::new(4).unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    run(&pool, async move {
        let scope = Arc::new(AsyncScope::new());
        let (s, d2, d3) = (scope.clone(), d.clone(), d.clone());
        scope
            .spawn(async move {
                sleep(Duration::from_millis(20)).await.unwrap();
                // Spawned while the parent awaits `join`: join must wait for it too.
                s.spawn(async move {
                    sleep(Duration::from_millis(50)).await.unwrap();
                    d2.fetch_add(1, SeqCst);
                })
                .unwrap()
                .detach();
                d3.fetch_add(1, SeqCst);
            })
            .unwrap()
            .detach();
        scope.join().await;
        assert_eq!(d.load(SeqCst), 2);
    });
    assert_eq!(done.load(SeqCst), 2);
}

#[test]
fn join_resumes_the_first_panic_after_all_children_finish() {
    let pool = ThreadPool::new(4).unwrap();
    let slow_done = Arc::new(AtomicBool::new(false));
    let sd = slow_done.clone();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run(&pool, async move {
            let scope = AsyncScope::new();
            let first = scope.spawn(async { panic!("first") }).unwrap();
            // `first` has panicked (and the scope recorded it) before `second` starts.
            until("first finished", || first.is_finished()).await;
            // The scope keeps the original payload; the handle reports a copy of the message.
            let copy = first.await.unwrap_err().try_into_panic().unwrap();
            assert_eq!(copy.downcast_ref::<String>().unwrap(), "first");
            scope.spawn(async { panic!("second") }).unwrap().detach();
            scope
                .spawn(async move {
                    sleep(Duration::from_millis(60)).await.unwrap();
                    sd.store(true, SeqCst);
                })
                .unwrap()
                .detach();
            scope.join().await;
        })
    }));
    let payload = result.expect_err("join must resume the child panic");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"first"));
    assert!(
        slow_done.load(SeqCst),
        "join resumed before all children finished"
    );
}

#[test]
fn cancel_and_join_cancels_sleeping_children_promptly() {
    let pool = ThreadPool::new(2).unwrap();
    run(&pool, async {
        let scope = AsyncScope::new();
        let handles: Vec<_> = (0..3)
            .map(|_| scope.spawn(sleep(Duration::from_secs(60))).unwrap())
            .collect();
        sleep(Duration::from_millis(10)).await.unwrap();
        let start = Instant::now();
        scope.cancel_and_join().await;
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(scope.token().is_cancellation_requested());
        for h in handles {
            assert_eq!(h.await.unwrap(), Err(Cancelled));
        }
    });
}

#[test]
fn children_see_the_scope_token_merged_with_the_spawners() {
    let pool = ThreadPool::new(2).unwrap();
    let source = CancellationSource::new();
    let spawner_token = source.token();
    let saw_scope = block_wait(
        Task::new(async move {
            let scope = AsyncScope::new();
            let a = scope.token();
            let child = scope
                .spawn(async { coro::current_cancellation_token() })
                .unwrap()
                .await
                .unwrap();
            scope.join().await;
            assert!(!child.is_cancellation_requested());
            scope.cancel_and_join().await;
            let scope_first = child.is_cancellation_requested();
            assert_ne!(child, a, "the child's token must include the spawner's too");
            scope_first
        })
        .with_cancellation(spawner_token.clone())
        .schedule_on(&pool),
    );
    assert!(saw_scope, "scope cancellation must reach the child token");
    // A second scope: cancelling the spawner's source reaches its child.
    let seen = block_wait(
        Task::new(async move {
            let scope = AsyncScope::new();
            let h = scope
                .spawn(async { coro::current_cancellation_token() })
                .unwrap();
            let token = h.await.unwrap();
            assert!(!token.is_cancellation_requested());
            source.request_cancellation();
            token.is_cancellation_requested()
        })
        .with_cancellation(spawner_token)
        .schedule_on(&pool),
    );
    assert!(seen, "spawner cancellation must reach the child token");
}

#[test]
fn dropping_an_unjoined_scope_drops_its_children() {
    let pool = ThreadPool::new(2).unwrap();
    let flags: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::default()).collect();
    let f = flags.clone();
    let handles = run(&pool, async move {
        let scope = AsyncScope::new();
        let handles: Vec<_> = f
            .iter()
            .map(|flag| {
                let guard = SetOnDrop(flag.clone());
                scope
                    .spawn(async move {
                        let _guard = guard;
                        std::future::pending::<()>().await
                    })
                    .unwrap()
            })
            .collect();
        sleep(Duration::from_millis(10)).await.unwrap();
        drop(scope);
        handles
    });
    let start = Instant::now();
    while !flags.iter().all(|f| f.load(SeqCst)) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "children not dropped"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    for h in handles {
        assert!(block_wait(h).is_err());
    }
}

#[test]
fn dropping_a_waiting_spawn_wait_lets_the_next_waiter_in() {
    let pool = ThreadPool::new(4).unwrap();
    run(&pool, async {
        let scope = Arc::new(AsyncScope::bounded(1));
        let gate = Gate::default();
        let g = gate.clone();
        scope.spawn(async move { g.wait().await }).unwrap().detach();
        let dropped_ran = Arc::new(AtomicBool::new(false));
        let (s, dr) = (scope.clone(), dropped_ran.clone());
        let first =
            coro::spawn(async move { s.spawn_wait(async move { dr.store(true, SeqCst) }).await });
        let s = scope.clone();
        until("first queued", move || s.status().waiting == 1).await;
        let s = scope.clone();
        let second = coro::spawn(async move { s.spawn_wait(async { 2 }).await.unwrap().await });
        let s = scope.clone();
        until("second queued", move || s.status().waiting == 2).await;
        first.cancel();
        let s = scope.clone();
        until("first left", move || s.status().waiting == 1).await;
        gate.open();
        let outcome = coro::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the next waiter was not let in");
        assert_eq!(outcome.unwrap().unwrap(), 2);
        scope.join().await;
        assert!(!dropped_ran.load(SeqCst), "the dropped waiter's child ran");
        assert_eq!(scope.status().running, 0);
    });
}

#[test]
fn a_dropped_waiter_passes_on_a_slot_it_was_given() {
    let scope = AsyncScope::bounded(1);
    block_wait(async {
        let gate = Gate::default();
        let g = gate.clone();
        scope.spawn(async move { g.wait().await }).unwrap().detach();
        let mut first = Box::pin(scope.spawn_wait(async { 1 }));
        let mut second = Box::pin(scope.spawn_wait(async { 2 }));
        // Queue both, in order.
        assert!(futures::poll!(first.as_mut()).is_pending());
        assert!(futures::poll!(second.as_mut()).is_pending());
        gate.open();
        until("slot granted to first", || scope.status().waiting == 1).await;
        drop(first); // granted, never taken: must pass the slot on
        let handle = coro::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("the slot given to the dropped waiter was not passed on");
        assert_eq!(handle.unwrap().await.unwrap(), 2);
        scope.join().await;
    });
}

#[test]
#[should_panic(expected = "capacity must be at least 1")]
fn bounded_zero_panics_with_a_message() {
    let _ = AsyncScope::bounded(0);
}

/// A scope child that is a named `Task` shows under its own name in task dumps (not as the
/// type of the wrapper the scope puts around it).
#[test]
fn a_named_task_child_keeps_its_name_in_dumps() {
    let pool = ThreadPool::new(1).unwrap();
    let scope = Arc::new(AsyncScope::new());
    let gate = Arc::new(coro::sync::Baton::new());
    let child = {
        let gate = gate.clone();
        Task::new(async move { gate.wait().await }).named("refresh_profile")
    };
    let handle = scope.spawn(child).unwrap();
    let start = Instant::now();
    let names = loop {
        let names: Vec<String> = coro::trace::dump_all()
            .tasks()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        if names.iter().any(|n| n == "refresh_profile") || start.elapsed() > Duration::from_secs(5)
        {
            break names;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(
        names.iter().any(|n| n == "refresh_profile"),
        "no task named refresh_profile in the dump: {names:?}"
    );
    gate.post();
    block_wait(handle).unwrap();
    run(&pool, async move { scope.join().await });
}
