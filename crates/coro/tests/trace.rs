//! Async stack traces: the current stack, its text form, and the panic hook.

use coro::{Task, block_wait};

#[coro::task]
async fn leaf() -> coro::trace::AsyncStack {
    coro::trace::current_stack()
}

#[coro::task]
async fn middle() -> coro::trace::AsyncStack {
    leaf().await
}

#[test]
fn current_stack_lists_awaiting_tasks_innermost_first() {
    let stack = block_wait(Task::new(async { middle().await }).named("root"));
    let names: Vec<_> = stack.frames().iter().map(|f| f.name()).collect();
    assert_eq!(names, ["leaf", "middle", "root"]);
    // Each frame's location is where that task was created: `leaf()` is called in `middle`.
    assert!(
        stack
            .frames()
            .iter()
            .all(|f| f.location().file().ends_with("trace.rs"))
    );
}

#[test]
fn current_stack_displays_one_line_per_frame() {
    let stack = block_wait(Task::new(async { leaf().await }).named("root"));
    let text = stack.to_string();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("  at leaf (") && lines[0].contains("trace.rs:"),
        "{text}"
    );
    assert!(lines[1].starts_with("  at root ("), "{text}");
}

#[test]
fn the_stack_of_a_spawned_task_starts_at_the_spawned_task() {
    let pool = coro::ThreadPool::new(1).unwrap();
    let stack = block_wait(
        Task::new(async { coro::spawn(async { leaf().await }).await.unwrap() }).schedule_on(&pool),
    );
    let names: Vec<_> = stack.frames().iter().map(|f| f.name().to_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[0], "leaf");
    // A spawned task is named after its future's type unless named.
    assert!(names[1].contains("trace"), "{names:?}");
}

#[test]
fn outside_tasks_the_stack_is_empty() {
    assert!(coro::trace::current_stack().frames().is_empty());
}

const CHILD: &str = "CORO_TRACE_PANIC_CHILD";

#[coro::task]
async fn exploding_leaf() {
    panic!("kaboom in the leaf");
}

/// Runs in a child process (see below): panics inside a chain of named tasks with the hook on.
#[test]
fn panic_hook_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    coro::trace::install_panic_hook();
    block_wait(Task::new(async { exploding_leaf().await }).named("request_handler"));
}

#[test]
fn the_panic_hook_prints_the_async_stack_after_the_message() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "panic_hook_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let message = stderr
        .find("kaboom in the leaf")
        .expect("the panic message is printed");
    let stack = stderr
        .find("async stack")
        .expect("the async stack is printed");
    assert!(
        message < stack,
        "the stack comes after the message:\n{stderr}"
    );
    let leaf = stderr
        .find("at exploding_leaf (")
        .expect("the leaf frame is printed");
    let root = stderr
        .find("at request_handler (")
        .expect("the root frame is printed");
    assert!(leaf < root, "innermost first:\n{stderr}");
}

mod dump {
    use coro::executor::{ExecutorHandle, InlineExecutor, ManualExecutor};
    use coro::trace::{TaskState, dump_all};
    use coro::{Task, ThreadPool, block_wait};
    use futures::FutureExt;
    use futures::channel::oneshot;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::{Duration, Instant};

    #[coro::task]
    async fn wait_for(rx: oneshot::Receiver<()>) {
        rx.await.ok();
    }

    #[coro::task]
    async fn handler(rx: oneshot::Receiver<()>, child_rx: oneshot::Receiver<()>) {
        let child = coro::spawn(Task::new(async move { wait_for(child_rx).await }).named("child"));
        wait_for(rx).await;
        child.await.unwrap();
    }

    #[coro::task]
    async fn wait_again(rx: oneshot::Receiver<()>) {
        rx.await.ok();
    }

