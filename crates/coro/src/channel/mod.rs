//! Channels: Go's `chan` for tasks, and a oneshot.
//!
//! - [`bounded`]`(cap)` and [`unbounded`]: multi-producer multi-consumer channels. `cap == 0`
//!   makes a rendezvous channel, as Go's unbuffered `chan`: a send completes only once a
//!   receiver has taken the value.
//! - [`oneshot()`]: one value from one task to another.
//!
//! Rules every channel here keeps:
//! - Messages from one sender arrive in the order it sent them; waiting senders and waiting
//!   receivers are served first come, first served.
//! - Values pass through a lock-free queue while nobody waits; the channel's lock is taken only
//!   to wait and to wake. A waiting receiver is never overtaken: while one waits, every value
//!   goes to the receiver that has waited longest. A send that finds room goes in at once, even
//!   while other sends wait for room (as with async-channel and flume): room that frees up is
//!   granted to the waiting sends in order, and a granted send whose place was taken by such a
//!   newcomer goes back to the front of the line. Sends that had to wait thus never lose their
//!   turn to each other, and a running producer never stops for one that is asleep.
//! - A waiting receiver is handed the value directly by the sender, and woken (on a pool worker,
//!   into that worker's next slot, so it runs as soon as the sender's task suspends); waking
//!   happens outside the channel's lock.
//! - The channel closes when every [`Sender`] or every [`Receiver`] is gone, or on `close()`.
//!   Receivers still drain what was sent before the close; a send on a closed channel fails and
//!   gives the value back ([`SendError::into_inner`]).
//! - Every wait is cancel-safe: a value is delivered exactly once or given back. A `recv`
//!   dropped (by `select!`, a timeout, [`cancellable`](crate::cancel::cancellable)) after a
//!   value was handed to it puts the value back at the front; a value enters the channel only in
//!   the poll that completes its `send`, so a `send` dropped before completing did not send.
//!
//! ```
//! # coro::block_wait(async {
//! let (tx, rx) = coro::channel::bounded(16);
//! let producers: Vec<_> = (0..4)
//!     .map(|p| {
//!         let tx = tx.clone();
//!         coro::spawn(async move {
//!             for i in 0..100 {
//!                 tx.send(p * 100 + i).await.unwrap();
//!             }
//!         })
//!     })
//!     .collect();
//! drop(tx); // the channel closes when the producers are done
//! let mut sum = 0;
//! while let Ok(v) = rx.recv().await {
//!     sum += v;
//! }
//! assert_eq!(sum, (0..400).sum::<i32>());
//! for p in producers {
//!     p.await.unwrap();
//! }
//! # });
//! ```
//!
//! Layout: `chan` (the shared state and the send/receive algorithms), `receive_slot` (where a
//! sender leaves a value for a waiting receive), `sender`, `receiver`, `oneshot`, `error`.
//!
//! Why not async-channel's design (a lock-free `concurrent-queue` plus `event-listener`) as it
//! is: there a woken receiver must go back to the queue and may find its value taken by a
//! receiver that was not waiting, and a rendezvous channel cannot be built on it. Handing the
//! value to the receiver that has waited longest is what makes the channel FIFO-fair and lets a
//! ping-pong run as two tasks taking turns on one worker. The buffer is that same lock-free
//! queue, so the values of a channel nobody waits on never meet the lock.

mod chan;
mod error;
pub mod oneshot;
mod receive_slot;
mod receiver;
mod sender;

#[cfg(all(test, loom))]
mod loom_channel;

pub use error::{RecvError, SendError, TryRecvError, TrySendError};
pub use receiver::{Receiver, RecvFuture};
pub use sender::{SendFuture, Sender};

use chan::Chan;
use coro_loom::sync::Arc;

/// A channel buffering up to `cap` values; `cap == 0` makes a rendezvous channel (a send waits
/// for a receiver to take its value, as Go's unbuffered `chan`).
///
/// The buffer's `cap` places are allocated up front, as Go's `make(chan T, cap)` and
/// async-channel do: for a bound that is large or only a safety limit, prefer [`unbounded`].
///
/// # Panics
///
/// If `cap` places of `T` are more than the address space holds (`bounded(usize::MAX)`);
/// a buffer that fits the address space but not the memory fails as any allocation does.
///
/// ```
/// # coro::block_wait(async {
/// let (tx, rx) = coro::channel::bounded(0);
/// let handle = coro::spawn(async move {
///     tx.send(1).await.unwrap(); // completes once the value is taken
///     "sent"
/// });
/// assert_eq!(rx.recv().await, Ok(1));
/// assert_eq!(handle.await.unwrap(), "sent");
/// # });
/// ```
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    make(Some(cap))
}

/// A channel whose sends never wait.
///
/// ```
/// let (tx, rx) = coro::channel::unbounded();
/// for i in 0..1000 {
///     tx.try_send(i).unwrap();
/// }
/// assert_eq!(rx.len(), 1000);
/// assert_eq!(tx.capacity(), None);
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    make(None)
}

fn make<T>(capacity: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan::new(capacity));
    (Sender { chan: chan.clone() }, Receiver::new(chan))
}

/// A channel for one value: [`oneshot::Sender::send`] it, await the [`oneshot::Receiver`].
///
/// ```
/// # coro::block_wait(async {
/// let (tx, rx) = coro::channel::oneshot();
/// coro::spawn(async move { tx.send(6 * 7).unwrap() });
/// assert_eq!(rx.await, Ok(42));
/// # });
/// ```
pub fn oneshot<T>() -> (oneshot::Sender<T>, oneshot::Receiver<T>) {
    oneshot::channel()
}
