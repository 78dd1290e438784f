//! `coro::sim::net`: `coro::net` inside a simulation talks over an in-memory network of named
//! hosts: TCP with seeded latency per segment, refused connects, partitions that hold data back
//! until `heal`, UDP with seeded latency and loss; the same seed gives the same run.

use coro::sim::Builder;
use futures::{AsyncReadExt, AsyncWriteExt};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A server host that echoes every connection's bytes back until the peer closes.
async fn echo_server() {
    let listener = coro::net::TcpListener::bind("0.0.0.0:7").await.unwrap();
    loop {
        let (mut stream, _) = listener.accept().await.unwrap();
        coro::spawn(async move {
            let mut buf = [0; 64];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                stream.write_all(&buf[..n]).await.unwrap();
            }
        })
        .detach();
    }
}

/// Three clients on two hosts echo five messages each through the server host; the log holds
/// every reply with the client, the message and the virtual time it came back.
fn echo_log(seed: u64) -> Vec<String> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let client = |name: &'static str, log: Arc<Mutex<Vec<String>>>| {
        move || {
            let log = log.clone();
            async move {
                let start = coro::time::Instant::now();
                let mut stream = coro::net::TcpStream::connect("server:7").await.unwrap();
                assert_eq!(
                    stream.peer_addr().unwrap().ip(),
                    coro::sim::net::lookup("server")
                );
                for i in 0..5 {
                    let message = format!("{name}-{i}");
                    stream.write_all(message.as_bytes()).await.unwrap();
                    let mut reply = vec![0; message.len()];
                    stream.read_exact(&mut reply).await.unwrap();
                    assert_eq!(reply, message.as_bytes());
                    log.lock()
                        .unwrap()
                        .push(format!("{message} at {:?}", start.elapsed()));
                }
            }
        }
    };
    let done = log.clone();
    Builder::new()
        .seed(seed)
        .host("server", echo_server)
        .host("a", client("a", log.clone()))
        .host("b", client("b", log.clone()))
        .run(async move {
            // Main is a client too, then waits until the others have finished.
            client("main", done.clone())().await;
            while done.lock().unwrap().len() < 15 {
                coro::time::sleep(Duration::from_millis(1)).await.unwrap();
            }
        });
    log.lock().unwrap().clone()
}

#[test]
fn hosts_echo_over_tcp_and_the_same_seed_gives_the_same_event_log() {
    let wall = std::time::Instant::now();
    let first = echo_log(11);
    assert_eq!(first.len(), 15, "{first:?}");
    assert_eq!(first, echo_log(11), "the same seed gave another run");
    // Latency is seeded: other seeds give other arrival times and orders.
    assert!(
        (12..20).any(|seed| echo_log(seed) != first),
        "20 seeds gave one and the same run"
    );
    // Every reply took at least two segments of at least the default 1 ms latency.
    assert!(
        first.iter().all(|line| !line.ends_with(" at 0ns")),
        "{first:?}"
    );
    assert!(wall.elapsed() < Duration::from_secs(20));
}

#[test]
fn the_echo_is_deterministic_under_the_check() {
    let out = Builder::new()
        .seed(5)
        .workers(3)
        .check_determinism(true)
        .host("server", echo_server)
        .run_with(|| async {
            let mut stream = coro::net::TcpStream::connect(("server", 7)).await.unwrap();
            stream.write_all(b"determinism").await.unwrap();
            let mut reply = [0; 11];
            stream.read_exact(&mut reply).await.unwrap();
            reply
        });
    assert_eq!(&out, b"determinism");
}

#[test]
fn a_closed_port_refuses_and_an_unknown_host_does_not_resolve() {
    Builder::new()
        .seed(2)
        .host("server", || async {})
        .run(async {
            let start = coro::time::Instant::now();
            let err = coro::net::TcpStream::connect("server:8080")
                .await
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
            assert!(
                start.elapsed() > Duration::ZERO,
                "the refusal took no virtual time"
            );
            let err = coro::net::TcpStream::connect("nowhere:80")
                .await
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
            assert!(err.to_string().contains("nowhere"), "{err}");
        });
}

