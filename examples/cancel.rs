//! Cooperative cancellation: sources, tokens, and the waits that watch them.
//!
//! - a `CancellationSource` stops a task sleeping for a minute: `sleep` returns `Err(Cancelled)`;
//! - `cancellable(fut)` makes any wait (here: for a lock) end on cancellation;
//! - `time::timeout` cancels its operation's token on the deadline, and the operation sees it;
//! - `safe_point()` lets a CPU-bound loop stop early;
//! - `CancellationToken::merge`: a task stops when either of two sources fires.
//!
//! Run it with `cargo run --release --example cancel`.

use coro::cancel::{
    CancellationCallback, CancellationSource, CancellationToken, Cancelled, cancellable, safe_point,
};
use coro::sync::Mutex;
use coro::time::{Elapsed, sleep, timeout};
use coro::{Task, current_cancellation_token};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(5);
const MINUTE: Duration = Duration::from_secs(60);

/// Awaits `fut`, panicking if it takes longer than `LIMIT`: a hang becomes a clear failure.
async fn within<F: IntoFuture>(what: &str, fut: F) -> F::Output {
    timeout(LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"))
}

#[coro::main(worker_threads = 2)]
async fn main() {
    // 1. A source cancels a sleeping task.
    let source = CancellationSource::new();
    let start = Instant::now();
    let sleeper = coro::spawn(Task::new(sleep(MINUTE)).with_cancellation(source.token()));
    sleep(Duration::from_millis(10)).await.unwrap();
    assert!(source.request_cancellation()); // true: this call cancelled
    let slept = within("the cancelled sleeper", sleeper).await.unwrap();
    println!("sleep(60 s) returned {slept:?} after {:?}", start.elapsed());
    assert_eq!(slept, Err(Cancelled));

    // 2. `cancellable` around a wait for a lock that is held elsewhere.
    let mutex = Arc::new(Mutex::new(0));
    let held = mutex.lock().await;
    let source = CancellationSource::new();
    let locker = coro::spawn({
        let mutex = mutex.clone();
        Task::new(async move { cancellable(mutex.lock()).await.map(|_guard| ()) })
            .with_cancellation(source.token())
    });
    sleep(Duration::from_millis(10)).await.unwrap();
    source.request_cancellation();
    let waited = within("the cancelled lock wait", locker).await.unwrap();
    println!("lock wait cancelled: {waited:?}");
    assert_eq!(waited, Err(Cancelled));
    drop(held);
    assert!(mutex.try_lock().is_some()); // the abandoned wait left nothing behind

    // 3. A timeout cancels its operation's token before dropping the operation.
    let observed = Arc::new(AtomicBool::new(false));
    let op = {
        let observed = observed.clone();
        async move {
            let token = current_cancellation_token(); // the caller's merged with the timeout's
            let _on_cancel = CancellationCallback::new(&token, move || {
                println!("  op: my token was cancelled");
                observed.store(true, Ordering::SeqCst);
            });
            sleep(MINUTE).await
        }
    };
    let result = timeout(Duration::from_millis(20), op).await;
    println!("timeout(20 ms, op): {result:?}");
    assert_eq!(result, Err(Elapsed));
    assert!(observed.load(Ordering::SeqCst));

    // 4. `safe_point` in a CPU-bound loop: cancelled from a plain thread after 20 ms.
    let source = CancellationSource::new();
    let crunch = coro::spawn(
        Task::new(async {
            let started = Instant::now();
            let (mut rounds, mut acc) = (0u64, 0u64);
            while safe_point().is_ok() {
                assert!(started.elapsed() < LIMIT, "the loop never saw cancellation");
                acc = (0..10_000u64).fold(acc, |a, x| a.wrapping_mul(31).wrapping_add(x));
                rounds += 1;
            }
            (rounds, acc)
        })
        .with_cancellation(source.token()),
    );
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        source.request_cancellation();
    });
    let (rounds, _) = within("the CPU loop", crunch).await.unwrap();
    canceller.join().unwrap();
    println!("CPU loop stopped at a safe point after {rounds} rounds");
    assert!(rounds > 0);

    // 5. Merged tokens: a request handler stops on a client disconnect or on server shutdown.
    let (client, server) = (CancellationSource::new(), CancellationSource::new());
    let either = CancellationToken::merge([client.token(), server.token()]);
    assert_eq!(
        CancellationToken::merge([client.token(), CancellationToken::none()]),
        client.token()
    );
    let handler = coro::spawn(Task::new(sleep(MINUTE)).with_cancellation(either.clone()));
    server.request_cancellation();
    let handled = within("the handler", handler).await.unwrap();
    println!("server shutdown stops the handler: {handled:?}");
    assert_eq!(handled, Err(Cancelled));
    assert!(either.is_cancellation_requested());
    assert!(!client.is_cancellation_requested());
}
