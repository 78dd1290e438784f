//! Bad input against `serve_tls`: plain HTTP on the TLS port, a ClientHello cut short, a client
//! that stalls in its handshake, and garbage after a completed handshake. Each connection is
//! closed within a bound, the server serves a good client meanwhile, and afterwards no
//! connection and no task is left over.
//!
//! One test in its own binary: it counts every live task in the process, which other tests
//! running beside it would disturb.

mod common;

use common::{Server, raw, read_any, read_until_closed, tls_configs, within};
use coro_hyper::rustls;
use coro_hyper::{CoroConnector, client_builder};
use futures::AsyncWriteExt;
use http_body_util::Full;
use hyper::StatusCode;
use hyper::body::Bytes;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server's handshake timeout in this test: short, so the stalled client sees it fire.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_millis(1500);

/// How soon a connection whose input is wrong (not merely late) must be closed: well inside
/// the handshake timeout, so that it is the bad input that closed it.
const PROMPT: Duration = Duration::from_secs(1);

/// The name of serve's connection tasks.
const CONNECTION_TASK: &str = "coro-hyper connection";

/// Live tasks in the process, and those of them that are server connections.
fn live_tasks() -> (usize, usize) {
    let dump = coro::trace::dump_all();
    let connections = dump
        .tasks()
        .iter()
        .filter(|task| task.name() == CONNECTION_TASK)
        .count();
    (dump.tasks().len(), connections)
}

/// The first bytes a real client sends: a ClientHello for `localhost`.
fn client_hello(config: Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).unwrap();
    }
    assert!(hello.len() > 100, "a ClientHello of {} bytes", hello.len());
    hello
}

/// A good HTTPS request, answered promptly.
async fn still_serves(
    client: &hyper_util::client::legacy::Client<CoroConnector, Full<Bytes>>,
    addr: SocketAddr,
) {
    let start = Instant::now();
    let uri = format!("https://localhost:{}/ok", addr.port())
        .parse()
        .unwrap();
    let response = within(Duration::from_secs(5), client.get(uri))
        .await
        .unwrap();
    assert_eq!(
        read_any(response).await,
        (StatusCode::OK, "hello /ok".to_owned())
    );
    assert!(start.elapsed() < PROMPT, "took {:?}", start.elapsed());
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn bad_tls_input_is_closed_promptly_and_leaves_nothing_behind() {
    common::watchdog();
    let (server_config, client_config) = tls_configs(&[]);
    let server = Server::start_tls(server_config, |s| s.handshake_timeout(HANDSHAKE_TIMEOUT)).await;
    let addr = server.addr;
    let hello = client_hello(client_config.clone());
    let before = live_tasks();
    assert_eq!(before.1, 0, "no connection yet");

    let client = client_builder().build(CoroConnector::with_tls(client_config.clone()));
    still_serves(&client, addr).await;

    // Plain HTTP on the TLS port: not a TLS record, refused at once.
    let mut plain = raw(addr, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await;
    let (got, took) = read_until_closed(&mut plain, Duration::from_secs(5)).await;
    assert!(took < PROMPT, "plain HTTP was closed after {took:?}");
    assert!(
        !got.starts_with(b"HTTP/"),
        "plain HTTP got an HTTP answer: {:?}",
        String::from_utf8_lossy(&got)
    );

    // Half a ClientHello, then the client closes its side: the handshake fails at the end of
    // the stream.
    let mut truncated = raw(addr, &hello[..hello.len() / 2]).await;
    truncated.close().await.unwrap();
    let (_, took) = read_until_closed(&mut truncated, Duration::from_secs(5)).await;
    assert!(
        took < PROMPT,
        "a truncated ClientHello was closed after {took:?}"
    );

    // Half a ClientHello, then silence: closed at the handshake timeout, while a good client
    // is served.
    let opened = Instant::now();
    let mut stalled = raw(addr, &hello[..hello.len() / 2]).await;
    still_serves(&client, addr).await;
    let (_, _) = read_until_closed(&mut stalled, HANDSHAKE_TIMEOUT * 4).await;
    let closed_after = opened.elapsed();
    assert!(
        closed_after >= HANDSHAKE_TIMEOUT && closed_after < HANDSHAKE_TIMEOUT * 3,
        "a stalled handshake was closed after {closed_after:?} (timeout {HANDSHAKE_TIMEOUT:?})"
    );

    // A completed handshake, then bytes that are no TLS record, written under the TLS layer.
    let tcp = coro::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = futures_rustls::TlsConnector::from(client_config)
        .connect(name, tcp)
        .await
        .expect("the handshake of a good client");
    let (mut tcp, _) = tls.into_inner();
    tcp.write_all(b"\x00\x01garbage after the handshake\xff\xfe\r\n\r\n")
        .await
        .unwrap();
    let (_, took) = read_until_closed(&mut tcp, Duration::from_secs(5)).await;
    assert!(
        took < PROMPT,
        "garbage after the handshake was closed after {took:?}"
    );

    still_serves(&client, addr).await;
    assert_eq!(server.accepted(), 5, "four bad clients and the good one");

    // Nothing left over: once the client (and its pooled connection) is gone, the process
    // has the tasks it had before, and no server connection.
    drop(client);
    let until = Instant::now() + Duration::from_secs(5);
    let mut now = live_tasks();
    while now != before && Instant::now() < until {
        coro::time::sleep(Duration::from_millis(10)).await.unwrap();
        now = live_tasks();
    }
    assert_eq!(
        now,
        before,
        "(live tasks, live connections) before and after; now:\n{}",
        coro::trace::dump_all()
    );
    server.stop().await;
}
