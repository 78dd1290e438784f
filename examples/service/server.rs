//! The HTTP server of the `service` example: a `/user/{id}` page computed as a small DAG of
//! tasks under a deadline, a profile cache with single-flight loading and background refresh,
//! and `/debug/tasks`, `/debug/sleep?ms=N` (a request held in flight) and `/metrics` pages.
//! Used by `examples/service.rs` (run it with `cargo run --release --example service`) and by
//! `examples/tests/service.rs`.
//!
//! hyper does the HTTP (`coro_hyper::serve` on a `coro::net::TcpListener`: HTTP/1.1 with
//! keep-alive, HTTP/2 with prior knowledge, its parser's limits, a header read timeout that is
//! also the idle timeout, graceful shutdown); coro does the DAG behind each request, whose
//! branches read a real database (`store.rs`: SQLite by default, PostgreSQL, a Redis cache).

use crate::store::{Store, StoreConfig, StoreError};
use coro::cancel::CancellationSource;
use coro::sync::{SharedMutexFair, SharedTask};
use coro::time::{sleep, timeout};
use coro::{AsyncScope, JoinHandle, Task};
use coro_hyper::hyper::body::{Bytes, Incoming};
use coro_hyper::hyper::header::{CONTENT_TYPE, HeaderValue};
use coro_hyper::hyper::service::service_fn;
use coro_hyper::hyper::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Tunables; the defaults are what the example's load run uses.
#[derive(Clone, Debug)]
pub struct Config {
    /// The database (and cache) the DAG reads.
    pub store: StoreConfig,
    /// Network latency added to each profile load, standing in for a database in another
    /// machine (the queries themselves run against the real store).
    pub profile_latency: Duration,
    /// Network latency added to each friends and feed query, likewise.
    pub backend_latency: Duration,
    /// Latency of the feed backend for `?slow=1` requests: far past the deadline.
    pub slow_latency: Duration,
    /// Per-request deadline: past it the whole DAG is cancelled and the answer is 504.
    pub deadline: Duration,
    /// A cached profile younger than this is served as is.
    pub fresh_for: Duration,
    /// A cached profile older than `fresh_for` but younger than this is served and refreshed in
    /// the background; an older one is a miss.
    pub expire_after: Duration,
    /// Background refreshes that may run at once; more are dropped (the entry just ages).
    pub refresh_slots: usize,
    /// How long a client has to send a request head: a new connection's first one, and each
    /// later one on a keep-alive connection, so it is the idle timeout too. A client that sends
    /// nothing (or half a head) is disconnected when it runs out.
    pub header_timeout: Duration,
    /// hyper's read buffer limit, which bounds a request head: a longer one gets 431.
    pub max_head_bytes: usize,
    /// Most header fields in a request; more get 431.
    pub max_headers: usize,
    /// How long a graceful shutdown waits for requests in flight before closing them.
    pub drain_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            store: StoreConfig::default(),
            profile_latency: Duration::from_millis(3),
            backend_latency: Duration::from_millis(2),
            slow_latency: Duration::from_secs(10),
            deadline: Duration::from_millis(100),
            fresh_for: Duration::from_millis(50),
            expire_after: Duration::from_millis(200),
            refresh_slots: 4,
            header_timeout: Duration::from_secs(10),
            // hyper's smallest allowed buffer limit is 8 KiB.
            max_head_bytes: 16 * 1024,
            max_headers: 32,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// Counters, updated with relaxed atomics: they are statistics, not synchronisation.
#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    ok: AtomicU64,
    timeouts: AtomicU64,
    bad_requests: AtomicU64,
    not_found: AtomicU64,
    store_errors: AtomicU64,
    backend_calls: AtomicU64,
    cache_hits: AtomicU64,
    shared_waits: AtomicU64,
    refreshes: AtomicU64,
    refresh_drops: AtomicU64,
}

/// A snapshot of the server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests that reached the handler (any path, any outcome). Requests hyper rejects
    /// itself (malformed, too large) are not counted.
    pub requests: u64,
    /// 200 answers.
    pub ok: u64,
    /// 504 answers: the deadline passed.
    pub timeouts: u64,
    /// 400 and 405 answers from the handler.
    pub bad_requests: u64,
    /// 404 answers.
    pub not_found: u64,
    /// 503 answers: a store query failed.
    pub store_errors: u64,
    /// Calls of the profile backend (one per single-flight computation).
    pub backend_calls: u64,
    /// Profile lookups answered from the cache.
    pub cache_hits: u64,
    /// Profile lookups that joined a computation already in flight.
    pub shared_waits: u64,
    /// Background refreshes started.
    pub refreshes: u64,
    /// Background refreshes dropped because the refresh scope was full.
    pub refresh_drops: u64,
}

