//! The `service` example's server (`examples/service/server.rs`) on tokio: the same routes,
//! simulated backend latencies, deadline and cache policy, on hyper-util's tokio server
//! (`server::conn::auto::Builder` with `TokioExecutor` / `TokioIo`, 2 workers), for
//! `benches/wrk.sh` to compare with the coro one under `wrk`.
//!
//! - `GET /user/{id}`: profile, friends and feed (which needs friends) under a 100 ms deadline
//!   (`?slow=1`: 504), joined with `tokio::join!`; friends is a `futures` shared future awaited
//!   by two branches.
//! - The profile cache is behind a `tokio::sync::RwLock`; concurrent misses for one id share one
//!   load (a `futures` shared future in an in-flight map); stale entries are refreshed in the
//!   background, at most 4 at once (a semaphore; more are dropped).
//! - `GET /debug/tasks` (tokio has no task dump: the live task count) and `GET /metrics`.
//!
//! ```text
//! cargo run --release -p coro-benches --example service_tokio -- --serve 127.0.0.1:8081
//! ```

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{RwLock, Semaphore};
use tokio::time::{sleep, timeout};

// The same values as `Config::default()` in examples/service/server.rs.
const PROFILE_LATENCY: Duration = Duration::from_millis(3);
const BACKEND_LATENCY: Duration = Duration::from_millis(2);
const SLOW_LATENCY: Duration = Duration::from_secs(10);
const DEADLINE: Duration = Duration::from_millis(100);
const FRESH_FOR: Duration = Duration::from_millis(50);
const EXPIRE_AFTER: Duration = Duration::from_millis(200);
const REFRESH_SLOTS: usize = 4;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_HEAD_BYTES: usize = 16 * 1024;
const MAX_HEADERS: usize = 32;

