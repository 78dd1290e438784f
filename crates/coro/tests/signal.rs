//! `coro::signal`: each kind's delivery wakes a task waiting in `recv`; several `Signal`s of one
//! kind all see one delivery; a delivery before the first `recv` is seen; a `recv` dropped
//! mid-wait loses nothing; deliveries coalesce and `recv` drains them; `ctrl_c` resolves on
//! SIGINT; refused signals are errors; a shut-down pool gives `None`; dropping closes the
//! sockets; and no thread is started.
//!
//! Signals are process-wide and cargo runs the tests of this file as threads of one process, so
//! every test holds `SERIAL` while it creates `Signal`s and raises signals: no test sees
//! another's deliveries. A task waiting in `recv` is woken by `kill(getpid(), ..)` from the
//! test's thread (not a pool worker): the signal goes to the process, and the kernel picks the
//! thread that runs the handler. Where a test needs the handler to have run before it goes on,
//! it uses `raise`, which runs the handler in the raising thread before it returns.

#![cfg(unix)]

use coro::signal::unix::{Signal, SignalKind, signal};
use coro::{JoinHandle, Task, ThreadPool};
use std::future::Future;
use std::io::ErrorKind;
use std::pin::pin;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const WAIT: Duration = Duration::from_secs(10);

/// Sends `signum` to this process.
fn kill_self(signum: i32) {
    // SAFETY: getpid and kill have no memory-safety preconditions; every signal sent here has
    // a handler registered by the test (through `signal`) before it is sent.
    let rc = unsafe { libc::kill(libc::getpid(), signum) };
    assert_eq!(rc, 0, "kill({signum}): {}", std::io::Error::last_os_error());
}

/// Raises `signum` in this thread: its handlers have run when this returns.
fn raise_here(signum: i32) {
    signal_hook::low_level::raise(signum).unwrap_or_else(|e| panic!("raise({signum}): {e}"));
}

/// Runs `fut` until it completes, and sends on `pending` the first time it returns `Pending`
/// (it is then waiting: registered with the IO driver).
async fn notify_when_pending<F: Future>(fut: F, pending: mpsc::Sender<()>) -> F::Output {
    let mut fut = pin!(fut);
    let mut told = false;
    std::future::poll_fn(|cx| match fut.as_mut().poll(cx) {
        Poll::Pending => {
            if !told {
                told = true;
                let _ = pending.send(());
            }
            Poll::Pending
        }
        ready => ready,
    })
    .await
}

/// Starts a task on `pool` that creates a `Signal` for `kind` there and waits in `recv`; returns
/// once that `recv` is pending.
fn waiter(pool: &ThreadPool, kind: SignalKind) -> JoinHandle<Option<()>> {
    let (tx, rx) = mpsc::channel();
    let handle = Task::new(async move {
        let mut signal = signal(kind).expect("register the signal");
        notify_when_pending(signal.recv(), tx).await
    })
    .schedule_on(pool)
    .start();
    rx.recv_timeout(WAIT)
        .unwrap_or_else(|e| panic!("the waiter for {kind:?} never waited: {e}"));
    handle
}

/// Waits (bounded) for `handle`.
fn join<T: Send + 'static>(handle: JoinHandle<T>, what: &str) -> T {
    coro::block_wait(coro::time::timeout(WAIT, handle))
        .unwrap_or_else(|_| panic!("{what}: not done within {WAIT:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn pool() -> ThreadPool {
    ThreadPool::new(2).expect("a pool")
}

/// Whether `recv` would complete now: polls it once (then drops it, which is cancel-safe).
fn delivered_now(signal: &mut Signal) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    signal.poll_recv(&mut cx).is_ready()
}

fn kinds() -> Vec<SignalKind> {
    let mut kinds = vec![
        SignalKind::alarm(),
        SignalKind::child(),
        SignalKind::hangup(),
        SignalKind::interrupt(),
        SignalKind::pipe(),
        SignalKind::quit(),
        SignalKind::terminate(),
        SignalKind::user_defined1(),
        SignalKind::user_defined2(),
        SignalKind::window_change(),
    ];
    #[cfg(not(target_os = "haiku"))]
    kinds.push(SignalKind::io());
    #[cfg(any(target_os = "linux", target_os = "android"))]
    kinds.push(SignalKind::from_raw(libc::SIGRTMIN()));
    kinds
}

#[test]
fn each_kind_wakes_a_task_waiting_in_recv() {
    let _serial = serial();
    let pool = pool();
    for kind in kinds() {
        let waiting = waiter(&pool, kind);
        kill_self(kind.as_raw_value());
        assert_eq!(join(waiting, &format!("recv of {kind:?}")), Some(()));
    }
    pool.shutdown();
}

#[test]
fn every_signal_of_a_kind_sees_one_delivery() {
    let _serial = serial();
    let pool = pool();
    let kind = SignalKind::user_defined1();
    let waiting: Vec<_> = (0..4).map(|_| waiter(&pool, kind)).collect();
    kill_self(libc::SIGUSR1);
    for (i, waiter) in waiting.into_iter().enumerate() {
        assert_eq!(join(waiter, &format!("waiter {i}")), Some(()));
    }
    pool.shutdown();
}

