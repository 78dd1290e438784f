//! `coro::trace::snapshot()`: statistics, wait targets and the verdicts, each planted on
//! purpose and shown absent from healthy work.

use coro::ThreadPool;
use coro::trace::{Snapshot, TaskState, WaitTarget, Warning, snapshot};
use futures::channel::oneshot;
use std::time::{Duration, Instant};

/// Snapshots until `found` returns something or `limit` passes.
fn wait_for<T>(limit: Duration, mut found: impl FnMut(&Snapshot) -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        let snap = snapshot();
        if let Some(t) = found(&snap) {
            return t;
        }
        assert!(
            start.elapsed() < limit,
            "not seen within {limit:?}:\n{snap}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn pool(name: &str, workers: usize) -> ThreadPool {
    ThreadPool::builder()
        .thread_name(name)
        .worker_threads(workers)
        .build()
        .unwrap()
}

#[test]
fn counts_polls_busy_wakes_and_names_the_pool() {
    let _stats = coro::executor::trace::collect_stats();
    let pool = pool("stats-pool", 1);
    let (tx, rx) = oneshot::channel::<()>();
    let worker = coro::Task::new(async move {
        for _ in 0..5 {
            std::thread::sleep(Duration::from_millis(4));
            coro::executor::yield_now().await;
        }
        rx.await.ok();
    })
    .named("counted")
    .schedule_on(&pool)
    .start();
    let info = wait_for(Duration::from_secs(5), |snap| {
        snap.tasks
            .iter()
            .find(|t| t.name == "counted" && t.polls >= 6 && t.state == TaskState::Suspended)
            .cloned()
    });
    assert_eq!(info.pool.as_deref(), Some("stats-pool"));
    assert_eq!(info.wakes, 5, "{info:?}");
    // Five polls of 4 ms each, on a clock that ticks every millisecond (late when its thread
    // gets no CPU: only a lower bound well under the 20 ms is certain).
    assert!(info.busy >= Duration::from_millis(4), "{info:?}");
    assert!(info.age >= info.busy, "{info:?}");
    assert!(info.location.contains("snapshot.rs:"), "{info:?}");
    assert!(info.frames[0].starts_with("counted ("), "{info:?}");
    let pool_info = snapshot()
        .pools
        .into_iter()
        .find(|p| p.name == "stats-pool")
        .unwrap();
    assert_eq!(pool_info.workers.len(), 1);
    assert!(pool_info.workers[0].polls > 0, "{pool_info:?}");
    tx.send(()).unwrap();
    coro::block_wait(worker).unwrap();
}

#[test]
fn a_joining_task_waits_on_the_task_it_joins() {
    let pool = pool("join-pool", 2);
    let (tx, rx) = oneshot::channel::<()>();
    let child = pool.spawn(async move {
        rx.await.ok();
    });
    let child_id = wait_for(Duration::from_secs(5), |snap| {
        snap.tasks
            .iter()
            .filter(|t| t.pool.as_deref() == Some("join-pool"))
            .map(|t| t.id)
            .max()
    });
    let parent = coro::Task::new(async move { child.await.unwrap() })
        .named("joiner")
        .schedule_on(&pool)
        .start();
    let waiting = wait_for(Duration::from_secs(5), |snap| {
        let joiner = snap.tasks.iter().find(|t| t.name == "joiner")?;
        (joiner.state == TaskState::Suspended).then(|| joiner.waiting_on.clone())?
    });
    assert_eq!(waiting, WaitTarget::Task(child_id));
    // Healthy: a join is not a deadlock.
    assert_eq!(warnings_in(&snapshot(), "join-pool"), []);
    tx.send(()).unwrap();
    coro::block_wait(parent).unwrap();
    // The wait is undone with it.
    assert!(!snapshot().tasks.iter().any(|t| t.name == "joiner"));
}

#[test]
fn a_task_awaiting_its_own_handle_through_another_is_a_deadlock() {
    let pool = pool("cycle-pool", 2);
    let (send_a, get_a) = oneshot::channel::<coro::JoinHandle<()>>();
    let b = coro::Task::new(async move {
        let a = get_a.await.unwrap();
        a.await.ok();
    })
    .named("cycle-b")
    .schedule_on(&pool)
    .start();
    let a = coro::Task::new(async move {
        b.await.ok();
    })
    .named("cycle-a")
    .schedule_on(&pool)
    .start();
    send_a.send(a).unwrap();
    assert_eq!(deadlock_of(&["cycle-a", "cycle-b"]), ["cycle-a", "cycle-b"]);
    assert!(snapshot().to_string().contains("deadlock: tasks "));
    // Shutdown drops both, deadlock or not.
    pool.shutdown();
}

/// The warnings about tasks of pool `pool` (tests of this file run side by side).
fn warnings_in(snap: &Snapshot, pool: &str) -> Vec<Warning> {
    snap.warnings
        .iter()
        .filter(|w| {
            w.tasks().iter().all(|id| {
                snap.tasks
                    .iter()
                    .any(|t| t.id == *id && t.pool.as_deref() == Some(pool))
            })
        })
        .cloned()
        .collect()
}

#[test]
fn a_long_poll_is_reported_while_it_runs() {
    let _stats = coro::executor::trace::collect_stats();
    let pool = ThreadPool::builder()
        .thread_name("stuck-pool")
        .worker_threads(1)
        .stall_threshold(Duration::from_millis(50))
        .on_stall(|_| {})
        .build()
        .unwrap();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let blocker = coro::Task::new(async move {
        // Blocks its worker: a bug in the service, planted.
        released.recv().unwrap();
    })
    .named("blocker")
    .schedule_on(&pool)
    .start();
    let snap = wait_for(Duration::from_secs(5), |snap| {
        (!warnings_in(snap, "stuck-pool").is_empty()).then(|| snap.clone())
    });
    let id = snap.tasks.iter().find(|t| t.name == "blocker").unwrap().id;
    match warnings_in(&snap, "stuck-pool").as_slice() {
        [Warning::LongPoll { task, running_for }] => {
            assert_eq!(*task, id);
            assert!(*running_for > Duration::from_millis(50));
        }
        other => panic!("unexpected {other:?}"),
    }
    let worker = &snap
        .pools
        .iter()
        .find(|p| p.name == "stuck-pool")
        .unwrap()
        .workers[0];
    assert_eq!((worker.state, worker.current_task), ("running", Some(id)));
    release.send(()).unwrap();
    coro::block_wait(blocker).unwrap();
    // Polls that end in time are not reported.
    let quick = coro::Task::new(async {
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(5));
            coro::executor::yield_now().await;
        }
    })
    .schedule_on(&pool)
    .start();
    while !quick.is_finished() {
        assert_eq!(warnings_in(&snapshot(), "stuck-pool"), []);
    }
}

