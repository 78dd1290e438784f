//! [`client`] and [`client_builder`]: hyper-util's legacy `Client` with coro's executor and
//! timer, on [`CoroConnector`].
//!
//! The rule: everything the `Client` spawns (connection tasks, background connects) runs as a
//! coro task through [`CoroExecutor`], and every timeout it keeps (the idle pool's expiry,
//! HTTP/2 keep-alive) runs on coro's timer wheel through [`CoroTimer`]: no tokio runtime.

use crate::{CoroConnector, CoroExecutor, CoroTimer};
use hyper::body::Body;
use hyper_util::client::legacy::{Builder, Client};

/// hyper-util's legacy `Client` [`Builder`] with coro's executor and timer set (for hyper's
/// timeouts and for the connection pool's idle expiry): configure it (`http2_only(true)` for
/// HTTP/2 with prior knowledge, `pool_max_idle_per_host`, `pool_idle_timeout`, ...) and
/// `build` it with a [`CoroConnector`] (such as one made by
/// `CoroConnector::with_tls` (feature `rustls`) with your own TLS configuration).
///
/// ```
/// use coro_hyper::{CoroConnector, client_builder};
/// use coro_hyper::hyper_util::client::legacy::Client;
/// use std::time::Duration;
///
/// let client: Client<CoroConnector, String> = client_builder()
///     .http2_only(true)
///     .pool_idle_timeout(Duration::from_secs(30))
///     .build(CoroConnector::new());
/// # let _ = client;
/// ```
pub fn client_builder() -> Builder {
    let mut builder = Client::builder(CoroExecutor);
    builder.timer(CoroTimer).pool_timer(CoroTimer);
    builder
}

/// An HTTP client on [`coro::net`]: hyper-util's legacy [`Client`] with [`CoroConnector`],
/// [`CoroExecutor`] and [`CoroTimer`].
///
/// It keeps idle connections in a pool per host and reuses them (HTTP/1.1 keep-alive; one
/// multiplexed connection per host for HTTP/2), resolves names on coro's blocking pool, and
/// (feature `rustls`) speaks TLS for `https://` URIs, negotiating HTTP/2 through ALPN where the
/// server offers it. Requests need absolute URIs (`http://host:port/path`). Clone the client to
/// share its pool between tasks: clones are cheap handles on one pool. For HTTP/2 with prior
/// knowledge over plain TCP, or other settings, use [`client_builder`].
///
/// A request's future is cancelled as any coro wait is: a task that is cancelled while it
/// connects gets an error promptly (the connect is cancellation-aware); dropping a request
/// future drops the request.
///
/// ```
/// use coro_hyper::hyper::{Request, Response, body::{Bytes, Incoming}};
/// use http_body_util::{BodyExt, Empty, Full};
/// use std::convert::Infallible;
///
/// # coro::block_wait(async {
/// // A server to talk to.
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let service = hyper::service::service_fn(|req: Request<Incoming>| async move {
///     Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!("got {}", req.uri())))))
/// });
/// let stop = coro::cancel::CancellationSource::new();
/// let server = coro::spawn(coro_hyper::serve(listener, service)
///     .with_graceful_shutdown(stop.token().cancelled()));
///
/// let client = coro_hyper::client::<Empty<Bytes>>();
/// let uri: hyper::Uri = format!("http://{addr}/hello").parse().unwrap();
/// let response = client.get(uri).await.unwrap();
/// assert_eq!(response.status(), 200);
/// let body = response.into_body().collect().await.unwrap().to_bytes();
/// assert_eq!(body, "got /hello");
///
/// stop.request_cancellation();
/// server.await.unwrap().unwrap();
/// # });
/// ```
pub fn client<B>() -> Client<CoroConnector, B>
where
    B: Body + Send,
    B::Data: Send,
{
    client_builder().build(CoroConnector::new())
}
