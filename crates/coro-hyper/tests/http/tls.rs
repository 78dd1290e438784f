//! TLS: `client()` over `https://` against `serve_tls`, HTTP/1.1 and HTTP/2 chosen by ALPN, with
//! a certificate made at test time; an untrusted certificate refused by the default roots; and a
//! graceful shutdown that does not wait on a client stuck in its handshake.

use crate::common;

use common::{Server, io_error_in_chain, raw, read_any, read_until_closed, tls_configs, within};
use coro_hyper::{CoroConnector, client_builder};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, StatusCode, Uri, Version};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tower_service::Service;

fn https(addr: SocketAddr, host: &str, path: &str) -> Uri {
    format!("https://{host}:{}{path}", addr.port())
        .parse()
        .unwrap()
}

/// GETs and a POST over `client`, each answered on the `version` that ALPN chose.
async fn exchange(
    client: &hyper_util::client::legacy::Client<CoroConnector, Full<Bytes>>,
    addr: SocketAddr,
    version: Version,
) {
    for host in ["127.0.0.1", "localhost"] {
        let response = client.get(https(addr, host, "/secure")).await.unwrap();
        assert_eq!(response.version(), version, "to {host}");
        assert_eq!(
            read_any(response).await,
            (StatusCode::OK, "hello /secure".to_owned())
        );
    }
    let post = Request::post(https(addr, "127.0.0.1", "/echo"))
        .body(Full::new(Bytes::from("over tls")))
        .unwrap();
    let response = client.request(post).await.unwrap();
    assert_eq!(response.version(), version);
    assert_eq!(
        read_any(response).await,
        (StatusCode::OK, "over tls".to_owned())
    );
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn https_with_http1_and_with_h2_chosen_by_alpn() {
    common::watchdog();
    let (server_config, h1_only) = tls_configs(&[b"http/1.1"]);
    let mut both = (*h1_only).clone();
    both.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let server = Server::start_tls(server_config, |s| s).await;

    let http1 = client_builder().build(CoroConnector::with_tls(h1_only.clone()));
    exchange(&http1, server.addr, Version::HTTP_11).await;
    // The connector given a config without ALPN offers h2: the server picks it.
    let mut no_alpn = (*h1_only).clone();
    no_alpn.alpn_protocols.clear();
    let h2 = client_builder().build(CoroConnector::with_tls(no_alpn.into()));
    exchange(&h2, server.addr, Version::HTTP_2).await;

    // The connection itself says what was negotiated.
    let mut connector = CoroConnector::with_tls(both.into());
    let connection = connector
        .call(https(server.addr, "localhost", "/"))
        .await
        .unwrap();
    assert!(
        connection.is_tls() && connection.negotiated_h2(),
        "{connection:?}"
    );
    drop(connection);
    drop((http1, h2));
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn the_default_roots_refuse_a_self_signed_certificate() {
    common::watchdog();
    let (server_config, _) = tls_configs(&[]);
    let server = Server::start_tls(server_config, |s| s).await;
    let client = coro_hyper::client::<Full<Bytes>>();
    let err = within(
        Duration::from_secs(5),
        client.get(https(server.addr, "localhost", "/")),
    )
    .await
    .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    assert!(
        io_error_in_chain(&err, |e| e.to_string().contains("UnknownIssuer")),
        "{err:?}"
    );
    drop(client);
    server.stop().await;
}

#[coro::test(worker_threads = 2, timeout_ms = 20_000)]
async fn graceful_shutdown_abandons_a_stalled_handshake() {
    common::watchdog();
    let (server_config, _) = tls_configs(&[]);
    let server = Server::start_tls(server_config, |s| {
        s.handshake_timeout(Duration::from_secs(60))
    })
    .await;
    // The start of a TLS record (a handshake record of 512 bytes), then silence.
    let mut stalled = raw(server.addr, b"\x16\x03\x01\x02\x00\x01").await;
    while server.accepted() == 0 {
        coro::time::sleep(Duration::from_millis(2)).await.unwrap();
    }
    let stopping = Instant::now();
    server.stop().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(2),
        "the shutdown waited {:?} on a stalled handshake",
        stopping.elapsed()
    );
    let (got, _) = read_until_closed(&mut stalled, Duration::from_secs(2)).await;
    assert!(got.is_empty(), "{got:?}");
}
