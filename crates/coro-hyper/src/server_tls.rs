//! [`serve_tls`] and [`ServeTls`]: [`serve`](crate::serve) behind TLS (rustls).
//!
//! The rule: the accept loop only accepts; each connection's TLS handshake runs in that
//! connection's own task, bounded by a handshake timeout and abandoned at graceful shutdown, so
//! no client (silent, slow or malformed) can hold up the loop or keep the server from draining.
//! After the handshake the connection is served exactly as `serve` serves a plain one.

use crate::server::{Handshake, Serve};
use crate::{CoroExecutor, CoroIo};
use coro::cancel::CancellationToken;
use coro::net::{TcpListener, TcpStream};
use futures_rustls::TlsAcceptor;
use futures_rustls::rustls::ServerConfig;
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::server::conn::auto::Builder;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a [`ServeTls`] gives a client to complete the TLS handshake, unless set with
/// [`ServeTls::handshake_timeout`].
///
/// ```
/// assert_eq!(coro_hyper::DEFAULT_TLS_HANDSHAKE_TIMEOUT.as_secs(), 10);
/// ```
pub const DEFAULT_TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves HTTPS on `listener`: [`serve`](crate::serve) with a TLS handshake (rustls, `config`)
/// first on each connection. HTTP/1.1 and HTTP/2 are both served, chosen by ALPN: a `config`
/// that lists no ALPN protocol gets `h2` and `http/1.1` (on a copy); one that lists its own
/// keeps them.
///
/// Each handshake runs in its connection's own task, so the accept loop never waits on a
/// client. A handshake that fails (a client that speaks plain HTTP, garbage, an unknown
/// certificate authority) or does not complete within the handshake timeout
/// ([`DEFAULT_TLS_HANDSHAKE_TIMEOUT`], set with [`ServeTls::handshake_timeout`]) closes that
/// connection only; graceful shutdown abandons the handshakes in flight. Everything else (the
/// header read timeout, which counts from the end of the handshake, accept errors, panics,
/// graceful shutdown) is as for `serve`.
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
///
/// # coro::block_wait(async {
/// // A self-signed certificate for "localhost", made here with rcgen.
/// let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
/// let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
/// let provider = Arc::new(rustls::crypto::ring::default_provider());
/// let config = rustls::ServerConfig::builder_with_provider(provider)
///     .with_safe_default_protocol_versions()
///     .unwrap()
///     .with_no_client_auth()
///     .with_single_cert(vec![cert.cert.der().clone()], key)
///     .unwrap();
///
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let service = hyper::service::service_fn(|_req| async {
///     Ok::<_, Infallible>(hyper::Response::new(String::from("secret")))
/// });
/// let server = coro_hyper::serve_tls(listener, Arc::new(config), service);
/// assert!(server.local_addr().unwrap().ip().is_loopback());
/// // coro::spawn(server.with_graceful_shutdown(signal)) serves until `signal`.
/// # });
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
pub fn serve_tls<S, B>(listener: TcpListener, config: Arc<ServerConfig>, service: S) -> ServeTls<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let config = if config.alpn_protocols.is_empty() {
        let mut config = (*config).clone();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    } else {
        config
    };
    ServeTls {
        serve: crate::serve(listener, service),
        acceptor: TlsAcceptor::from(config),
        handshake_timeout: DEFAULT_TLS_HANDSHAKE_TIMEOUT,
    }
}

/// An HTTPS server that has not started yet, from [`serve_tls`]: the same shape as
/// [`Serve`] (`.await` it, or await [`with_graceful_shutdown`](ServeTls::with_graceful_shutdown)),
/// with a TLS handshake on each connection.
///
/// ```
/// use std::convert::Infallible;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # coro::block_wait(async {
/// let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
/// let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
/// let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
///     .with_safe_default_protocol_versions()
///     .unwrap()
///     .with_no_client_auth()
///     .with_single_cert(vec![cert.cert.der().clone()], key)
///     .unwrap();
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let service = hyper::service::service_fn(|_req| async {
///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
/// });
/// let server = coro_hyper::serve_tls(listener, Arc::new(config), service)
///     .handshake_timeout(Duration::from_secs(2));
/// let (stop, stopped) = coro::channel::oneshot::<()>();
/// let running = coro::spawn(server.with_graceful_shutdown(async { stopped.await.ok(); }));
/// stop.send(()).unwrap();
/// running.await.unwrap().unwrap(); // shut down: Ok(())
/// # });
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
#[must_use = "a server does nothing until it is awaited"]
pub struct ServeTls<S> {
    serve: Serve<S>,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
}

impl<S> ServeTls<S> {
    /// How long a client has to complete the TLS handshake from the accept (default:
    /// [`DEFAULT_TLS_HANDSHAKE_TIMEOUT`], 10 s); the connection is closed when it runs out.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// # coro::block_wait(async {
    /// # let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// # let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    /// # let config = Arc::new(rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
    /// #     .with_safe_default_protocol_versions().unwrap().with_no_client_auth()
    /// #     .with_single_cert(vec![cert.cert.der().clone()], key).unwrap());
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// let server = coro_hyper::serve_tls(listener, config, service)
    ///     .handshake_timeout(Duration::from_millis(500));
    /// assert!(server.local_addr().is_ok());
    /// # });
    /// ```
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How long a client has to send a request's header once the handshake is done: see
    /// [`Serve::header_read_timeout`].
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// # coro::block_wait(async {
    /// # let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// # let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    /// # let config = Arc::new(rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
    /// #     .with_safe_default_protocol_versions().unwrap().with_no_client_auth()
    /// #     .with_single_cert(vec![cert.cert.der().clone()], key).unwrap());
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// let server = coro_hyper::serve_tls(listener, config, service)
    ///     .header_read_timeout(Duration::from_secs(5));
    /// assert!(server.local_addr().is_ok());
    /// # });
    /// ```
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.serve = self.serve.header_read_timeout(timeout);
        self
    }

    /// Configures hyper's connection builder: see [`Serve::configure`].
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc};
    /// # coro::block_wait(async {
    /// # let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// # let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    /// # let config = Arc::new(rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
    /// #     .with_safe_default_protocol_versions().unwrap().with_no_client_auth()
    /// #     .with_single_cert(vec![cert.cert.der().clone()], key).unwrap());
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// let server = coro_hyper::serve_tls(listener, config, service).configure(|builder| {
    ///     builder.http2().max_concurrent_streams(100);
    /// });
    /// assert!(server.local_addr().is_ok());
    /// # });
    /// ```
    pub fn configure(mut self, f: impl FnOnce(&mut Builder<CoroExecutor>)) -> Self {
        self.serve = self.serve.configure(f);
        self
    }

    /// The address the server listens on.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc};
    /// # coro::block_wait(async {
    /// # let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// # let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    /// # let config = Arc::new(rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
    /// #     .with_safe_default_protocol_versions().unwrap().with_no_client_auth()
    /// #     .with_single_cert(vec![cert.cert.der().clone()], key).unwrap());
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// assert_eq!(coro_hyper::serve_tls(listener, config, service).local_addr().unwrap(), addr);
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.serve.local_addr()
    }

    /// The per-connection handshake this server runs.
    fn tls(&self) -> Tls {
        Tls {
            acceptor: self.acceptor.clone(),
            timeout: self.handshake_timeout,
        }
    }
}

