//! The HTTP/1.1 server of the `service` example: a `/user/{id}` page computed as a small DAG of
//! tasks under a deadline, a profile cache with single-flight loading and background refresh,
//! and `/debug/tasks` and `/metrics` pages. Used by `examples/service.rs` (run it with
//! `cargo run --release --example service`) and by `examples/tests/service.rs`.
//!
//! Sockets come from `async-net`, whose reactor thread wakes tasks of any executor; coro's
//! affinity puts every woken task back on its own pool, so no tokio is involved.

use async_net::{TcpListener, TcpStream};
use coro::cancel::{CancellationSource, cancellable};
use coro::sync::{SharedMutexFair, SharedTask};
use coro::time::{sleep, timeout};
use coro::{AsyncScope, JoinHandle, Task};
use futures::{AsyncReadExt, AsyncWriteExt};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Tunables; the defaults are what the example's load run uses.
#[derive(Clone, Debug)]
pub struct Config {
    /// Latency of the simulated profile backend.
    pub profile_latency: Duration,
    /// Latency of the simulated friends and feed backends.
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
}

impl Default for Config {
    fn default() -> Self {
        Config {
            profile_latency: Duration::from_millis(3),
            backend_latency: Duration::from_millis(2),
            slow_latency: Duration::from_secs(10),
            deadline: Duration::from_millis(100),
            fresh_for: Duration::from_millis(50),
            expire_after: Duration::from_millis(200),
            refresh_slots: 4,
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
    backend_calls: AtomicU64,
    cache_hits: AtomicU64,
    shared_waits: AtomicU64,
    refreshes: AtomicU64,
    refresh_drops: AtomicU64,
}

/// A snapshot of the server's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests parsed (any path, any outcome).
    pub requests: u64,
    /// 200 answers.
    pub ok: u64,
    /// 504 answers: the deadline passed.
    pub timeouts: u64,
    /// 400 and 405 answers.
    pub bad_requests: u64,
    /// 404 answers.
    pub not_found: u64,
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
    counters: Counters,
    /// Many requests read the cache at once; fills are rare and short.
    cache: SharedMutexFair<HashMap<u64, CachedProfile>>,
    /// Profile loads in flight, so that concurrent misses for one id share one backend call.
    /// A plain mutex: it is held for a map operation, never across an await.
    in_flight: Mutex<HashMap<u64, SharedTask<String>>>,
    /// Background refreshes: bounded, so a burst of stale entries cannot pile up work.
    refresh: AsyncScope,
}

/// A running server; stop it with [`Server::shutdown`].
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationSource,
    accept: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port) and serves on coro's default pool, whose
    /// metrics `/metrics` reports.
    pub async fn start(addr: SocketAddr, config: Config) -> std::io::Result<Server> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            refresh: AsyncScope::bounded(config.refresh_slots),
            config,
            counters: Counters::default(),
            cache: SharedMutexFair::new(HashMap::new()),
            in_flight: Mutex::new(HashMap::new()),
        });
        let stop = CancellationSource::new();
        let accept = Task::new(accept_loop(state.clone(), listener))
            .named("accept loop")
            .with_cancellation(stop.token())
            .schedule_on(coro::default_pool())
            .start();
        Ok(Server {
            addr,
            state,
            stop,
            accept,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        self.state.counters.snapshot()
    }

    /// Stops accepting, cancels every connection and refresh, and waits for them to finish.
    pub async fn shutdown(self) {
        self.stop.request_cancellation();
        self.accept.await.expect("the accept loop does not panic");
    }
}

async fn accept_loop(state: Arc<State>, listener: TcpListener) {
    // Connections are children of a scope, so shutdown can cancel and await all of them.
    let connections = AsyncScope::new();
    // `cancellable` ends the wait once the server's stop token fires.
    while let Ok(accepted) = cancellable(listener.accept()).await {
        match accepted {
            Ok((stream, _)) => {
                let conn = Task::new(serve_connection(state.clone(), stream)).named("connection");
                // An unbounded scope only refuses once closed, which never happens here.
                drop(connections.spawn(conn));
            }
            // Out of file descriptors, say: back off instead of spinning.
            Err(_) => drop(sleep(Duration::from_millis(10)).await),
        }
    }
    connections.cancel_and_join().await;
    state.refresh.cancel_and_join().await;
}

/// Largest request head accepted; a longer one is answered 431 and the connection closed.
const MAX_HEAD: usize = 8 * 1024;

async fn serve_connection(state: Arc<State>, mut stream: TcpStream) {
    let mut buf = Vec::new();
    loop {
        let head = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end + 4);
                break head;
            }
            if buf.len() > MAX_HEAD {
                let reply = response(431, "Request Header Fields Too Large", "", false);
                drop(stream.write_all(reply.as_bytes()).await);
                return;
            }
            let mut chunk = [0u8; 2048];
            match cancellable(stream.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return, // closed by the peer, an I/O error, or server shutdown
            }
        };
        let (reply, keep_alive) = handle(&state, &head).await;
        if stream.write_all(reply.as_bytes()).await.is_err() || !keep_alive {
            return;
        }
    }
}

