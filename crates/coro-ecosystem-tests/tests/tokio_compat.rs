//! Feature `tokio-compat`: `coro::compat::tokio(fut)` runs futures bound to tokio's reactor and
//! timers inside coro tasks; and redis-rs (`tokio-comp`) and sqlx's PostgreSQL pool
//! (`runtime-tokio`) through it, from many concurrent coro tasks, against a real `redis-server`
//! and a real PostgreSQL that the tests start (skipped, saying so, where they are missing).

use coro::cancel::{CancellationSource, cancellable};
use coro::compat;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

#[coro::test(worker_threads = 2)]
async fn tokio_timers_and_sockets_work_and_the_task_resumes_on_its_own_executor() {
    // Without the bridge, tokio's sleep panics in a coro task: "no reactor running".
    let bare = coro::spawn(async { tokio::time::sleep(Duration::from_millis(1)).await });
    assert!(bare.await.is_err(), "tokio's sleep ran without a runtime");

    let executor = coro::current_executor().unwrap();
    let start = Instant::now();
    // `tokio::time::sleep` looks for the runtime when it is called, not when first polled:
    // the wrapped future makes the call inside.
    compat::tokio(async { tokio::time::sleep(Duration::from_millis(20)).await }).await;
    assert!(start.elapsed() >= Duration::from_millis(20));
    // The wake came from the bridge's thread; the task resumed on its own pool.
    assert!(
        thread_name().starts_with("coro-worker"),
        "{}",
        thread_name()
    );
    assert!(coro::current_executor().unwrap() == executor);

    // tokio sockets, both ends, and tokio::spawn inside the wrapped future.
    let listener = compat::tokio(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let echo = compat::tokio(async move {
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = [0; 5];
            stream.read_exact(&mut buf).await.unwrap();
            stream.write_all(&buf).await.unwrap();
        })
        .await
    });
    let echo = coro::spawn(echo);
    let reply = compat::tokio(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"hello").await.unwrap();
        let mut buf = [0; 5];
        stream.read_exact(&mut buf).await.unwrap();
        buf
    })
    .await;
    assert_eq!(&reply, b"hello");
    echo.await.unwrap().unwrap();
    assert!(thread_name().starts_with("coro-worker"));
}

/// Counts drops, and whether a tokio runtime context was entered at the drop.
struct DropProbe {
    drops: Arc<AtomicUsize>,
    in_context: Arc<AtomicUsize>,
}

impl Drop for DropProbe {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if tokio::runtime::Handle::try_current().is_ok() {
            self.in_context.fetch_add(1, SeqCst);
        }
    }
}

#[coro::test(worker_threads = 2)]
async fn cancelling_the_task_drops_the_wrapped_future_inside_the_runtime_context() {
    let drops = Arc::new(AtomicUsize::new(0));
    let in_context = Arc::new(AtomicUsize::new(0));
    let probe = DropProbe {
        drops: drops.clone(),
        in_context: in_context.clone(),
    };
    let source = CancellationSource::new();
    let task = coro::Task::new(async move {
        cancellable(compat::tokio(async move {
            let _probe = probe;
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }))
        .await
    })
    .with_cancellation(source.token());
    let waiting = coro::spawn(task);
    coro::time::sleep(Duration::from_millis(20)).await.unwrap();
    assert_eq!(drops.load(SeqCst), 0);
    let start = Instant::now();
    source.request_cancellation();
    assert!(
        waiting.await.unwrap().is_err(),
        "the wait was not cancelled"
    );
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(drops.load(SeqCst), 1);
    assert_eq!(
        in_context.load(SeqCst),
        1,
        "dropped outside the runtime context"
    );
}

#[coro::test(worker_threads = 2)]
async fn a_panic_inside_is_the_tasks_panic() {
    let task = coro::spawn(compat::tokio(async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        panic!("inside the bridge");
    }));
    match task.await {
        Err(coro::JoinError::Panicked(payload)) => {
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside the bridge"));
        }
        other => panic!("expected the task's panic, got {other:?}"),
    }
}

