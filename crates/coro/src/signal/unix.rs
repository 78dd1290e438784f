//! Unix signals as streams of deliveries: [`signal`] gives a [`Signal`] for a [`SignalKind`],
//! whose [`recv`](Signal::recv) waits for the next delivery.
//!
//! Rule: each `Signal` has its own non-blocking socket pair. The write end belongs to a
//! signal-hook action (its handler only sends a byte, without blocking, which is
//! async-signal-safe); the read end is registered with the pool's IO driver. `recv` reads every
//! byte pending and returns once, so deliveries may coalesce but none after creation is missed,
//! and bytes are only consumed by a `recv` that returns: dropping a pending `recv` loses nothing.

use coro_executor::io::Registration;
use signal_hook::SigId;
use signal_hook::consts::signal::*;
use signal_hook::low_level::{pipe, signal_name, unregister};
use std::fmt;
use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::task::{Context, Poll};

/// A kind of signal: its number, with a constructor for each common one (the same as
/// `tokio::signal::unix::SignalKind`'s).
///
/// ```
/// use coro::signal::unix::SignalKind;
///
/// assert_eq!(SignalKind::terminate(), SignalKind::from_raw(signal_hook::consts::SIGTERM));
/// assert_eq!(SignalKind::interrupt().as_raw_value(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(i32);

impl SignalKind {
    /// The kind of signal number `signum`, which is not checked here: [`signal`] refuses a
    /// number that is not a signal, or a signal that cannot be handled.
    ///
    /// ```
    /// use coro::signal::unix::SignalKind;
    ///
    /// let rtmin = SignalKind::from_raw(34); // a real-time signal on Linux
    /// assert_eq!(rtmin.as_raw_value(), 34);
    /// ```
    pub const fn from_raw(signum: i32) -> SignalKind {
        SignalKind(signum)
    }

    /// The signal's number.
    ///
    /// ```
    /// use coro::signal::unix::SignalKind;
    ///
    /// assert_eq!(SignalKind::hangup().as_raw_value(), signal_hook::consts::SIGHUP);
    /// ```
    pub const fn as_raw_value(&self) -> i32 {
        self.0
    }

    /// `SIGALRM`: a timer set with `alarm(2)` or `setitimer(2)` expired.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::alarm().as_raw_value(), signal_hook::consts::SIGALRM);
    /// ```
    pub const fn alarm() -> SignalKind {
        SignalKind(SIGALRM)
    }

    /// `SIGCHLD`: a child process stopped or ended.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::child().as_raw_value(), signal_hook::consts::SIGCHLD);
    /// ```
    pub const fn child() -> SignalKind {
        SignalKind(SIGCHLD)
    }

