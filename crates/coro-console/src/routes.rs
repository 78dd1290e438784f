//! The console's HTTP service: one handler per route, each answering from one
//! [`snapshot`](coro::trace::snapshot) taken for the request (nothing is cached, and nothing
//! is held between requests).

use crate::{json, page, prometheus};
use http_body_util::{Either, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use std::convert::Infallible;

/// A response body: a whole one, or the streamed JSON.
pub(crate) type Body = Either<Full<Bytes>, json::JsonBody>;

/// The console's hyper service.
pub(crate) fn service() -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone
+ Send
+ 'static {
    hyper::service::service_fn(|req: Request<Incoming>| async move { Ok(route(&req)) })
}

/// The response to `req`.
pub(crate) fn route(req: &Request<Incoming>) -> Response<Body> {
    route_parts(req.method(), req.uri().path())
}

fn route_parts(method: &Method, path: &str) -> Response<Body> {
    let known = matches!(path, "/" | "/tasks.json" | "/tasks.txt" | "/metrics");
    if !known {
        return whole(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            format!(
                "no route {path}: the console serves /, /tasks.json, /tasks.txt and /metrics\n"
            ),
        );
    }
    if method != Method::GET && method != Method::HEAD {
        return whole(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            format!("{path} answers GET only\n"),
        );
    }
    match path {
        "/" => whole(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page::HTML.to_owned(),
        ),
        "/tasks.json" => {
            let mut response =
                Response::new(Either::Right(json::JsonBody::new(coro::trace::snapshot())));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            no_cache(response)
        }
        "/tasks.txt" => whole(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            coro::trace::snapshot().to_string(),
        ),
        _ => whole(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            prometheus::render(&coro::trace::snapshot()),
        ),
    }
}

fn whole(status: StatusCode, content_type: &'static str, body: String) -> Response<Body> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    no_cache(response)
}

fn no_cache(mut response: Response<Body>) -> Response<Body> {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}