#[test]
fn a_listener_on_main_is_reached_through_localhost_and_its_name() {
    Builder::new().seed(3).run(async {
        let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(addr.ip(), coro::sim::net::lookup("main"));
        let port = addr.port();
        let by_name = coro::spawn(coro::net::TcpStream::connect(("main", port)));
        let by_loopback = coro::spawn(coro::net::TcpStream::connect(("localhost", port)));
        listener.accept().await.unwrap();
        listener.accept().await.unwrap();
        by_name.await.unwrap().unwrap();
        by_loopback.await.unwrap().unwrap();
        // A second bind of the port fails; once the listener is gone, connects are refused.
        let again = coro::net::TcpListener::bind(("0.0.0.0", port)).await;
        assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
        drop(listener);
        let err = coro::net::TcpStream::connect(addr).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    });
}

/// A request/reply server: reads a 4-byte request, replies "pong".
async fn pong_server(log: Arc<Mutex<Vec<String>>>) {
    let listener = coro::net::TcpListener::bind("0.0.0.0:80").await.unwrap();
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut request = [0; 4];
    stream.read_exact(&mut request).await.unwrap();
    log.lock().unwrap().push(format!(
        "server read {:?}",
        std::str::from_utf8(&request).unwrap()
    ));
    stream.write_all(b"pong").await.unwrap();
    coro::time::sleep(Duration::from_secs(3600)).await.unwrap();
}

#[test]
fn a_partition_mid_request_fires_the_timeout_in_virtual_time_and_heal_completes_it() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let server_log = log.clone();
    let wall = std::time::Instant::now();
    let (timed_out_after, total) = Builder::new()
        .seed(7)
        .host("server", move || pong_server(server_log.clone()))
        .run(async {
            let start = coro::time::Instant::now();
            let mut stream = coro::net::TcpStream::connect("server:80").await.unwrap();
            stream.write_all(b"ping").await.unwrap();
            // The request is in flight: the partition holds it back.
            coro::sim::net::partition("main", "server");
            let asked = coro::time::Instant::now();
            let mut reply = [0; 4];
            let attempt =
                coro::time::timeout(Duration::from_secs(30), stream.read_exact(&mut reply)).await;
            assert!(attempt.is_err(), "a reply crossed the partition");
            let timed_out_after = asked.elapsed();
            coro::sim::net::heal("main", "server");
            stream.read_exact(&mut reply).await.unwrap();
            assert_eq!(&reply, b"pong");
            (timed_out_after, start.elapsed())
        });
    assert_eq!(timed_out_after, Duration::from_secs(30));
    assert!(total > Duration::from_secs(30));
    assert_eq!(*log.lock().unwrap(), ["server read \"ping\""]);
    assert!(
        wall.elapsed() < Duration::from_secs(10),
        "virtual time took real time"
    );
}

#[test]
fn a_connect_across_a_partition_times_out_in_virtual_time() {
    Builder::new()
        .seed(4)
        .host("server", || async {
            let listener = coro::net::TcpListener::bind("0.0.0.0:80").await.unwrap();
            let _ = listener.accept().await;
        })
        .run(async {
            coro::sim::net::partition("server", "main");
            let start = coro::time::Instant::now();
            let err = coro::net::TcpStream::connect("server:80")
                .await
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");
            assert!(start.elapsed() >= Duration::from_secs(75));
            // Healed, the same connect goes through.
            coro::sim::net::heal("server", "main");
            coro::net::TcpStream::connect("server:80").await.unwrap();
        });
}

#[test]
fn a_writer_to_a_partitioned_peer_stalls_once_the_window_fills() {
    Builder::new()
        .seed(6)
        .host("sink", || async {
            let listener = coro::net::TcpListener::bind("0.0.0.0:9").await.unwrap();
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut all = Vec::new();
            stream.read_to_end(&mut all).await.unwrap();
            assert_eq!(all.len(), 1 << 20);
        })
        .run(async {
            let mut stream = coro::net::TcpStream::connect("sink:9").await.unwrap();
            coro::sim::net::partition("main", "sink");
            let big = vec![7u8; 1 << 20];
            let stalled = coro::time::timeout(Duration::from_secs(5), stream.write_all(&big)).await;
            assert!(
                stalled.is_err(),
                "a megabyte went into a partitioned connection"
            );
            coro::sim::net::heal("main", "sink");
            stream.write_all(&big).await.unwrap();
            stream.close().await.unwrap();
        });
}