/// Answers one request head: the response bytes, and whether the connection stays open.
async fn handle(state: &Arc<State>, head: &str) -> (String, bool) {
    bump(&state.counters.requests);
    let Some(request) = parse(head) else {
        // After a malformed head the stream cannot be trusted: answer and close.
        bump(&state.counters.bad_requests);
        return (
            response(400, "Bad Request", "malformed request\n", false),
            false,
        );
    };
    let keep = request.keep_alive;
    if request.method != "GET" || request.has_body {
        bump(&state.counters.bad_requests);
        return (
            response(405, "Method Not Allowed", "only GET\n", false),
            false,
        );
    }
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((request.target, ""));
    let (status, reason, body) = match path {
        "/debug/tasks" => (200, "OK", coro::trace::dump_all().to_string()),
        "/metrics" => (200, "OK", metrics(state)),
        _ => match path.strip_prefix("/user/").map(str::parse::<u64>) {
            None => (404, "Not Found", "no such page\n".to_string()),
            Some(Err(_)) => (400, "Bad Request", "bad user id\n".to_string()),
            Some(Ok(id)) => {
                let slow = query.split('&').any(|kv| kv == "slow=1");
                // The deadline cancels the DAG's token and drops it: every branch stops.
                let page =
                    Task::new(user_page(state.clone(), id, slow)).named(format!("user {id}"));
                match timeout(state.config.deadline, page).await {
                    Ok(body) => (200, "OK", body),
                    Err(_) => (504, "Gateway Timeout", "deadline exceeded\n".to_string()),
                }
            }
        },
    };
    let counter = match status {
        200 => &state.counters.ok,
        504 => &state.counters.timeouts,
        404 => &state.counters.not_found,
        _ => &state.counters.bad_requests,
    };
    bump(counter);
    (response(status, reason, &body, keep), keep)
}

struct Request<'a> {
    method: &'a str,
    target: &'a str,
    keep_alive: bool,
    has_body: bool,
}

fn parse(head: &str) -> Option<Request<'_>> {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !target.starts_with('/') || !version.starts_with("HTTP/1.") {
        return None;
    }
    // HTTP/1.1 keeps the connection by default, HTTP/1.0 closes it.
    let mut keep_alive = version == "HTTP/1.1";
    let mut has_body = false;
    for line in lines {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            keep_alive = !value.eq_ignore_ascii_case("close")
                && (keep_alive || value.eq_ignore_ascii_case("keep-alive"));
        } else if name.eq_ignore_ascii_case("content-length") {
            has_body = value != "0";
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            has_body = true;
        }
    }
    Some(Request {
        method,
        target,
        keep_alive,
        has_body,
    })
}

fn response(status: u16, reason: &str, body: &str, keep_alive: bool) -> String {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    )
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
async fn user_page(state: Arc<State>, id: u64, slow: bool) -> String {
    let friends = friends(state.clone(), id).shared();
    let (name, friend_ids, posts) = coro::collect_all!(
        profile(state.clone(), id),
        friends.clone(),
        feed(state, friends, slow),
    )
    .await;
    let friend_ids: Vec<String> = friend_ids.iter().map(u64::to_string).collect();
    format!(
        "id: {id}\nname: {name}\nfriends: {}\nfeed: {}\n",
        friend_ids.join(" "),
        posts.join("; ")
    )
}

/// A backend call: its latency, spent in a cancellation-aware sleep. A cancelled sleep only
/// happens when the deadline already dropped the DAG, so its result is never seen.
async fn backend_delay(latency: Duration) {
    let _ = sleep(latency).await;
}

#[coro::task]
async fn friends(state: Arc<State>, id: u64) -> Vec<u64> {
    backend_delay(state.config.backend_latency).await;
    (id + 1..=id + 3).collect()
}

#[coro::task]
async fn feed(state: Arc<State>, friends: SharedTask<Vec<u64>>, slow: bool) -> Vec<String> {
    let friends = friends.await; // the edge of the DAG: feed starts after friends
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
    friends
        .iter()
        .map(|f| format!("post from user{f}"))
        .collect()
}

/// The profile, from the cache when it is fresh enough, otherwise from one shared load.
#[coro::task]
async fn profile(state: Arc<State>, id: u64) -> String {
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
        return name;
    }
    load_profile(&state, id).await
}

/// Single flight: the load of `id` already in flight, or a new one registered in `in_flight`.
fn load_profile(state: &Arc<State>, id: u64) -> SharedTask<String> {
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
        let name = format!("user{id}");
        // Check under an upgradable read (readers go on meanwhile, other fillers wait), then
        // fill under the upgrade, unless a load that started later already filled the entry.
        let cache = st.cache.upgradable_read().await;
        if cache.get(&id).is_none_or(|p| p.fetched < started) {
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
        name
    })
    .named("profile backend")
    .shared();
    in_flight.insert(id, load.clone());
    load
}
