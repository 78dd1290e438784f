//! [`serve`] and [`Serve`]: HTTP/1.1 and HTTP/2 on a [`coro::net::TcpListener`].
//!
//! The accept loop runs in the task that awaits [`Serve`]; each connection is a child task of an
//! [`AsyncScope`] it owns, so the connections end with the server: graceful shutdown closes the
//! scope and joins it, and dropping the server future drops the scope, which drops (closes)
//! every connection. A connection's error or panic ends that connection's task only.

use crate::tcp_io::TcpIo;
use crate::{CoroExecutor, CoroTimer};
use coro::cancel::{CancellationSource, CancellationToken, CancelledOutcome, cancellable};
use coro::net::{TcpListener, TcpStream};
use coro::{AsyncScope, Task};
use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::server::conn::auto::Builder;
use pin_project::pin_project;
use std::fmt;
use std::future::{Future, IntoFuture, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The header read timeout a [`Serve`] starts with: hyper's own default for HTTP/1.
///
/// ```
/// assert_eq!(coro_hyper::DEFAULT_HEADER_READ_TIMEOUT.as_secs(), 30);
/// ```
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The first pause after an accept error that is not a single connection's (such as `EMFILE`,
/// out of file descriptors); it doubles with each error in a row, up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(5);

/// The longest pause between accepts after errors (hyper 0.14's and axum's fixed pause).
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Serves HTTP on `listener`, calling `service` for each request: HTTP/1.1 (with keep-alive)
/// and HTTP/2 with prior knowledge, told apart by the connection's first bytes (hyper-util's
/// `server::conn::auto`). Each connection runs as its own task, on the executor of the task
/// that awaits the server.
///
/// The [`Serve`] it returns is lazy: await it to serve until the listener fails, or await
/// [`Serve::with_graceful_shutdown`] to serve until a signal; configure it first with
/// [`Serve::header_read_timeout`] and [`Serve::configure`].
///
/// - Accept errors that concern one connection (`ECONNABORTED`, `ECONNRESET`, ...) are skipped.
///   Others that can pass (`EMFILE` and `ENFILE`, out of file descriptors; `ENOBUFS`, `ENOMEM`;
///   anything not known to be fatal) are printed to stderr and retried after a pause, from
///   5 ms doubling up to 1 s while they go on, as hyper and axum servers do. The server ends
///   with `Err` only when the listener itself is broken (`EBADF`, `EINVAL`, `ENOTSOCK`) or when
///   the awaiting task is cancelled (`accept` is cancellation-aware; the error then holds
///   [`coro::cancel::Cancelled`]).
/// - A connection's errors (a reset, a malformed request, a timeout) and a panic in `service`
///   end that connection only. Errors are not logged; a panic is reported by the panic hook,
///   as any panic is.
/// - Accepted connections get `TCP_NODELAY`, as most HTTP servers set: hyper writes whole
///   responses (or HTTP/2 frames) itself, and Nagle's delay would only hold back the last
///   segment of a response.
///
/// ```
/// use http_body_util::Full;
/// use hyper::body::Bytes;
/// use std::convert::Infallible;
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let service = hyper::service::service_fn(|_req| async {
///     Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from("hi"))))
/// });
/// let server = coro_hyper::serve(listener, service);
/// assert!(server.local_addr().unwrap().ip().is_loopback());
/// // coro::spawn(server.into_future()) would serve until the listener fails.
/// # });
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut builder = Builder::new(CoroExecutor);
    builder.http1().timer(CoroTimer);
    builder.http2().timer(CoroTimer);
    Serve {
        listener,
        service,
        builder,
        header_read_timeout: Some(DEFAULT_HEADER_READ_TIMEOUT),
    }
}

/// A server that has not started yet, from [`serve`]: `.await` it (it is
/// [`IntoFuture`]) to serve until the listener fails, or await
/// [`with_graceful_shutdown`](Serve::with_graceful_shutdown) to serve until a signal.
///
/// Either future is `Send`, so it can be [spawned](coro::spawn). When it ends (or is dropped),
/// the connections it accepted are closed; a handler that hyper spawned for an HTTP/2 stream
/// runs on to its end.
///
/// ```
/// use hyper::body::Bytes;
/// use std::convert::Infallible;
/// use std::time::Duration;
///
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let service = hyper::service::service_fn(|_req| async {
///     Ok::<_, Infallible>(hyper::Response::new(http_body_util::Empty::<Bytes>::new()))
/// });
/// let addr = listener.local_addr().unwrap();
/// let server = coro_hyper::serve(listener, service);
/// // Serves until the timeout drops it, which closes its listener and connections.
/// let outcome = coro::time::timeout(Duration::from_millis(20), server).await;
/// assert_eq!(outcome.unwrap_err(), coro::time::Elapsed);
/// assert!(coro::net::TcpStream::connect(addr).await.is_err());
/// # });
/// ```
#[must_use = "a server does nothing until it is awaited"]
pub struct Serve<S> {
    listener: TcpListener,
    service: S,
    builder: Builder<CoroExecutor>,
    header_read_timeout: Option<Duration>,
}

impl<S> Serve<S> {
    /// How long a client has to send a request's header, `None` for no limit (default:
    /// [`DEFAULT_HEADER_READ_TIMEOUT`], 30 s).
    ///
    /// It bounds both the wait for a new connection's first request (HTTP/1 or HTTP/2; a
    /// connection that sends nothing, or only part of a request head, is closed when it runs
    /// out) and, on HTTP/1, each later request head, which is hyper's own header read timeout:
    /// that makes it the idle timeout of a keep-alive connection too. Set it here rather than
    /// through [`configure`](Serve::configure), which could only reach hyper's HTTP/1 part.
    ///
    /// ```
    /// use std::convert::Infallible;
    /// use std::time::Duration;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::from("ok")))
    /// });
    /// let server = coro_hyper::serve(listener, service).header_read_timeout(Duration::from_secs(5));
    /// assert!(server.local_addr().is_ok());
    /// # });
    /// ```
    pub fn header_read_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.header_read_timeout = timeout.into();
        self
    }

    /// Configures hyper: `f` gets the connection builder (hyper-util's
    /// [`auto::Builder`](hyper_util::server::conn::auto::Builder)), whose `http1()` and
    /// `http2()` hold every limit and timeout hyper has: maximum header count and buffer size,
    /// HTTP/2 concurrent streams, header list size, window sizes, keep-alive pings, and so on.
    /// The builder comes with [`CoroExecutor`] and [`CoroTimer`] set, which those timeouts need.
    ///
    /// Exposing hyper's builder rather than copying its methods here keeps every knob hyper
    /// has, with hyper's own documentation, as hyper adds them. The header read timeout is the
    /// exception: set it with [`header_read_timeout`](Serve::header_read_timeout), which
    /// overrides what `f` sets for it.
    ///
    /// ```
    /// use std::convert::Infallible;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::from("ok")))
    /// });
    /// let server = coro_hyper::serve(listener, service).configure(|builder| {
    ///     builder.http1().max_buf_size(64 * 1024).max_headers(50);
    ///     builder.http2().max_concurrent_streams(100).max_header_list_size(16 * 1024);
    /// });
    /// assert!(server.local_addr().is_ok());
    /// # });
    /// ```
    pub fn configure(mut self, f: impl FnOnce(&mut Builder<CoroExecutor>)) -> Self {
        f(&mut self.builder);
        self
    }

    /// The address the server listens on.
    ///
    /// ```
    /// use std::convert::Infallible;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(String::new()))
    /// });
    /// assert_eq!(coro_hyper::serve(listener, service).local_addr().unwrap(), addr);
    /// # });
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl<S, B> Serve<S>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// Serves until `signal` completes, then shuts down gracefully: stops accepting and closes
    /// the listener (new connections are refused), lets in-flight requests finish (an HTTP/1
    /// connection closes after its current response, an HTTP/2 one sends `GOAWAY` and finishes
    /// its open streams), closes idle connections at once, and completes with `Ok(())` once
    /// every connection has closed.
    ///
    /// The wait for in-flight requests has no limit of its own: bound it with
    /// [`coro::time::timeout`], which drops the server, and with it the connections still open,
    /// at the deadline. Cancelling the awaiting task does the same, with the cancellation
    /// error. Lazy, like every future: nothing happens until it is awaited.
    ///
    /// ```
    /// use hyper::body::Bytes;
    /// use std::convert::Infallible;
    ///
    /// # coro::block_wait(async {
    /// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    /// let addr = listener.local_addr().unwrap();
    /// let service = hyper::service::service_fn(|_req| async {
    ///     Ok::<_, Infallible>(hyper::Response::new(http_body_util::Empty::<Bytes>::new()))
    /// });
    /// let (stop, stopped) = coro::channel::oneshot::<()>();
    /// let server = coro::spawn(coro_hyper::serve(listener, service).with_graceful_shutdown(async {
    ///     stopped.await.ok();
    /// }));
    /// stop.send(()).unwrap();
    /// server.await.unwrap().unwrap(); // Ok(()): shut down
    /// assert!(coro::net::TcpStream::connect(addr).await.is_err()); // the listener is closed
    /// # });
    /// ```
    pub fn with_graceful_shutdown(
        self,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        self.run(Box::pin(signal), Plain)
    }

    /// The accept loop, until `signal`, then the graceful shutdown. Each accepted stream goes
    /// through `handshake` in its connection's own task, so a slow handshake never holds up
    /// the accept loop.
    pub(crate) async fn run<H: Handshake>(
        self,
        mut signal: Pin<Box<dyn Future<Output = ()> + Send>>,
        handshake: H,
    ) -> io::Result<()> {
        let Serve {
            listener,
            service,
            mut builder,
            header_read_timeout,
        } = self;
        builder.http1().header_read_timeout(header_read_timeout);
        let builder = Arc::new(builder);
        let connections = AsyncScope::new();
        // Tells the connections to shut down gracefully. Not their cancellation token: that
        // one reaches the handlers, whose in-flight requests are to finish undisturbed.
        let shutdown = CancellationSource::new();
        let mut backoff = MIN_BACKOFF;
        loop {
            let accepted = coro::select! {
                biased;
                () = &mut signal => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _peer)) => {
                    backoff = MIN_BACKOFF;
                    let (builder, service, handshake) =
                        (builder.clone(), service.clone(), handshake.clone());
                    let shutdown = shutdown.token();
                    let conn = async move {
                        // Best effort: a socket that refuses is served all the same.
                        let _ = stream.set_nodelay(true);
                        if let Some(io) = handshake.handshake(stream, &shutdown).await {
                            connection(builder, io, service, shutdown, header_read_timeout).await;
                        }
                    };
                    let task = Task::new(CatchUnwind(conn)).named("coro-hyper connection");
                    // Never closed while accepting, and unbounded: the spawn cannot fail.
                    if let Ok(handle) = connections.spawn(task) {
                        handle.detach();
                    }
                }
                Err(err) => match classify(&err) {
                    AcceptError::Connection => {}
                    AcceptError::Fatal => return Err(err),
                    AcceptError::Transient => {
                        eprintln!(
                            "coro-hyper: accepting a connection failed: {err}; retrying in {backoff:?}"
                        );
                        coro::select! {
                            biased;
                            () = &mut signal => break,
                            _ = coro::time::sleep(backoff) => {}
                        }
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                },
            }
        }
        drop(listener);
        shutdown.request_cancellation();
        connections.close();
        cancellable(connections.join())
            .await
            .map_err(io::Error::other)
    }
}

impl<S, B> IntoFuture for Serve<S>
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

    /// Serves until the listener fails (see [`serve`]); never completes otherwise.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run(Box::pin(std::future::pending()), Plain))
    }
}

