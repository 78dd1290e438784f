//! Integration tests of the small executors and of the `Executor` trait:
//! `InlineExecutor` (runs at once on the scheduling thread, trampolines nested wake-ups so a yield
//! loop cannot overflow the stack, runs a task woken elsewhere on the waking thread),
//! `ManualExecutor` (FIFO `run_one`, `pending`, `run_until_idle`, handle identity), and
//! user-defined executors used through `ExecutorHandle::new(..)` / `ExecutorHandle::from_arc(..)`
//! and `spawn`, including one that hands its runnables on to another executor's
//! `Executor::schedule`.

use coro_executor::{
    Executor, ExecutorHandle, InlineExecutor, JoinError, JoinHandle, ManualExecutor, Runnable,
    ThreadPool, yield_now,
};
use futures::channel::oneshot;
use futures::executor::block_on;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::ThreadId;

use crate::support::{TIMEOUT, wait};

/// Receives from `rx`, sending on `pending_tx` once `rx` has returned `Pending` (so its waker is
/// registered and a later send is a wake-up).
async fn recv_after_pending<T>(
    mut rx: oneshot::Receiver<T>,
    pending_tx: mpsc::Sender<()>,
) -> Result<T, oneshot::Canceled> {
    let mut pending_tx = Some(pending_tx);
    futures::future::poll_fn(|cx| {
        let poll = Pin::new(&mut rx).poll(cx);
        if poll.is_pending() {
            if let Some(tx) = pending_tx.take() {
                tx.send(()).unwrap();
            }
        }
        poll
    })
    .await
}

fn thread_id() -> ThreadId {
    std::thread::current().id()
}

fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed>")
        .to_owned()
}

// ---------------------------------------------------------------------------------------------
// InlineExecutor

#[test]
fn inline_runs_the_task_on_the_calling_thread_before_spawn_returns() {
    let inline = ExecutorHandle::new(InlineExecutor);
    let ran_on = Arc::new(Mutex::new(None));
    let ran_on2 = ran_on.clone();
    let handle = inline.spawn(async move {
        *ran_on2.lock().unwrap() = Some(thread_id());
        5
    });
    assert_eq!(
        *ran_on.lock().unwrap(),
        Some(thread_id()),
        "the task did not run on the spawning thread before spawn returned"
    );
    assert!(handle.is_finished());
    assert_eq!(block_on(handle).unwrap(), 5);
}

#[test]
fn inline_task_yielding_100_000_times_does_not_overflow_the_stack() {
    let inline = ExecutorHandle::new(InlineExecutor);
    let yields = Arc::new(AtomicUsize::new(0));
    let yields2 = yields.clone();
    // Without the trampoline each self-wake would run the task again one frame deeper.
    let handle = inline.spawn(async move {
        for _ in 0..100_000 {
            yield_now().await;
            yields2.fetch_add(1, SeqCst);
        }
        "done"
    });
    assert!(handle.is_finished());
    assert_eq!(yields.load(SeqCst), 100_000);
    assert_eq!(block_on(handle).unwrap(), "done");
}

#[test]
fn inline_task_spawned_from_an_inline_task_runs_after_the_outer_one_returns() {
    let inline = ExecutorHandle::new(InlineExecutor);
    let order = Arc::new(Mutex::new(Vec::new()));
    let inner_slot: Arc<Mutex<Option<JoinHandle<()>>>> = Arc::default();
    let (inline2, order2, slot2) = (inline.clone(), order.clone(), inner_slot.clone());
    let outer = inline.spawn(async move {
        order2.lock().unwrap().push("outer start");
        let order3 = order2.clone();
        let inner = inline2.spawn(async move {
            order3.lock().unwrap().push("inner");
        });
        assert!(
            !inner.is_finished(),
            "nested inline task ran inside its parent's poll"
        );
        order2.lock().unwrap().push("outer end");
        *slot2.lock().unwrap() = Some(inner);
    });
    assert!(outer.is_finished());
    block_on(outer).unwrap();
    let inner = inner_slot.lock().unwrap().take().unwrap();
    assert!(inner.is_finished());
    assert_eq!(
        *order.lock().unwrap(),
        ["outer start", "outer end", "inner"]
    );
}

#[test]
fn inline_task_woken_from_another_thread_runs_on_the_waking_thread() {
    let inline = ExecutorHandle::new(InlineExecutor);
    let (tx, rx) = oneshot::channel::<()>();
    let handle = inline.spawn(async move {
        let before = thread_id();
        rx.await.unwrap();
        (before, thread_id())
    });
    assert!(!handle.is_finished());
    let waker = std::thread::spawn(move || {
        tx.send(()).unwrap();
        thread_id()
    });
    let waker_id = waker.join().unwrap();
    assert!(handle.is_finished());
    let (before, after) = block_on(handle).unwrap();
    assert_eq!(before, thread_id());
    assert_eq!(
        after, waker_id,
        "the woken task did not run on the waking thread"
    );
}

// ---------------------------------------------------------------------------------------------
// ManualExecutor

