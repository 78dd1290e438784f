//! Tasks doing IO resume on their own pool, and no thread is started for IO. A test binary of its
//! own: it counts the process's threads, which tests running beside it would change.

#![cfg(unix)]

use coro::net::{TcpListener, TcpStream};
use futures::{AsyncReadExt, AsyncWriteExt};
use std::time::Duration;

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
}

#[test]
fn tasks_resume_on_their_own_pool_and_no_thread_is_started_for_io() {
    let pool = coro::ThreadPool::builder()
        .worker_threads(2)
        .thread_name("net-own")
        .build()
        .unwrap();
    // Let the pool start its threads.
    coro::block_wait(coro::Task::new(async {}).schedule_on(&pool));
    std::thread::sleep(Duration::from_millis(20));
    let before = thread_count();
    let names = coro::block_wait(
        coro::Task::new(async {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut names = Vec::new();
            for _ in 0..20 {
                let client = coro::spawn(async move {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    s.write_all(b"x").await.unwrap();
                    let mut b = [0u8; 1];
                    s.read_exact(&mut b).await.unwrap();
                    std::thread::current().name().map(str::to_owned)
                });
                let (mut s, _) = listener.accept().await.unwrap();
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                names.push(std::thread::current().name().map(str::to_owned));
                s.write_all(&b).await.unwrap();
                names.push(client.await.unwrap());
            }
            names
        })
        .schedule_on(&pool),
    );
    for name in names {
        assert!(
            name.as_deref().is_some_and(|n| n.starts_with("net-own")),
            "resumed on {name:?}"
        );
    }
    assert_eq!(thread_count(), before, "IO started a thread");
}
