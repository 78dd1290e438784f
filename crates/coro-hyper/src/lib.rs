//! [hyper] 1.x on coro, in hyper-util's naming: what hyper needs from a runtime, and a server.
//!
//! - [`CoroIo`] adapts IO both ways between `futures_io` (what [`coro::net`]'s sockets are) and
//!   hyper's own IO traits, so hyper's client and server connections run over a
//!   [`coro::net::TcpStream`].
//! - [`CoroExecutor`] runs the tasks hyper spawns (HTTP/2 streams, client connections) with
//!   [`coro::spawn`]; [`CoroTimer`] gives hyper's timeouts coro's timer wheel.
//! - [`serve`] runs a hyper [`Service`](hyper::service::Service) on a
//!   [`coro::net::TcpListener`]: HTTP/1.1 with keep-alive and HTTP/2 with prior knowledge, one
//!   task per connection, a header read timeout so that a silent client is dropped, accept
//!   errors ridden out, and [graceful shutdown](Serve::with_graceful_shutdown).
//!
//! The server's sockets register with the IO driver of the pool it runs on: the pool's idle
//! workers poll the OS for them, so there is no reactor thread, and each connection's task is
//! woken on its own executor.
//!
//! # A tour
//!
//! A handler, a server on a free port, one request from hyper's HTTP/1.1 client over
//! `coro::net`, then a graceful shutdown:
//!
//! ```
//! use coro_hyper::{CoroIo, serve};
//! use http_body_util::{BodyExt, Empty, Full};
//! use hyper::body::{Bytes, Incoming};
//! use hyper::{Request, Response};
//! use std::convert::Infallible;
//!
//! async fn hello(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
//!     let greeting = format!("hello from {}", req.uri().path());
//!     Ok(Response::new(Full::new(Bytes::from(greeting))))
//! }
//!
//! #[coro::main(worker_threads = 2)]
//! async fn main() {
//!     // The server: serve until `stop` is cancelled, then drain and return.
//!     let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let stop = coro::cancel::CancellationSource::new();
//!     let service = hyper::service::service_fn(hello);
//!     let server = coro::spawn(serve(listener, service).with_graceful_shutdown(stop.token().cancelled()));
//!
//!     // A client: hyper's HTTP/1.1 connection over a coro::net stream.
//!     let stream = coro::net::TcpStream::connect(addr).await.unwrap();
//!     let (mut sender, connection) =
//!         hyper::client::conn::http1::handshake(CoroIo::new(stream)).await.unwrap();
//!     let connection = coro::spawn(connection);
//!     let request = Request::get("/tour").body(Empty::<Bytes>::new()).unwrap();
//!     let response = sender.send_request(request).await.unwrap();
//!     assert_eq!(response.status(), 200);
//!     let body = response.into_body().collect().await.unwrap().to_bytes();
//!     assert_eq!(body, "hello from /tour");
//!
//!     // Graceful shutdown: the idle keep-alive connection is closed, the server returns Ok.
//!     stop.request_cancellation();
//!     server.await.unwrap().unwrap();
//!     connection.await.unwrap().unwrap(); // the client saw a clean close
//! }
//! ```
//!
//! For HTTP/2, hyper's client takes the executor: `hyper::client::conn::http2::handshake(
//! CoroExecutor, CoroIo::new(stream))`. Limits and timeouts (header sizes, HTTP/2 streams,
//! keep-alive pings) are set with [`Serve::configure`] and [`Serve::header_read_timeout`].
//!
//! The crate re-exports [`hyper`] and [`hyper_util`], so that the versions match.
//!
//! # Features: an HTTP client and TLS
//!
//! - `client`: `client()`, hyper-util's pooled legacy `Client` (HTTP/1.1 keep-alive, HTTP/2)
//!   on `CoroConnector`, which connects over `coro::net` (names resolved on the blocking pool,
//!   cancellation-aware connects), with `CoroExecutor` and `CoroTimer`; `client_builder()` for
//!   your own settings or connector.
//! - `rustls`: TLS with rustls (the `ring` provider): `serve_tls(listener, config, service)`,
//!   `serve` behind TLS with HTTP/1.1 and HTTP/2 chosen by ALPN and each handshake in its
//!   connection's task under a timeout; and with `client`, `https://` URIs for the connector
//!   (Mozilla's roots by default, or `CoroConnector::with_tls(config)`).
//!
//! Neither starts a tokio runtime: hyper-util's client compiles tokio's types, but every task
//! and timer it uses is coro's.
#![cfg_attr(
    all(feature = "client", feature = "rustls"),
    doc = r#"
