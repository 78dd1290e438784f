//! [`IoDriver`]: a pool's OS poller, driven by the pool's own idle workers.
//!
//! One `mio::Poll` (epoll, kqueue) per pool, created when the pool's first
//! socket registers. Nobody is dedicated to it: a worker with nothing to run polls the OS
//! instead of sleeping (`Parker::park_polling`), one worker at a time (the `events` mutex is the
//! token: whoever holds it waits in the OS, the others sleep on their condvars), and whoever
//! wakes that worker for new work interrupts the wait with [`IoDriver::notify`]. A busy pool
//! still looks at the OS: every worker tries a non-blocking poll on its 61st tick, and the
//! monitor does so when nobody has polled for a while (Go's sysmon polling the netpoller).
//!
//! Sockets are registered once, edge-triggered for both directions (no `epoll_ctl` per wait).
//! Readiness is recorded in the [`Source`] and its wakers are woken after every lock is
//! released: each waker puts its task back on the task's own executor (from a worker of this
//! pool, into that worker's queue), so a task always resumes where it belongs.

use super::poller::{NOTIFY, OsPoller, pool_gone};
use super::readiness::{READ_CLOSED, READABLE, WRITABLE, WRITE_CLOSED};
use super::source::Source;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One pool's poller and the sources registered with it.
pub(crate) struct IoDriver {
    /// The poller, shared with the sources (which arm their interest through it).
    os: Arc<OsPoller>,
    /// Registered sources by token (see [`Slab`]).
    sources: Mutex<Slab>,
    /// The OS poll and its events buffer, held by the one thread waiting in the OS: the poll
    /// token.
    events: Mutex<(Poll, Events)>,
    /// Live registrations: idle workers poll only while there are some.
    live: AtomicUsize,
    /// When the OS was last polled, in ms after `origin` (for the monitor's check).
    last_poll_ms: AtomicU64,
    origin: Instant,
}

/// The registered sources, indexed by the low half of their token.
///
/// Rule: a token is never handed out twice while an event for it may still be pending. An event
/// batch read from the OS may be processed after its fd was deregistered and its slot given to a
/// new fd; had the slot's token stayed the same, the new source would take the old fd's readiness
/// (a hang-up or an error marks a direction closed, which an edge-triggered source never hears
/// contradicted). So each slot counts its registrations in the token's high half, and an event
/// whose token is not the slot's current one is dropped.
#[derive(Default)]
struct Slab {
    /// Per slot: the token of its current (or last) registration, and the source while registered.
    entries: Vec<(usize, Option<Arc<Source>>)>,
    free: Vec<usize>,
}

/// The token's bits above this shift count the slot's registrations.
const GENERATION_SHIFT: u32 = usize::BITS / 2;

impl Slab {
    /// A slot and a token no pending event can carry; the caller stores the source with
    /// [`fill`](Self::fill), or gives the slot back with [`vacate`](Self::vacate).
    fn reserve(&mut self) -> (usize, Token) {
        let key = self.free.pop().unwrap_or_else(|| {
            self.entries.push((0, None));
            self.entries.len() - 1
        });
        assert!(
            key < 1 << GENERATION_SHIFT,
            "coro: more than 2^{GENERATION_SHIFT} sockets registered at once"
        );
        let generation = (self.entries[key].0 >> GENERATION_SHIFT).wrapping_add(1);
        let token = (generation << GENERATION_SHIFT) | key;
        // `NOTIFY` is `usize::MAX`: a key of all ones in the low half never happens.
        self.entries[key].0 = token;
        (key, Token(token))
    }

    fn fill(&mut self, key: usize, source: Arc<Source>) {
        self.entries[key].1 = Some(source);
    }

    fn vacate(&mut self, key: usize) {
        self.entries[key].1 = None;
        self.free.push(key);
    }

    /// The source an event with `token` is for: none if its registration is gone.
    fn get(&self, token: Token) -> Option<&Arc<Source>> {
        let key = token.0 & ((1 << GENERATION_SHIFT) - 1);
        match self.entries.get(key) {
            Some((current, Some(source))) if *current == token.0 => Some(source),
            _ => None,
        }
    }
}

impl IoDriver {
    pub(crate) fn new(kick: Box<dyn Fn() + Send + Sync>) -> io::Result<IoDriver> {
        let poll = Poll::new()?;
        Ok(IoDriver {
            os: Arc::new(OsPoller::new(&poll, kick)?),
            sources: Mutex::new(Slab::default()),
            events: Mutex::new((poll, Events::with_capacity(1024))),
            live: AtomicUsize::new(0),
            last_poll_ms: AtomicU64::new(0),
            origin: Instant::now(),
        })
    }

