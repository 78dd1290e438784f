//! `coro::net` on the pool's own IO driver: echo over TCP with many connections and split
//! halves, UDP, Unix streams, cancellation-aware accept and connect (tasks resuming on their own
//! pool with no thread started for IO: `net_threads.rs`).

#![cfg(unix)]

use coro::cancel::{CancellationSource, CancelledOutcome};
use coro::net::{TcpListener, TcpStream, UdpSocket, UnixStream};
use futures::{AsyncReadExt, AsyncWriteExt};
use std::time::{Duration, Instant};

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn tcp_echo_with_many_connections_and_split_halves() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = coro::spawn(async move {
        let mut connections = Vec::new();
        for _ in 0..100 {
            let (stream, _) = listener.accept().await.unwrap();
            connections.push(coro::spawn(async move {
                let (mut read, mut write) = stream.into_split();
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = read.read(&mut buf).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    write.write_all(&buf[..n]).await.unwrap();
                }
                write.close().await.unwrap();
            }));
        }
        for connection in connections {
            connection.await.unwrap();
        }
    });
    let clients: Vec<_> = (0..100u32)
        .map(|i| {
            coro::spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                stream.set_nodelay(true).unwrap();
                // More than a socket buffer's worth, so that writes wait for the echo.
                let message: Vec<u8> = (0..200_000u32).map(|b| (b ^ i) as u8).collect();
                let (mut read, mut write) = stream.into_split();
                let sent = message.clone();
                let writer = coro::spawn(async move {
                    write.write_all(&sent).await.unwrap();
                    write.close().await.unwrap();
                });
                let mut echoed = Vec::new();
                read.read_to_end(&mut echoed).await.unwrap();
                writer.await.unwrap();
                assert_eq!(echoed, message);
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    server.await.unwrap();
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn udp_round_trip_between_tasks() {
    let a = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let b_addr = b.local_addr().unwrap();
    let echo = coro::spawn(async move {
        let mut buf = [0u8; 64];
        for _ in 0..100 {
            let (n, from) = b.recv_from(&mut buf).await.unwrap();
            b.send_to(&buf[..n], from).await.unwrap();
        }
    });
    let mut buf = [0u8; 64];
    for i in 0..100u32 {
        let message = i.to_le_bytes();
        a.send_to(&message, b_addr).await.unwrap();
        let (n, from) = a.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&message[..], b_addr));
    }
    echo.await.unwrap();
}

#[coro::test(worker_threads = 2, timeout_ms = 10_000)]
async fn unix_stream_pair_carries_data_both_ways() {
    let (mut a, mut b) = UnixStream::pair().unwrap();
    let peer = coro::spawn(async move {
        let mut buf = vec![0u8; 100_000];
        b.read_exact(&mut buf).await.unwrap();
        b.write_all(&buf).await.unwrap();
    });
    let data: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    a.write_all(&data).await.unwrap();
    let mut back = vec![0u8; data.len()];
    a.read_exact(&mut back).await.unwrap();
    assert_eq!(back, data);
    peer.await.unwrap();
}

#[test]
fn a_pending_accept_returns_a_cancelled_error_promptly() {
    let source = CancellationSource::new();
    let token = source.token();
    let handle = coro::Task::new(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.accept().await.map(|_| ())
    })
    .with_cancellation(token)
    .schedule_on(coro::default_pool())
    .start();
    std::thread::sleep(Duration::from_millis(50));
    let cancelled_at = Instant::now();
    source.request_cancellation();
    let err = coro::block_wait(handle).unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(1));
}

/// A listener whose accept queue is full and never drained: a further connect's SYN is dropped
/// by the kernel, so that connect stays pending.
fn saturated_listener() -> (
    socket2::Socket,
    std::net::SocketAddr,
    Vec<std::net::TcpStream>,
) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
    socket.listen(0).unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    let mut filled = Vec::new();
    while let Ok(stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
        filled.push(stream);
        assert!(filled.len() < 64, "the accept queue never filled");
    }
    (socket, addr, filled)
}

#[test]
fn a_pending_connect_returns_a_cancelled_error_promptly() {
    let (_listener, addr, _filled) = saturated_listener();
    let source = CancellationSource::new();
    let token = source.token();
    let handle = coro::Task::new(async move { TcpStream::connect(addr).await.map(|_| ()) })
        .with_cancellation(token)
        .schedule_on(coro::default_pool())
        .start();
    std::thread::sleep(Duration::from_millis(100));
    let cancelled_at = Instant::now();
    source.request_cancellation();
    let err = coro::block_wait(handle).unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(1));
}