#[test]
fn inside_a_tokio_context_the_bridge_uses_that_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A current-thread runtime runs what it spawns on the thread in `block_on`: this one, not
    // the bridge's.
    let spawned_on = runtime.block_on(compat::tokio(async {
        tokio::spawn(async { thread_name() }).await.unwrap()
    }));
    assert_eq!(spawned_on, thread_name());
    // Outside any tokio context, what the wrapped future spawns runs on the bridge's thread.
    let spawned_on = coro::block_wait(compat::tokio(async {
        tokio::spawn(async { thread_name() }).await.unwrap()
    }));
    assert_eq!(spawned_on, "coro-tokio-compat");
}

#[test]
fn redis_from_many_coro_tasks_through_the_bridge() {
    let Some(redis) = coro_test_servers::Redis::start() else {
        return;
    };
    let pool = coro::ThreadPool::new(2).unwrap();
    let url = redis.url();
    coro::block_wait(
        coro::Task::new(async move {
            let client = redis::Client::open(url).unwrap();
            let connection = compat::tokio(client.get_multiplexed_async_connection())
                .await
                .unwrap();
            let mut tasks = Vec::new();
            for t in 0..64u32 {
                let mut connection = connection.clone();
                tasks.push(coro::spawn(async move {
                    for i in 0..20u32 {
                        let key = format!("key:{t}:{i}");
                        let () = compat::tokio(redis::AsyncCommands::set(
                            &mut connection,
                            &key,
                            t * 1000 + i,
                        ))
                        .await
                        .unwrap();
                        let got: u32 =
                            compat::tokio(redis::AsyncCommands::get(&mut connection, &key))
                                .await
                                .unwrap();
                        assert_eq!(got, t * 1000 + i);
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let mut connection = connection;
            let keys: Vec<String> =
                compat::tokio(redis::AsyncCommands::keys(&mut connection, "key:*"))
                    .await
                    .unwrap();
            assert_eq!(keys.len(), 64 * 20);
        })
        .schedule_on(&pool),
    );
}

#[test]
fn sqlx_postgres_pool_from_many_coro_tasks_through_the_bridge() {
    let Some(pg) = coro_test_servers::Postgres::start() else {
        return;
    };
    let pool = coro::ThreadPool::new(2).unwrap();
    let url = pg.url();
    coro::block_wait(
        coro::Task::new(async move {
            // sqlx's pool connects (and reconnects) with tokio sockets and times out with tokio
            // timers: every call that may touch them goes through the bridge.
            let db = compat::tokio(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(4)
                    .connect(&url),
            )
            .await
            .unwrap();
            compat::tokio(
                sqlx::query("CREATE TABLE kv (k int4 PRIMARY KEY, v int4 NOT NULL)").execute(&db),
            )
            .await
            .unwrap();
            let mut tasks = Vec::new();
            for t in 0..32i32 {
                let db = db.clone();
                tasks.push(coro::spawn(async move {
                    for i in 0..10i32 {
                        let k = t * 100 + i;
                        compat::tokio(
                            sqlx::query("INSERT INTO kv (k, v) VALUES ($1, $2)")
                                .bind(k)
                                .bind(k * 2)
                                .execute(&db),
                        )
                        .await
                        .unwrap();
                        let v: i32 = compat::tokio(
                            sqlx::query_scalar("SELECT v FROM kv WHERE k = $1")
                                .bind(k)
                                .fetch_one(&db),
                        )
                        .await
                        .unwrap();
                        assert_eq!(v, k * 2);
                        // Between the queries the task runs on its own pool, not the bridge's.
                        assert!(
                            thread_name().starts_with("coro-worker"),
                            "{}",
                            thread_name()
                        );
                    }
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            let rows: i64 =
                compat::tokio(sqlx::query_scalar("SELECT count(*) FROM kv").fetch_one(&db))
                    .await
                    .unwrap();
            assert_eq!(rows, 32 * 10);
            compat::tokio(db.close()).await;
        })
        .schedule_on(&pool),
    );
}
