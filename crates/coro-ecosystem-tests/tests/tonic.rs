//! tonic on coro, no tokio runtime: a gRPC server (unary and server-streaming) served by
//! `coro_hyper::serve`, a tonic client over `CoroConnector` (hyper-util's pooled client on
//! coro::net, HTTP/2), and a client deadline that reaches the handler as cancellation of its
//! token (`GrpcDeadline`).
//!
//! The service is written out as tonic-build would generate it (a `tower::Service` that routes
//! by path to tonic's `server::Grpc`), so the test needs no protoc.

use coro::channel;
use coro_hyper::hyper::body::Incoming;
use coro_hyper::hyper::http;
use coro_hyper::{CoroConnector, GrpcDeadline, serve};
use futures::StreamExt;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

#[derive(Clone, PartialEq, prost::Message)]
struct EchoRequest {
    #[prost(string, tag = "1")]
    message: String,
    /// Replies the server-streaming call sends.
    #[prost(uint32, tag = "2")]
    count: u32,
    /// How long the unary handler waits (cancellation-aware) before it answers.
    #[prost(uint64, tag = "3")]
    delay_ms: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct EchoReply {
    #[prost(string, tag = "1")]
    message: String,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type ReplyStream = Pin<Box<dyn futures::Stream<Item = Result<EchoReply, Status>> + Send>>;

/// The handlers. `cancelled` hears from a unary handler whose token fired.
#[derive(Clone)]
struct Echo {
    cancelled: channel::Sender<Duration>,
}

impl Echo {
    async fn unary(&self, request: EchoRequest) -> Result<EchoReply, Status> {
        let started = Instant::now();
        if coro::time::sleep(Duration::from_millis(request.delay_ms))
            .await
            .is_err()
        {
            // The client's deadline, as coro cancellation: say so, and give up.
            let _ = self.cancelled.try_send(started.elapsed());
            return Err(Status::cancelled("the deadline passed"));
        }
        Ok(EchoReply {
            message: format!("echo: {}", request.message),
        })
    }

    fn stream(&self, request: EchoRequest) -> ReplyStream {
        Box::pin(futures::stream::iter((0..request.count).map(move |i| {
            Ok(EchoReply {
                message: format!("{} #{i}", request.message),
            })
        })))
    }
}

struct Unary(Echo);

impl tonic::server::UnaryService<EchoRequest> for Unary {
    type Response = EchoReply;
    type Future = BoxFuture<Result<Response<EchoReply>, Status>>;

    fn call(&mut self, request: Request<EchoRequest>) -> Self::Future {
        let echo = self.0.clone();
        Box::pin(async move { echo.unary(request.into_inner()).await.map(Response::new) })
    }
}

struct ServerStreaming(Echo);

impl tonic::server::ServerStreamingService<EchoRequest> for ServerStreaming {
    type Response = EchoReply;
    type ResponseStream = ReplyStream;
    type Future = BoxFuture<Result<Response<ReplyStream>, Status>>;

    fn call(&mut self, request: Request<EchoRequest>) -> Self::Future {
        let stream = self.0.stream(request.into_inner());
        Box::pin(async move { Ok(Response::new(stream)) })
    }
}

/// Routes a request by path to tonic's `server::Grpc`, as generated servers do.
async fn route(
    echo: Echo,
    request: http::Request<Incoming>,
) -> Result<http::Response<tonic::body::Body>, Infallible> {
    let mut grpc = tonic::server::Grpc::new(ProstCodec::<EchoReply, EchoRequest>::default());
    Ok(match request.uri().path() {
        "/echo.Echo/Unary" => grpc.unary(Unary(echo), request).await,
        "/echo.Echo/Stream" => grpc.server_streaming(ServerStreaming(echo), request).await,
        _ => Status::unimplemented("no such method").into_http(),
    })
}

/// A tonic client on hyper-util's pooled client over coro::net, HTTP/2 only.
fn grpc_client(
    addr: std::net::SocketAddr,
) -> tonic::client::Grpc<
    coro_hyper::hyper_util::client::legacy::Client<CoroConnector, tonic::body::Body>,
> {
    let client = coro_hyper::client_builder()
        .http2_only(true)
        .build(CoroConnector::new());
    let origin = format!("http://{addr}").parse().unwrap();
    tonic::client::Grpc::with_origin(client, origin)
}

async fn call_unary(
    grpc: &mut tonic::client::Grpc<
        coro_hyper::hyper_util::client::legacy::Client<CoroConnector, tonic::body::Body>,
    >,
    request: Request<EchoRequest>,
) -> Result<EchoReply, Status> {
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/echo.Echo/Unary");
    grpc.unary(request, path, ProstCodec::default())
        .await
        .map(Response::into_inner)
}

/// Starts the server; returns its address, the handle to stop it and the cancelled reports.
async fn start_server() -> (
    std::net::SocketAddr,
    coro::cancel::CancellationSource,
    coro::JoinHandle<std::io::Result<()>>,
    channel::Receiver<Duration>,
) {
    let (cancelled, cancelled_rx) = channel::unbounded();
    let echo = Echo { cancelled };
    let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = GrpcDeadline::new(coro_hyper::hyper::service::service_fn(move |request| {
        route(echo.clone(), request)
    }));
    let stop = coro::cancel::CancellationSource::new();
    let server =
        coro::spawn(serve(listener, service).with_graceful_shutdown(stop.token().cancelled()));
    (addr, stop, server, cancelled_rx)
}

fn request(message: &str, count: u32, delay_ms: u64) -> Request<EchoRequest> {
    Request::new(EchoRequest {
        message: message.into(),
        count,
        delay_ms,
    })
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn unary_and_server_streaming_calls_from_many_tasks() {
    let (addr, stop, server, _cancelled) = start_server().await;
    let grpc = grpc_client(addr);
    let mut calls = Vec::new();
    for t in 0..32 {
        let mut grpc = grpc.clone();
        calls.push(coro::spawn(async move {
            for i in 0..10 {
                let reply = call_unary(&mut grpc, request(&format!("{t}.{i}"), 0, 0))
                    .await
                    .unwrap();
                assert_eq!(reply.message, format!("echo: {t}.{i}"));
            }
        }));
    }
    for call in calls {
        call.await.unwrap();
    }

    let mut grpc = grpc;
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/echo.Echo/Stream");
    let replies: Vec<String> = grpc
        .server_streaming(
            request("tick", 5, 0),
            path,
            ProstCodec::<EchoRequest, EchoReply>::default(),
        )
        .await
        .unwrap()
        .into_inner()
        .map(|reply: Result<EchoReply, Status>| reply.unwrap().message)
        .collect()
        .await;
    assert_eq!(
        replies,
        ["tick #0", "tick #1", "tick #2", "tick #3", "tick #4"]
    );

    // An unknown method is UNIMPLEMENTED, and the server goes on.
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/echo.Echo/Nope");
    let err = grpc
        .unary::<EchoRequest, EchoReply, _>(request("x", 0, 0), path, ProstCodec::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);

    assert!(
        tokio::runtime::Handle::try_current().is_err(),
        "no tokio runtime"
    );
    stop.request_cancellation();
    drop(grpc);
    server.await.unwrap().unwrap();
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn a_client_deadline_cancels_the_handlers_token() {
    let (addr, stop, server, cancelled) = start_server().await;
    let mut grpc = grpc_client(addr);
    let mut slow = request("slow", 0, 60_000);
    slow.set_timeout(Duration::from_millis(100)); // sends grpc-timeout: 100m
    let started = Instant::now();
    let err = call_unary(&mut grpc, slow).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // The handler saw its token fire at the deadline (not after its 60 s wait).
    let seen_after = cancelled.recv().await.unwrap();
    assert!(
        seen_after >= Duration::from_millis(90) && seen_after < Duration::from_secs(2),
        "the handler was cancelled after {seen_after:?}"
    );
    // A call within its deadline is answered as usual.
    let mut quick = request("quick", 0, 5);
    quick.set_timeout(Duration::from_secs(5));
    assert_eq!(
        call_unary(&mut grpc, quick).await.unwrap().message,
        "echo: quick"
    );
    assert!(
        cancelled.try_recv().is_err(),
        "a call within its deadline was cancelled"
    );
    stop.request_cancellation();
    drop(grpc);
    server.await.unwrap().unwrap();
}
