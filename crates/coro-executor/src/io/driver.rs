//! [`IoDriver`]: a pool's OS poller, driven by the pool's own idle workers.
//!
//! One `polling::Poller` (epoll, kqueue, event ports) per pool, created when the pool's first
//! socket registers. Nobody is dedicated to it: a worker with nothing to run polls the OS
//! instead of sleeping (`Parker::park_polling`), one worker at a time (the `events` mutex is the
//! token: whoever holds it waits in the OS, the others sleep on their condvars), and whoever
//! wakes that worker for new work interrupts the wait with [`IoDriver::notify`]. A busy pool
//! still looks at the OS: every worker tries a non-blocking poll on its 61st tick, and the
//! monitor does so when nobody has polled for a while (Go's sysmon polling the netpoller).
//!
//! Readiness is recorded in the [`Source`] and its wakers are woken after every lock is
//! released: each waker puts its task back on the task's own executor (from a worker of this
//! pool, into that worker's queue), so a task always resumes where it belongs.

use super::poller::{OsPoller, pool_gone};
use super::source::Source;
use polling::Events;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One pool's poller and the sources registered with it.
pub(crate) struct IoDriver {
    /// The poller, shared with the sources (which arm their interest through it).
    os: Arc<OsPoller>,
    /// Registered sources by key (the key is the index; freed keys are reused).
    sources: Mutex<Slab>,
    /// The events buffer, held by the one thread waiting in the OS: the poll token.
    events: Mutex<Events>,
    /// Live registrations: idle workers poll only while there are some.
    live: AtomicUsize,
    /// When the OS was last polled, in ms after `origin` (for the monitor's check).
    last_poll_ms: AtomicU64,
    origin: Instant,
}

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Arc<Source>>>,
    free: Vec<usize>,
}

impl IoDriver {
    pub(crate) fn new(kick: Box<dyn Fn() + Send + Sync>) -> io::Result<IoDriver> {
        Ok(IoDriver {
            os: Arc::new(OsPoller::new(kick)?),
            sources: Mutex::new(Slab::default()),
            events: Mutex::new(Events::new()),
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
        let key = match sources.free.pop() {
            Some(key) => key,
            None => {
                sources.entries.push(None);
                sources.entries.len() - 1
            }
        };
        let source = Arc::new(Source::new(fd, key, self.os.clone()));
        // SAFETY: the fd stays open while registered: its owner (a `Registration`) deletes it
        // from the poller in its `Drop`, before the socket that owns the fd closes it.
        if let Err(err) = unsafe { self.os.poller.add(fd, polling::Event::none(key)) } {
            sources.free.push(key);
            return Err(err);
        }
        sources.entries[key] = Some(source.clone());
        self.live.fetch_add(1, Relaxed);
        Ok(source)
    }

    /// Removes `source` from the poller; its fd may be closed afterwards.
    pub(crate) fn deregister(&self, source: &Source) {
        // SAFETY: the fd is still open (see `register`).
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(source.fd()) };
        // An error means the fd is not registered (any more): nothing to undo.
        let _ = self.os.poller.delete(fd);
        let mut sources = self.sources.lock().unwrap();
        sources.entries[source.key()] = None;
        sources.free.push(source.key());
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

    /// Interrupts the thread waiting in [`PollGuard::wait`], or makes the next wait return at
    /// once.
    pub(crate) fn notify(&self) {
        if let Err(err) = self.os.poller.notify() {
            eprintln!("coro: waking the thread that polls the OS failed: {err}");
        }
    }

    /// The pool shut down: fails every registered source's waiters (and future waits).
    pub(crate) fn close(&self) {
        self.os.close();
        let sources: Vec<Arc<Source>> = {
            let sources = self.sources.lock().unwrap();
            sources.entries.iter().flatten().cloned().collect()
        };
        for source in sources {
            source.fire(true, true);
        }
    }
}

/// The right to wait in the OS (the events buffer): one thread at a time.
pub(crate) struct PollGuard<'a> {
    driver: &'a IoDriver,
    events: std::sync::MutexGuard<'a, Events>,
}

impl PollGuard<'_> {
    /// Waits in the OS for up to `timeout` (`None`: until an event or
    /// [`IoDriver::notify`]), then wakes the tasks whose sockets became ready. `on_events` runs
    /// first if there are any, before any task is woken (an idle worker takes itself off the
    /// idle list there, so that the tasks it wakes land on a worker that counts as awake).
    /// Returns the number of sources made ready.
    pub(crate) fn wait(mut self, timeout: Option<Duration>, on_events: impl FnOnce()) -> usize {
        let driver = self.driver;
        self.events.clear();
        driver.os.waiting.store(true, SeqCst);
        let waited = driver.os.poller.wait(&mut self.events, timeout);
        driver.os.waiting.store(false, SeqCst);
        driver
            .last_poll_ms
            .store(driver.origin.elapsed().as_millis() as u64, Relaxed);
        if let Err(err) = waited {
            // Nothing sensible to do with a failing poller but say so; the wait ends as a
            // spurious wake-up and the worker goes on.
            eprintln!("coro: polling the OS for IO readiness failed: {err}");
            return 0;
        }
        if self.events.is_empty() {
            return 0;
        }
        on_events();
        let mut ready = Vec::with_capacity(self.events.len());
        {
            let sources = driver.sources.lock().unwrap();
            for event in self.events.iter() {
                if let Some(Some(source)) = sources.entries.get(event.key) {
                    ready.push((source.clone(), event.readable, event.writable));
                }
            }
        }
        // The poll token is released before anyone is woken, so that another idle worker can
        // wait in the OS while these tasks run.
        drop(self);
        let count = ready.len();
        for (source, readable, writable) in ready {
            source.fire(readable, writable);
        }
        count
    }
}