impl<S> fmt::Debug for Serve<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("header_read_timeout", &self.header_read_timeout)
            .finish_non_exhaustive()
    }
}

/// What to do after an accept error.
#[derive(Debug, PartialEq, Eq)]
enum AcceptError {
    /// One connection's trouble (Linux reports some network errors of the new connection from
    /// `accept`): accept the next one at once.
    Connection,
    /// May pass (out of file descriptors or memory, or not known): log, pause, accept again.
    Transient,
    /// The listener is broken, or the task cancelled: stop serving.
    Fatal,
}

fn classify(err: &io::Error) -> AcceptError {
    use io::ErrorKind::*;
    if err.is_cancelled() {
        return AcceptError::Fatal;
    }
    match err.raw_os_error() {
        Some(libc::EBADF | libc::EINVAL | libc::ENOTSOCK | libc::EFAULT) => AcceptError::Fatal,
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => AcceptError::Transient,
        Some(libc::EPROTO) => AcceptError::Connection,
        _ => match err.kind() {
            ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted | WouldBlock
            | TimedOut | PermissionDenied | HostUnreachable | NetworkUnreachable | NetworkDown => {
                AcceptError::Connection
            }
            _ => AcceptError::Transient,
        },
    }
}

/// How an accepted stream becomes the IO that hyper serves: as it is for [`serve`], after a TLS
/// handshake for `serve_tls`. It runs in the connection's own task.
pub(crate) trait Handshake: Clone + Send + Sync + 'static {
    /// What hyper reads and writes.
    type Io: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static;

    /// The IO to serve, or `None` to close the connection (a failed handshake, or `shutdown`
    /// fired before it completed).
    fn handshake(
        &self,
        stream: TcpStream,
        shutdown: &CancellationToken,
    ) -> impl Future<Output = Option<Self::Io>> + Send;
}