    /// Polls `dump_all` until `pred` holds for some task, or panics after 10 s.
    fn dump_until(
        what: &str,
        pred: impl Fn(&coro::trace::TaskSnapshot) -> bool,
    ) -> coro::trace::TaskDump {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let dump = dump_all();
            if dump.tasks().iter().any(&pred) {
                return dump;
            }
            assert!(
                Instant::now() < deadline,
                "never saw {what} in:\n{dump}\n{:#?}",
                dump.tasks()
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    #[test]
    fn a_frame_in_the_place_of_a_finished_one_is_published_as_itself() {
        // `wait_again` is `wait_for`'s twin: its task is allocated where `wait_for`'s just
        // was, so a dump that recognised a chain by where its frames live alone would keep
        // showing `wait_for`.
        let pool = ThreadPool::new(1).unwrap();
        let (first_tx, first_rx) = oneshot::channel();
        let (second_tx, second_rx) = oneshot::channel();
        let root = Task::new(async move {
            wait_for(first_rx).await;
            wait_again(second_rx).await;
        })
        .named("sequence")
        .schedule_on(&pool)
        .start();
        let inner = |t: &coro::trace::TaskSnapshot, name: &str| {
            t.name() == "sequence" && t.frames().first().map(|f| f.name()) == Some(name)
        };
        dump_until("the first wait", |t| inner(t, "wait_for"));
        first_tx.send(()).unwrap();
        dump_until("the second wait", |t| inner(t, "wait_again"));
        second_tx.send(()).unwrap();
        block_wait(root).unwrap();
    }

    /// A task waiting for `first`, then for `second`.
    #[coro::task]
    async fn wait_twice(first: oneshot::Receiver<()>, second: oneshot::Receiver<()>) {
        first.await.ok();
        second.await.ok();
    }

    /// Polls `task` once, in the task calling this.
    async fn poll_once<T>(task: &mut Task<T>) {
        futures::future::poll_fn(|cx| {
            let _ = task.poll_unpin(cx);
            std::task::Poll::Ready(())
        })
        .await;
    }

    /// A task named `name` on a manual executor, whose body `body` makes from a `wait_twice`
    /// child.
    struct WithChild {
        name: &'static str,
        manual: ManualExecutor,
        first: Option<oneshot::Sender<()>>,
        second: oneshot::Sender<()>,
        join: coro::JoinHandle<()>,
    }

    impl WithChild {
        fn new<F>(name: &'static str, body: impl FnOnce(Task<()>) -> F) -> WithChild
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            let manual = ManualExecutor::new();
            let (first, first_rx) = oneshot::channel();
            let (second, second_rx) = oneshot::channel();
            let join = Task::new(body(wait_twice(first_rx, second_rx)))
                .named(name)
                .schedule_on(manual.handle())
                .start();
            WithChild {
                name,
                manual,
                first: Some(first),
                second,
                join,
            }
        }

        /// Runs the executor until it is idle, then gives the frame names of the stack where
        /// the task waits, innermost first.
        fn waits_in(&self) -> Vec<String> {
            self.manual.run_until_idle();
            let dump = dump_all();
            let task = dump.tasks().iter().find(|t| t.name() == self.name);
            let task = task.unwrap_or_else(|| panic!("{} is not listed in:\n{dump}", self.name));
            task.frames().iter().map(|f| f.name().to_owned()).collect()
        }

        /// Ends the child's first wait.
        fn end_first_wait(&mut self) {
            self.first.take().unwrap().send(()).unwrap();
        }

        /// Ends both waits and runs the task to its end.
        fn finish(self) {
            drop((self.first, self.second));
            self.manual.run_until_idle();
            block_wait(self.join).unwrap();
        }
    }

    // The next three tests each suspend twice in the same frame, in a stack that changed in
    // between without that frame changing: the dump must show the new stack, not the first.

    #[test]
    #[allow(clippy::async_yields_async)] // handing the unfinished task on is the point
    fn a_task_handed_to_another_awaiter_is_published_under_it() {
        let task = WithChild::new("mover", |mut child| async move {
            let child = Task::new(async move {
                poll_once(&mut child).await;
                coro::yield_now().await; // suspended in `child` first, under `lender`
                child
            })
            .named("lender")
            .await;
            child.await;
        });
        assert_eq!(task.waits_in(), ["wait_twice", "mover"]);
        task.finish();
    }

    #[test]
    #[allow(clippy::async_yields_async)] // handing the unfinished task on is the point
    fn a_task_handed_over_within_one_poll_is_published_under_its_new_awaiter_next_time() {
        let mut task = WithChild::new("handover", |mut child| async move {
            let child = Task::new(async move {
                poll_once(&mut child).await;
                child
            })
            .named("lender")
            .await;
            child.await;
        });
        // One publication per poll, at the first suspension: this poll's was under `lender`.
        assert_eq!(task.waits_in(), ["wait_twice", "lender", "handover"]);
        task.end_first_wait();
        assert_eq!(task.waits_in(), ["wait_twice", "handover"]);
        task.finish();
    }

    #[test]
    fn a_task_renamed_after_it_suspended_is_published_with_its_new_name() {
        let task = WithChild::new("renamer", |mut child| async move {
            poll_once(&mut child).await;
            let child = child.named("renamed");
            coro::yield_now().await;
            child.await;
        });
        assert_eq!(task.waits_in(), ["renamed", "renamer"]);
        task.finish();
    }

    #[test]
    #[allow(clippy::async_yields_async)] // handing the unfinished task on is the point
    fn a_task_run_inline_is_published_anew_when_the_frames_around_it_change() {
        // `nested` runs on an inline executor, so inside the poll of whoever starts or wakes
        // it, and its stack goes on into that task's frames. It suspends twice in the same
        // frame, both times inside `x`; in between, `x` moved from under `lender` to directly
        // under the root. Nothing of `nested`'s own changed, but its stack did.
        let manual = ManualExecutor::new();
        let inline = ExecutorHandle::new(InlineExecutor);
        let (first_tx, first_rx) = oneshot::channel();
        let (second_tx, second_rx) = oneshot::channel();
        let root = Task::new(async move {
            let mut x = Task::new(async move {
                let nested = wait_twice(first_rx, second_rx)
                    .named("nested")
                    .schedule_on(inline)
                    .start();
                coro::yield_now().await;
                first_tx.send(()).unwrap(); // `nested` runs on, inline, to its second wait
                nested
            })
            .named("x");
            let x = Task::new(async move {
                poll_once(&mut x).await;
                x
            })
            .named("lender")
            .await;
            x.await.await.unwrap();
        })
        .named("inline_root")
        .schedule_on(manual.handle())
        .start();
        manual.run_until_idle();
        let dump = dump_all();
        let nested = dump.tasks().iter().find(|t| t.name() == "nested");
        let nested = nested.unwrap_or_else(|| panic!("nested is not listed in:\n{dump}"));
        let frames: Vec<_> = nested.frames().iter().map(|f| f.name()).collect();
        assert_eq!(frames, ["nested", "x", "inline_root"], "{dump}");
        second_tx.send(()).unwrap();
        manual.run_until_idle();
        block_wait(root).unwrap();
    }

    #[test]
    fn dump_all_shows_a_stuck_dag_as_a_tree_with_frames_and_states() {
        let pool = ThreadPool::new(2).unwrap();
        let (tx, rx) = oneshot::channel();
        let (child_tx, child_rx) = oneshot::channel();
        let root = Task::new(async move { handler(rx, child_rx).await })
            .named("request")
            .schedule_on(&pool)
            .start();

        let dump = dump_until("the suspended handler", |t| {
            t.name() == "request" && t.state() == TaskState::Suspended && t.frames().len() == 3
        });
        let request = dump.tasks().iter().find(|t| t.name() == "request").unwrap();
        let names: Vec<_> = request.frames().iter().map(|f| f.name()).collect();
        assert_eq!(names, ["wait_for", "handler", "request"], "innermost first");
        let dump = dump_until("the child under its spawner", |t| {
            t.name() == "child" && t.parent_id() == Some(request.id()) && t.frames().len() == 2
        });
        let text = dump.to_string();
        let request_line = text
            .lines()
            .position(|l| l.contains(&format!("task {} request [suspended]", request.id())));
        let child_line = text.lines().position(|l| l.contains("child [suspended]"));
        let (Some(r), Some(c)) = (request_line, child_line) else {
            panic!("missing lines in:\n{text}")
        };
        assert!(c > r, "the child is listed under its parent:\n{text}");
        assert!(text.contains("  at wait_for ("), "{text}");

        tx.send(()).unwrap();
        child_tx.send(()).unwrap();
        block_wait(root).unwrap();
        let ids: Vec<u64> = dump_all().tasks().iter().map(|t| t.id()).collect();
        assert!(
            !ids.contains(&request.id()),
            "a finished task is no longer listed"
        );
    }

    #[test]
    fn collect_children_show_under_the_task_running_the_collect() {
        let pool = ThreadPool::new(2).unwrap();
        let (senders, receivers): (Vec<_>, Vec<_>) =
            (0..3).map(|_| oneshot::channel::<()>()).unzip();
        let root = Task::new(async move {
            let children = receivers.into_iter().map(|rx| async move {
                rx.await.ok();
            });
            coro::collect_all_range(children).await;
        })
        .named("fan_out")
        .schedule_on(&pool)
        .start();
        let dump = dump_until("the collect's parent suspended in the collect", |t| {
            t.name() == "fan_out" && t.frames().iter().any(|f| f.name() == "collect_all_range")
        });
        let parent = dump
            .tasks()
            .iter()
            .find(|t| t.name() == "fan_out")
            .unwrap()
            .id();
        let dump = dump_until("three children under the parent", |_| {
            dump_all()
                .tasks()
                .iter()
                .filter(|t| t.parent_id() == Some(parent))
                .count()
                == 3
        });
        let text = dump.to_string();
        assert!(text.contains("at collect_all_range ("), "{text}");
        // Each child's own chain: its frame, then the collect's and its parent's, to the root
        // (the children suspended while the collect ran them inline, so each is driven by a task
        // of its own).
        let dump = dump_until("the children's stacks continued into the collect's", |t| {
            t.parent_id() == Some(parent)
                && t.frames().iter().map(|f| f.name()).collect::<Vec<_>>()
                    == ["collect_all_range", "collect_all_range", "fan_out"]
        });
        let children: Vec<_> = dump
            .tasks()
            .iter()
            .filter(|t| t.parent_id() == Some(parent))
            .collect();
        assert_eq!(children.len(), 3);
        for child in children {
            assert!(child.awaited_by_parent(), "{child:?}");
            let names: Vec<_> = child.frames().iter().map(|f| f.name()).collect();
            assert_eq!(names.last(), Some(&"fan_out"), "{names:?}");
        }
        for tx in senders {
            tx.send(()).unwrap();
        }
        block_wait(root).unwrap();
    }

    #[test]
    fn dump_all_does_not_wait_for_a_task_stuck_in_a_long_poll() {
        let pool = ThreadPool::new(1).unwrap();
        let release = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = mpsc::channel();
        let r = release.clone();
        let busy = Task::new(async move {
            coro::yield_now().await;
            started_tx.send(()).unwrap();
            while !r.load(Ordering::SeqCst) {
                std::hint::spin_loop();
            }
        })
        .named("spinner")
        .schedule_on(&pool)
        .start();
        started_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let began = Instant::now();
        let dump = dump_all();
        let spinner = dump
            .tasks()
            .iter()
            .find(|t| t.name() == "spinner")
            .expect("the spinner is listed");
        assert_eq!(spinner.state(), TaskState::Running);
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "dump_all waited for a running task"
        );
        release.store(true, Ordering::SeqCst);
        block_wait(busy).unwrap();
    }

    #[test]
    fn dump_all_lists_tasks_of_every_executor_kind() {
        let manual = ManualExecutor::new();
        let (tx, rx) = oneshot::channel::<()>();
        let queued = Task::new(async {})
            .named("queued_on_manual")
            .schedule_on(manual.handle())
            .start();
        let waiting = Task::new(async move {
            rx.await.ok();
        })
        .named("waiting_on_manual")
        .schedule_on(manual.handle())
        .start();
        // Not polled yet: scheduled, without a name until it starts.
        let dump = dump_all();
        assert!(
            dump.tasks()
                .iter()
                .filter(|t| t.state() == TaskState::Scheduled)
                .count()
                >= 2,
            "{dump}"
        );
        manual.run_one();
        manual.run_one();
        let dump = dump_all();
        let waiting_task = dump
            .tasks()
            .iter()
            .find(|t| t.name() == "waiting_on_manual")
            .expect("listed");
        assert_eq!(waiting_task.state(), TaskState::Suspended);
        assert!(
            !dump.tasks().iter().any(|t| t.name() == "queued_on_manual"),
            "finished tasks leave"
        );
        tx.send(()).unwrap();
        assert_eq!(
            waiting_task.state(),
            TaskState::Suspended,
            "a snapshot is a copy"
        );
        let dump = dump_all();
        let again = dump
            .tasks()
            .iter()
            .find(|t| t.name() == "waiting_on_manual")
            .unwrap();
        assert_eq!(again.state(), TaskState::Scheduled, "woken and queued");
        manual.run_until_idle();
        block_wait(queued).unwrap();
        block_wait(waiting).unwrap();
    }
}

/// Collect children start inline and move to tasks of their own when they suspend; neither may
/// blur where the collect's task waits in a dump.
mod collect_dumps {
    use coro::sync::Baton;
    use coro::trace::{TaskSnapshot, dump_all};
    use coro::{Task, ThreadPool};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    fn until(what: &str, pred: impl Fn(&[TaskSnapshot]) -> bool) -> Vec<TaskSnapshot> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let dump = dump_all();
            if pred(dump.tasks()) {
                return dump.tasks().to_vec();
            }
            assert!(Instant::now() < deadline, "never saw {what} in:\n{dump}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn names(task: &TaskSnapshot) -> Vec<&str> {
        task.frames().iter().map(|f| f.name()).collect()
    }