#[derive(Default, Debug)]
struct Counters {
    requests: AtomicU64,
    ok: AtomicU64,
    timeouts: AtomicU64,
    bad_requests: AtomicU64,
    not_found: AtomicU64,
    backend_calls: AtomicU64,
    cache_hits: AtomicU64,
    shared_waits: AtomicU64,
    refreshes: AtomicU64,
    refresh_drops: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

struct CachedProfile {
    name: String,
    fetched: Instant,
}

type Load = Shared<BoxFuture<'static, String>>;

struct State {
    counters: Counters,
    cache: RwLock<HashMap<u64, CachedProfile>>,
    /// Profile loads in flight: concurrent misses for one id share one.
    in_flight: Mutex<HashMap<u64, Load>>,
    /// Background refresh slots.
    refresh: Arc<Semaphore>,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: SocketAddr = match (args.next().as_deref(), args.next()) {
        (Some("--serve"), Some(addr)) => addr.parse().expect("an address such as 127.0.0.1:8081"),
        (Some("--serve"), None) => "127.0.0.1:8081".parse().expect("a literal address"),
        _ => {
            eprintln!("usage: service_tokio --serve [ADDR]");
            std::process::exit(2);
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(serve(addr));
}

async fn serve(addr: SocketAddr) {
    let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
    println!(
        "serving on http://{}/user/1 (also /user/1?slow=1, /debug/tasks, /metrics)",
        listener.local_addr().expect("local address")
    );
    let state = Arc::new(State {
        counters: Counters::default(),
        cache: RwLock::new(HashMap::new()),
        in_flight: Mutex::new(HashMap::new()),
        refresh: Arc::new(Semaphore::new(REFRESH_SLOTS)),
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(128)
        .max_header_list_size(MAX_HEAD_BYTES as u32);
    let builder = Arc::new(builder);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(_) => {
                // Out of file descriptors, say: back off instead of spinning.
                sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let builder = builder.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req).await) }
            });
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Answer = Response<Full<Bytes>>;

fn answer(status: StatusCode, body: impl Into<Bytes>) -> Answer {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Answer {
    bump(&state.counters.requests);
    if req.method() != Method::GET {
        bump(&state.counters.bad_requests);
        return answer(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let (status, body) = match path {
        "/debug/tasks" => {
            let tasks = tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks();
            (StatusCode::OK, format!("{tasks} live tasks\n"))
        }
        "/metrics" => {
            let metrics = tokio::runtime::Handle::current().metrics();
            let body = format!(
                "{:#?}\nworkers: {}\nlive tasks: {}\nrefresh slots free: {}\n",
                state.counters,
                metrics.num_workers(),
                metrics.num_alive_tasks(),
                state.refresh.available_permits()
            );
            (StatusCode::OK, body)
        }
        _ => match path.strip_prefix("/user/").map(str::parse::<u64>) {
            None => (StatusCode::NOT_FOUND, "no such page\n".to_string()),
            Some(Err(_)) => (StatusCode::BAD_REQUEST, "bad user id\n".to_string()),
            Some(Ok(id)) => {
                let slow = query.split('&').any(|kv| kv == "slow=1");
                // The deadline drops the DAG: every branch stops.
                match timeout(DEADLINE, user_page(state.clone(), id, slow)).await {
                    Ok(body) => (StatusCode::OK, body),
                    Err(_) => (
                        StatusCode::GATEWAY_TIMEOUT,
                        "deadline exceeded\n".to_string(),
                    ),
                }
            }
        },
    };
    let counter = match status {
        StatusCode::OK => &state.counters.ok,
        StatusCode::GATEWAY_TIMEOUT => &state.counters.timeouts,
        StatusCode::NOT_FOUND => &state.counters.not_found,
        _ => &state.counters.bad_requests,
    };
    bump(counter);
    answer(status, body)
}

/// The `/user/{id}` DAG: profile, friends and feed joined, feed also awaiting friends.
async fn user_page(state: Arc<State>, id: u64, slow: bool) -> String {
    let friends = friends(id).boxed().shared();
    let (name, friend_ids, posts) = tokio::join!(
        profile(state.clone(), id),
        friends.clone(),
        feed(friends, slow),
    );
    let friend_ids: Vec<String> = friend_ids.iter().map(u64::to_string).collect();
    format!(
        "id: {id}\nname: {name}\nfriends: {}\nfeed: {}\n",
        friend_ids.join(" "),
        posts.join("; ")
    )
}

async fn friends(id: u64) -> Vec<u64> {
    sleep(BACKEND_LATENCY).await;
    (id + 1..=id + 3).collect()
}

async fn feed(friends: Shared<BoxFuture<'static, Vec<u64>>>, slow: bool) -> Vec<String> {
    let friends = friends.await;
    sleep(if slow { SLOW_LATENCY } else { BACKEND_LATENCY }).await;
    friends
        .iter()
        .map(|f| format!("post from user{f}"))
        .collect()
}

/// The profile, from the cache when it is fresh enough, otherwise from one shared load.
async fn profile(state: Arc<State>, id: u64) -> String {
    let now = Instant::now();
    let cached = state.cache.read().await.get(&id).and_then(|p| {
        let age = now.saturating_duration_since(p.fetched);
        (age < EXPIRE_AFTER).then(|| (p.name.clone(), age))
    });
    if let Some((name, age)) = cached {
        bump(&state.counters.cache_hits);
        let refreshing = || state.in_flight.lock().unwrap().contains_key(&id);
        if age >= FRESH_FOR && !refreshing() {
            // Stale: serve it, and refresh it off the request path if a slot is free.
            match state.refresh.clone().try_acquire_owned() {
                Ok(permit) => {
                    bump(&state.counters.refreshes);
                    let load = load_profile(&state, id);
                    tokio::spawn(async move {
                        load.await;
                        drop(permit);
                    });
                }
                Err(_) => bump(&state.counters.refresh_drops),
            }
        }
        return name;
    }
    load_profile(&state, id).await
}

/// Single flight: the load of `id` already in flight, or a new one registered in `in_flight`.
fn load_profile(state: &Arc<State>, id: u64) -> Load {
    let mut in_flight = state.in_flight.lock().unwrap();
    if let Some(load) = in_flight.get(&id) {
        bump(&state.counters.shared_waits);
        return load.clone();
    }
    let st = state.clone();
    let load = async move {
        bump(&st.counters.backend_calls);
        let started = Instant::now();
        sleep(PROFILE_LATENCY).await;
        let name = format!("user{id}");
        {
            let mut cache = st.cache.write().await;
            if cache.get(&id).is_none_or(|p| p.fetched < started) {
                let entry = CachedProfile {
                    name: name.clone(),
                    fetched: started,
                };
                cache.insert(id, entry);
            }
        }
        let done = st.in_flight.lock().unwrap().remove(&id);
        drop(done);
        name
    }
    .boxed()
    .shared();
    in_flight.insert(id, load.clone());
    load
}
