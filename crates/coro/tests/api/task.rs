//! The task model: laziness, inline children, executor affinity, `block_wait`,
//! the free functions and deep chains.

use coro::executor::{ExecutorHandle, ManualExecutor};
use coro::{Task, ThreadPool, block_wait};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

fn thread_name() -> String {
    thread::current().name().unwrap_or("<unnamed>").to_owned()
}

fn pool(name: &str, workers: usize) -> ThreadPool {
    ThreadPool::builder()
        .worker_threads(workers)
        .thread_name(name)
        .build()
        .unwrap()
}

#[test]
fn creating_a_task_runs_nothing() {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let task = Task::new(async move { flag.store(true, Ordering::SeqCst) });
    thread::sleep(std::time::Duration::from_millis(20));
    assert!(
        !ran.load(Ordering::SeqCst),
        "a Task ran before it was awaited"
    );
    block_wait(task);
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn awaiting_a_child_task_runs_it_inline_without_queueing() {
    let ex = ManualExecutor::new();
    let queue_lengths = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (ex2, seen) = (ex.clone(), queue_lengths.clone());
    let root = ex.handle().spawn(async move {
        let mut total = 0;
        for i in 0..100u64 {
            total += Task::new(async move { i }).await;
            seen.lock().unwrap().push(ex2.pending());
        }
        total
    });
    // One run of the root task completes it: no child ever went through the queue.
    assert_eq!(ex.run_one() as usize, 1);
    assert_eq!(ex.pending(), 0);
    assert!(queue_lengths.lock().unwrap().iter().all(|&n| n == 0));
    assert_eq!(block_wait(root).unwrap(), 4950);
}

#[test]
fn schedule_on_runs_the_child_there_and_resumes_the_awaiter_at_home() {
    let (home, away) = (pool("home", 2), pool("away", 2));
    let away_handle = away.handle();
    let (child_ran_on, resumed_on) = block_wait(
        Task::new(async move {
            let child = Task::new(async { thread_name() })
                .schedule_on(away_handle)
                .await;
            (child, thread_name())
        })
        .schedule_on(&home),
    );
    assert!(
        child_ran_on.starts_with("away-"),
        "child ran on {child_ran_on}"
    );
    assert!(
        resumed_on.starts_with("home-"),
        "awaiter resumed on {resumed_on}"
    );
}

#[test]
fn a_child_panic_is_resumed_in_the_awaiter_on_its_own_executor() {
    let (home, away) = (pool("home", 1), pool("away", 1));
    let away_handle = away.handle();
    let outer = home.spawn(async move {
        let child = Task::new(async { panic!("child failed") }).schedule_on(away_handle);
        let caught = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(child)).await;
        (caught.is_err(), thread_name())
    });
    let (panicked, resumed_on) = block_wait(outer).unwrap();
    assert!(panicked);
    assert!(resumed_on.starts_with("home-"));
    // Uncaught, it fails the awaiter with the child's message.
    let away_handle = away.handle();
    let outer = home.spawn(async move {
        Task::new(async { panic!("child failed") })
            .schedule_on(away_handle)
            .await;
    });
    let err = block_wait(outer).unwrap_err();
    assert!(err.to_string().contains("child failed"), "{err}");
}

#[test]
fn start_queues_the_task_at_once() {
    let p = pool("eager", 1);
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = Task::new(async move { tx.send(thread_name()).unwrap() })
        .schedule_on(&p)
        .start();
    let ran_on = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("start did not run the task");
    assert!(ran_on.starts_with("eager-"));
    block_wait(handle).unwrap();
}

#[test]
fn code_after_awaiting_another_pool_runs_on_its_own_pool() {
    let (home, other) = (pool("home", 2), pool("other", 2));
    let other_handle = other.handle();
    let names = block_wait(
        Task::new(async move {
            let mut names = Vec::new();
            for _ in 0..50 {
                // Completed by a worker of `other`, which wakes us from there.
                other_handle
                    .spawn(async { thread::yield_now() })
                    .await
                    .unwrap();
                names.push(thread_name());
            }
            names
        })
        .schedule_on(&home),
    );
    assert!(names.iter().all(|n| n.starts_with("home-")), "{names:?}");
}

#[test]
fn code_after_awaiting_a_plain_thread_runs_on_its_own_pool() {
    let home = pool("home", 2);
    let names = block_wait(
        Task::new(async move {
            let mut names = Vec::new();
            for _ in 0..20 {
                let (tx, rx) = futures::channel::oneshot::channel();
                thread::spawn(move || tx.send(()).unwrap());
                rx.await.unwrap();
                names.push(thread_name());
            }
            names
        })
        .schedule_on(&home),
    );
    assert!(names.iter().all(|n| n.starts_with("home-")), "{names:?}");
}