An HTTPS server on a certificate made on the spot, and a client that trusts it, speaking
HTTP/2 (chosen by ALPN) over one pooled connection:

```
use coro_hyper::{CoroConnector, client_builder, rustls, serve_tls};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use std::convert::Infallible;
use std::sync::Arc;

# coro::block_wait(async {
let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
let provider = Arc::new(rustls::crypto::ring::default_provider());
let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
    .with_safe_default_protocol_versions().unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.cert.der().clone()], key).unwrap();
let mut roots = rustls::RootCertStore::empty();
roots.add(cert.cert.der().clone()).unwrap();
let client_config = rustls::ClientConfig::builder_with_provider(provider)
    .with_safe_default_protocol_versions().unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();

let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
let port = listener.local_addr().unwrap().port();
let service = hyper::service::service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
    Ok::<_, Infallible>(hyper::Response::new(format!("{:?}", req.version())))
});
let stop = coro::cancel::CancellationSource::new();
let server = coro::spawn(serve_tls(listener, Arc::new(server_config), service)
    .with_graceful_shutdown(stop.token().cancelled()));

let client = client_builder()
    .build::<_, Empty<Bytes>>(CoroConnector::with_tls(Arc::new(client_config)));
let uri = format!("https://localhost:{port}/").parse().unwrap();
let response = client.get(uri).await.unwrap();
let body = response.into_body().collect().await.unwrap().to_bytes();
assert_eq!(body, "HTTP/2.0");

drop(client);
stop.request_cancellation();
server.await.unwrap().unwrap();
# });
```
"#
)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "client")]
mod client;
#[cfg(feature = "client")]
mod connector;
mod grpc;
mod io;
mod rt;
mod server;
#[cfg(feature = "rustls")]
mod server_tls;
mod tcp_io;

#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use client::{client, client_builder};
#[cfg(feature = "client")]
#[cfg_attr(docsrs, doc(cfg(feature = "client")))]
pub use connector::{CoroConnection, CoroConnector};
pub use grpc::{GRACE as GRPC_DEADLINE_GRACE, GrpcDeadline};
pub use io::CoroIo;
pub use rt::{CoroExecutor, CoroTimer};
pub use server::{DEFAULT_HEADER_READ_TIMEOUT, Serve, serve};
#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub use server_tls::{DEFAULT_TLS_HANDSHAKE_TIMEOUT, ServeTls, serve_tls};

/// The rustls this crate is built on (re-exported whole, feature `rustls`), for the
/// `ServerConfig` of [`serve_tls`] and the `ClientConfig` of
/// `CoroConnector::with_tls` (with feature `client`): the versions match.
///
/// ```
/// let provider = coro_hyper::rustls::crypto::ring::default_provider();
/// assert!(!provider.cipher_suites.is_empty());
/// ```
#[cfg(feature = "rustls")]
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub use futures_rustls::rustls;

/// The hyper this crate is built on (re-exported whole).
///
/// ```
/// let response = coro_hyper::hyper::Response::new(());
/// assert_eq!(response.status(), 200);
/// ```
pub use hyper;

/// The hyper-util this crate is built on (re-exported whole): [`Serve::configure`] hands over
/// its `server::conn::auto::Builder`.
///
/// ```
/// fn limit(builder: &mut coro_hyper::hyper_util::server::conn::auto::Builder<coro_hyper::CoroExecutor>) {
///     builder.http1().max_headers(64);
/// }
/// # let _ = limit;
/// ```
pub use hyper_util;