#[test]
fn manual_run_one_runs_tasks_in_fifo_order() {
    let ex = ManualExecutor::new();
    let order = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..5)
        .map(|i| {
            let order = order.clone();
            ex.handle()
                .spawn(async move { order.lock().unwrap().push(i) })
        })
        .collect();
    assert!(order.lock().unwrap().is_empty(), "ran before run_one");
    for expected in 0..5 {
        assert!(ex.run_one());
        assert_eq!(order.lock().unwrap().last(), Some(&expected));
    }
    assert!(!ex.run_one());
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3, 4]);
    assert!(handles.iter().all(JoinHandle::is_finished));

    // Wake-ups queue behind what is already there too.
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = oneshot::channel::<()>();
    let o = order.clone();
    ex.handle()
        .spawn(async move {
            rx.await.unwrap();
            o.lock().unwrap().push("woken");
        })
        .detach();
    assert_eq!(ex.run_until_idle(), 1);
    let o = order.clone();
    ex.handle()
        .spawn(async move { o.lock().unwrap().push("queued first") })
        .detach();
    tx.send(()).unwrap();
    assert_eq!(ex.run_until_idle(), 2);
    assert_eq!(*order.lock().unwrap(), ["queued first", "woken"]);
}

#[test]
fn manual_pending_counts_queued_tasks() {
    let ex = ManualExecutor::new();
    assert_eq!(ex.pending(), 0);
    let handle = ex.handle();
    for _ in 0..3 {
        handle.spawn(async {}).detach();
    }
    assert_eq!(ex.pending(), 3);
    assert!(ex.run_one());
    assert_eq!(ex.pending(), 2);
    assert_eq!(ex.run_until_idle(), 2);
    assert_eq!(ex.pending(), 0);

    // A task waiting on a wake-up is not pending; the wake-up (from another thread) queues it.
    let (tx, rx) = oneshot::channel::<u8>();
    let waiting = handle.spawn(async move { rx.await.unwrap() });
    assert_eq!(ex.run_until_idle(), 1);
    assert_eq!(ex.pending(), 0);
    std::thread::spawn(move || tx.send(9).unwrap())
        .join()
        .unwrap();
    assert_eq!(ex.pending(), 1);
    assert_eq!(ex.run_until_idle(), 1);
    assert_eq!(block_on(waiting).unwrap(), 9);
}

#[test]
fn manual_run_until_idle_counts_tasks_spawned_by_tasks() {
    let ex = ManualExecutor::new();
    let handle = ex.handle();
    let h = handle.clone();
    let root = handle.spawn(async move {
        let h2 = h.clone();
        // A child that spawns a grandchild, and a child that yields once (two runs).
        h.spawn(async move { h2.spawn(async {}).detach() }).detach();
        h.spawn(async { yield_now().await }).detach();
    });
    // root, child 1, child 2, grandchild, child 2 again after its yield.
    assert_eq!(ex.run_until_idle(), 5);
    assert_eq!(ex.run_until_idle(), 0);
    assert!(root.is_finished());
}

#[test]
fn manual_runs_tasks_on_the_thread_that_calls_run() {
    let ex = ManualExecutor::new();
    let handle = ex.handle().spawn(async { thread_id() });
    let runner = ex.clone();
    let runner_id = std::thread::spawn(move || {
        assert_eq!(runner.run_until_idle(), 1);
        thread_id()
    })
    .join()
    .unwrap();
    assert_eq!(block_on(handle).unwrap(), runner_id);
}

#[test]
fn handles_are_equal_exactly_when_they_share_an_executor() {
    let ex = ManualExecutor::new();
    assert_eq!(ex.handle(), ex.handle());
    assert_eq!(ex.handle(), ex.clone().handle());
    assert_eq!(ex.handle().clone(), ex.handle());
    let other = ManualExecutor::new();
    assert_ne!(ex.handle(), other.handle());

    let inline = ExecutorHandle::new(InlineExecutor);
    assert_eq!(inline.clone(), inline);
    assert_ne!(inline, ExecutorHandle::new(InlineExecutor));
    assert_ne!(inline, ex.handle());

    let pool = ThreadPool::new(1).unwrap();
    let other_pool = ThreadPool::new(1).unwrap();
    assert_eq!(pool.handle(), pool.handle());
    assert_eq!(pool.handle(), ExecutorHandle::from(&pool));
    assert_ne!(pool.handle(), other_pool.handle());
    assert_ne!(pool.handle(), ex.handle());
}

/// Sets its flag when dropped.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn dropping_a_manual_executor_cancels_its_queued_tasks() {
    let ex = ManualExecutor::new();
    let dropped = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(dropped.clone());
    let handle = ex.handle().spawn(async move {
        let _guard = guard;
    });
    assert_eq!(ex.pending(), 1);
    // Nobody can run the task any more: the Executor contract says it must then be dropped.
    drop(ex);
    assert!(
        matches!(
            wait("task of a dropped ManualExecutor", handle),
            Err(JoinError::Cancelled)
        ),
        "the task of a dropped ManualExecutor did not resolve Cancelled"
    );
    assert!(dropped.load(SeqCst), "the queued future was never dropped");
}