impl Counters {
    fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Relaxed);
        Stats {
            requests: get(&self.requests),
            ok: get(&self.ok),
            timeouts: get(&self.timeouts),
            bad_requests: get(&self.bad_requests),
            not_found: get(&self.not_found),
            store_errors: get(&self.store_errors),
            backend_calls: get(&self.backend_calls),
            cache_hits: get(&self.cache_hits),
            shared_waits: get(&self.shared_waits),
            refreshes: get(&self.refreshes),
            refresh_drops: get(&self.refresh_drops),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

struct CachedProfile {
    name: String,
    fetched: Instant,
}

struct State {
    config: Config,
    store: Arc<Store>,
    counters: Counters,
    /// Many requests read the cache at once; fills are rare and short.
    cache: SharedMutexFair<HashMap<u64, CachedProfile>>,
    /// Profile loads in flight, so that concurrent misses for one id share one backend call.
    /// A plain mutex: it is held for a map operation, never across an await.
    in_flight: Mutex<HashMap<u64, SharedTask<ProfileLoad>>>,
    /// Background refreshes: bounded, so a burst of stale entries cannot pile up work.
    refresh: AsyncScope,
}

/// A running server; stop it with [`Server::shutdown`].
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationSource,
    serving: JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and serves on coro's default pool, whose
    /// metrics `/metrics` reports: the listener and every connection register with that pool's
    /// IO driver, and each request's DAG runs on it.
    pub async fn start(addr: SocketAddr, config: Config) -> std::io::Result<Server> {
        let store = Store::open(&config.store)
            .await
            .map_err(std::io::Error::other)?;
        let state = Arc::new(State {
            store,
            refresh: AsyncScope::bounded(config.refresh_slots),
            config,
            counters: Counters::default(),
            cache: SharedMutexFair::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
        });
        // Bound on the default pool, so that the listener uses that pool's IO driver.
        let listener = Task::new(coro::net::TcpListener::bind(addr))
            .schedule_on(coro::default_pool())
            .start()
            .await
            .expect("binding does not panic")?;
        let addr = listener.local_addr()?;
        let stop = CancellationSource::new();
        let handler = state.clone();
        let service = service_fn(move |req| {
            let state = handler.clone();
            async move { Ok::<_, Infallible>(handle(&state, req).await) }
        });
        let config = &state.config;
        let (max_buf, max_headers) = (config.max_head_bytes, config.max_headers);
        let server = coro_hyper::serve(listener, service)
            .header_read_timeout(config.header_timeout)
            .configure(|builder| {
                builder
                    .http1()
                    .max_buf_size(max_buf)
                    .max_headers(max_headers);
                builder
                    .http2()
                    .max_concurrent_streams(128)
                    .max_header_list_size(max_buf as u32);
            })
            .with_graceful_shutdown(stop.token().cancelled());
        let serving = Task::new(server)
            .named("accept loop")
            .schedule_on(coro::default_pool())
            .start();
        Ok(Server {
            addr,
            state,
            stop,
            serving,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the server reads its data from.
    pub fn store(&self) -> String {
        self.state.store.describe()
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.state.counters.snapshot()
    }

    /// Shuts down gracefully: stops accepting (new connections are refused), lets the requests
    /// in flight finish (each is bounded by the deadline; the whole drain by `drain_timeout`,
    /// past which the remaining connections are closed), closes idle connections, then cancels
    /// and awaits the background refreshes. Says whether every request in flight finished.
    pub async fn shutdown(self) -> Drained {
        self.stop.request_cancellation();
        let drain = self.state.config.drain_timeout;
        let mut serving = self.serving;
        let complete = match timeout(drain, &mut serving).await {
            Ok(Ok(Ok(()))) => true,
            Ok(Ok(Err(err))) => {
                eprintln!("service: the server failed: {err}");
                false
            }
            Ok(Err(err)) => {
                eprintln!("service: the server task failed: {err:?}");
                false
            }
            Err(_) => {
                eprintln!("service: requests still in flight after {drain:?}: closing them");
                // Dropping the server's future drops its connections.
                serving.cancel();
                false
            }
        };
        self.state.refresh.cancel_and_join().await;
        Drained {
            stats: self.state.counters.snapshot(),
            complete,
        }
    }
}

/// What [`Server::shutdown`] did.
#[derive(Clone, Copy, Debug)]
pub struct Drained {
    /// The counters once the server stopped: every request it answered.
    pub stats: Stats,
    /// Whether every request in flight finished; false if `drain_timeout` cut some off or the
    /// server failed (the reason was written to stderr).
    pub complete: bool,
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

/// Answers one request.
async fn handle(state: &Arc<State>, req: Request<Incoming>) -> Answer {
    bump(&state.counters.requests);
    if req.method() != Method::GET {
        bump(&state.counters.bad_requests);
        return answer(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    let path = req.uri().path();
    let query = req.uri().query().unwrap_or("");
    let (status, body) = match path {
        "/debug/tasks" => (StatusCode::OK, coro::trace::dump_all().to_string()),
        "/debug/sleep" => debug_sleep(query).await,
        "/metrics" => (StatusCode::OK, metrics(state)),
        _ => match path.strip_prefix("/user/").map(str::parse::<u64>) {
            None => (StatusCode::NOT_FOUND, "no such page\n".to_string()),
            Some(Err(_)) => (StatusCode::BAD_REQUEST, "bad user id\n".to_string()),
            Some(Ok(id)) => {
                let slow = query.split('&').any(|kv| kv == "slow=1");
                // The deadline cancels the DAG's token and drops it: every branch stops.
                let page =
                    Task::new(user_page(state.clone(), id, slow)).named(format!("user {id}"));
                match timeout(state.config.deadline, page).await {
                    Ok(Ok(Some(body))) => (StatusCode::OK, body),
                    Ok(Ok(None)) => (StatusCode::NOT_FOUND, "no such user\n".to_string()),
                    Ok(Err(err)) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("the store failed: {err}\n"),
                    ),
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
        StatusCode::SERVICE_UNAVAILABLE => &state.counters.store_errors,
        _ => &state.counters.bad_requests,
    };
    bump(counter);
    answer(status, body)
}

/// The longest `/debug/sleep` accepts: a request held longer than a graceful shutdown waits
/// (`Config::drain_timeout`) would only be cut off.
const MAX_DEBUG_SLEEP: Duration = Duration::from_secs(5);

/// `/debug/sleep?ms=N`: answers after N ms (at most [`MAX_DEBUG_SLEEP`]), so that a request
/// stays in flight as long as wanted, to watch a graceful shutdown drain it. The sleep is a
/// task named "debug sleep", which `/debug/tasks` shows while it waits.
async fn debug_sleep(query: &str) -> (StatusCode, String) {
    let ms = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("ms="))
        .and_then(|ms| ms.parse::<u64>().ok())
        .filter(|&ms| Duration::from_millis(ms) <= MAX_DEBUG_SLEEP);
    let Some(ms) = ms else {
        let why = format!(
            "want ?ms=N with N at most {}\n",
            MAX_DEBUG_SLEEP.as_millis()
        );
        return (StatusCode::BAD_REQUEST, why);
    };
    // Graceful shutdown leaves the handlers' token alone, so this sleep is not cut short then.
    Task::new(backend_delay(Duration::from_millis(ms)))
        .named("debug sleep")
        .await;
    (StatusCode::OK, format!("slept {ms} ms\n"))
}

fn metrics(state: &State) -> String {
    let mut out = format!("{:#?}\n", state.counters.snapshot());
    let scope = state.refresh.status();
    let _ = writeln!(out, "refresh scope: {scope:?}");
    let _ = writeln!(out, "{:#?}", coro::default_pool().metrics());
    out
}

/// The `/user/{id}` DAG: profile, friends and feed run in parallel, and feed also needs the
/// friends list. Friends is a `SharedTask` awaited by two branches, so it runs once; if the
/// deadline drops the DAG, both clones go and the friends computation is cancelled with it.
/// The first store error cancels the other branches (`try_collect_all!`); `None`: no such user.
async fn user_page(state: Arc<State>, id: u64, slow: bool) -> Result<Option<String>, StoreError> {
    let friends = friends(state.clone(), id).shared();
    let (name, friend_ids, posts) = coro::try_collect_all!(
        profile(state.clone(), id),
        friends.clone(),
        feed(state, friends, slow),
    )
    .await?;
    let Some(name) = name else {
        return Ok(None);
    };
    let friend_ids: Vec<String> = friend_ids.iter().map(i64::to_string).collect();
    Ok(Some(format!(
        "id: {id}\nname: {name}\nfriends: {}\nfeed: {}\n",
        friend_ids.join(" "),
        posts.join("; ")
    )))
}

/// A backend call: its latency, spent in a cancellation-aware sleep. A cancelled sleep only
/// happens when the deadline already dropped the DAG, so its result is never seen.
async fn backend_delay(latency: Duration) {
    let _ = sleep(latency).await;
}

#[coro::task]
async fn friends(state: Arc<State>, id: u64) -> Result<Vec<i64>, StoreError> {
    backend_delay(state.config.backend_latency).await;
    state.store.friends(id as i64).await
}

#[coro::task]
async fn feed(
    state: Arc<State>,
    friends: SharedTask<Result<Vec<i64>, StoreError>>,
    slow: bool,
) -> Result<Vec<String>, StoreError> {
    let friends = friends.await?; // the edge of the DAG: feed starts after friends
    let latency = if slow {
        state.config.slow_latency
    } else {
        state.config.backend_latency
    };
    Task::new(backend_delay(latency))
        .named(if slow {
            "slow feed backend"
        } else {
            "feed backend"
        })
        .await;
    state.store.posts(friends).await
}

/// What a profile load gives: the name, `None` if there is no such user, or the store's error.
type ProfileLoad = Result<Option<String>, StoreError>;

/// The profile, from the cache when it is fresh enough, otherwise from one shared load.
#[coro::task]
async fn profile(state: Arc<State>, id: u64) -> ProfileLoad {
    let now = Instant::now();
    let cached = state.cache.read().await.get(&id).and_then(|p| {
        let age = now.saturating_duration_since(p.fetched);
        (age < state.config.expire_after).then(|| (p.name.clone(), age))
    });
    if let Some((name, age)) = cached {
        bump(&state.counters.cache_hits);
        let refreshing = || state.in_flight.lock().unwrap().contains_key(&id);
        if age >= state.config.fresh_for && !refreshing() {
            // Stale: serve it, and refresh it off the request path. The refresh gets the
            // scope's token, not this request's, so a request's deadline does not cancel it.
            let refresh = Task::new(load_profile(&state, id))
                .named("refresh")
                .with_cancellation(state.refresh.token());
            match state.refresh.spawn(refresh) {
                Ok(_) => bump(&state.counters.refreshes),
                Err(_) => bump(&state.counters.refresh_drops), // full: the entry just ages
            }
        }
        return Ok(Some(name));
    }
    load_profile(&state, id).await
}

/// Single flight: the load of `id` already in flight, or a new one registered in `in_flight`.
fn load_profile(state: &Arc<State>, id: u64) -> SharedTask<ProfileLoad> {
    let mut in_flight = state.in_flight.lock().unwrap();
    if let Some(load) = in_flight.get(&id) {
        bump(&state.counters.shared_waits);
        return load.clone();
    }
    let st = state.clone();
    let load = Task::new(async move {
        bump(&st.counters.backend_calls);
        let started = Instant::now();
        backend_delay(st.config.profile_latency).await;
        let loaded = st.store.profile(id as i64).await;
        // Check under an upgradable read (readers go on meanwhile, other fillers wait), then
        // fill under the upgrade, unless a load that started later already filled the entry.
        let cache = st.cache.upgradable_read().await;
        if let Ok(Some(name)) = &loaded
            && cache.get(&id).is_none_or(|p| p.fetched < started)
        {
            let fetched = started;
            let entry = CachedProfile {
                name: name.clone(),
                fetched,
            };
            cache.upgrade().await.insert(id, entry);
        }
        // Only now leave the map: a newcomer either joins this load or finds the cache filled.
        let done = st.in_flight.lock().unwrap().remove(&id);
        drop(done);
        loaded
    })
    .named("profile backend")
    .shared();
    in_flight.insert(id, load.clone());
    load
}
