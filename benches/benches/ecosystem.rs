//! tokio's ecosystem on coro, side by side with the same crates on tokio: real PostgreSQL and
//! Redis servers (started once per bench process by `coro-test-servers`, on 127.0.0.1), the same
//! client crates, the same queries, the same task shape. What differs is only the runtime under
//! the tasks and how the crate reaches the OS:
//!
//! - `postgres_point_select`: [`TASKS`] concurrent tasks each run [`QUERIES_PER_TASK`] point
//!   selects (`SELECT name FROM users WHERE id = $1`, prepared once per connection) on a table of
//!   [`ROWS`] rows, over [`PG_CONNECTIONS`] tokio-postgres connections that the tasks share round
//!   robin (tokio-postgres pipelines the queries of many tasks on one connection). `coro`: a
//!   `coro::ThreadPool` of [`WORKERS`]; each connection is `Config::connect_raw` over a
//!   `coro::net::TcpStream` (feature `tokio-io`: tokio's IO traits on coro's own IO driver, no
//!   tokio runtime), its connection future a `coro::spawn`ed task. `tokio`: a multi-thread
//!   runtime of [`WORKERS`]; each connection is tokio-postgres' own `Config::connect` over
//!   `tokio::net` (which sets `TCP_NODELAY`, as the coro side does), its connection future
//!   `tokio::spawn`ed.
//! - `redis_get`: [`TASKS`] concurrent tasks each run [`GETS_PER_TASK`] `GET`s of seeded keys on
//!   one redis-rs multiplexed connection (`tokio-comp`). `coro`: a `coro::ThreadPool` of
//!   [`WORKERS`], every redis call wrapped in `coro::compat::tokio` (feature `tokio-compat`), so
//!   the connection's socket and its driver task live on the bridge's tokio thread and every
//!   reply wakes the coro task from that thread. `tokio`: plain redis-rs on a multi-thread
//!   runtime of [`WORKERS`].
//!
//! Every function spawns its tasks with the runtime's public spawn (`coro::spawn`,
//! `tokio::spawn`, through `coro_benches`' [`Spawner`]), and the bench thread waits for the root
//! task with `coro_benches::run`, the same wait for both. The runtime and its connections are
//! made once per bench function, outside `b.iter`; one iteration is the whole batch of queries,
//! so criterion's throughput (`Throughput::Elements`) is queries per second. Every reply is
//! checked against the row or key it asked for, so a bench cannot silently measure nothing.
//!
//! A server that is not installed is skipped: `coro-test-servers` prints
//! `skipped: postgres not installed` (or redis) and its group does not run.
//!
//! Run with `cargo bench -p coro-benches --bench ecosystem`;
//! `python3 benches/ratios.py --bench ecosystem --runs 3` runs it in three fresh processes and
//! prints coro / tokio per shape.

use coro_benches::{Runtime, Spawner, WORKERS, run};
use criterion::{Criterion, Throughput};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::{Client, NoTls, Statement};

/// Concurrent tasks per iteration, in both shapes.
const TASKS: usize = 64;
/// Point selects each task runs per iteration of `postgres_point_select`.
const QUERIES_PER_TASK: usize = 50;
/// Rows of the `users` table the point selects read.
const ROWS: usize = 10_000;
/// tokio-postgres connections the tasks of `postgres_point_select` share round robin.
const PG_CONNECTIONS: usize = 4;
/// `GET`s each task runs per iteration of `redis_get`.
const GETS_PER_TASK: usize = 50;
/// Keys seeded for `redis_get`: key `k` holds `k`.
const KEYS: usize = 1_000;
/// The point select of `postgres_point_select`.
const POINT_SELECT: &str = "SELECT name FROM users WHERE id = $1";

/// The user and database of a `coro_test_servers::Postgres` cluster on `port`.
fn pg_config(port: u16) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .dbname("postgres");
    config
}

/// Resolves once a connection task has ended: a runtime is dropped only after its connections
/// have closed, or a socket of coro's would fail in its closing handshake (its IO driver gone).
type Ended = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a tokio-postgres connection future, which ends when its client is dropped; a failure
/// is a panic, so that a broken connection fails the bench instead of stalling it.
async fn drive(connection: impl Future<Output = Result<(), tokio_postgres::Error>>) {
    if let Err(err) = connection.await {
        panic!("the postgres connection failed: {err:?}");
    }
}