/// [`serve`]'s handshake: none, the stream is served as it is.
#[derive(Clone, Copy)]
struct Plain;

impl Handshake for Plain {
    type Io = TcpIo;

    async fn handshake(&self, stream: TcpStream, _: &CancellationToken) -> Option<Self::Io> {
        Some(TcpIo::new(stream))
    }
}

/// Serves one connection until it closes, the client fails to send its first request head in
/// `first_request_timeout` (counted from the end of the handshake), or (after `shutdown`
/// fires) its graceful shutdown completes.
async fn connection<I, S, B>(
    builder: Arc<Builder<CoroExecutor>>,
    io: I,
    service: S,
    shutdown: CancellationToken,
    first_request_timeout: Option<Duration>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    // hyper's HTTP/1 header read timeout starts once hyper-util has read enough to tell HTTP/1
    // from HTTP/2, which a client that sends nothing never lets it do; and HTTP/2 has no such
    // timeout. So the first request head has its own deadline here, from the accept; after it,
    // hyper's HTTP/1 timeout covers each request head.
    let seen = Arc::new(AtomicBool::new(false));
    let service = FirstRequest {
        inner: service,
        seen: seen.clone(),
    };
    let mut conn = pin!(builder.serve_connection(io, service));
    let mut deadline = first_request_timeout.map(coro::executor::time::sleep);
    let mut shutdown = Some(shutdown.cancelled());
    poll_fn(|cx| {
        if let Some(wait) = shutdown.as_mut() {
            if Pin::new(wait).poll(cx).is_ready() {
                shutdown = None;
                conn.as_mut().graceful_shutdown();
            }
        }
        if conn.as_mut().poll(cx).is_ready() {
            // Closed, or failed: this connection's error concerns nobody else.
            return Poll::Ready(());
        }
        if let Some(timer) = deadline.as_mut() {
            if seen.load(Ordering::Relaxed) {
                deadline = None;
            } else if Pin::new(timer).poll(cx).is_ready() {
                return Poll::Ready(()); // dropping the connection closes the socket
            }
        }
        Poll::Pending
    })
    .await
}

