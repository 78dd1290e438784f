//! A small HTTP service on coro and hyper, driven by its own load generator.
//!
//! `GET /user/{id}` computes a page as a DAG of tasks (profile, friends, and a feed that needs
//! the friends) under a 100 ms deadline (`?slow=1` makes the feed miss it: 504). Profiles are
//! cached behind a fair shared mutex, concurrent misses share one backend call, and stale
//! entries are refreshed in a bounded background scope. `GET /debug/tasks` dumps every live
//! task; `GET /metrics` shows the counters and the pool's metrics. hyper does the HTTP (through
//! `coro_hyper::serve` on `coro::net`), coro the DAG; the server is in `service/server.rs`.
//!
//! The load generator is `coro_hyper::client()` (hyper-util's pooled client on `coro::net`): N
//! tasks sharing one client, each sending requests back to back for D seconds over the pool's
//! keep-alive connections. It prints requests/s and latency percentiles, shuts the server down
//! gracefully and exits 0.
//!
//! The DAG's branches read real data (`service/store.rs`): by default an SQLite database made
//! and seeded in a temporary file at start (so the example needs nothing installed), with
//! `--postgres URL` a PostgreSQL database over coro::net (tokio-postgres, no tokio runtime),
//! and with `--redis URL` profiles cached in Redis (redis-rs through `coro::compat::tokio`).
//!
//! ```text
//! cargo run --release --example service                 # 3 s load run on loopback, then a report
//! cargo run --release --example service -- --postgres postgres://postgres@127.0.0.1:5432/postgres
//! cargo run --release --example service -- --redis redis://127.0.0.1:6379/
//! cargo run --release --example service -- --duration 5 --concurrency 64
//! cargo run --release --example service -- --serve 127.0.0.1:8080   # then curl or wrk it
//! cargo run --release --example service -- --serve --console 127.0.0.1:6669  # and open the console
//! ```
//!
//! With `--serve`, SIGTERM or SIGINT (Ctrl-C) shuts the server down gracefully through
//! `coro::signal`: it stops accepting, lets the requests in flight finish (try
//! `/debug/sleep?ms=3000` and Ctrl-C), prints that it drained, and exits 0.

#[path = "service/server.rs"]
mod server;
#[path = "service/store.rs"]
mod store;

use coro::Task;
use coro::signal::unix::{SignalKind, signal};
use coro::time::timeout;
use coro_hyper::CoroConnector;
use coro_hyper::hyper::body::Bytes;
use coro_hyper::hyper_util::client::legacy::Client;
use http_body_util::{BodyExt, Empty};
use server::{Config, Server};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: service [--serve [ADDR]] [--duration SECS] [--concurrency N] \
                     [--postgres URL] [--redis URL] [--console ADDR]";
/// Users the load generator asks for: few enough that requests for one id overlap.
const KEYS: u64 = 64;
/// One request in this many asks for the slow feed, which hits the deadline.
const SLOW_ONE_IN: u64 = 200;
/// Bounds on the load generator whatever the duration: requests per connection, and how long
/// one request may take before the client gives up on it.
const MAX_REQUESTS_PER_CLIENT: usize = 1_000_000;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

struct Args {
    serve: Option<SocketAddr>,
    /// Where to serve the live task console (coro-console), if anywhere.
    console: Option<SocketAddr>,
    store: store::StoreConfig,
    duration: Duration,
    concurrency: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        serve: None,
        console: None,
        store: store::StoreConfig::default(),
        duration: Duration::from_secs(3),
        concurrency: 32,
    };
    let mut it = std::env::args().skip(1).peekable();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--serve" => {
                let addr = it.next_if(|a| !a.starts_with("--"));
                let addr = addr.as_deref().unwrap_or("127.0.0.1:8080");
                args.serve = Some(
                    addr.parse()
                        .map_err(|e| format!("bad address {addr}: {e}"))?,
                );
            }
            "--duration" => {
                let secs: f64 = value(it.next(), &flag)?;
                if !(0.1..=600.0).contains(&secs) {
                    return Err("--duration must be between 0.1 and 600 seconds".into());
                }
                args.duration = Duration::from_secs_f64(secs);
            }
            "--concurrency" => {
                args.concurrency = value(it.next(), &flag)?;
                if !(1..=1024).contains(&args.concurrency) {
                    return Err("--concurrency must be between 1 and 1024".into());
                }
            }
            "--console" => args.console = Some(value(it.next(), &flag)?),
            "--postgres" => args.store.postgres = Some(value(it.next(), &flag)?),
            "--redis" => args.store.redis = Some(value(it.next(), &flag)?),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(args)
}