#[test]
fn a_panicking_host_fails_the_run_and_names_the_host() {
    let failure = catch_unwind(AssertUnwindSafe(|| {
        Builder::new()
            .seed(1)
            .host("flaky", || async { panic!("flaky host gave up") })
            .run(async {
                coro::time::sleep(Duration::from_secs(1)).await.unwrap();
            })
    }))
    .unwrap_err();
    let report = coro::executor::panic_message(failure.as_ref()).unwrap_or_default();
    assert!(report.contains("host \"flaky\" failed"), "{report}");
    assert!(report.contains("CORO_SIM_SEED=1"), "{report}");
}

/// How many of 1000 datagrams arrive with 30% loss, and when the last one did.
fn udp_run(seed: u64) -> (usize, Duration) {
    Builder::new()
        .seed(seed)
        .host("sink", || async {
            let socket = coro::net::UdpSocket::bind("0.0.0.0:53").await.unwrap();
            let mut count = 0u32;
            let mut buf = [0; 16];
            loop {
                let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                assert_eq!(from.ip(), coro::sim::net::lookup("main"));
                if &buf[..n] == b"count?" {
                    socket.send_to(&count.to_le_bytes(), from).await.unwrap();
                } else {
                    count += 1;
                }
            }
        })
        .run(async {
            coro::sim::net::set_udp_drop(0.3);
            coro::sim::net::set_latency(Duration::from_millis(1), Duration::from_millis(50));
            let socket = coro::net::UdpSocket::bind("0.0.0.0:0").await.unwrap();
            let start = coro::time::Instant::now();
            for i in 0..1000u32 {
                socket.send_to(&i.to_le_bytes(), "sink:53").await.unwrap();
            }
            coro::time::sleep(Duration::from_secs(1)).await.unwrap();
            coro::sim::net::set_udp_drop(0.0);
            socket.send_to(b"count?", "sink:53").await.unwrap();
            let mut buf = [0; 4];
            let (n, _) = socket.recv_from(&mut buf).await.unwrap();
            assert_eq!(n, 4);
            (u32::from_le_bytes(buf) as usize, start.elapsed())
        })
}

#[test]
fn udp_loses_datagrams_with_the_seeded_probability() {
    let (received, elapsed) = udp_run(21);
    assert!(
        (600..800).contains(&received),
        "{received} of 1000 arrived at 30% loss"
    );
    assert!(elapsed >= Duration::from_secs(1));
    assert_eq!(
        udp_run(21),
        (received, elapsed),
        "the same seed lost other datagrams"
    );
    assert!((22..30).any(|seed| udp_run(seed).0 != received));
}

#[test]
fn udp_across_a_partition_is_lost() {
    Builder::new()
        .seed(8)
        .host("peer", || async {
            let socket = coro::net::UdpSocket::bind("0.0.0.0:9").await.unwrap();
            let mut buf = [0; 8];
            loop {
                let (n, from) = socket.recv_from(&mut buf).await.unwrap();
                socket.send_to(&buf[..n], from).await.unwrap();
            }
        })
        .run(async {
            let socket = coro::net::UdpSocket::bind("0.0.0.0:0").await.unwrap();
            socket.connect("peer:9").await.unwrap();
            coro::sim::net::partition("main", "peer");
            socket.send(b"lost").await.unwrap();
            let mut buf = [0; 8];
            let lost = coro::time::timeout(Duration::from_secs(1), socket.recv(&mut buf)).await;
            assert!(lost.is_err(), "a datagram crossed the partition");
            coro::sim::net::heal("main", "peer");
            socket.send(b"found").await.unwrap();
            let n = socket.recv(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"found");
        });
}