    /// `SIGHUP`: the terminal hung up; daemons take it as "reload the configuration".
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::hangup().as_raw_value(), signal_hook::consts::SIGHUP);
    /// ```
    pub const fn hangup() -> SignalKind {
        SignalKind(SIGHUP)
    }

    /// `SIGINT`: Ctrl-C in a terminal ([`ctrl_c`](super::ctrl_c) waits for it).
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::interrupt().as_raw_value(), signal_hook::consts::SIGINT);
    /// ```
    pub const fn interrupt() -> SignalKind {
        SignalKind(SIGINT)
    }

    /// `SIGINFO` (the BSDs and macOS): Ctrl-T in a terminal asks for a status line.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::info().as_raw_value(), signal_hook::consts::SIGINFO);
    /// ```
    #[cfg(any(
        target_os = "freebsd",
        target_os = "dragonfly",
        target_os = "netbsd",
        target_os = "openbsd",
        target_os = "macos"
    ))]
    pub const fn info() -> SignalKind {
        SignalKind(signal_hook::consts::SIGINFO)
    }

    /// `SIGIO`: IO is possible on a descriptor set up for signal-driven IO.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::io().as_raw_value(), signal_hook::consts::SIGIO);
    /// ```
    #[cfg(not(target_os = "haiku"))]
    pub const fn io() -> SignalKind {
        SignalKind(SIGIO)
    }

    /// `SIGPIPE`: a write to a pipe or socket whose reader is gone. Rust programs start with it
    /// ignored (writes fail with `BrokenPipe` instead); a handler makes it delivered.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::pipe().as_raw_value(), signal_hook::consts::SIGPIPE);
    /// ```
    pub const fn pipe() -> SignalKind {
        SignalKind(SIGPIPE)
    }

    /// `SIGQUIT`: Ctrl-\ in a terminal (see also
    /// [`trace::dump_on_signal`](crate::trace::dump_on_signal)).
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::quit().as_raw_value(), signal_hook::consts::SIGQUIT);
    /// ```
    pub const fn quit() -> SignalKind {
        SignalKind(SIGQUIT)
    }

    /// `SIGTERM`: the polite request to end (`kill <pid>`, and what service managers send).
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::terminate().as_raw_value(), signal_hook::consts::SIGTERM);
    /// ```
    pub const fn terminate() -> SignalKind {
        SignalKind(SIGTERM)
    }

    /// `SIGUSR1`: meaning whatever the program gives it.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::user_defined1().as_raw_value(), signal_hook::consts::SIGUSR1);
    /// ```
    pub const fn user_defined1() -> SignalKind {
        SignalKind(SIGUSR1)
    }

    /// `SIGUSR2`: meaning whatever the program gives it.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::user_defined2().as_raw_value(), signal_hook::consts::SIGUSR2);
    /// ```
    pub const fn user_defined2() -> SignalKind {
        SignalKind(SIGUSR2)
    }

    /// `SIGWINCH`: the terminal's window changed size.
    ///
    /// ```
    /// # use coro::signal::unix::SignalKind;
    /// assert_eq!(SignalKind::window_change().as_raw_value(), signal_hook::consts::SIGWINCH);
    /// ```
    pub const fn window_change() -> SignalKind {
        SignalKind(SIGWINCH)
    }
}

/// The kind of a signal number, as [`SignalKind::from_raw`].
///
/// ```
/// use coro::signal::unix::SignalKind;
///
/// assert_eq!(SignalKind::from(15), SignalKind::terminate());
/// ```
impl From<i32> for SignalKind {
    fn from(signum: i32) -> SignalKind {
        SignalKind::from_raw(signum)
    }
}

/// The signal's number, as [`SignalKind::as_raw_value`].
///
/// ```
/// use coro::signal::unix::SignalKind;
///
/// assert_eq!(i32::from(SignalKind::interrupt()), 2);
/// ```
impl From<SignalKind> for i32 {
    fn from(kind: SignalKind) -> i32 {
        kind.0
    }
}

/// Deliveries of one signal to this process, from the moment it was created: see [`signal`].
///
/// Every delivery after creation is seen at least once by every `Signal` of that kind: several
/// deliveries before a [`recv`](Signal::recv) may be seen as one. Dropping the `Signal`
/// unregisters its handler entry and closes its sockets (the process-wide handler stays; see
/// the [module docs](super)).
///
/// It is `Send` and `Sync`; `recv` needs `&mut`, so one task at a time waits on it. Create one
/// per task that listens.
///
/// ```
/// use coro::signal::unix::{SignalKind, signal};
///
/// # coro::block_wait(async {
/// let mut a = signal(SignalKind::user_defined1())?;
/// let mut b = signal(SignalKind::user_defined1())?;
/// signal_hook::low_level::raise(signal_hook::consts::SIGUSR1)?;
/// assert_eq!(a.recv().await, Some(())); // both see the one delivery
/// assert_eq!(b.recv().await, Some(()));
/// # std::io::Result::Ok(())
/// # }).unwrap();
/// ```
pub struct Signal {
    kind: SignalKind,
    /// The signal-hook action that owns the write end; unregistering it closes that end.
    action: SigId,
    /// Declared before `reader`, so it is dropped (deregistered from the driver) before the
    /// read end closes its fd.
    registration: Registration,
    /// The read end, non-blocking.
    reader: UnixStream,
}

