//! [`CoroConnector`] and [`CoroConnection`]: how hyper-util's legacy `Client` opens a
//! connection on `coro::net`, plain for `http://` URIs and (feature `rustls`) with TLS for
//! `https://` ones.
//!
//! The rule: a connection is a [`coro::net::TcpStream`] with `TCP_NODELAY`, wrapped in TLS when
//! the URI says so; names are resolved by `coro::net` on the blocking pool, and the connect
//! (TCP and TLS handshake both) fails promptly when the calling task is cancelled, since
//! `coro::net`'s connect is cancellation-aware and the handshake runs inside a cancellable wait.

#[cfg(feature = "rustls")]
use crate::CoroIo;
use crate::tcp_io::TcpIo;
use coro::net::TcpStream;
use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The port of a URI that names none: 80 for `http`, 443 for `https`.
fn default_port(scheme: &str) -> u16 {
    if scheme == "https" { 443 } else { 80 }
}

/// Connects hyper-util's legacy [`Client`](hyper_util::client::legacy::Client) to servers over
/// [`coro::net`]: a [`tower_service::Service`] from a [`Uri`] to a [`CoroConnection`].
///
/// - `http://` URIs get a TCP connection with `TCP_NODELAY` set (hyper writes whole messages;
///   Nagle's delay would only hold back their last segment). Host names are resolved on coro's
///   blocking pool, never on a worker, and each address is tried in turn.
/// - `https://` URIs (feature `rustls`) get TLS with rustls: by default Mozilla's root
///   certificates (webpki-roots) and ALPN offering `h2` then `http/1.1`, so that a server that
///   speaks HTTP/2 gets it; `CoroConnector::with_tls` takes a `ClientConfig` of
///   your own (custom roots, client certificates). Without the feature, an `https://` URI is
///   refused with an error that names the feature.
/// - A URI without a host, or with another scheme, is refused with an
///   [`InvalidInput`](io::ErrorKind::InvalidInput) error that says what was wrong.
/// - The connect is cancellation-aware: when the task that awaits it is cancelled, it returns
///   an error promptly (one whose
///   [`is_cancelled`](coro::cancel::CancelledOutcome::is_cancelled) is true).
///
/// Cloning is cheap (the TLS configuration is shared). [`client`](crate::client) builds a
/// `Client` on it; give one to [`client_builder`](crate::client_builder)`().build(connector)`
/// for your own.
///
/// ```
/// use tower_service::Service;
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let uri: http::Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
/// let mut connector = coro_hyper::CoroConnector::new();
/// let connection = connector.call(uri).await.unwrap();
/// let (accepted, _) = listener.accept().await.unwrap();
/// assert_eq!(connection.peer_addr().unwrap(), accepted.local_addr().unwrap());
/// assert!(!connection.is_tls());
///
/// // No host, or a scheme that is not HTTP: a clear error.
/// let err = connector.call("/just/a/path".parse().unwrap()).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// assert!(err.to_string().contains("no host"), "{err}");
/// # });
/// ```
#[derive(Clone, Default)]
pub struct CoroConnector {
    #[cfg(feature = "rustls")]
    tls: Option<futures_rustls::TlsConnector>,
}

impl CoroConnector {
    /// A connector with the default settings: plain TCP for `http://`, and (feature `rustls`)
    /// TLS with Mozilla's roots for `https://`, whose configuration is built once per process,
    /// at the first `https://` connect of a connector made without one.
    ///
    /// ```
    /// let connector = coro_hyper::CoroConnector::new();
    /// let client: coro_hyper::hyper_util::client::legacy::Client<_, String> =
    ///     coro_hyper::client_builder().build(connector);
    /// # let _ = client;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Connects to `uri`'s host and port; the future [`call`](tower_service::Service::call)
    /// returns.
    async fn connect(self, uri: Uri) -> io::Result<CoroConnection> {
        let scheme = uri.scheme_str().unwrap_or("http");
        let tls = match scheme {
            "http" => false,
            "https" => true,
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "coro-hyper's connector: unsupported URI scheme {other:?} in {uri} \
                         (use http:// or https://)"
                    ),
                ));
            }
        };
        let host = match uri.host() {
            Some(host) if !host.is_empty() => host,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "coro-hyper's connector: the URI {uri:?} has no host \
                         (a client request needs an absolute URI such as http://host:port/path)"
                    ),
                ));
            }
        };
        // An IPv6 literal comes bracketed ("[::1]"); the resolver and TLS take it bare.
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = uri.port_u16().unwrap_or_else(|| default_port(scheme));
        if tls {
            return self.connect_tls(host, port).await;
        }
        let stream = tcp(host, port).await?;
        Ok(CoroConnection {
            inner: Inner::Plain(TcpIo::new(stream)),
        })
    }

    #[cfg(not(feature = "rustls"))]
    async fn connect_tls(&self, host: &str, port: u16) -> io::Result<CoroConnection> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "coro-hyper's connector: https://{host}:{port} needs TLS; enable coro-hyper's \
                 \"rustls\" feature"
            ),
        ))
    }
}