fn value<T: std::str::FromStr>(arg: Option<String>, flag: &str) -> Result<T, String> {
    let arg = arg.ok_or_else(|| format!("{flag} needs a value"))?;
    arg.parse()
        .map_err(|_| format!("bad value for {flag}: {arg}"))
}

#[coro::main]
async fn main() {
    let args = parse_args().unwrap_or_else(|msg| {
        eprintln!("{msg}\n{USAGE}");
        std::process::exit(2);
    });
    let config = Config {
        store: args.store.clone(),
        ..Config::default()
    };
    // On a pool of its own: it answers even when every worker of the service is stuck.
    let _console = args.console.map(|addr| {
        let console = coro_console::spawn(addr).unwrap_or_else(|err| {
            eprintln!("service: cannot start the console on {addr}: {err}");
            std::process::exit(1);
        });
        eprintln!("console on http://{}/", console.local_addr());
        console
    });
    if let Some(addr) = args.serve {
        return serve(addr, config).await;
    }
    let server = Server::start(([127, 0, 0, 1], 0).into(), config)
        .await
        .unwrap_or_else(|err| {
            eprintln!("service: cannot start: {err}");
            std::process::exit(1);
        });
    let addr = server.addr();
    println!("data: {}", server.store());
    println!(
        "load: {} clients sharing coro_hyper::client()'s keep-alive pool for {:?} against http://{addr}",
        args.concurrency, args.duration
    );

    let http = coro_hyper::client::<Empty<Bytes>>();
    let started = Instant::now();
    let until = started + args.duration;
    let clients = (0..args.concurrency as u64)
        .map(|i| Task::new(client(http.clone(), addr, i, until)).named("load client"));
    // Halfway through, ask the server what all its tasks are doing.
    let half = args.duration / 2;
    let dump_client = http.clone();
    let dump = Task::new(async move {
        let _ = coro::time::sleep(half).await;
        timeout(CLIENT_TIMEOUT, get(&dump_client, addr, "/debug/tasks")).await
    })
    .named("dump taker");
    let (reports, dump) = coro::collect_all!(coro::collect_all_range(clients), dump).await;
    let elapsed = started.elapsed();

    let mut total = Report::default();
    for r in reports {
        total.latencies.extend(r.latencies);
        total.ok += r.ok;
        total.timeouts += r.timeouts;
        total.errors += r.errors;
    }
    total.latencies.sort();
    let pct = |p: f64| {
        let at = ((total.latencies.len() as f64 - 1.0) * p).round() as usize;
        total.latencies.get(at).copied().unwrap_or_default()
    };
    let count = total.latencies.len();
    println!(
        "requests: {count} in {elapsed:.2?} = {:.0} requests/s",
        count as f64 / elapsed.as_secs_f64()
    );
    println!(
        "latency: p50 {:.2?}, p90 {:.2?}, p99 {:.2?}, max {:.2?}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    println!(
        "answers: {} ok, {} timeouts (504), {} client errors",
        total.ok, total.timeouts, total.errors
    );
    let s = server.stats();
    println!(
        "profile sharing: {} requests, {} backend calls, {} cache hits, {} joined a load in flight",
        s.requests, s.backend_calls, s.cache_hits, s.shared_waits
    );
    println!(
        "background refresh: {} started, {} dropped (scope full)",
        s.refreshes, s.refresh_drops
    );
    match dump {
        Ok(Ok((200, text))) => {
            const SHOWN: usize = 40;
            let lines: Vec<&str> = text.lines().collect();
            println!(
                "task dump taken mid-run (first {SHOWN} of {} lines):",
                lines.len()
            );
            lines.iter().take(SHOWN).for_each(|l| println!("  {l}"));
        }
        other => println!("no task dump: {other:?}"),
    }
    // Graceful: the clients are done, so every connection is idle and closes at once.
    drop(http);
    let stopping = Instant::now();
    server.shutdown().await;
    println!("graceful shutdown: {:.2?}", stopping.elapsed());
    assert!(count > 0 && total.errors == 0, "the load run saw errors");
}