/// Starts listening for `kind`: every delivery of it to this process from now on is seen at
/// least once by the returned [`Signal`]'s [`recv`](Signal::recv).
///
/// The read end registers with the IO driver of the pool this is called on (the default pool's
/// outside any pool); the `Signal` may then be awaited from anywhere, and it is woken through
/// that driver: no thread is started. The first `Signal` of a kind installs a process-wide
/// handler for it, for the rest of the process, which replaces the signal's default action:
/// after `signal(SignalKind::terminate())`, SIGTERM no longer ends the process, even once the
/// `Signal` is dropped (see the [module docs](super)).
///
/// # Errors
///
/// - `InvalidInput` for a number that is not a signal (0 or negative, or one the OS rejects),
///   and for the signals that are refused, each with the reason in the message:
///   - `SIGKILL` and `SIGSTOP`: no process may catch them;
///   - `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGTRAP` and `SIGSYS`: they report a fault of
///     the thread that raised it, and a handler that returns resumes the faulting instruction, so
///     the process would loop on the fault instead of crashing;
///   - any other signal signal-hook forbids on this target.
/// - An error of the OS if the sockets cannot be created or registered (too many open files).
///
/// ```
/// use coro::signal::unix::{SignalKind, signal};
/// use std::io::ErrorKind;
///
/// # coro::block_wait(async {
/// let mut hangup = signal(SignalKind::hangup())?;
/// signal_hook::low_level::raise(signal_hook::consts::SIGHUP)?; // `kill -HUP <pid>`: reload
/// assert_eq!(hangup.recv().await, Some(()));
///
/// let refused = signal(SignalKind::from_raw(signal_hook::consts::SIGKILL)).unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::InvalidInput);
/// assert!(refused.to_string().contains("SIGKILL (9)"), "{refused}");
/// # std::io::Result::Ok(())
/// # }).unwrap();
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let signum = kind.0;
    let invalid = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("coro::signal::unix::signal: {why}"),
        )
    };
    if signum <= 0 {
        return Err(invalid(format!("{signum} is not a signal number")));
    }
    if let Some(why) = refusal(signum) {
        return Err(invalid(format!("refusing {}: {why}", name(signum))));
    }
    let (reader, writer) = UnixStream::pair()?;
    reader.set_nonblocking(true)?;
    // signal-hook sends with MSG_DONTWAIT already; this keeps the write end non-blocking for
    // any other writer too.
    writer.set_nonblocking(true)?;
    // Registered with the driver before the handler entry exists, so that a failure here leaves
    // no entry behind.
    let registration = Registration::new(&reader)?;
    let action = pipe::register(signum, writer).map_err(|err| {
        io::Error::new(
            err.kind(),
            format!(
                "coro::signal::unix::signal: cannot handle {}: {err}",
                name(signum)
            ),
        )
    })?;
    Ok(Signal {
        kind,
        action,
        registration,
        reader,
    })
}