/// A TCP connection to `host:port` with `TCP_NODELAY` set.
async fn tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let stream = TcpStream::connect((host, port)).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

#[cfg(feature = "rustls")]
mod tls {
    use super::*;
    use futures_rustls::TlsConnector;
    use futures_rustls::rustls::pki_types::ServerName;
    use futures_rustls::rustls::{ClientConfig, RootCertStore};
    use std::sync::{Arc, OnceLock};

    /// What a default connector offers in ALPN: HTTP/2 first, so that servers that speak it
    /// get it, then HTTP/1.1.
    fn alpn() -> Vec<Vec<u8>> {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    }

    /// The configuration of connectors made without one: Mozilla's roots, built once per
    /// process.
    fn default_config() -> Arc<ClientConfig> {
        static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
        CONFIG
            .get_or_init(|| {
                let roots = RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                };
                let mut config = ClientConfig::builder_with_provider(Arc::new(
                    futures_rustls::rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .expect("ring's provider supports rustls' default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
                config.alpn_protocols = alpn();
                Arc::new(config)
            })
            .clone()
    }

    impl CoroConnector {
        /// A connector whose `https://` connections use `config` (your root certificates,
        /// client certificates, protocol versions). A config that offers no ALPN protocol gets
        /// `h2` and `http/1.1` (on a copy), so that HTTP/2 is negotiated where the server
        /// speaks it; one that lists its own keeps them.
        ///
        /// ```
        /// use std::sync::Arc;
        /// use rustls::ClientConfig;
        ///
        /// let provider = Arc::new(rustls::crypto::ring::default_provider());
        /// let config = ClientConfig::builder_with_provider(provider)
        ///     .with_safe_default_protocol_versions()
        ///     .unwrap()
        ///     .with_root_certificates(rustls::RootCertStore::empty())
        ///     .with_no_client_auth();
        /// let connector = coro_hyper::CoroConnector::with_tls(Arc::new(config));
        /// let client: coro_hyper::hyper_util::client::legacy::Client<_, String> =
        ///     coro_hyper::client_builder().build(connector);
        /// # let _ = client;
        /// ```
        #[cfg_attr(docsrs, doc(cfg(feature = "rustls")))]
        pub fn with_tls(config: Arc<ClientConfig>) -> Self {
            let config = if config.alpn_protocols.is_empty() {
                let mut config = (*config).clone();
                config.alpn_protocols = alpn();
                Arc::new(config)
            } else {
                config
            };
            CoroConnector {
                tls: Some(TlsConnector::from(config)),
            }
        }

        /// A TLS connection to `host:port`, checked against `host` as the server's name.
        pub(super) async fn connect_tls(
            &self,
            host: &str,
            port: u16,
        ) -> io::Result<CoroConnection> {
            let name = ServerName::try_from(host.to_owned()).map_err(|err| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "coro-hyper's connector: {host:?} is not a valid TLS server name: {err}"
                    ),
                )
            })?;
            let connector = match &self.tls {
                Some(connector) => connector.clone(),
                None => TlsConnector::from(default_config()),
            };
            let stream = tcp(host, port).await?;
            // The handshake waits on the server: bound it by the task's cancellation, as the
            // TCP connect is.
            let stream = coro::cancel::cancellable(connector.connect(name, stream))
                .await
                .map_err(io::Error::other)??;
            Ok(CoroConnection {
                inner: Inner::Tls(Box::new(CoroIo::new(stream))),
            })
        }
    }
}