/// The join handle of a spawned [`drive`] as an [`Ended`].
fn ended<E: std::fmt::Debug>(task: impl Future<Output = Result<(), E>> + Send + 'static) -> Ended {
    Box::pin(async move { task.await.expect("the postgres connection task") })
}

/// How each runtime reaches tokio's ecosystem: the only code that differs between the two
/// functions of a shape.
trait Ecosystem: Runtime + 'static {
    /// Connects tokio-postgres to the server on `port` and starts its connection future as a
    /// task of this runtime; the second output resolves once that task has ended (after the
    /// client is dropped). Runs inside a task of this runtime.
    fn pg_connect(port: u16) -> impl Future<Output = (Client, Ended)> + Send + 'static;

    /// `fut`, a future bound to tokio's reactor (a redis-rs call), made runnable inside a task
    /// of this runtime.
    fn tokio_bound<F: Future + Send>(fut: F) -> impl Future<Output = F::Output> + Send;
}

/// coro: tokio-postgres over `coro::net` (`tokio-io`), redis-rs through `coro::compat::tokio`.
impl Ecosystem for coro::ThreadPool {
    async fn pg_connect(port: u16) -> (Client, Ended) {
        let stream = coro::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connecting to postgres over coro::net");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        let (client, connection) = pg_config(port)
            .connect_raw(stream, NoTls)
            .await
            .expect("postgres startup over coro::net");
        let task = coro::spawn(drive(connection));
        (client, ended(task))
    }

    fn tokio_bound<F: Future + Send>(fut: F) -> impl Future<Output = F::Output> + Send {
        coro::compat::tokio(fut)
    }
}

/// tokio: tokio-postgres' own `connect` over `tokio::net`, plain redis-rs.
impl Ecosystem for tokio::runtime::Runtime {
    async fn pg_connect(port: u16) -> (Client, Ended) {
        let (client, connection) = pg_config(port)
            .connect(NoTls)
            .await
            .expect("connecting to postgres over tokio::net");
        let task = tokio::spawn(drive(connection));
        (client, ended(task))
    }

    fn tokio_bound<F: Future + Send>(fut: F) -> impl Future<Output = F::Output> + Send {
        fut
    }
}

// ---------------------------------------------------------------------------------------------
// postgres_point_select

/// A tokio-postgres connection and the point select prepared on it (a statement belongs to its
/// connection).
struct PgConnection {
    client: Client,
    select: Statement,
}

/// Creates and fills the `users` table once per server: row `id` is named `user <id>`.
fn seed_postgres(port: u16) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime for seeding");
    rt.block_on(async {
        let (client, connection) = pg_config(port)
            .connect(NoTls)
            .await
            .expect("connecting to postgres to seed it");
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!(
                "CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL);
                 INSERT INTO users SELECT i, 'user ' || i FROM generate_series(1, {ROWS}) i;
                 ANALYZE users;"
            ))
            .await
            .expect("seeding the users table");
        drop(client);
        driver
            .await
            .expect("the seeding connection panicked")
            .expect("the seeding connection failed");
    });
}

/// One iteration: [`TASKS`] tasks, each [`QUERIES_PER_TASK`] point selects on connection
/// `task % PG_CONNECTIONS`, every row checked.
async fn point_selects<S: Spawner>(spawner: S, connections: Arc<[PgConnection]>) {
    let mut tasks = Vec::with_capacity(TASKS);
    for task in 0..TASKS {
        let connections = connections.clone();
        tasks.push(spawner.spawn(async move {
            let connection = &connections[task % connections.len()];
            for query in 0..QUERIES_PER_TASK {
                let id = ((task * QUERIES_PER_TASK + query) % ROWS + 1) as i32;
                let row = connection
                    .client
                    .query_one(&connection.select, &[&id])
                    .await
                    .expect("point select");
                let name: &str = row.get(0);
                let got = name
                    .strip_prefix("user ")
                    .and_then(|n| n.parse::<i32>().ok());
                assert_eq!(got, Some(id), "row {id} came back as {name:?}");
            }
        }));
    }
    for task in tasks {
        task.await;
    }
}