impl<S, B> ServeTls<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// Serves until `signal` completes, then shuts down gracefully as
    /// [`Serve::with_graceful_shutdown`] does; handshakes still in flight are abandoned (their
    /// connections closed).
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc};
    /// # coro::block_wait(async {
    /// # let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// # let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    /// # let config = Arc::new(rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
    /// #     .with_safe_default_protocol_versions().unwrap().with_no_client_auth()
    /// #     .with_single_cert(vec![cert.cert.der().clone()], key).unwrap());
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// let stop = coro::cancel::CancellationSource::new();
    /// let server = coro::spawn(
    ///     coro_hyper::serve_tls(listener, config, service).with_graceful_shutdown(stop.token().cancelled()),
    /// );
    /// stop.request_cancellation();
    /// server.await.unwrap().unwrap();
    /// assert!(coro::net::TcpStream::connect(addr).await.is_err()); // the listener is closed
    /// # });
    /// ```
    pub fn with_graceful_shutdown(
        self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let tls = self.tls();
        self.serve.run(Box::pin(signal), tls)
    }
}

impl<S, B> IntoFuture for ServeTls<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    /// Serves until the listener fails (see [`serve_tls`]); never completes otherwise.
    fn into_future(self) -> Self::IntoFuture {
        let tls = self.tls();
        Box::pin(self.serve.run(Box::pin(std::future::pending()), tls))
    }
}

impl<S> fmt::Debug for ServeTls<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeTls")
            .field("serve", &self.serve)
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// [`serve_tls`]'s handshake: rustls' server side, within `timeout`.
#[derive(Clone)]
struct Tls {
    acceptor: TlsAcceptor,
    timeout: Duration,
}

impl Handshake for Tls {
    type Io = CoroIo<futures_rustls::server::TlsStream<TcpStream>>;

    async fn handshake(&self, stream: TcpStream, shutdown: &CancellationToken) -> Option<Self::Io> {
        // A failure or a timeout drops the stream, which closes the connection; neither
        // concerns anyone but this client.
        let handshake = coro::time::timeout(self.timeout, self.acceptor.accept(stream));
        coro::select! {
            biased;
            () = shutdown.cancelled() => None,
            done = handshake => match done {
                Ok(Ok(tls)) => Some(CoroIo::new(tls)),
                Ok(Err(_)) | Err(_) => None,
            },
        }
    }
}