impl fmt::Debug for CoroConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("CoroConnector");
        #[cfg(feature = "rustls")]
        d.field(
            "tls",
            &if self.tls.is_some() {
                "given ClientConfig"
            } else {
                "default (webpki roots)"
            },
        );
        d.finish()
    }
}

impl tower_service::Service<Uri> for CoroConnector {
    type Response = CoroConnection;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<CoroConnection>> + Send>>;

    /// Always ready: each connect is independent.
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        Box::pin(self.clone().connect(uri))
    }
}

/// A connection that [`CoroConnector`] made: a [`coro::net::TcpStream`], or (feature
/// `rustls`) TLS over one. It is hyper's [`Read`](hyper::rt::Read) and
/// [`Write`](hyper::rt::Write), and hyper-util's [`Connection`], which tells the `Client`
/// when TLS negotiated HTTP/2 (ALPN `h2`).
///
/// ```
/// use tower_service::Service;
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let addr = listener.local_addr().unwrap();
/// let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
/// let connection = coro_hyper::CoroConnector::new().call(uri).await.unwrap();
/// assert_eq!(connection.peer_addr().unwrap(), addr);
/// # });
/// ```
pub struct CoroConnection {
    inner: Inner,
}

enum Inner {
    Plain(TcpIo),
    #[cfg(feature = "rustls")]
    Tls(Box<CoroIo<futures_rustls::client::TlsStream<TcpStream>>>),
}

impl CoroConnection {
    /// The TCP stream under the connection (under TLS, for a TLS one).
    fn tcp(&self) -> &TcpStream {
        match &self.inner {
            Inner::Plain(io) => io.get_ref(),
            #[cfg(feature = "rustls")]
            Inner::Tls(io) => io.get_ref().get_ref().0,
        }
    }

    /// The server's address.
    ///
    /// ```
    /// use tower_service::Service;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
    /// let connection = coro_hyper::CoroConnector::new().call(uri).await.unwrap();
    /// assert_eq!(connection.peer_addr().unwrap(), addr);
    /// # });
    /// ```
    pub fn peer_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp().peer_addr()
    }

    /// Whether the connection runs TLS (it came from an `https://` URI).
    ///
    /// ```
    /// use tower_service::Service;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let uri: http::Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
    /// let connection = coro_hyper::CoroConnector::new().call(uri).await.unwrap();
    /// assert!(!connection.is_tls());
    /// # });
    /// ```
    pub fn is_tls(&self) -> bool {
        !matches!(self.inner, Inner::Plain(_))
    }

    /// Whether TLS negotiated HTTP/2 through ALPN (never for a plain connection).
    ///
    /// ```
    /// use tower_service::Service;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let uri: http::Uri = format!("http://{}/", listener.local_addr().unwrap()).parse().unwrap();
    /// let connection = coro_hyper::CoroConnector::new().call(uri).await.unwrap();
    /// assert!(!connection.negotiated_h2());
    /// # });
    /// ```
    pub fn negotiated_h2(&self) -> bool {
        match &self.inner {
            Inner::Plain(_) => false,
            #[cfg(feature = "rustls")]
            Inner::Tls(io) => io.get_ref().get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }
}

impl fmt::Debug for CoroConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoroConnection")
            .field("peer", &self.peer_addr().ok())
            .field("tls", &self.is_tls())
            .field("h2", &self.negotiated_h2())
            .finish()
    }
}

impl Connection for CoroConnection {
    fn connected(&self) -> Connected {
        let connected = Connected::new();
        if self.negotiated_h2() {
            connected.negotiated_h2()
        } else {
            connected
        }
    }
}

/// Forwards a call to the IO inside, whichever kind it is.
macro_rules! delegate {
    ($self:ident, $io:ident => $call:expr) => {
        match &mut $self.get_mut().inner {
            Inner::Plain($io) => {
                let $io = Pin::new($io);
                $call
            }
            #[cfg(feature = "rustls")]
            Inner::Tls($io) => {
                let $io = Pin::new(&mut **$io);
                $call
            }
        }
    };
}

impl hyper::rt::Read for CoroConnection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_read(cx, buf))
    }
}

impl hyper::rt::Write for CoroConnection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, io => io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, io => io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        // A plain stream writes vectored; TLS (through `CoroIo`) gets flattened buffers.
        matches!(self.inner, Inner::Plain(_))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, io => io.poll_shutdown(cx))
    }
}