#[test]
fn a_delivery_between_creation_and_the_first_recv_is_seen() {
    let _serial = serial();
    let pool = pool();
    let mut hangup = coro::block_wait(
        Task::new(async { signal(SignalKind::hangup()).unwrap() }).schedule_on(&pool),
    );
    kill_self(libc::SIGHUP);
    let recv = coro::time::timeout(WAIT, async move { hangup.recv().await });
    assert_eq!(coro::block_wait(recv), Ok(Some(())));
    pool.shutdown();
}

#[test]
fn a_recv_dropped_mid_wait_loses_nothing() {
    let _serial = serial();
    let pool = pool();
    let mut usr2 = coro::block_wait(
        Task::new(async { signal(SignalKind::user_defined2()).unwrap() }).schedule_on(&pool),
    );
    // A recv that waits, then is dropped (a timeout or a lost select does that).
    let gave_up = coro::block_wait(coro::time::timeout(Duration::from_millis(20), usr2.recv()));
    assert!(gave_up.is_err(), "a recv completed with nothing delivered");
    // A delivery while no recv waits, and the next recv sees it.
    kill_self(libc::SIGUSR2);
    let seen = coro::block_wait(coro::time::timeout(WAIT, usr2.recv()));
    assert_eq!(seen, Ok(Some(())));

    // A recv that waits, the delivery comes, and the recv is dropped before it is polled again:
    // the delivery stays for the next recv.
    {
        let mut cx = Context::from_waker(Waker::noop());
        let mut recv = pin!(usr2.recv());
        assert!(recv.as_mut().poll(&mut cx).is_pending());
        raise_here(libc::SIGUSR2);
    }
    let seen = coro::block_wait(coro::time::timeout(WAIT, usr2.recv()));
    assert_eq!(seen, Ok(Some(())));
    assert!(!delivered_now(&mut usr2), "one delivery was seen twice");

    // And a task waiting in recv after all that is woken by the next delivery.
    let (tx, rx) = mpsc::channel();
    let waiting = Task::new(async move { notify_when_pending(usr2.recv(), tx).await })
        .schedule_on(&pool)
        .start();
    rx.recv_timeout(WAIT).expect("the waiter waits");
    kill_self(libc::SIGUSR2);
    assert_eq!(join(waiting, "the last recv"), Some(()));
    pool.shutdown();
}

#[test]
fn deliveries_coalesce_and_recv_takes_them_all() {
    let _serial = serial();
    let mut quit = signal(SignalKind::quit()).unwrap();
    for _ in 0..5 {
        raise_here(libc::SIGQUIT);
    }
    let seen = coro::block_wait(coro::time::timeout(WAIT, quit.recv()));
    assert_eq!(seen, Ok(Some(())));
    assert!(
        !delivered_now(&mut quit),
        "recv left deliveries behind: the next recv would return at once"
    );
    kill_self(libc::SIGQUIT);
    let seen = coro::block_wait(coro::time::timeout(WAIT, quit.recv()));
    assert_eq!(seen, Ok(Some(())));
}

#[test]
fn ctrl_c_resolves_on_sigint() {
    let _serial = serial();
    // Delivered while a task waits.
    let pool = pool();
    let (tx, rx) = mpsc::channel();
    let waiting = Task::new(async move { notify_when_pending(coro::signal::ctrl_c(), tx).await })
        .schedule_on(&pool)
        .start();
    rx.recv_timeout(WAIT).expect("ctrl_c waits");
    kill_self(libc::SIGINT);
    join(waiting, "ctrl_c").expect("ctrl_c");

    // Delivered after the call, before the future is first polled.
    let interrupted = coro::signal::ctrl_c();
    kill_self(libc::SIGINT);
    coro::block_wait(coro::time::timeout(WAIT, interrupted))
        .expect("ctrl_c in time")
        .expect("ctrl_c");

    // A SIGINT before the call is not one ctrl_c waits for.
    let earlier = signal(SignalKind::interrupt()).unwrap(); // keeps a handler in place
    raise_here(libc::SIGINT);
    let later = coro::block_wait(coro::time::timeout(
        Duration::from_millis(50),
        coro::signal::ctrl_c(),
    ));
    assert!(later.is_err(), "ctrl_c saw a SIGINT from before its call");
    drop(earlier);
    pool.shutdown();
}