/// `postgres_point_select/<name>` on runtime `R`, against the server on `port`.
fn postgres_point_select<R: Ecosystem>(c: &mut Criterion, port: u16, name: &str) {
    let rt = R::build(WORKERS);
    let (connections, ended) = rt.block_on(async move {
        let mut connections = Vec::with_capacity(PG_CONNECTIONS);
        let mut ended = Vec::with_capacity(PG_CONNECTIONS);
        for _ in 0..PG_CONNECTIONS {
            let (client, connection_ended) = R::pg_connect(port).await;
            let select = client
                .prepare(POINT_SELECT)
                .await
                .expect("preparing the point select");
            connections.push(PgConnection { client, select });
            ended.push(connection_ended);
        }
        (Arc::<[PgConnection]>::from(connections), ended)
    });
    let spawner = rt.spawner();
    let mut group = c.benchmark_group("postgres_point_select");
    group.throughput(Throughput::Elements((TASKS * QUERIES_PER_TASK) as u64));
    group.bench_function(name, |b| {
        b.iter(|| run(&rt, point_selects(spawner, connections.clone())))
    });
    group.finish();
    // The clients go first, and the runtime waits for their connections to close.
    rt.block_on(async move {
        drop(connections);
        for connection_ended in ended {
            connection_ended.await;
        }
    });
}

// ---------------------------------------------------------------------------------------------
// redis_get

/// The name of seeded key `k`.
fn redis_key(k: usize) -> String {
    format!("bench:{k}")
}

/// Sets key `k` to `k` for every `k` below [`KEYS`], once per server.
fn seed_redis(url: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime for seeding");
    rt.block_on(async {
        let client = redis::Client::open(url).expect("redis url");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("connecting to redis to seed it");
        let mut pipe = redis::pipe();
        for k in 0..KEYS {
            pipe.set(redis_key(k), k).ignore();
        }
        pipe.query_async::<()>(&mut connection)
            .await
            .expect("seeding redis");
    });
}

/// One iteration: [`TASKS`] tasks, each [`GETS_PER_TASK`] `GET`s on a clone of the multiplexed
/// `connection`, every value checked.
async fn gets<R: Ecosystem>(
    spawner: R::Spawner,
    connection: MultiplexedConnection,
    keys: Arc<[String]>,
) {
    let mut tasks = Vec::with_capacity(TASKS);
    for task in 0..TASKS {
        let mut connection = connection.clone();
        let keys = keys.clone();
        tasks.push(spawner.spawn(async move {
            for get in 0..GETS_PER_TASK {
                let k = (task * GETS_PER_TASK + get) % KEYS;
                let value: usize = R::tokio_bound(connection.get(&keys[k]))
                    .await
                    .expect("redis GET");
                assert_eq!(value, k, "key {} came back as {value}", keys[k]);
            }
        }));
    }
    for task in tasks {
        task.await;
    }
}

/// `redis_get/<name>` on runtime `R`, against the server at `url`.
fn redis_get<R: Ecosystem>(c: &mut Criterion, url: &str, name: &str) {
    let rt = R::build(WORKERS);
    let client = redis::Client::open(url).expect("redis url");
    let connection = rt.block_on(async move {
        R::tokio_bound(client.get_multiplexed_async_connection())
            .await
            .expect("connecting to redis")
    });
    let keys: Arc<[String]> = (0..KEYS).map(redis_key).collect();
    let spawner = rt.spawner();
    let mut group = c.benchmark_group("redis_get");
    group.throughput(Throughput::Elements((TASKS * GETS_PER_TASK) as u64));
    group.bench_function(name, |b| {
        b.iter(|| run(&rt, gets::<R>(spawner, connection.clone(), keys.clone())))
    });
    group.finish();
    drop(connection);
}

/// `rt_multi_threaded`'s settings.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

/// criterion's `criterion_main!`, with the servers started before the groups and stopped (their
/// handles dropped) after them: one server of each kind for the whole process, shared by both
/// runtimes.
fn main() {
    let mut c = config().configure_from_args();
    if let Some(postgres) = coro_test_servers::Postgres::start() {
        seed_postgres(postgres.port());
        postgres_point_select::<coro::ThreadPool>(&mut c, postgres.port(), "coro");
        postgres_point_select::<tokio::runtime::Runtime>(&mut c, postgres.port(), "tokio");
    }
    if let Some(redis) = coro_test_servers::Redis::start() {
        let url = redis.url();
        seed_redis(&url);
        redis_get::<coro::ThreadPool>(&mut c, &url, "coro");
        redis_get::<tokio::runtime::Runtime>(&mut c, &url, "tokio");
    }
    c.final_summary();
}