#[test]
fn a_task_queued_and_not_polled_is_starving() {
    let _stats = coro::executor::trace::collect_stats();
    let manual = coro::executor::ManualExecutor::new();
    let queued = manual.handle().spawn(async { 7 });
    let id = wait_for(Duration::from_secs(5), |snap| {
        snap.warnings.iter().find_map(|w| match w {
            Warning::Starving { task, queued_for } => {
                assert!(*queued_for > Duration::from_millis(100));
                Some(*task)
            }
            _ => None,
        })
    });
    let snap = snapshot();
    let task = snap.tasks.iter().find(|t| t.id == id).unwrap();
    assert_eq!(
        (task.state, task.pool.as_deref()),
        (TaskState::Scheduled, None)
    );
    manual.run_until_idle();
    assert_eq!(coro::block_wait(queued).unwrap(), 7);
    assert!(!snapshot().warnings.iter().any(|w| w.tasks() == [id]));
}

#[test]
fn busy_healthy_work_raises_nothing() {
    let pool = pool("healthy-pool", 2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for i in 0..8 {
        let stop = stop.clone();
        workers.push(
            coro::Task::new(async move {
                let (tx, rx) = coro::channel::bounded::<u64>(4);
                let echo = coro::spawn(async move {
                    while let Ok(v) = rx.recv().await {
                        coro::time::sleep(Duration::from_micros(100)).await.unwrap();
                        std::hint::black_box(v);
                    }
                });
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    tx.send(i).await.unwrap();
                }
                drop(tx);
                echo.await.unwrap();
            })
            .schedule_on(&pool)
            .start(),
        );
    }
    for _ in 0..20 {
        let snap = snapshot();
        assert_eq!(warnings_in(&snap, "healthy-pool"), [], "{snap}");
        std::thread::sleep(Duration::from_millis(25));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in workers {
        coro::block_wait(w).unwrap();
    }
}

/// The first deadlock among the tasks named in `names`, as those names (sorted), within 1 s.
fn deadlock_of(names: &[&str]) -> Vec<String> {
    let started = Instant::now();
    let found = wait_for(Duration::from_secs(5), |snap| {
        snap.warnings.iter().find_map(|w| match w {
            Warning::Deadlock { tasks } => {
                let mut named: Vec<String> = tasks
                    .iter()
                    .filter_map(|id| snap.tasks.iter().find(|t| t.id == *id))
                    .map(|t| t.name.clone())
                    .collect();
                named.sort();
                named
                    .iter()
                    .all(|n| names.contains(&n.as_str()))
                    .then_some(named)
            }
            _ => None,
        })
    });
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    found
}

#[test]
fn two_tasks_locking_in_opposite_orders_are_a_deadlock() {
    let pool = pool("ab-ba-pool", 2);
    let first = std::sync::Arc::new(coro::sync::Mutex::new(()));
    let second = std::sync::Arc::new(coro::sync::Mutex::new(()));
    let both = std::sync::Arc::new(coro::sync::Barrier::new(2));
    let task = |name: &'static str,
                a: std::sync::Arc<coro::sync::Mutex<()>>,
                b: std::sync::Arc<coro::sync::Mutex<()>>| {
        let both = both.clone();
        coro::Task::new(async move {
            let _a = a.lock().await;
            both.wait().await;
            let _b = b.lock().await;
        })
        .named(name)
        .schedule_on(&pool)
        .start()
    };
    let _ab = task("locks-a-then-b", first.clone(), second.clone());
    let _ba = task("locks-b-then-a", second.clone(), first.clone());
    assert_eq!(
        deadlock_of(&["locks-a-then-b", "locks-b-then-a"]),
        ["locks-a-then-b", "locks-b-then-a"]
    );
    let snap = snapshot();
    let waiter = snap
        .tasks
        .iter()
        .find(|t| t.name == "locks-a-then-b")
        .unwrap();
    let holder = snap
        .tasks
        .iter()
        .find(|t| t.name == "locks-b-then-a")
        .unwrap();
    match &waiter.waiting_on {
        Some(WaitTarget::Lock { kind, holders, .. }) => {
            assert_eq!((*kind, holders.as_slice()), ("Mutex", &[holder.id][..]));
        }
        other => panic!("{other:?}"),
    }
    pool.shutdown();
}

#[test]
fn an_upgrade_waiting_on_a_reader_that_waits_to_write_is_a_deadlock() {
    let pool = pool("upgrade-pool", 2);
    let lock = std::sync::Arc::new(coro::sync::SharedMutexFair::new(0));
    let both = std::sync::Arc::new(coro::sync::Barrier::new(2));
    let (l, b) = (lock.clone(), both.clone());
    let _upgrader = coro::Task::new(async move {
        let guard = l.upgradable_read().await;
        b.wait().await;
        *guard.upgrade().await += 1;
    })
    .named("upgrader")
    .schedule_on(&pool)
    .start();
    let (l, b) = (lock.clone(), both.clone());
    let _reader = coro::Task::new(async move {
        let read = l.read().await;
        b.wait().await;
        // Waits behind the upgrade, which waits for this reader to leave.
        let _write = l.write().await;
        drop(read);
    })
    .named("reader-then-writer")
    .schedule_on(&pool)
    .start();
    assert_eq!(
        deadlock_of(&["upgrader", "reader-then-writer"]),
        ["reader-then-writer", "upgrader"]
    );
    pool.shutdown();
}

#[test]
fn a_semaphore_with_another_holder_still_free_to_release_is_not_a_deadlock() {
    let pool = pool("semaphore-pool", 2);
    let permits = std::sync::Arc::new(coro::sync::Semaphore::new(2));
    let (release, released) = oneshot::channel::<()>();
    let (p, held) = (
        permits.clone(),
        std::sync::Arc::new(coro::sync::Barrier::new(3)),
    );
    let h = held.clone();
    // Holds a permit and waits on something coro does not name: it may release any time.
    let free_holder = coro::Task::new(async move {
        let _permit = p.acquire(1).await;
        h.wait().await;
        released.await.ok();
    })
    .named("free-holder")
    .schedule_on(&pool)
    .start();
    let (p, h) = (permits.clone(), held.clone());
    let (send_waiter, get_waiter) = oneshot::channel::<coro::JoinHandle<()>>();
    // Holds the other permit and joins the waiter, which waits for a permit.
    let joining_holder = coro::Task::new(async move {
        let _permit = p.acquire(1).await;
        h.wait().await;
        get_waiter.await.unwrap().await.unwrap();
    })
    .named("joining-holder")
    .schedule_on(&pool)
    .start();
    held_wait(&held);
    let p = permits.clone();
    let waiter = coro::spawn(
        coro::Task::new(async move {
            let _permit = p.acquire(1).await;
        })
        .named("permit-waiter"),
    );
    send_waiter.send(waiter).ok().unwrap();
    // All three are suspended: the waiter on the semaphore, the joiner on the waiter.
    wait_for(Duration::from_secs(5), |snap| {
        snap.tasks
            .iter()
            .find(|t| {
                t.name == "permit-waiter" && matches!(t.waiting_on, Some(WaitTarget::Lock { .. }))
            })
            .map(|_| ())
    });
    for _ in 0..5 {
        let snap = snapshot();
        let ours: Vec<u64> = snap
            .tasks
            .iter()
            .filter(|t| {
                ["free-holder", "joining-holder", "permit-waiter"].contains(&t.name.as_str())
            })
            .map(|t| t.id)
            .collect();
        assert_eq!(ours.len(), 3, "{snap}");
        let about_ours = snap
            .warnings
            .iter()
            .any(|w| w.tasks().iter().any(|id| ours.contains(id)));
        assert!(!about_ours, "{snap}");
        std::thread::sleep(Duration::from_millis(20));
    }
    release.send(()).unwrap();
    coro::block_wait(free_holder).unwrap();
    coro::block_wait(joining_holder).unwrap();
}

/// Joins `barrier` from this (non-task) thread.
fn held_wait(barrier: &std::sync::Arc<coro::sync::Barrier>) {
    coro::block_wait(barrier.wait());
}

/// What the suspended task named `name` waits on, if it is suspended and waits on something.
fn suspended_waiting_on(snap: &Snapshot, name: &str) -> Option<WaitTarget> {
    snap.tasks
        .iter()
        .find(|t| t.name == name && t.state == TaskState::Suspended)?
        .waiting_on
        .clone()
}

#[test]
fn sleeping_and_receiving_tasks_say_what_they_wait_on() {
    let pool = pool("waits-pool", 1);
    let sleeper = coro::Task::new(async {
        coro::time::sleep(Duration::from_secs(30)).await.unwrap();
    })
    .named("sleeper")
    .schedule_on(&pool)
    .start();
    let (tx, rx) = coro::channel::bounded::<()>(1);
    let receiver = coro::Task::new(async move {
        rx.recv().await.unwrap();
    })
    .named("receiver")
    .schedule_on(&pool)
    .start();
    let (timer, channel) = wait_for(Duration::from_secs(5), |snap| {
        let of = |name: &str| suspended_waiting_on(snap, name);
        Some((of("sleeper")?, of("receiver")?))
    });
    match timer {
        WaitTarget::Timer { deadline_in } => {
            // Kept in microseconds, converted through two clock reads: within a few of 30 s.
            let left = deadline_in.as_secs_f64();
            assert!(left > 20.0 && left < 30.01, "{deadline_in:?}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(channel, WaitTarget::Channel { .. }), "{channel:?}");
    tx.try_send(()).unwrap();
    coro::block_wait(receiver).unwrap();
    sleeper.cancel();
}

/// A listener on a free local port, bound on `pool` (sockets belong to a pool's IO driver).
fn listen(pool: &ThreadPool) -> (coro::net::TcpListener, std::net::SocketAddr) {
    let listener = coro::block_wait(
        coro::Task::new(coro::net::TcpListener::bind("127.0.0.1:0")).schedule_on(pool),
    )
    .unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

#[test]
fn socket_reads_and_promises_say_what_they_wait_on_until_they_are_polled_again() {
    let pool = pool("io-promise-pool", 1);
    let (listener, addr) = listen(&pool);
    let reader = coro::Task::new(async move {
        use futures::AsyncReadExt;
        let mut stream = coro::net::TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        stream.read_exact(&mut byte).await.unwrap();
        byte[0]
    })
    .named("socket-reader")
    .schedule_on(&pool)
    .start();
    let (mut server, _) = coro::block_wait(
        coro::Task::new(async move { listener.accept().await }).schedule_on(&pool),
    )
    .unwrap();

    let promise = coro::sync::SharedPromise::<u32>::new();
    let future = promise.get_future();
    let awaiting = coro::Task::new(async move { future.await.unwrap() })
        .named("promise-awaiter")
        .schedule_on(&pool)
        .start();
    let baton = std::sync::Arc::new(coro::sync::Baton::new());
    let posted = baton.clone();
    let baton_waiter = coro::Task::new(async move { posted.wait().await })
        .named("baton-waiter")
        .schedule_on(&pool)
        .start();

    let (io, promised, batoned) = wait_for(Duration::from_secs(5), |snap| {
        let of = |name: &str| suspended_waiting_on(snap, name);
        Some((
            of("socket-reader")?,
            of("promise-awaiter")?,
            of("baton-waiter")?,
        ))
    });
    let WaitTarget::Io { fd } = io else {
        panic!("the reader waits on {io:?}, not its socket");
    };
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
    assert!(
        link.to_string_lossy().starts_with("socket:"),
        "fd {fd} is {link:?}"
    );
    let (WaitTarget::Promise { id: promise_id }, WaitTarget::Promise { id: baton_id }) =
        (&promised, &batoned)
    else {
        panic!("not promises: {promised:?}, {batoned:?}");
    };
    assert_ne!(promise_id, baton_id, "two promises, two ids");

    // Fulfilled and polled again: the waits are gone with the tasks' next polls.
    coro::block_wait(
        coro::Task::new(async move {
            use futures::AsyncWriteExt;
            server.write_all(&[7]).await
        })
        .schedule_on(&pool),
    )
    .unwrap();
    promise.set_value(5).unwrap();
    baton.post();
    assert_eq!(coro::block_wait(reader).unwrap(), 7);
    assert_eq!(coro::block_wait(awaiting).unwrap(), 5);
    coro::block_wait(baton_waiter).unwrap();
}

#[test]
fn a_task_polled_again_after_a_socket_wait_no_longer_claims_it() {
    let pool = pool("io-repoll-pool", 1);
    let (listener, addr) = listen(&pool);
    let (go_tx, go_rx) = oneshot::channel::<()>();
    // Reads with nothing to read (a socket wait, beside a timer's), is polled again by the
    // timeout, which wins before the read is polled again (biased), and then waits on the
    // oneshot only: the socket wait must not linger.
    let task = coro::Task::new(async move {
        use futures::{AsyncReadExt, FutureExt};
        let mut stream = coro::net::TcpStream::connect(addr).await.unwrap();
        let mut byte = [0u8; 1];
        futures::select_biased! {
            _ = coro::time::sleep(Duration::from_millis(20)).fuse() => {}
            _ = stream.read_exact(&mut byte).fuse() => panic!("nothing was written"),
        }
        go_rx.await.unwrap();
    })
    .named("moved-on")
    .schedule_on(&pool)
    .start();
    let (_server, _) = coro::block_wait(
        coro::Task::new(async move { listener.accept().await }).schedule_on(&pool),
    )
    .unwrap();
    // Suspended in the oneshot, which registers nothing: no wait at all.
    std::thread::sleep(Duration::from_millis(100));
    let seen = wait_for(Duration::from_secs(5), |snap| {
        let t = snap
            .tasks
            .iter()
            .find(|t| t.name == "moved-on" && t.state == TaskState::Suspended)?;
        // Past the select (its frames no longer show the sleep).
        Some(t.waiting_on.clone())
    });
    assert_eq!(seen, None, "a wait outlived the poll that made it");
    go_tx.send(()).unwrap();
    coro::block_wait(task).unwrap();
}