/// `--serve ADDR`: serves until SIGTERM or SIGINT (Ctrl-C), then stops accepting, lets the
/// requests in flight finish, says so and returns (the process exits 0); exits 1 if the drain
/// had to cut requests off.
async fn serve(addr: SocketAddr, config: Config) {
    // Registered before the server starts: from here on SIGTERM and SIGINT no longer end the
    // process at once, they reach the select below.
    let mut terminate = signal(SignalKind::terminate()).expect("handle SIGTERM");
    let mut interrupt = signal(SignalKind::interrupt()).expect("handle SIGINT");
    let server = Server::start(addr, config).await.unwrap_or_else(|err| {
        eprintln!("service: cannot start: {err}");
        std::process::exit(1);
    });
    println!("data: {}", server.store());
    println!(
        "serving on http://{0}/user/1 (also /user/1?slow=1, /debug/tasks, /debug/sleep?ms=300, \
         /metrics); Ctrl-C or SIGTERM drains and stops",
        server.addr()
    );
    let name = coro::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    };
    println!("{name}: stopped accepting, draining the requests in flight");
    let stopping = Instant::now();
    let drained = server.shutdown().await;
    if !drained.complete {
        eprintln!("service: the drain after {name} cut requests off");
        std::process::exit(1);
    }
    println!(
        "drained in {:.2?}: {} requests answered in all; exiting",
        stopping.elapsed(),
        drained.stats.requests
    );
}

#[derive(Default)]
struct Report {
    latencies: Vec<Duration>,
    ok: u64,
    timeouts: u64,
    errors: u64,
}

/// One client task sending requests back to back until `until`, on the shared pool's
/// keep-alive connections.
async fn client(http: Http, addr: SocketAddr, seed: u64, until: Instant) -> Report {
    let mut report = Report::default();
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1; // xorshift: any odd start
    while Instant::now() < until && report.latencies.len() < MAX_REQUESTS_PER_CLIENT {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let id = 1 + rng % KEYS;
        let roll = (rng >> 32) % SLOW_ONE_IN; // independent of the id's low bits
        let slow = if roll == 0 { "?slow=1" } else { "" };
        let sent = Instant::now();
        match timeout(
            CLIENT_TIMEOUT,
            get(&http, addr, &format!("/user/{id}{slow}")),
        )
        .await
        {
            Ok(Ok((200, _))) => report.ok += 1,
            Ok(Ok((504, _))) => report.timeouts += 1,
            _ => {
                report.errors += 1;
                continue;
            }
        }
        report.latencies.push(sent.elapsed());
    }
    report
}

/// The load generator's HTTP client: one pool of keep-alive connections, shared by every
/// client task (clones are handles on it).
type Http = Client<CoroConnector, Empty<Bytes>>;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends `GET path` to the server through the pool (which opens a connection when none is
/// idle, and drops those the server closed) and reads the answer: status and body.
async fn get(http: &Http, addr: SocketAddr, path: &str) -> Result<(u16, String), BoxError> {
    let response = http.get(format!("http://{addr}{path}").parse()?).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}
