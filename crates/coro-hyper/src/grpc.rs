//! [`GrpcDeadline`]: a gRPC client's deadline (`grpc-timeout`) reaches the handler as coro
//! cancellation.
//!
//! Rule: the handler is never dropped at the deadline while it may still be cleaning up. At the
//! deadline its cancellation token fires (so `coro::time::sleep`, `cancellable`, `accept`,
//! `connect` and every cancellation-aware wait in it return at once); the call is then awaited
//! for up to [`GRACE`], and the client is answered `DEADLINE_EXCEEDED` whatever it returned,
//! since the client has stopped waiting. A handler still running after the grace period is
//! dropped.

use coro::Task;
use coro::cancel::{CancellationSource, CancellationToken};
use hyper::service::Service;
use hyper::{Request, Response};
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::task::Poll;
use std::time::Duration;

/// How long a cancelled handler may take to return after the deadline before it is dropped.
///
/// ```
/// assert_eq!(coro_hyper::GRPC_DEADLINE_GRACE, std::time::Duration::from_secs(1));
/// ```
pub const GRACE: Duration = Duration::from_secs(1);

/// gRPC status code `DEADLINE_EXCEEDED`.
const DEADLINE_EXCEEDED: &str = "4";

/// Wraps a gRPC service (a tonic server's routes, through a hyper service) so that the
/// deadline a client sends in the `grpc-timeout` header becomes the cancellation of the
/// handler's token: gRPC's deadline propagation, in coro's cancellation model. Requests without
/// the header run as they are.
///
/// tonic's own server (its tokio transport) enforces `grpc-timeout` by dropping the handler;
/// served by [`serve`](crate::serve), the handler instead sees its token fire and can return.
/// The handler is never dropped at the deadline while it may still be cleaning up: at the
/// deadline its token fires, the call is awaited for up to [`GRPC_DEADLINE_GRACE`](crate::GRPC_DEADLINE_GRACE),
/// and the client is answered `DEADLINE_EXCEEDED` whatever it returned (the client has stopped
/// waiting); a handler still running after that is dropped.
///
/// ```
/// use coro_hyper::GrpcDeadline;
/// use http_body_util::Empty;
/// use hyper::body::Bytes;
/// use hyper::service::Service;
/// use std::convert::Infallible;
/// use std::time::Duration;
///
/// # coro::block_wait(async {
/// let handler = hyper::service::service_fn(|_req: hyper::Request<Empty<Bytes>>| async {
///     // A slow backend call: cancellation-aware, so it returns at the deadline.
///     let waited = coro::time::sleep(Duration::from_secs(60)).await;
///     assert!(waited.is_err(), "the deadline cancelled the sleep");
///     Ok::<_, Infallible>(hyper::Response::new(Empty::<Bytes>::new()))
/// });
/// let service = GrpcDeadline::new(handler);
/// let request = hyper::Request::builder()
///     .header("grpc-timeout", "20m") // 20 ms
///     .body(Empty::<Bytes>::new())
///     .unwrap();
/// let response = service.call(request).await.unwrap();
/// assert_eq!(response.headers()["grpc-status"], "4"); // DEADLINE_EXCEEDED
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct GrpcDeadline<S> {
    inner: S,
}

impl<S> GrpcDeadline<S> {
    /// Wraps `inner`.
    ///
    /// ```
    /// let service = coro_hyper::GrpcDeadline::new(hyper::service::service_fn(|_req: hyper::Request<()>| async {
    ///     Ok::<_, std::convert::Infallible>(hyper::Response::new(()))
    /// }));
    /// # let _ = service;
    /// ```
    pub fn new(inner: S) -> Self {
        GrpcDeadline { inner }
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for GrpcDeadline<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ResBody>, S::Error>> + Send>>;

    fn call(&self, req: Request<ReqBody>) -> Self::Future {
        let deadline = req
            .headers()
            .get("grpc-timeout")
            .and_then(|value| parse_timeout(value.as_bytes()));
        let call = self.inner.call(req);
        match deadline {
            None => Box::pin(call),
            Some(deadline) => Box::pin(with_deadline(call, deadline)),
        }
    }
}

/// Runs `call` under a token that fires after `deadline`; see the module rule.
async fn with_deadline<ResBody: Default, E>(
    call: impl Future<Output = Result<Response<ResBody>, E>> + Send + 'static,
    deadline: Duration,
) -> Result<Response<ResBody>, E>
where
    Result<Response<ResBody>, E>: Send + 'static,
{
    let source = CancellationSource::new();
    let token = CancellationToken::merge([coro::current_cancellation_token(), source.token()]);
    let mut call = Task::new(call).with_cancellation(token);
    // The engine's timer: unlike `coro::time::sleep`, the caller's cancellation does not end it.
    let mut timer = pin!(coro::executor::time::sleep(deadline));
    let answered = poll_fn(|cx| match Pin::new(&mut call).poll(cx) {
        Poll::Ready(answer) => Poll::Ready(Some(answer)),
        Poll::Pending => timer.as_mut().poll(cx).map(|()| None),
    })
    .await;
    if let Some(answer) = answered {
        return answer;
    }
    source.request_cancellation();
    // Whatever the handler returns, the client has stopped waiting: answer DEADLINE_EXCEEDED.
    let _ = coro::time::timeout(GRACE, call).await;
    Ok(deadline_exceeded())
}

/// A trailers-only gRPC response with status `DEADLINE_EXCEEDED`.
fn deadline_exceeded<B: Default>() -> Response<B> {
    let mut response = Response::new(B::default());
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    headers.insert(
        "grpc-status",
        hyper::header::HeaderValue::from_static(DEADLINE_EXCEEDED),
    );
    headers.insert(
        "grpc-message",
        hyper::header::HeaderValue::from_static("deadline exceeded"),
    );
    response
}

/// Parses a `grpc-timeout` value: 1 to 8 ASCII digits and a unit (`H`, `M`, `S`, `m`, `u`,
/// `n`), as gRPC over HTTP/2 specifies; `None` for anything else (served without a deadline,
/// as tonic does).
fn parse_timeout(value: &[u8]) -> Option<Duration> {
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let amount: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(amount * 3600),
        b'M' => Duration::from_secs(amount * 60),
        b'S' => Duration::from_secs(amount),
        b'm' => Duration::from_millis(amount),
        b'u' => Duration::from_micros(amount),
        b'n' => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::parse_timeout;
    use std::time::Duration;

    #[test]
    fn grpc_timeout_values_parse_as_the_spec_says() {
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout(b"3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_timeout(b"250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            parse_timeout(b"99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        for bad in [
            &b""[..],
            b"S",
            b"123456789S",
            b"12x",
            b"-1S",
            b"1.5S",
            b"10s",
        ] {
            assert_eq!(parse_timeout(bad), None, "{:?}", std::str::from_utf8(bad));
        }
    }
}