    #[test]
    fn a_suspended_inline_child_is_not_shown_as_where_its_parent_waits() {
        let pool = ThreadPool::new(1).unwrap();
        let gate = Arc::new(Baton::new());
        let child = |name: &'static str| {
            let gate = gate.clone();
            Task::new(async move { gate.wait().await }).named(name)
        };
        let (a, b) = (child("child_a"), child("child_b"));
        let handle = Task::new(async move {
            coro::collect_all!(a, b).await;
        })
        .named("parent")
        .schedule_on(&pool)
        .start();
        let tasks = until("the parent suspended in the collect", |tasks| {
            tasks
                .iter()
                .any(|t| t.name() == "parent" && !t.frames().is_empty())
                && tasks
                    .iter()
                    .filter(|t| names(t).contains(&"child_b"))
                    .count()
                    == 1
        });
        let parent = tasks.iter().find(|t| t.name() == "parent").unwrap();
        assert_eq!(
            names(parent),
            ["collect_all", "parent"],
            "the parent waits in its collect, not in a child that moved to its own task"
        );
        gate.post();
        coro::block_wait(handle).unwrap();
    }

    #[test]
    fn helpers_offered_by_helpers_show_under_the_collects_task() {
        let pool = ThreadPool::new(2).unwrap();
        let gate = Arc::new(Baton::new());
        let release = Arc::new(AtomicBool::new(false));
        // Child 0 keeps the collect's worker busy, so helpers take the other children, each
        // offering the next before it waits on the gate: a chain of helpers.
        let children: Vec<_> = (0..4)
            .map(|i| {
                let (gate, release) = (gate.clone(), release.clone());
                async move {
                    if i == 0 {
                        let start = Instant::now();
                        while !release.load(SeqCst) && start.elapsed() < Duration::from_secs(10) {
                            std::hint::spin_loop();
                        }
                    } else {
                        gate.wait().await;
                    }
                }
            })
            .collect();
        let handle = Task::new(async move {
            coro::collect_all_range(children).await;
        })
        .named("helper_chain")
        .schedule_on(&pool)
        .start();
        // Other tests run collects too: look only at the tasks under this one.
        let tasks = until("three helpers waiting at the gate", |tasks| {
            let Some(root) = tasks.iter().find(|t| t.name() == "helper_chain") else {
                return false;
            };
            tasks
                .iter()
                .filter(|t| t.parent_id() == Some(root.id()) && !t.frames().is_empty())
                .count()
                >= 3
        });
        let helpers: Vec<_> = tasks
            .iter()
            .filter(|t| t.name() == "collect_all_range")
            .collect();
        for helper in &helpers {
            let parent = tasks.iter().find(|t| Some(t.id()) == helper.parent_id());
            assert!(
                parent.is_none_or(|p| p.name() != "collect_all_range"),
                "a collect helper shows under another helper, not under the collect's task: \
                 {helper:?}"
            );
        }
        // Children that idle workers took continue their stacks into the collect's task too.
        let root = tasks
            .iter()
            .find(|t| t.name() == "helper_chain")
            .unwrap()
            .id();
        for child in tasks.iter().filter(|t| t.parent_id() == Some(root)) {
            assert_eq!(
                names(child).last(),
                Some(&"helper_chain"),
                "a taken child's stack does not continue into the collect's: {child:?}"
            );
        }
        release.store(true, SeqCst);
        gate.post();
        coro::block_wait(handle).unwrap();
    }
}