// ---------------------------------------------------------------------------------------------
// A user-defined executor

/// Runs tasks on one dedicated thread that drains a std channel.
struct ChannelExecutor {
    tx: Mutex<mpsc::Sender<Runnable>>,
    scheduled: Arc<AtomicUsize>,
}

impl Executor for ChannelExecutor {
    fn schedule(&self, runnable: Runnable) {
        self.scheduled.fetch_add(1, SeqCst);
        // A closed channel drops the runnable, which cancels the task.
        let _ = self.tx.lock().unwrap().send(runnable);
    }
}

/// Starts a `ChannelExecutor` whose thread is called `name`; returns it and its count of
/// scheduled runnables. The thread ends when the last task and handle are gone.
fn channel_executor(name: &str) -> (Arc<dyn Executor>, Arc<AtomicUsize>) {
    let (tx, rx) = mpsc::channel::<Runnable>();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            for runnable in rx {
                runnable.run();
            }
        })
        .unwrap();
    let scheduled = Arc::new(AtomicUsize::new(0));
    let executor = ChannelExecutor {
        tx: Mutex::new(tx),
        scheduled: scheduled.clone(),
    };
    (Arc::new(executor), scheduled)
}

#[test]
fn user_defined_executor_runs_spawned_tasks_on_its_own_thread() {
    let (executor, scheduled) = channel_executor("chan-exec");
    let handle = ExecutorHandle::from_arc(executor.clone());
    assert!(!handle.is_thread_pool());
    assert_eq!(handle, ExecutorHandle::from_arc(executor));
    let (tx, rx) = oneshot::channel::<u32>();
    let (polled_tx, polled_rx) = mpsc::channel();
    let join = handle.spawn(async move {
        let before = thread_name();
        let v = recv_after_pending(rx, polled_tx).await.unwrap();
        (before, thread_name(), v)
    });
    polled_rx.recv_timeout(TIMEOUT).unwrap();
    // Woken from the test thread: the task still resumes on the executor's thread.
    tx.send(7).unwrap();
    let (before, after, v) = wait("task on a channel executor", join).unwrap();
    assert_eq!(
        (before.as_str(), after.as_str(), v),
        ("chan-exec", "chan-exec", 7)
    );
    assert_eq!(scheduled.load(SeqCst), 2, "one spawn and one wake-up");

    // Panics are caught there too, and the thread keeps serving.
    let join = handle.spawn(async {
        if std::hint::black_box(true) {
            panic!("inside a user executor");
        }
    });
    assert!(wait("panicking task", join).unwrap_err().is_panic());
    assert_eq!(
        wait("task after a panic", handle.spawn(async { thread_name() })).unwrap(),
        "chan-exec"
    );
}

/// Hands every runnable to another executor through its `Executor::schedule`.
struct Forward {
    to: Arc<dyn Executor>,
    forwarded: Arc<AtomicUsize>,
}

impl Executor for Forward {
    fn schedule(&self, runnable: Runnable) {
        self.forwarded.fetch_add(1, SeqCst);
        self.to.schedule(runnable);
    }
}

fn forward_to(to: Arc<dyn Executor>) -> (ExecutorHandle, Arc<AtomicUsize>) {
    let forwarded = Arc::new(AtomicUsize::new(0));
    let handle = ExecutorHandle::new(Forward {
        to,
        forwarded: forwarded.clone(),
    });
    (handle, forwarded)
}

#[test]
fn user_defined_executor_can_hand_runnables_to_another_executor() {
    // To another user-defined executor: the task runs on (and resumes on) that one's thread.
    let (chan, scheduled) = channel_executor("sched-target");
    let (via, forwarded) = forward_to(chan.clone());
    assert_ne!(via, ExecutorHandle::from_arc(chan));
    let (tx, rx) = oneshot::channel::<()>();
    let (polled_tx, polled_rx) = mpsc::channel();
    let join = via.spawn(async move {
        let first = thread_name();
        recv_after_pending(rx, polled_tx).await.unwrap();
        (first, thread_name())
    });
    polled_rx.recv_timeout(TIMEOUT).unwrap();
    tx.send(()).unwrap();
    let (first, second) = wait("forwarded task", join).unwrap();
    assert_eq!(
        (first.as_str(), second.as_str()),
        ("sched-target", "sched-target")
    );
    assert_eq!(forwarded.load(SeqCst), 2, "one spawn and one wake-up");
    assert_eq!(scheduled.load(SeqCst), 2);

    // To the InlineExecutor: runs at once, on the scheduling thread.
    let (via, forwarded) = forward_to(Arc::new(InlineExecutor));
    let join = via.spawn(async { thread_id() });
    assert!(join.is_finished());
    assert_eq!(forwarded.load(SeqCst), 1);
    assert_eq!(block_on(join).unwrap(), thread_id());
}
