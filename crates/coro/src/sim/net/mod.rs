//! The simulated network: `coro::net` inside a simulation talks over it, between named hosts,
//! instead of opening OS sockets (see the [`sim` guide](crate::sim#a-simulated-network)).
//!
//! Map: `world` (the run's hosts, partitions, settings, bound ports and delivery timers),
//! `host` (the host a task runs on), `flow` (one direction of a TCP connection), `stream` (a
//! connection's end), `connect` (opening a connection), `listener` (a listening port), `udp`
//! (a UDP socket), `control` (the public functions below).

pub(crate) mod connect;
mod control;
mod flow;
pub(crate) mod host;
pub(crate) mod listener;
pub(crate) mod stream;
pub(crate) mod udp;
pub(crate) mod world;

pub use control::{heal, lookup, partition, set_latency, set_udp_drop};