/// The user's service, noting that a request head has arrived.
struct FirstRequest<S> {
    inner: S,
    seen: Arc<AtomicBool>,
}

impl<S: Service<Request<Incoming>>> Service<Request<Incoming>> for FirstRequest<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, req: Request<Incoming>) -> S::Future {
        self.seen.store(true, Ordering::Relaxed);
        self.inner.call(req)
    }
}

/// Ends a connection's task quietly when the service panics: the panic hook has reported it,
/// and the scope would otherwise keep it to resume in the graceful shutdown's join.
#[pin_project]
struct CatchUnwind<F>(#[pin] F);

impl<F: Future<Output = ()>> Future for CatchUnwind<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let fut = self.project().0;
        catch_unwind(AssertUnwindSafe(|| fut.poll(cx))).unwrap_or(Poll::Ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_are_classified() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(classify(&os(libc::EMFILE)), AcceptError::Transient);
        assert_eq!(classify(&os(libc::ENFILE)), AcceptError::Transient);
        assert_eq!(classify(&os(libc::ECONNABORTED)), AcceptError::Connection);
        assert_eq!(classify(&os(libc::EPROTO)), AcceptError::Connection);
        assert_eq!(classify(&os(libc::EBADF)), AcceptError::Fatal);
        assert_eq!(classify(&os(libc::EINVAL)), AcceptError::Fatal);
        let cancelled = io::Error::other(coro::cancel::Cancelled);
        assert_eq!(classify(&cancelled), AcceptError::Fatal);
        assert_eq!(classify(&io::Error::other("odd")), AcceptError::Transient);
    }
}