#[test]
fn a_stalled_task_is_reported_with_its_name_and_frame() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// Each report's task name and frame names.
    type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let pool = coro::ThreadPool::builder()
        .worker_threads(2)
        .stall_threshold(Duration::from_millis(30))
        .on_stall(move |report: &coro::executor::StallReport| {
            let frames = report.stack().iter().map(|f| f.name().to_owned()).collect();
            log.lock()
                .unwrap()
                .push((report.task_name().to_owned(), frames));
        })
        .build()
        .unwrap();
    #[coro::task]
    async fn load_profile() {
        // Blocks its worker: a stall.
        std::thread::sleep(Duration::from_millis(200));
    }
    block_wait(load_profile().schedule_on(&pool));
    let seen = seen.lock().unwrap();
    assert_eq!(
        *seen,
        [("load_profile".to_owned(), vec!["load_profile".to_owned()])],
        "the stall was not reported, or not with the task's name and frame"
    );
}

/// Waits (bounded) until the dump lists a task named `name` in `state`, and returns its frame
/// names.
fn frames_of_dumped(name: &str, state: coro::trace::TaskState) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let dump = coro::trace::dump_all();
        if let Some(task) = dump
            .tasks()
            .iter()
            .find(|t| t.name() == name && t.state() == state)
        {
            return task.frames().iter().map(|f| f.name().to_owned()).collect();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no task `{name}` in state {state:?} in:\n{dump}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[coro::task]
async fn waits_in_child(baton: std::sync::Arc<coro::sync::Baton>) {
    waits_for_baton(baton).await
}

#[coro::task]
async fn waits_for_baton(baton: std::sync::Arc<coro::sync::Baton>) {
    baton.wait().await
}

#[test]
fn a_task_spawned_on_a_pool_directly_is_traced_with_its_name_and_stack() {
    use coro::trace::TaskState;
    let pool = coro::ThreadPool::new(1).unwrap();
    let baton = std::sync::Arc::new(coro::sync::Baton::new());
    let handle = pool.spawn(waits_in_child(baton.clone()).named("direct_pool"));
    assert_eq!(
        frames_of_dumped("direct_pool", TaskState::Suspended),
        ["waits_for_baton", "direct_pool"]
    );
    baton.post();
    block_wait(handle).unwrap();
}

#[test]
fn a_task_spawned_through_a_users_executor_is_traced() {
    use coro::executor::{Executor, ExecutorHandle, Runnable};
    use coro::trace::TaskState;
    /// A user's executor: runs each task on a fresh thread.
    struct ThreadPerTask;
    impl Executor for ThreadPerTask {
        fn schedule(&self, runnable: Runnable) {
            std::thread::spawn(move || runnable.run());
        }
    }
    let handle = ExecutorHandle::new(ThreadPerTask);
    let baton = std::sync::Arc::new(coro::sync::Baton::new());
    let join = handle.spawn(waits_in_child(baton.clone()).named("users_executor"));
    assert_eq!(
        frames_of_dumped("users_executor", TaskState::Suspended),
        ["waits_for_baton", "users_executor"]
    );
    baton.post();
    block_wait(join).unwrap();
}

#[test]
fn a_task_awaited_by_a_plain_spawned_future_keeps_a_valid_root_after_it_finishes() {
    use coro::trace::TaskState;
    let pool = coro::ThreadPool::new(1).unwrap();
    let baton = std::sync::Arc::new(coro::sync::Baton::new());
    let b = baton.clone();
    // The Task is the outermost frame of a plain future, and finishes long before it: the
    // task's trace must not point into the Task's freed box afterwards.
    let handle = pool.spawn(async move {
        Task::new(async {}).named("first_step").await;
        waits_for_baton(b).await;
    });
    assert_eq!(
        frames_of_dumped("first_step", TaskState::Suspended),
        ["waits_for_baton"]
    );
    baton.post();
    block_wait(handle).unwrap();
}

#[test]
fn a_child_on_another_executor_continues_its_stack_into_its_awaiter() {
    use coro::trace::TaskState;
    let (a, b) = (
        coro::ThreadPool::new(1).unwrap(),
        coro::ThreadPool::new(1).unwrap(),
    );
    let baton = std::sync::Arc::new(coro::sync::Baton::new());
    let (b_handle, waiter) = (b.handle(), baton.clone());
    // In the child, on pool B: its own frame, then its awaiter's chain on pool A.
    let stack = block_wait(
        Task::new(async move {
            Task::new(async move {
                Task::new(async { leaf().await })
                    .named("child")
                    .schedule_on(b_handle)
                    .await
            })
            .named("awaiter")
            .await
        })
        .named("root")
        .schedule_on(&a),
    );
    let names: Vec<_> = stack.frames().iter().map(|f| f.name()).collect();
    assert_eq!(names, ["leaf", "child", "awaiter", "root"]);

    // In a dump, while the child waits on pool B.
    let child = Task::new(async move { waits_for_baton(waiter).await }).named("remote_child");
    let parent = Task::new(async move { child.schedule_on(b.handle()).await })
        .named("local_parent")
        .schedule_on(&a)
        .start();
    assert_eq!(
        frames_of_dumped("remote_child", TaskState::Suspended),
        ["waits_for_baton", "remote_child", "local_parent"]
    );
    baton.post();
    block_wait(parent).unwrap();
}

/// The async stacks of a collect's children, read inside the children: each one's own frame
/// links to the collect's frame, then the collect's awaiter's, whether the collect polled the
/// child inline, an idle worker took it, or it resumed on a task of its own after suspending.
mod collect_stacks {
    use coro::{Task, ThreadPool, block_wait};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    /// The names of the frames of `current_stack()`, innermost first.
    fn stack_names() -> Vec<String> {
        coro::trace::current_stack()
            .frames()
            .iter()
            .map(|f| f.name().to_owned())
            .collect()
    }

    /// A child named `name` that returns the names on its stack.
    fn reader(name: &'static str) -> Task<Vec<String>> {
        Task::new(async { stack_names() }).named(name)
    }

    /// What children `A` and `B` of a `collect_all_range` in a task `P` read: each its own
    /// frame, the collect's, then its awaiter's.
    const WHOLE_CHAINS: [[&str; 3]; 2] = [
        ["A", "collect_all_range", "P"],
        ["B", "collect_all_range", "P"],
    ];

    /// The stacks children `a` and `b` return, collected by `collect_all_range` in a task
    /// named `P` on `pool`.
    fn collected_in_p(
        pool: &ThreadPool,
        a: Task<Vec<String>>,
        b: Task<Vec<String>>,
    ) -> Vec<Vec<String>> {
        block_wait(
            Task::new(async move { coro::collect_all_range([a, b]).await })
                .named("P")
                .schedule_on(pool),
        )
    }

    #[test]
    fn collect_children_read_the_whole_chain_on_a_fresh_two_worker_pool() {
        // The children are quick: usually the collect runs both inline, but an idle worker
        // of a pool just started often takes one, and that child runs in parallel.
        for run in 0..2000 {
            let pool = ThreadPool::new(2).unwrap();
            let stacks = collected_in_p(&pool, reader("A"), reader("B"));
            assert_eq!(
                stacks, WHOLE_CHAINS,
                "run {run}: each child reads its own frame, the collect's, then its awaiter's"
            );
        }
    }

    #[test]
    fn a_child_an_idle_worker_takes_reads_the_whole_chain() {
        let pool = ThreadPool::new(2).unwrap();
        let taken_ran = Arc::new(AtomicBool::new(false));
        let flag = taken_ran.clone();
        // A keeps the collect's worker busy until B has run: B can only have run on the other
        // worker, which took it from the collect's offer.
        let busy = Task::new(async move {
            let start = Instant::now();
            while !flag.load(SeqCst) && start.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
            stack_names()
        })
        .named("A");
        let flag = taken_ran.clone();
        let taken = Task::new(async move {
            let names = stack_names();
            flag.store(true, SeqCst);
            names
        })
        .named("B");
        let stacks = collected_in_p(&pool, busy, taken);
        assert!(taken_ran.load(SeqCst), "no idle worker took B within 10 s");
        assert_eq!(stacks, WHOLE_CHAINS);
    }

    #[test]
    fn a_child_resumed_by_a_task_of_its_own_reads_the_whole_chain() {
        let pool = ThreadPool::new(2).unwrap();
        // Each child suspends while the collect runs it inline, so it resumes on a task of
        // its own.
        let child = |name: &'static str| {
            Task::new(async {
                coro::yield_now().await;
                stack_names()
            })
            .named(name)
        };
        let stacks = collected_in_p(&pool, child("A"), child("B"));
        assert_eq!(stacks, WHOLE_CHAINS);
    }

    #[test]
    fn a_task_child_links_to_the_collects_frame_once() {
        // A Task child has a frame of its own, linked directly to the collect's; a plain
        // future child has none, and stands in the chain as a frame named after the collect.
        let (tasks, plain) = block_wait(
            Task::new(async {
                let tasks = coro::collect_all!(reader("A"), reader("B")).await;
                let plain = coro::collect_all_range([async { stack_names() }]).await;
                (tasks, plain)
            })
            .named("P"),
        );
        assert_eq!(tasks.0, ["A", "collect_all", "P"]);
        assert_eq!(tasks.1, ["B", "collect_all", "P"]);
        assert_eq!(plain[0], ["collect_all_range", "collect_all_range", "P"]);
    }
}
