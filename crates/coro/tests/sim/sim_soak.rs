//! The soak's workload under many seeds of a simulation: DAGs with shared dependencies, a
//! collect that races its children, a fair reader-writer lock whose two copies must always
//! agree, a semaphore that must never admit more than its permits, a bounded channel whose values
//! must each arrive exactly once, timeouts and cancellations on virtual time, a store reached
//! over TCP on the simulated network (each reply must answer its own request), and
//! `spawn_blocking`. Each seed is another interleaving of the same pool code; a failure names
//! its seed (`CORO_SIM_SEED=<n>` replays it).
//!
//! `CORO_SIM_SOAK_SEEDS=n` runs seeds `0..n` (default 300, a few seconds in CI's build);
//! `.ci/long` runs more.

use coro::sync::{Semaphore, SharedMutexFair};
use futures::{AsyncReadExt, AsyncWriteExt};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

/// Requests per simulated run.
const REQUESTS: u64 = 24;
/// Permits of the semaphore every request passes.
const PERMITS: usize = 3;

/// Shared state whose invariants the run checks.
struct World {
    /// Two copies a writer updates one at a time around a yield: a reader let in beside a
    /// writer would see them differ.
    pair: SharedMutexFair<(u64, u64)>,
    gate: Semaphore,
    inside: AtomicUsize,
}

/// The store: a TCP server on the simulation's own host that answers each of `REQUESTS`
/// connections' 8-byte key with three times the key, then ends (so that it leaves no task
/// behind and an accept that never came shows as a stuck run).
async fn store(listener: coro::net::TcpListener) {
    let mut connections = Vec::new();
    for _ in 0..REQUESTS {
        let (mut stream, _) = listener.accept().await.unwrap();
        connections.push(coro::spawn(async move {
            let mut key = [0; 8];
            stream.read_exact(&mut key).await.unwrap();
            let value = u64::from_le_bytes(key) * 3;
            stream.write_all(&value.to_le_bytes()).await.unwrap();
        }));
    }
    for connection in connections {
        connection.await.unwrap();
    }
}

/// A socket leaf: asks the store on `port` for key `i` over a fresh connection.
async fn fetch(port: u16, i: u64) -> u64 {
    let mut stream = coro::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    stream.write_all(&i.to_le_bytes()).await.unwrap();
    let mut value = [0; 8];
    stream.read_exact(&mut value).await.unwrap();
    u64::from_le_bytes(value)
}

/// One request: a DAG (a shared dependency awaited by two children, a timer leaf and a
/// socket leaf), a section under the fair lock, a pass through the semaphore, a value sent to
/// the consumer, and a leaf that is cancelled by a timeout in some requests.
async fn request(i: u64, port: u16, world: Arc<World>, tx: coro::channel::Sender<u64>) {
    let dependency = coro::Task::new(async move {
        coro::yield_now().await;
        i
    })
    .shared();
    let (a, b, c, stored) = coro::collect_all!(
        dependency.clone(),
        dependency.clone(),
        async move {
            coro::time::sleep(Duration::from_millis(i % 5))
                .await
                .unwrap();
            1
        },
        fetch(port, i)
    )
    .await;
    assert_eq!(
        (a, b, c),
        (i, i, 1),
        "a shared dependency gave another value"
    );
    assert_eq!(stored, 3 * i, "request {i} got another request's reply");

    if coro::sim::random_u64() % 4 == 0 {
        let mut pair = world.pair.write().await;
        pair.0 += 1;
        coro::yield_now().await;
        pair.1 += 1;
    } else {
        let pair = world.pair.read().await;
        assert_eq!(pair.0, pair.1, "a reader saw a writer's half-done update");
    }

    {
        let _permit = world.gate.acquire(1).await;
        let now = world.inside.fetch_add(1, SeqCst) + 1;
        assert!(
            now <= PERMITS,
            "{now} tasks inside a semaphore of {PERMITS}"
        );
        coro::yield_now().await;
        world.inside.fetch_sub(1, SeqCst);
    }

    // A leaf that outlives its deadline in some requests: the timeout drops it.
    let slow = Duration::from_millis(if i % 3 == 0 { 50 } else { 1 });
    let timed = coro::time::timeout(Duration::from_millis(10), coro::time::sleep(slow)).await;
    assert_eq!(
        timed.is_err(),
        i % 3 == 0,
        "request {i}: the timeout decided wrongly"
    );

    let blocking = coro::spawn_blocking(move || i * 2).await.unwrap();
    tx.send(a + b + c + stored + blocking).await.unwrap();
}

/// The whole run: returns the consumer's sum, which must be each request's value once.
async fn workload() -> u64 {
    let world = Arc::new(World {
        pair: SharedMutexFair::new((0, 0)),
        gate: Semaphore::new(PERMITS),
        inside: AtomicUsize::new(0),
    });
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let store = coro::spawn(store(listener));
    let (tx, rx) = coro::channel::bounded::<u64>(2);
    let consumer = coro::spawn(async move {
        let mut sum = 0;
        while let Ok(value) = rx.recv().await {
            sum += value;
        }
        sum
    });
    let requests: Vec<_> = (0..REQUESTS)
        .map(|i| coro::spawn(request(i, port, world.clone(), tx.clone())))
        .collect();
    drop(tx);
    for request in requests {
        request.await.unwrap();
    }
    store.await.unwrap();
    let pair = world.pair.read().await;
    assert_eq!(pair.0, pair.1);
    consumer.await.unwrap()
}

/// Each request sends `i + i + 1 + 3i + 2i`.
fn expected_sum() -> u64 {
    (0..REQUESTS).map(|i| 7 * i + 1).sum()
}

#[test]
fn the_soak_mix_holds_its_invariants_under_every_seed() {
    let seeds = std::env::var("CORO_SIM_SOAK_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let runs = Rc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    coro::sim::run_seeds(0..seeds, move || {
        counted.fetch_add(1, SeqCst);
        async {
            assert_eq!(
                workload().await,
                expected_sum(),
                "a value was lost or doubled"
            );
        }
    });
    // `CORO_SIM_SEED` replays that one seed instead.
    let replay = std::env::var("CORO_SIM_SEED").is_ok();
    assert_eq!(runs.load(SeqCst) as u64, if replay { 1 } else { seeds });
}

#[test]
fn the_soak_mix_is_deterministic() {
    for seed in [1, 7, 42] {
        let sum = coro::sim::Builder::new()
            .seed(seed)
            .check_determinism(true)
            .run_with(workload);
        assert_eq!(sum, expected_sum());
    }
}