#[test]
fn refused_signals_and_non_signals_are_invalid_input() {
    let _serial = serial();
    let cases = [
        (libc::SIGKILL, "SIGKILL (9): no process may catch it"),
        (libc::SIGSTOP, "no process may catch it"),
        (libc::SIGSEGV, "a fault of the thread that raised it"),
        (libc::SIGBUS, "a fault of the thread that raised it"),
        (libc::SIGILL, "a fault of the thread that raised it"),
        (libc::SIGFPE, "a fault of the thread that raised it"),
        (libc::SIGTRAP, "a fault of the thread that raised it"),
        (libc::SIGSYS, "a fault of the thread that raised it"),
        (0, "0 is not a signal number"),
        (-1, "-1 is not a signal number"),
    ];
    for (signum, why) in cases {
        let err = signal(SignalKind::from_raw(signum)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{signum}: {err}");
        let text = err.to_string();
        assert!(
            text.starts_with("coro::signal::unix::signal: ") && text.contains(why),
            "{signum}: {text}"
        );
        assert!(text.contains(&signum.to_string()), "{text}");
    }
    // A number past the last signal: the OS refuses it, and the message names it.
    let err = signal(SignalKind::from_raw(100_000)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("signal 100000"), "{err}");
}

#[test]
fn recv_returns_none_once_the_pool_shut_down() {
    let _serial = serial();
    let pool = pool();
    let mut alarm = coro::block_wait(
        Task::new(async { signal(SignalKind::alarm()).unwrap() }).schedule_on(&pool),
    );
    // A delivery before the shutdown is still returned, then None.
    raise_here(libc::SIGALRM);
    pool.shutdown();
    let mut cx = Context::from_waker(Waker::noop());
    assert_eq!(alarm.poll_recv(&mut cx), Poll::Ready(Some(())));
    assert_eq!(alarm.poll_recv(&mut cx), Poll::Ready(None));
    assert_eq!(coro::block_wait(alarm.recv()), None);
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count())
}

#[cfg(target_os = "linux")]
#[test]
fn dropping_signals_closes_their_sockets_and_unregisters() {
    let _serial = serial();
    let pool = pool();
    let make = |n: usize| {
        coro::block_wait(
            Task::new(async move {
                (0..n)
                    .map(|_| signal(SignalKind::window_change()).unwrap())
                    .collect::<Vec<_>>()
            })
            .schedule_on(&pool),
        )
    };
    drop(make(1)); // the pool's driver and signal-hook's globals exist from here on
    let before = open_fds();
    let mut signals = make(50);
    assert_eq!(open_fds(), before + 100, "a socket pair each");
    drop(signals.split_off(1));
    assert_eq!(
        open_fds(),
        before + 2,
        "dropped Signals left descriptors open"
    );
    // The one left still works.
    kill_self(libc::SIGWINCH);
    let seen = coro::block_wait(coro::time::timeout(WAIT, signals[0].recv()));
    assert_eq!(seen, Ok(Some(())));
    drop(signals);
    assert_eq!(open_fds(), before);
    pool.shutdown();
}

/// The environment variable that makes `no_thread_child` run (in a process of its own).
const CHILD: &str = "CORO_SIGNAL_TEST_THREAD_CHILD";

/// Runs `no_thread_child` alone in a fresh process of this test binary, where no other test
/// starts or ends threads while it counts them.
#[cfg(target_os = "linux")]
#[test]
fn no_thread_is_started_for_signals() {
    let _serial = serial();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_thread_child",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "run by no_thread_is_started_for_signals, in a process of its own"]
fn no_thread_child() {
    assert_eq!(
        std::env::var(CHILD).as_deref(),
        Ok("1"),
        "run it through its parent"
    );
    let threads = || std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count());
    let pool = ThreadPool::builder()
        .worker_threads(2)
        .thread_name("signal-own")
        .build()
        .unwrap();
    // Let the pool start its threads, and the timer thread that `join`'s timeout (outside any
    // pool) uses.
    join(Task::new(async {}).schedule_on(&pool).start(), "warm-up");
    coro::block_wait(coro::time::sleep(Duration::from_millis(1))).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let before = threads();
    for kind in [SignalKind::terminate(), SignalKind::user_defined1()] {
        let waiting = waiter(&pool, kind);
        let also = waiter(&pool, kind);
        kill_self(kind.as_raw_value());
        assert_eq!(join(waiting, "recv"), Some(()));
        assert_eq!(join(also, "recv"), Some(()));
    }
    // Called in the pool, so that it registers with this pool's driver (called here, outside
    // any pool, it would register with the default pool's, starting that pool).
    let (tx, rx) = mpsc::channel();
    let interrupted =
        Task::new(async move { notify_when_pending(coro::signal::ctrl_c(), tx).await })
            .schedule_on(&pool)
            .start();
    rx.recv_timeout(WAIT).expect("ctrl_c waits");
    kill_self(libc::SIGINT);
    join(interrupted, "ctrl_c").expect("ctrl_c");
    let names = || {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(threads(), before, "signals started a thread: {:?}", names());
    pool.shutdown();
}

#[test]
fn signal_and_its_recv_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let _serial = serial();
    let mut usr1 = signal(SignalKind::user_defined1()).unwrap();
    send_sync(&usr1);
    send(&usr1.recv());
    send(&coro::signal::ctrl_c());
    assert_eq!(usr1.kind(), SignalKind::user_defined1());
    assert!(format!("{usr1:?}").contains("SIGUSR1 (10)"), "{usr1:?}");
}
