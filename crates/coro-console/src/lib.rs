//! A live task console for services on coro: open a page and see every task (what it is, who
//! started it, where it waits and on what, how long it has been busy or queued) and which tasks
//! are stuck for good.
//!
//! ```no_run
//! // In a service's main: serve the console on its own small pool.
//! let console = coro_console::spawn("127.0.0.1:6669").unwrap();
//! println!("console on http://{}/", console.local_addr());
//! ```
//!
//! Routes (all `GET`; anything else is 404, or 405 for another method):
//! - `/`: an HTML page with no external assets: the warnings on top, the tasks as a table
//!   sortable by busy time, queued time, age and more, the parent/child tree, a task's async
//!   stack on click; it refreshes every second from `/tasks.json`.
//! - `/tasks.json`: [`coro::trace::snapshot()`] as JSON, streamed task by task.
//! - `/tasks.txt`: the snapshot as text: the warnings, then `dump_all`'s tree (for `curl` and
//!   logs).
//! - `/metrics`: Prometheus text format 0.0.4: per pool and per worker counters and gauges,
//!   warnings by kind.
//!
//! The page, over `examples/console.rs --plant` (a deadlock and a blocked worker planted on
//! purpose), as `.ci/browser --screenshot` took it: `docs/console.png` in the repository, shown
//! in this crate's `README.md`.
//!
//! The console keeps coro's per-poll statistics on while it runs
//! ([`coro::executor::trace::collect_stats`]). One file per concern: `routes` (the service),
//! `json` (the streamed body), `prometheus` (the Prometheus text), `page` (the HTML page).

mod json;
mod page;
mod prometheus;
mod routes;

use coro::ThreadPool;
use coro::executor::trace::{StatsGuard, collect_stats};
use coro::net::TcpListener;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

/// Serves the console on `listener` until the listener fails (or the awaiting task is
/// cancelled); each connection is served by a task of its own, on the awaiting task's pool.
///
/// ```
/// # coro::block_wait(async {
/// let listener = coro::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
/// let served = coro::time::timeout(std::time::Duration::from_millis(20), coro_console::serve(listener)).await;
/// assert!(served.is_err()); // still serving when the timeout dropped it
/// # });
/// ```
pub async fn serve(listener: TcpListener) -> io::Result<()> {
    let _stats = collect_stats();
    coro_hyper::serve(listener, routes::service()).await
}

/// A console serving on a pool of its own; from [`spawn`]. Dropping it stops the console and
/// joins its threads.
///
/// ```
/// let console = coro_console::spawn("127.0.0.1:0").unwrap();
/// assert!(console.local_addr().ip().is_loopback());
/// drop(console); // stops it
/// ```
#[derive(Debug)]
pub struct ConsoleHandle {
    addr: SocketAddr,
    stop: Option<coro::channel::Sender<()>>,
    pool: Option<ThreadPool>,
    _stats: StatsGuard,
}

/// Binds `addr` at once and serves the console on a small pool of its own (two workers named
/// `coro-console-N`), so that it still answers when every worker of the service is stuck. An
/// address that does not resolve or cannot be bound is the error.
///
/// ```
/// let console = coro_console::spawn("127.0.0.1:0").unwrap();
/// let text = std::net::TcpStream::connect(console.local_addr()).is_ok();
/// assert!(text);
/// assert!(coro_console::spawn("256.0.0.1:1").is_err());
/// ```
pub fn spawn(addr: impl ToSocketAddrs) -> io::Result<ConsoleHandle> {
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the console's address resolved to nothing: give a host:port such as 127.0.0.1:6669",
        ));
    }
    let pool = ThreadPool::builder()
        .thread_name("coro-console")
        .worker_threads(2)
        .build()
        .map_err(io::Error::other)?;
    // Bound here, so that a bad or busy address is the caller's error at once (without
    // blocking: `spawn` may be called from inside a task); registered with the console pool's
    // IO driver by the server task.
    let listener = std::net::TcpListener::bind(&addrs[..])?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = coro::channel::bounded::<()>(1);
    let server = async move {
        let listener = match TcpListener::try_from(listener) {
            Ok(listener) => listener,
            Err(err) => {
                eprintln!("coro-console: cannot serve on {addr}: {err}");
                return;
            }
        };
        let served = coro_hyper::serve(listener, routes::service())
            .with_graceful_shutdown(async move {
                // Ends on a message or when the handle (the sender) is dropped.
                let _ = stopped.recv().await;
            })
            .await;
        if let Err(err) = served {
            eprintln!("coro-console: stopped serving on {addr}: {err}");
        }
    };
    // Detached: it ends when the handle signals it or its pool shuts down.
    drop(
        coro::Task::new(server)
            .named("coro-console server")
            .schedule_on(&pool)
            .start(),
    );
    Ok(ConsoleHandle {
        addr,
        stop: Some(stop),
        pool: Some(pool),
        _stats: collect_stats(),
    })
}

impl ConsoleHandle {
    /// The address the console listens on (with the port the OS chose for port 0).
    ///
    /// ```
    /// let console = coro_console::spawn("127.0.0.1:0").unwrap();
    /// assert_ne!(console.local_addr().port(), 0);
    /// ```
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for ConsoleHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(pool) = self.pool.take() {
            pool.shutdown();
        }
    }
}