    /// Registers `fd` (non-blocking, owned by the caller until [`deregister`](Self::deregister)).
    pub(crate) fn register(self: &Arc<Self>, fd: RawFd) -> io::Result<Arc<Source>> {
        if self.os.is_closed() {
            return Err(pool_gone());
        }
        let mut sources = self.sources.lock().unwrap();
        let (key, token) = sources.reserve();
        let source = Arc::new(Source::new(fd, key, self.os.clone()));
        // Both directions, edge-triggered (mio's only mode), once for the fd's life. The fd stays
        // open while registered: its owner (a `Registration`) deregisters it in its `Drop`,
        // before the socket that owns the fd closes it.
        let interest = Interest::READABLE.add(Interest::WRITABLE);
        if let Err(err) = (self.os.registry).register(&mut SourceFd(&fd), token, interest) {
            sources.vacate(key);
            return Err(err);
        }
        sources.fill(key, source.clone());
        self.live.fetch_add(1, Relaxed);
        Ok(source)
    }

    /// Removes `source` from the poller; its fd may be closed afterwards.
    pub(crate) fn deregister(&self, source: &Source) {
        // An error means the fd is not registered (any more): nothing to undo.
        let _ = self.os.registry.deregister(&mut SourceFd(&source.fd()));
        self.sources.lock().unwrap().vacate(source.key());
        self.live.fetch_sub(1, Relaxed);
    }

    /// Whether any socket is registered: idle workers poll the OS only then.
    pub(crate) fn has_sources(&self) -> bool {
        self.live.load(Relaxed) > 0
    }

    /// How many sockets are registered.
    pub(crate) fn sources(&self) -> usize {
        self.live.load(Relaxed)
    }

    /// Milliseconds since the OS was last polled.
    pub(crate) fn ms_since_poll(&self) -> u64 {
        let now = self.origin.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_poll_ms.load(Relaxed))
    }

    /// The right to wait in the OS, if no other thread has it.
    pub(crate) fn try_poll(&self) -> Option<PollGuard<'_>> {
        let events = self.events.try_lock().ok()?;
        Some(PollGuard {
            driver: self,
            events,
        })
    }

    /// Polls the OS without waiting, if no other thread holds the token (a busy worker's look
    /// on its global-queue tick, the monitor's for neglected sockets), and then gives the wait
    /// in the OS on: a worker that parked while this held the token sleeps without it, and is
    /// woken to take it (see [`OsPoller::need_waiter`]).
    pub(crate) fn poll_now(&self) {
        if let Some(guard) = self.try_poll() {
            guard.wait_now();
        }
    }

    /// Interrupts the thread waiting in [`PollGuard::wait`], or makes the next wait return at
    /// once.
    pub(crate) fn notify(&self) {
        if let Err(err) = self.os.waker.wake() {
            eprintln!("coro: waking the thread that polls the OS failed: {err}");
        }
    }

    /// The pool shut down: fails every registered source's waiters (and future waits).
    pub(crate) fn close(&self) {
        self.os.close();
        let sources: Vec<Arc<Source>> = {
            let sources = self.sources.lock().unwrap();
            sources
                .entries
                .iter()
                .filter_map(|(_, s)| s.clone())
                .collect()
        };
        let mut wake = Vec::new();
        for source in sources {
            source.close(&mut wake);
        }
        for waker in wake {
            waker.wake();
        }
    }
}

/// The right to wait in the OS (the events buffer): one thread at a time.
pub(crate) struct PollGuard<'a> {
    driver: &'a IoDriver,
    events: std::sync::MutexGuard<'a, (Poll, Events)>,
}

impl PollGuard<'_> {
    /// Waits in the OS for up to `timeout` (`None`: until an event or
    /// [`IoDriver::notify`]), then wakes the tasks whose sockets became ready. `on_events` runs
    /// first if there are any, before any task is woken (an idle worker takes itself off the
    /// idle list there, so that the tasks it wakes land on a worker that counts as awake).
    /// Returns the number of sources made ready.
    /// Polls without waiting, wakes the tasks of what it finds, and gives the token back, then
    /// the wait in the OS on (see [`IoDriver::poll_now`]).
    pub(crate) fn wait_now(self) {
        let os = self.driver.os.clone();
        self.wait(Some(Duration::ZERO), || {});
        os.need_waiter();
    }

    pub(crate) fn wait(mut self, timeout: Option<Duration>, on_events: impl FnOnce()) -> usize {
        let driver = self.driver;
        let (poll, events) = &mut *self.events;
        driver.os.waiting.store(true, SeqCst);
        let waited = poll.poll(events, timeout);
        driver.os.waiting.store(false, SeqCst);
        driver
            .last_poll_ms
            .store(driver.origin.elapsed().as_millis() as u64, Relaxed);
        match waited {
            Ok(()) => {}
            // A signal interrupted the wait: a spurious wake-up.
            Err(err) if err.kind() == io::ErrorKind::Interrupted => return 0,
            Err(err) => {
                // Nothing sensible to do with a failing poller but say so; the wait ends as a
                // spurious wake-up and the worker goes on.
                eprintln!("coro: polling the OS for IO readiness failed: {err}");
                return 0;
            }
        }
        // The driver's own wake-up carries no readiness.
        if events.iter().all(|event| event.token() == NOTIFY) {
            return 0;
        }
        on_events();
        let mut ready = Vec::new();
        {
            let sources = driver.sources.lock().unwrap();
            for event in events.iter() {
                if let Some(source) = sources.get(event.token()) {
                    ready.push((source.clone(), readiness_bits(event)));
                }
            }
        }
        // The poll token is released before anyone is woken, so that another idle worker can
        // wait in the OS while these tasks run.
        drop(self);
        let count = ready.len();
        let mut wake = Vec::new();
        for (source, bits) in ready {
            source.fire(bits, &mut wake);
        }
        for waker in wake {
            waker.wake();
        }
        count
    }
}

