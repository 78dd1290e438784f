//! Deterministic simulation: run a test, or a whole service, as a seeded, replayable
//! simulation on coro's own scheduler.
//!
//! A simulation runs a future, and every task it spawns, on the calling thread as `n` logical
//! workers of the real [`ThreadPool`](crate::ThreadPool) code: the same run queues, next slots,
//! global queue, stealing and idle bookkeeping as production, with no second scheduler. Which
//! logical worker takes the next step, which victim a searcher steals from, whether a next-slot
//! task is stolen, where [`select!`](crate::select) starts, every [`random_u64`] and every
//! [`buggify`]: each is drawn from one seed. The same seed gives the same run, event for event,
//! on any machine; another seed gives another interleaving, so a race that shows up once in a
//! million production runs shows up within a few hundred seeds, and its seed replays it under
//! a debugger.
//!
//! Time is virtual: inside a simulation [`coro::time`](crate::time) (sleeps, timeouts,
//! [`time::Instant::now`](crate::time::Instant::now), coro-hyper's timer) reads a simulated
//! clock that stands still while tasks run and jumps to the next timer deadline when every
//! task is idle. A thousand tasks sleeping an hour finish in milliseconds.
//!
//! # Writing a simulated test
//!
//! The test macro runs the body as a simulation: once with a random seed (printed), once with a
//! fixed one, or once per seed of a range.
//!
//! ```
//! use std::time::Duration;
//!
//! #[coro::test(sim)]
//! async fn retries_back_off_in_virtual_time() {
//!     let start = coro::time::Instant::now();
//!     coro::time::sleep(Duration::from_secs(30)).await.unwrap();
//!     assert!(start.elapsed() >= Duration::from_secs(30));
//! }
//!
//! #[coro::test(sim, seed = 42)]
//! async fn one_known_interleaving() {
//!     assert!(coro::sim::is_simulated());
//! }
//!
//! #[coro::test(sim, seeds = 0..100)]
//! async fn a_hundred_interleavings() {
//!     let a = coro::spawn(async { 1 });
//!     let b = coro::spawn(async { 2 });
//!     assert_eq!(a.await.unwrap() + b.await.unwrap(), 3);
//! }
//! ```
//!
//! Without the macro, [`Builder`] runs one simulation and [`run_seeds`] many:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! // The order in which two tasks append depends on the seed, and only on the seed.
//! let order = |seed| {
//!     coro::sim::Builder::new().seed(seed).workers(2).run(async {
//!         let log = Arc::new(Mutex::new(Vec::new()));
//!         let tasks: Vec<_> = ["a", "b", "c"]
//!             .into_iter()
//!             .map(|name| {
//!                 let log = log.clone();
//!                 coro::spawn(async move {
//!                     coro::yield_now().await;
//!                     log.lock().unwrap().push(name);
//!                 })
//!             })
//!             .collect();
//!         for task in tasks {
//!             task.await.unwrap();
//!         }
//!         let order = log.lock().unwrap().clone();
//!         order
//!     })
//! };
//! assert_eq!(order(1), order(1));
//! assert!((0..20).any(|seed| order(seed) != order(0)));
//! ```
//!
//! # When a seed fails, and replaying it
//!
//! A failure (a panic or failed assertion in the simulation's main future or one it awaits, a
//! deadlock where every task waits and no timer is pending, a livelock past the step limit, a
//! wake-up from a thread outside the simulation) panics with a report like
//!
//! ```text
//! coro::sim: the simulation failed: the simulation's main future failed: task panicked: lost an update
//! seed 17, 2 logical workers, after 212 steps and 0ns of virtual time; replay it with CORO_SIM_SEED=17
//! 3 live task(s)
//! - task #0 simulation main [running]
//! ...
//! ```
//!
//! with the async stack of every live task. Run the test again with `CORO_SIM_SEED=17` in the
//! environment: every simulation that is not given a seed in code (the plain macro,
//! [`Builder`] without [`seed`](Builder::seed), [`run_seeds`]) then runs that seed, and takes
//! the same decisions again, step for step.
//!
//! # What breaks determinism
//!
//! The seed decides everything coro schedules. It cannot decide what happens outside coro:
//! - **`std::time`**: `std::time::Instant::now()`, `SystemTime` and `std::thread::sleep` read or
//!   wait on the real clock. Use [`coro::time::Instant`](crate::time::Instant) and
//!   [`coro::time::sleep`](crate::time::sleep); a `std::time::Instant` deadline passed to
//!   `sleep_until` still works (virtual instants are `std::time::Instant` values).
//! - **OS randomness**: `rand::thread_rng()`, `RandomState` (and so the iteration order of a
//!   default `HashMap`), UUIDs. Use [`random_u64`] (seeded inside, OS-random outside) or a
//!   generator seeded from it.
//! - **Threads the test starts**, and anything they complete (a std channel, a `Mutex` another
//!   thread holds): their timing is the OS's. A task woken from such a thread fails the run
//!   with a message that says so. Blocking code belongs in [`spawn_blocking`](crate::spawn_blocking),
//!   which inside a simulation runs its closure as a step of the simulation.
//! - **Real IO**: files, pipes, Unix sockets, and sockets of other crates (async-io, tokio)
//!   are the OS's, outside the seed. `coro::net`'s TCP and UDP are simulated (below); a
//!   `coro::net` socket made from a std socket (`TryFrom`) stays an OS socket.
//!
//! [`Builder::check_determinism`] runs a simulation twice and compares the sequences of
//! scheduling decisions, naming the first that differs: the way to find such a leak.
//!
//! # A simulated network
//!
//! Inside a simulation, [`coro::net`](crate::net)'s [`TcpListener`](crate::net::TcpListener),
//! [`TcpStream`](crate::net::TcpStream) and [`UdpSocket`](crate::net::UdpSocket) open no OS
//! socket: they talk over an in-memory network between named hosts, with the same API, so a
//! service and its clients (coro-hyper's `serve` included) run unchanged.
//!
//! - **Hosts**: [`Builder::host`]`(name, f)` adds a host that runs `f()` from the start; the
//!   future given to `run` runs on the host `"main"`. A task, and every task it starts, belongs
//!   to its host; a host's name resolves wherever `coro::net` takes an address (`"server:80"`,
//!   `("server", 80)`), [`net::lookup`] gives its address, and `localhost`, `127.0.0.1` and
//!   `0.0.0.0` are the task's own host.
//! - **TCP** is ordered and reliable; each segment takes a seeded latency (default 1 to 5 ms,
//!   [`net::set_latency`]), delivered by a timer on the virtual clock, so waiting on the network
//!   costs no wall time. A connect to a port nobody listens on is refused; a connection holds
//!   at most 64 KiB in flight and unread per direction, so a writer to a slow reader waits.
//! - **UDP** datagrams take a seeded latency too (they may overtake each other) and are lost
//!   with the seeded probability [`net::set_udp_drop`].
//! - **Partitions**: [`net::partition`]`(a, b)` cuts two hosts apart until [`net::heal`]`(a, b)`.
//!   TCP data between them stays in flight (writes stall once the window fills, reads see
//!   nothing) and arrives, in order, after the heal; a connect between them times out after 75 s
//!   of virtual time; datagrams between them are lost.
//!
//! ```
//! use futures::{AsyncReadExt, AsyncWriteExt};
//! use std::time::Duration;
//!
//! let late = coro::sim::Builder::new()
//!     .seed(12)
//!     .host("db", || async {
//!         let listener = coro::net::TcpListener::bind("0.0.0.0:5432").await.unwrap();
//!         let (mut conn, _) = listener.accept().await.unwrap();
//!         let mut query = [0; 5];
//!         conn.read_exact(&mut query).await.unwrap();
//!         conn.write_all(b"rows").await.unwrap();
//!     })
//!     .run(async {
//!         let mut conn = coro::net::TcpStream::connect("db:5432").await.unwrap();
//!         conn.write_all(b"query").await.unwrap();
//!         coro::sim::net::partition("main", "db"); // the query is held in flight
//!         let mut reply = [0; 4];
//!         let deadline = coro::time::timeout(Duration::from_secs(2), conn.read_exact(&mut reply));
//!         assert!(deadline.await.is_err()); // two seconds of virtual time, none of wall time
//!         coro::sim::net::heal("main", "db");
//!         conn.read_exact(&mut reply).await.unwrap();
//!         reply
//!     });
//! assert_eq!(&late, b"rows");
//! ```
//!
//! # Fault injection
//!
//! [`buggify`]`(p)` is a seeded fault point: true with probability `p` inside a simulation,
//! always false outside, so the fault paths can stay in production code.
//!
//! ```
//! async fn send(reply: u32) -> Result<u32, &'static str> {
//!     if coro::sim::buggify(0.3) {
//!         return Err("injected: connection reset");
//!     }
//!     Ok(reply)
//! }
//!
//! assert_eq!(coro::block_wait(send(7)), Ok(7)); // never fires outside a simulation
//! let failures = coro::sim::Builder::new().seed(9).run(async {
//!     let mut failures = 0;
//!     for i in 0..100 {
//!         failures += send(i).await.is_err() as u32;
//!     }
//!     failures
//! });
//! assert!((10..60).contains(&failures));
//! ```

mod builder;
mod check;
mod hosts;
pub mod net;
mod seeds;
mod sim_only;

pub use builder::Builder;
pub use coro_executor::sim::{buggify, is_simulated, random_u64};
pub use seeds::run_seeds;
