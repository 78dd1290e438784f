//! What the integration tests share: a test app, a running server, clients, raw sockets.

#![allow(dead_code)] // each test binary uses its own part

use coro::JoinHandle;
use coro::cancel::{CancellationSource, WaitForCancellation};
use coro::net::{TcpListener, TcpStream};
use coro_hyper::rustls;
use coro_hyper::{CoroExecutor, CoroIo, Serve, ServeTls, serve, serve_tls};
use futures::{AsyncReadExt, AsyncWriteExt};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::{http1, http2};
use hyper::service::Service;
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Aborts the test process if it is still running after two minutes: a safety net for hangs
/// that the tests' own time bounds cannot catch (a deadlock while a failed test tears its pool
/// down). Each test calls it first; the first call starts the clock.
pub fn watchdog() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(120));
            eprintln!("a coro-hyper test binary ran for over 120 s: hung, aborting");
            std::process::abort();
        });
    });
}

/// How long the `/slow` handler takes.
pub const SLOW: Duration = Duration::from_millis(400);

/// The test app: `/slow` (answers after [`SLOW`]), `/panic`, `/echo` (the request body back),
/// anything else `hello <path>`. Each request's path is sent on `started` when its handler starts.
///
/// The server clones its service once per accepted connection (and nowhere else), so the
/// clones, counted in `accepted`, are the connections the server accepted.
pub struct App {
    started: coro::channel::Sender<String>,
    accepted: Arc<AtomicUsize>,
}

impl Clone for App {
    fn clone(&self) -> Self {
        self.accepted.fetch_add(1, Ordering::Relaxed);
        App {
            started: self.started.clone(),
            accepted: self.accepted.clone(),
        }
    }
}

impl App {
    /// An app, the receiver of its started paths, and its accepted-connection count.
    fn new() -> (App, coro::channel::Receiver<String>, Arc<AtomicUsize>) {
        let (tx, started) = coro::channel::unbounded();
        let accepted = Arc::new(AtomicUsize::new(0));
        let app = App {
            started: tx,
            accepted: accepted.clone(),
        };
        (app, started, accepted)
    }
}

impl Service<Request<Incoming>> for App {
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let started = self.started.clone();
        Box::pin(async move {
            let path = req.uri().path().to_owned();
            let _ = started.try_send(path.clone());
            let body = match path.as_str() {
                "/slow" => {
                    coro::time::sleep(SLOW)
                        .await
                        .expect("the slow handler was cancelled");
                    Bytes::from("slow done")
                }
                "/panic" => panic!("the /panic handler panics on purpose"),
                "/echo" => req.into_body().collect().await.unwrap().to_bytes(),
                _ => Bytes::from(format!("hello {path}")),
            };
            Ok(Response::new(Full::new(body)))
        })
    }
}

/// A server running the [`App`] in a task of its own, shut down gracefully by [`Server::stop`].
pub struct Server {
    pub addr: SocketAddr,
    /// The paths of the requests whose handler has started, in order.
    pub started: coro::channel::Receiver<String>,
    stop: CancellationSource,
    pub task: JoinHandle<io::Result<()>>,
    accepted: Arc<AtomicUsize>,
}

impl Server {
    /// Starts the app on a free loopback port, after `setup` has configured it.
    pub async fn start(setup: impl FnOnce(Serve<App>) -> Serve<App>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Server::launch(addr, |app, stop| {
            setup(serve(listener, app)).with_graceful_shutdown(stop)
        })
    }

    /// Starts the app behind TLS with `config` on a free loopback port, after `setup` has
    /// configured it.
    pub async fn start_tls(
        config: Arc<rustls::ServerConfig>,
        setup: impl FnOnce(ServeTls<App>) -> ServeTls<App>,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Server::launch(addr, |app, stop| {
            setup(serve_tls(listener, config, app)).with_graceful_shutdown(stop)
        })
    }