#[test]
fn block_wait_drives_a_task_on_this_thread_which_becomes_its_executor() {
    let me = thread::current().id();
    let (inside, spawned_on, executor) = block_wait(Task::new(async move {
        let spawned_on = coro::spawn(async { thread::current().id() }).await.unwrap();
        (thread::current().id(), spawned_on, coro::current_executor())
    }));
    assert_eq!(inside, me);
    assert_eq!(
        spawned_on, me,
        "a task spawned inside block_wait ran elsewhere"
    );
    let executor = executor.expect("block_wait provides an executor");
    assert!(!executor.is_thread_pool());
}

#[test]
fn block_wait_resumes_panics() {
    let caught = std::panic::catch_unwind(|| block_wait(async { panic!("inside block_wait") }));
    let payload = caught.unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside block_wait"));
}

#[test]
fn block_wait_on_a_worker_panics_with_an_explanation() {
    let p = pool("busy", 1);
    let err = block_wait(p.spawn(async { block_wait(async {}) })).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("worker thread") && msg.contains("deadlock"),
        "{msg}"
    );
}

#[test]
// The block returns the child's handle on purpose, to look at it after block_wait returns.
#[allow(clippy::async_yields_async)]
fn unfinished_tasks_spawned_inside_block_wait_are_dropped_when_it_returns() {
    let dropped = Arc::new(AtomicUsize::new(0));
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let guard = Guard(dropped.clone());
    let handle = block_wait(async move {
        coro::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await
        })
    });
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(block_wait(handle).unwrap_err().is_cancelled());
}

#[test]
fn spawn_runs_on_the_current_pool_and_spawn_blocking_off_it() {
    let p = pool("cur", 2);
    let (spawned, blocking) = block_wait(
        Task::new(async {
            let spawned = coro::spawn(async { thread_name() }).await.unwrap();
            let blocking = coro::spawn_blocking(thread_name).await.unwrap();
            (spawned, blocking)
        })
        .schedule_on(&p),
    );
    assert!(spawned.starts_with("cur-"), "{spawned}");
    assert!(blocking.starts_with("cur-blocking"), "{blocking}");
}

#[test]
fn current_executor_is_the_tasks_executor() {
    assert!(coro::current_executor().is_none());
    let ex = ManualExecutor::new();
    let handle: ExecutorHandle = ex.handle();
    let seen = Task::new(async { coro::current_executor() })
        .schedule_on(handle.clone())
        .start();
    ex.run_until_idle();
    assert_eq!(block_wait(seen).unwrap(), Some(handle));
}

#[test]
fn yield_now_lets_queued_tasks_run_first() {
    let ex = ManualExecutor::new();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (o1, o2) = (order.clone(), order.clone());
    let a = Task::new(async move {
        o1.lock().unwrap().push("a1");
        coro::yield_now().await;
        o1.lock().unwrap().push("a2");
    })
    .schedule_on(ex.handle())
    .start();
    let b = Task::new(async move { o2.lock().unwrap().push("b") })
        .schedule_on(ex.handle())
        .start();
    ex.run_until_idle();
    assert_eq!(*order.lock().unwrap(), ["a1", "b", "a2"]);
    block_wait(a).unwrap();
    block_wait(b).unwrap();
}

#[test]
fn one_hundred_thousand_nested_synchronous_tasks_do_not_overflow() {
    // Built iteratively, awaited as one chain (folly's SynchronousCompletionInLoop).
    let mut task = Task::new(async { 0u64 });
    for _ in 0..100_000 {
        let inner = task;
        task = Task::new(async move { inner.await + 1 });
    }
    assert_eq!(block_wait(task), 100_000);
    // Dropping an unawaited chain is just as deep.
    let mut task = Task::new(async { 0u64 });
    for _ in 0..100_000 {
        let inner = task;
        task = Task::new(async move { inner.await + 1 });
    }
    drop(task);
}

fn recurse(depth: u32) -> Task<u32> {
    Task::new(async move {
        if depth == 0 {
            coro::yield_now().await;
            0
        } else {
            recurse(depth - 1).await + 1
        }
    })
}

#[test]
fn a_recursive_chain_of_ten_thousand_async_tasks_works_on_a_worker() {
    let p = pool("deep", 1);
    assert_eq!(block_wait(recurse(10_000).schedule_on(&p)), 10_000);
}

#[test]
#[should_panic(expected = "already awaited to completion")]
fn starting_a_task_after_awaiting_it_to_completion_says_so() {
    use futures::FutureExt;
    let manual = ManualExecutor::new();
    let mut task = Task::new(async { 1 }).schedule_on(manual.handle());
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    assert!(
        task.poll_unpin(&mut cx).is_pending(),
        "queued on the manual executor"
    );
    manual.run_until_idle();
    assert_eq!(task.poll_unpin(&mut cx), std::task::Poll::Ready(1));
    drop(task.start());
}
