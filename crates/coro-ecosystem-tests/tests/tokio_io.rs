//! Feature `tokio-io`: tokio's IO traits on coro::net's streams, over coro's own IO driver,
//! with no tokio runtime anywhere in the process; and tokio-postgres on them against a real
//! PostgreSQL server that the test starts (skipped, saying so, where PostgreSQL is missing).
//!
//! This file runs as its own process, so "no tokio runtime thread" is a statement about coro
//! alone (the bridge of `tokio-compat` is tested in `tokio_compat.rs`).

use coro::net::{TcpListener, TcpStream, UnixStream};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// No tokio runtime: none in this task's context, and no thread named like tokio's in the
/// process.
fn assert_no_tokio_runtime() {
    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "a tokio runtime context is entered inside a coro task"
    );
    for entry in std::fs::read_dir("/proc/self/task").unwrap() {
        let comm = std::fs::read_to_string(entry.unwrap().path().join("comm")).unwrap();
        assert!(
            !comm.starts_with("tokio-runtime") && !comm.starts_with("coro-tokio"),
            "a tokio runtime thread runs in the process: {comm}"
        );
    }
}

/// Writes `msg` on `w`, shuts it down, and reads everything `r` gets.
async fn round_trip(
    mut w: impl AsyncWrite + Unpin,
    mut r: impl AsyncRead + Unpin,
    msg: &[u8],
) -> Vec<u8> {
    w.write_all(msg).await.unwrap();
    w.shutdown().await.unwrap();
    let mut got = Vec::new();
    r.read_to_end(&mut got).await.unwrap();
    got
}

#[coro::test(worker_threads = 2)]
async fn tcp_streams_and_halves_implement_tokio_io() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    // Whole streams one way, split halves (from two tasks) the other way.
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let there = coro::spawn(round_trip(client_write, server_read, b"to the server"));
    let back = round_trip(server_write, client_read, b"to the client").await;
    assert_eq!(back, b"to the client");
    assert_eq!(there.await.unwrap(), b"to the server");
    assert_no_tokio_runtime();
}

#[coro::test(worker_threads = 2)]
async fn unix_streams_and_halves_implement_tokio_io() {
    let (a, b) = UnixStream::pair().unwrap();
    assert_eq!(round_trip(a, b, b"whole streams").await, b"whole streams");
    let (a, b) = UnixStream::pair().unwrap();
    let (_a_read, a_write) = a.into_split();
    let (b_read, _b_write) = b.into_split();
    assert_eq!(round_trip(a_write, b_read, b"halves").await, b"halves");
    assert_no_tokio_runtime();
}

#[coro::test(worker_threads = 2)]
async fn reads_land_in_uninitialised_capacity_and_large_transfers_arrive_whole() {
    // `read_buf` into a Vec's spare capacity hands the socket uninitialised memory.
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let payload: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let writer = coro::spawn({
        let payload = payload.clone();
        async move {
            a.write_all(&payload).await.unwrap();
            a.shutdown().await.unwrap();
        }
    });
    let mut got = Vec::with_capacity(4096);
    while b.read_buf(&mut got).await.unwrap() > 0 {
        if got.len() == got.capacity() {
            got.reserve(64 * 1024);
        }
    }
    writer.await.unwrap();
    assert_eq!(got.len(), payload.len());
    assert!(got == payload, "the bytes arrived changed");
}

#[coro::test(worker_threads = 2)]
async fn vectored_writes_reach_the_peer_in_order() {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    assert!(a.is_write_vectored());
    let bufs = [
        std::io::IoSlice::new(b"head "),
        std::io::IoSlice::new(b"body"),
    ];
    let n = a.write_vectored(&bufs).await.unwrap();
    assert_eq!(n, 9); // a socket buffer takes both at once
    drop(a);
    let mut got = String::new();
    b.read_to_string(&mut got).await.unwrap();
    assert_eq!(got, "head body");
}

/// Connects tokio-postgres to `port` over a coro::net::TcpStream; its connection future runs
/// as a coro task.
async fn connect(port: u16) -> tokio_postgres::Client {
    let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut config = tokio_postgres::Config::new();
    config.user("postgres").dbname("postgres");
    let (client, connection) = config
        .connect_raw(stream, tokio_postgres::NoTls)
        .await
        .unwrap();
    // Detached: it ends when the client is dropped.
    drop(coro::spawn(async move {
        if let Err(err) = connection.await {
            panic!("the postgres connection failed: {err}");
        }
    }));
    client
}

#[test]
fn tokio_postgres_queries_from_many_coro_tasks_over_coro_net() {
    let Some(pg) = coro_test_servers::Postgres::start() else {
        return;
    };
    let pool = coro::ThreadPool::new(2).unwrap();
    let port = pg.port();
    coro::block_wait(
        coro::Task::new(async move {
            let setup = connect(port).await;
            setup
                .batch_execute(
                    "CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL);
                     INSERT INTO users SELECT i, 'user ' || i FROM generate_series(1, 100) i;",
                )
                .await
                .unwrap();
            // One client shared by 64 tasks (tokio-postgres pipelines their queries on one
            // connection), and 4 clients of their own.
            let shared = Arc::new(connect(port).await);
            let mut tasks = Vec::new();
            for t in 0..64u32 {
                let client = shared.clone();
                tasks.push(coro::spawn(async move {
                    let statement = client
                        .prepare("SELECT name FROM users WHERE id = $1")
                        .await
                        .unwrap();
                    for q in 0..20 {
                        let id = ((t * 20 + q) % 100 + 1) as i32;
                        let row = client.query_one(&statement, &[&id]).await.unwrap();
                        assert_eq!(row.get::<_, String>(0), format!("user {id}"));
                    }
                    assert_no_tokio_runtime();
                }));
            }
            for _ in 0..4 {
                tasks.push(coro::spawn(async move {
                    let own = connect(port).await;
                    let n: i64 = own
                        .query_one("SELECT count(*) FROM users", &[])
                        .await
                        .unwrap()
                        .get(0);
                    assert_eq!(n, 100);
                }));
            }
            for task in tasks {
                task.await.unwrap();
            }
            // A transaction and an error: the connection reports it and goes on.
            let err = setup
                .execute("INSERT INTO users VALUES (1, 'dup')", &[])
                .await
                .unwrap_err();
            assert_eq!(
                err.code(),
                Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
            );
            let n: i64 = setup
                .query_one("SELECT count(*) FROM users", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(n, 100);
        })
        .schedule_on(&pool),
    );
}