impl Signal {
    /// Waits for the next delivery: `Some(())` once the signal was delivered since the last
    /// `recv` that returned (or since creation). All deliveries pending are taken at once, so
    /// several deliveries in between are seen as one.
    ///
    /// `None` means no delivery can be seen any more: the pool whose IO driver the `Signal` is
    /// registered with has shut down (deliveries that came before are still returned first).
    ///
    /// Cancel-safe: dropping the future before it completes consumes nothing, so the next
    /// `recv` sees a delivery it had missed.
    ///
    /// ```
    /// use coro::signal::unix::{SignalKind, signal};
    /// use std::time::Duration;
    ///
    /// # coro::block_wait(async {
    /// let mut usr2 = signal(SignalKind::user_defined2())?;
    /// for _ in 0..3 {
    ///     signal_hook::low_level::raise(signal_hook::consts::SIGUSR2)?;
    /// }
    /// assert_eq!(usr2.recv().await, Some(())); // the three, seen as one
    /// let next = coro::time::timeout(Duration::from_millis(20), usr2.recv()).await;
    /// assert!(next.is_err(), "nothing more was delivered");
    /// # std::io::Result::Ok(())
    /// # }).unwrap();
    /// ```
    pub async fn recv(&mut self) -> Option<()> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`recv`](Signal::recv) as a poll function, for hand-written futures and streams: `Pending`
    /// registers `cx`'s waker to be woken at the next delivery.
    ///
    /// ```
    /// use coro::signal::unix::{SignalKind, signal};
    /// use std::task::{Context, Poll, Waker};
    ///
    /// # coro::block_wait(async {
    /// let mut winch = signal(SignalKind::window_change())?;
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(winch.poll_recv(&mut cx).is_pending());
    /// signal_hook::low_level::raise(signal_hook::consts::SIGWINCH)?;
    /// assert_eq!(winch.poll_recv(&mut cx), Poll::Ready(Some(())));
    /// # std::io::Result::Ok(())
    /// # }).unwrap();
    /// ```
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<()>> {
        // The readiness the last drain relied on: a drain that finds nothing clears it.
        let mut relied_on = None;
        loop {
            match self.drain() {
                Ok(true) => return Poll::Ready(Some(())),
                // The end of the stream: the write end was closed, which only dropping this
                // `Signal` does; should it happen anyway, nothing can be delivered any more.
                Ok(false) => return Poll::Ready(None),
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                    if let Some(ready) = relied_on.take() {
                        self.registration.clear_readiness(ready);
                    }
                    match self.registration.poll_read_ready(cx) {
                        Poll::Ready(Ok(ready)) => relied_on = Some(ready),
                        // The driver is gone (its pool shut down): nothing can wake us again.
                        Poll::Ready(Err(_)) => return Poll::Ready(None),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(_) => return Poll::Ready(None),
            }
        }
    }

    /// Reads every byte pending: `Ok(true)` if there was at least one, `WouldBlock` if there was
    /// none, `Ok(false)` at the end of the stream.
    fn drain(&self) -> io::Result<bool> {
        let mut buf = [0u8; 64];
        let mut got = false;
        loop {
            match (&self.reader).read(&mut buf) {
                Ok(0) => return Ok(got),
                Ok(_) => got = true,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) if got && err.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(err) => return Err(err),
            }
        }
    }

    /// The kind of signal this listens for.
    ///
    /// ```
    /// use coro::signal::unix::{SignalKind, signal};
    ///
    /// # coro::block_wait(async {
    /// let quit = signal(SignalKind::quit())?;
    /// assert_eq!(quit.kind(), SignalKind::quit());
    /// # std::io::Result::Ok(())
    /// # }).unwrap();
    /// ```
    pub fn kind(&self) -> SignalKind {
        self.kind
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        // signal-hook drops the action, closing the write end, once no handler is running it.
        unregister(self.action);
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Signal")
            .field("kind", &self.kind)
            .field("name", &name(self.kind.0))
            .finish()
    }
}

/// `SIGTERM (15)`, or `signal 40` for a number without a name here.
fn name(signum: i32) -> String {
    match signal_name(signum) {
        Some(name) => format!("{name} ({signum})"),
        None => format!("signal {signum}"),
    }
}

/// Why a signal is refused, if it is.
fn refusal(signum: i32) -> Option<&'static str> {
    match signum {
        SIGKILL | SIGSTOP => Some("no process may catch it"),
        SIGSEGV | SIGBUS | SIGILL | SIGFPE | SIGTRAP | SIGSYS => Some(
            "it reports a fault of the thread that raised it, and a handler that returns resumes \
             the faulting instruction: the process would loop on the fault instead of crashing",
        ),
        _ if signal_hook::consts::FORBIDDEN.contains(&signum) => {
            Some("signal-hook forbids handling it on this target")
        }
        _ => None,
    }
}