    /// Runs the server that `make` builds from a fresh app and a stop signal, in a task.
    fn launch<F>(addr: SocketAddr, make: impl FnOnce(App, WaitForCancellation) -> F) -> Server
    where
        F: Future<Output = io::Result<()>> + Send + 'static,
    {
        let (app, started, accepted) = App::new();
        let stop = CancellationSource::new();
        let task = coro::spawn(make(app, stop.token().cancelled()));
        Server {
            addr,
            started,
            stop,
            task,
            accepted,
        }
    }

    /// How many connections the server has accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Signals the graceful shutdown (the server task goes on until it has drained).
    pub fn signal_stop(&self) {
        self.stop.request_cancellation();
    }

    /// Signals the graceful shutdown and waits for the server, which must return `Ok`.
    pub async fn stop(self) {
        self.signal_stop();
        within(Duration::from_secs(5), self.task)
            .await
            .expect("the server task panicked")
            .expect("serve returned an error");
    }
}

/// `fut`'s output, or a panic naming the bound if it takes longer than `limit`.
pub async fn within<F: std::future::IntoFuture>(limit: Duration, fut: F) -> F::Output {
    match coro::time::timeout(limit, fut).await {
        Ok(output) => output,
        Err(_) => panic!("took longer than {limit:?}"),
    }
}

/// An HTTP/1.1 client connection to `addr`; its connection task is returned too.
pub async fn http1_client(
    addr: SocketAddr,
) -> (
    http1::SendRequest<Empty<Bytes>>,
    JoinHandle<hyper::Result<()>>,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = http1::handshake(CoroIo::new(stream)).await.unwrap();
    (sender, coro::spawn(conn))
}

/// An HTTP/2 (prior knowledge) client connection to `addr`.
pub async fn http2_client(
    addr: SocketAddr,
) -> (
    http2::SendRequest<Empty<Bytes>>,
    JoinHandle<hyper::Result<()>>,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, conn) = http2::handshake(CoroExecutor, CoroIo::new(stream))
        .await
        .unwrap();
    (sender, coro::spawn(conn))
}

/// A GET request for `path`.
pub fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path)
        .header(hyper::header::HOST, "test")
        .body(Empty::new())
        .unwrap()
}

/// The status and body of a response.
pub async fn read(response: Response<Incoming>) -> (StatusCode, String) {
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

/// One GET on a fresh HTTP/1.1 connection, which is then dropped.
pub async fn get_once(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let (mut sender, _conn) = http1_client(addr).await;
    read(sender.send_request(get(path)).await.unwrap()).await
}

/// Reads `stream` until the peer closes it (or resets it, which counts as closed), within
/// `limit`; returns what was read and how long it took.
pub async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    within(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(err) if err.kind() == io::ErrorKind::ConnectionReset => break,
                Err(err) => panic!("reading from the server failed: {err}"),
            }
        }
    })
    .await;
    (got, start.elapsed())
}

/// A raw connection that has sent `bytes`.
pub async fn raw(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

/// A certificate for `localhost` and `127.0.0.1`, made now: a server config that presents it
/// (with the ALPN protocols serve_tls chooses), and a client config that trusts it and offers
/// `alpn` (none: the connector's default, `h2` and `http/1.1`).
pub fn tls_configs(alpn: &[&[u8]]) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("make a test certificate");
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .expect("a server config with the test certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    (Arc::new(server), Arc::new(client))
}

/// Whether `err` or an error in its chain of sources is an IO error for which `check` holds.
pub fn io_error_in_chain(
    err: &(dyn std::error::Error + 'static),
    check: impl Fn(&io::Error) -> bool,
) -> bool {
    let mut next = Some(err);
    while let Some(err) = next {
        if err.downcast_ref::<io::Error>().is_some_and(&check) {
            return true;
        }
        next = err.source();
    }
    false
}

/// The status and body of a response from the client (any body type that collects).
pub async fn read_any<B>(response: Response<B>) -> (StatusCode, String)
where
    B: hyper::body::Body,
    B::Error: std::fmt::Debug,
{
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}