/// The readiness word's bits for an OS event. An error counts as every direction ready and
/// closed: the next operation reports it.
fn readiness_bits(event: &mio::event::Event) -> usize {
    if event.is_error() {
        return READABLE | WRITABLE | READ_CLOSED | WRITE_CLOSED;
    }
    let mut bits = 0;
    for (set, bit) in [
        (event.is_readable(), READABLE),
        (event.is_writable(), WRITABLE),
        (event.is_read_closed(), READ_CLOSED),
        (event.is_write_closed(), WRITE_CLOSED),
    ] {
        if set {
            bits |= bit;
        }
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::{OsPoller, Slab, Source};
    use crate::ThreadPool;
    use crate::io::Registration;
    use std::io::{ErrorKind, Read, Write};
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::time::Duration;

    /// A worker that parks while a poll that does not wait holds the token (a busy worker's,
    /// the monitor's) sleeps without it; the poll's give-back must get it to wait in the OS,
    /// or a socket event is never seen: the monitor sleeps too once every worker is parked.
    #[test]
    fn a_worker_that_parks_while_a_poll_holds_the_token_is_handed_the_wait() {
        let pool = ThreadPool::new(1).unwrap();
        let (a, mut b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let (registration, a) = futures::executor::block_on(
            pool.spawn(async move { (Registration::new(&a).unwrap(), a) }),
        )
        .unwrap();
        let driver = pool.shared.io_driver().unwrap().clone();
        // Keep the worker in one poll while this thread takes the token.
        let spinning = Arc::new(AtomicBool::new(true));
        let spin = spinning.clone();
        let spinner = pool.spawn(async move {
            while spin.load(SeqCst) {
                std::hint::spin_loop();
            }
        });
        let guard = loop {
            if let Some(guard) = driver.try_poll() {
                break guard;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let (pending_tx, pending_rx) = std::sync::mpsc::channel();
        let reader = pool.spawn(async move {
            let mut told = Some(pending_tx);
            let mut buf = [0u8; 8];
            loop {
                let ready = std::future::poll_fn(|cx| {
                    let ready = registration.poll_read_ready(cx);
                    if ready.is_pending() {
                        told.take().map(|tx| tx.send(()));
                    }
                    ready
                })
                .await
                .unwrap();
                match (&a).read(&mut buf) {
                    Ok(n) => return n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        registration.clear_readiness(ready)
                    }
                    Err(e) => panic!("read failed: {e}"),
                }
            }
        });
        spinning.store(false, SeqCst);
        futures::executor::block_on(spinner).unwrap();
        pending_rx.recv_timeout(Duration::from_secs(5)).unwrap();
        // The worker parks without the token, and the monitor with it.
        std::thread::sleep(Duration::from_millis(50));
        guard.wait_now();
        b.write_all(b"x").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(futures::executor::block_on(reader)));
        let read = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("nobody waited in the OS after the poll gave the token back: the reader hangs");
        assert_eq!(read.unwrap(), 1);
    }

    #[test]
    fn an_event_for_a_vacated_slot_does_not_reach_the_slots_next_source() {
        let poll = mio::Poll::new().unwrap();
        let os = Arc::new(OsPoller::new(&poll, Box::new(|| {})).unwrap());
        let mut slab = Slab::default();
        let (key, old) = slab.reserve();
        slab.fill(key, Arc::new(Source::new(3, key, os.clone())));
        assert!(slab.get(old).is_some());
        // The fd is deregistered while an event for it is still in a batch read from the OS;
        // the slot goes to the next fd registered.
        slab.vacate(key);
        let (again, new) = slab.reserve();
        assert_eq!(again, key, "the freed slot is reused");
        slab.fill(again, Arc::new(Source::new(4, again, os)));
        assert_ne!(old, new);
        assert!(
            slab.get(old).is_none(),
            "the old fd's event would set the new fd's readiness"
        );
        assert_eq!(slab.get(new).unwrap().fd(), 4);
    }
}
