//! Task-local values: inherited by children, never leaked back to parents.

use coro::{Task, ThreadPool, block_wait};

coro::task_local! {
    static REQUEST: u32;
    static USER: String;
}

#[test]
fn child_tasks_inherit_task_locals() {
    let seen = block_wait(REQUEST.scope(7, async { Task::new(async { REQUEST.get() }).await }));
    assert_eq!(seen, 7);
}

#[test]
fn schedule_on_children_and_spawned_tasks_inherit_task_locals() {
    let pool = ThreadPool::new(2).unwrap();
    let handle = pool.handle();
    let (scheduled, spawned) = block_wait(REQUEST.scope(11, async move {
        let scheduled = Task::new(async { REQUEST.get() }).schedule_on(handle).await;
        let spawned = coro::spawn(async { REQUEST.get() }).await.unwrap();
        (scheduled, spawned)
    }));
    assert_eq!((scheduled, spawned), (11, 11));
}

#[test]
fn values_are_captured_when_the_child_starts() {
    // Created outside the scope, started inside: it sees the scope.
    let child = Task::new(async { REQUEST.try_with(|v| *v).ok() });
    assert_eq!(block_wait(REQUEST.scope(3, child)), Some(3));
}

#[test]
fn a_childs_scope_never_leaks_back_to_its_parent() {
    let (inner, after) = block_wait(REQUEST.scope(1, async {
        let inner = Task::new(async { REQUEST.scope(2, async { REQUEST.get() }).await }).await;
        (inner, REQUEST.get())
    }));
    assert_eq!((inner, after), (2, 1));
}

#[test]
fn several_keys_coexist_and_missing_ones_are_errors() {
    let (r, u) = block_wait(REQUEST.scope(
        5,
        USER.scope("ann".into(), async {
            (REQUEST.get(), USER.with(|u| u.clone()))
        }),
    ));
    assert_eq!((r, u.as_str()), (5, "ann"));
    let err = block_wait(async { USER.try_with(|u| u.len()) }).unwrap_err();
    assert!(err.to_string().contains("USER"));
    let panic = std::panic::catch_unwind(|| block_wait(async { USER.get() })).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("USER") && msg.contains("scope"), "{msg}");
}

#[test]
fn collect_children_run_by_an_idle_worker_see_the_callers_locals_and_token() {
    let pool = coro::ThreadPool::new(2).unwrap();
    // CPU-bound children: the second is taken by the other worker while the first runs.
    let child = || async {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(50) {
            std::hint::spin_loop();
        }
        let token = coro::current_cancellation_token();
        (
            std::thread::current().id(),
            REQUEST.get(),
            token.can_be_cancelled(),
        )
    };
    let collect = REQUEST.scope(5, async move {
        let caller_token = coro::current_cancellation_token();
        let (a, b) = coro::collect_all!(child(), child()).await;
        (a, b, caller_token)
    });
    let (a, b, caller_token) = block_wait(Task::new(collect).schedule_on(&pool));
    assert_ne!(a.0, b.0, "both children ran on one worker");
    assert_eq!((a.1, b.1), (5, 5), "a child lost the caller's task-local");
    assert!(
        a.2 && b.2,
        "a child's token is not the collect's (cancellable) one"
    );
    assert!(!caller_token.can_be_cancelled());
}
