//! [`dump_on_signal`]: on a signal (SIGQUIT by default, as Go does for goroutines), write
//! [`dump_all`](super::dump_all) to stderr while the workers keep running.
//!
//! The signal plumbing is signal-hook's: its handler only records the signal and wakes a pipe,
//! and a dedicated ordinary thread (`coro-signal-dump`), blocked on `Signals::forever`, takes the
//! dump, which allocates and locks, outside the handler.

use std::fmt;
use std::io;

/// The signal a service usually dumps its tasks on: `SIGQUIT` (Ctrl-\ in a terminal, or
/// `kill -QUIT <pid>`), as Go prints every goroutine's stack on it.
///
/// It is `signal_hook::consts::SIGQUIT` (3 on Linux and the BSDs, macOS included). It is also
/// defined on other targets, as 3, so that portable code compiles; there
/// [`dump_on_signal`] returns an `Unsupported` error.
///
/// ```
/// # #[cfg(unix)]
/// assert_eq!(coro::trace::DEFAULT_DUMP_SIGNAL, 3);
/// ```
#[cfg(unix)]
pub const DEFAULT_DUMP_SIGNAL: i32 = signal_hook::consts::SIGQUIT;

/// The signal a service usually dumps its tasks on: `SIGQUIT`, 3 on the Unix targets. Signals
/// are Unix-only: on this target [`dump_on_signal`] returns an `Unsupported` error.
///
/// ```
/// assert_eq!(coro::trace::DEFAULT_DUMP_SIGNAL, 3);
/// ```
#[cfg(not(unix))]
pub const DEFAULT_DUMP_SIGNAL: i32 = 3;

/// The guard of a task dump installed by [`dump_on_signal`]: while it lives, each delivery of its
/// signal writes [`dump_all`](super::dump_all) to stderr. Dropping it uninstalls the dump.
///
/// Dropping it stops the dump thread and waits for it (a dump being written is finished
/// first), so once `drop` returns no further dump is written. What the signal does after that
/// is what signal-hook allows, and is described under [`dump_on_signal`]'s *Uninstalling*. To
/// keep the dump for the life of the process, keep the guard in `main` (or
/// [`std::mem::forget`] it).
///
/// ```
/// let guard = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL)?;
/// assert_eq!(guard.signal(), coro::trace::DEFAULT_DUMP_SIGNAL);
/// drop(guard); // uninstalled: the signal no longer dumps
/// # Ok::<(), std::io::Error>(())
/// ```
#[must_use = "dropping the guard uninstalls the dump at once; keep it alive as long as the dump is wanted"]
pub struct SignalDump {
    #[cfg(unix)]
    inner: unix::Installed,
    #[cfg(not(unix))]
    never: std::convert::Infallible,
}

impl SignalDump {
    /// The signal this guard dumps on.
    ///
    /// ```
    /// let guard = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL)?;
    /// assert_eq!(guard.signal(), coro::trace::DEFAULT_DUMP_SIGNAL);
    /// println!("kill -{} {} dumps the tasks", guard.signal(), std::process::id());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn signal(&self) -> i32 {
        #[cfg(unix)]
        {
            self.inner.signal
        }
        #[cfg(not(unix))]
        {
            match self.never {}
        }
    }
}

impl fmt::Debug for SignalDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SignalDump")
            .field("signal", &self.signal())
            .finish()
    }
}

/// Opt-in, Unix: on each delivery of `signal`, writes [`dump_all`](super::dump_all) (every live
/// task with its name, state and frames) to stderr, while the workers keep running and the
/// process goes on. Go does this for goroutines on SIGQUIT; pass [`DEFAULT_DUMP_SIGNAL`] for the
/// same.
///
/// The dump is a header line, `coro: task dump on signal SIGQUIT (N tasks)`, then the
/// [`TaskDump`](super::TaskDump) tree, written with one `write_all` to a locked stderr, so lines
/// from other threads do not interleave with it. Write errors (a closed stderr) are ignored.
///
/// The signal handler (signal-hook's) only records the signal; the dump is taken and written by
/// a dedicated thread, `coro-signal-dump`, not in the handler. Signals that arrive while a dump
/// is being written are coalesced into at most one more dump. Installing the dump replaces the
/// signal's default action (SIGQUIT's is to terminate with a core dump): while the guard lives,
/// the signal only dumps. Handlers registered through signal-hook by other code, and a handler
/// from outside signal-hook that was in place before, still run as well.
///
/// # Uninstalling
///
/// Dropping the returned [`SignalDump`] stops and joins the dump thread: no dump is written
/// after `drop` returns. signal-hook cannot take its process-level handler out again, so that
/// handler stays registered but no longer acts for this dump, and the signal then does:
///
/// - if a handler from outside signal-hook was in place before the install: that handler, which
///   signal-hook keeps calling (and the actions other code registered with signal-hook);
/// - if the signal was ignored before (`SIG_IGN`): nothing, as before;
/// - if it had its default action before (`SIG_DFL`, the usual case): **nothing either**. The
///   default action is not restored: after uninstalling, a SIGQUIT no longer terminates the
///   process or writes a core file, it is ignored. A program that wants the default action back
///   can register it itself, once, with signal-hook's
///   `flag::register_conditional_default(signal, flag)` and set `flag` when it drops the guard.
///
/// The dump can be installed again after its guard is dropped.
///
/// # Errors
///
/// - `InvalidInput` for a number that is not a signal (0, negative, out of range), and for the
///   signals it refuses: `SIGKILL` and `SIGSTOP` (they cannot be caught); `SIGSEGV`, `SIGBUS`,
///   `SIGILL`, `SIGFPE`, `SIGTRAP` and `SIGSYS` (a fault of the thread that raised them: a handler
///   that returns resumes the faulting instruction, and swallowing them would hide crashes and
///   breakpoints); `SIGABRT` (`abort()` ends the process right after the handlers return, before
///   a dump could be written).
/// - `AlreadyExists` if a dump is already installed for this signal (its guard not yet dropped):
///   one signal gives one dump. Different signals can each have their own.
/// - An error of signal-hook or the OS if the handler cannot be registered or the dump thread
///   cannot be started.
/// - `Unsupported` on targets other than Unix, which have no signals.
///
/// ```
/// use std::io::ErrorKind;
///
/// let guard = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL)?;
/// let again = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL).unwrap_err();
/// assert_eq!(again.kind(), ErrorKind::AlreadyExists);
/// drop(guard);
///
/// let sigkill = 9;
/// let refused = coro::trace::dump_on_signal(sigkill).unwrap_err();
/// assert_eq!(refused.kind(), ErrorKind::InvalidInput);
/// println!("{refused}"); // coro::trace::dump_on_signal: refusing SIGKILL (9): it cannot be caught
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// A service keeps the guard for as long as it runs; `kill -QUIT <pid>` then prints its tasks:
///
/// ```no_run
/// #[coro::main]
/// async fn main() -> std::io::Result<()> {
///     let _dump = coro::trace::dump_on_signal(coro::trace::DEFAULT_DUMP_SIGNAL)?;
///     // ... serve; each SIGQUIT writes every live task to stderr ...
///     # Ok(())
/// }
/// ```
pub fn dump_on_signal(signal: i32) -> io::Result<SignalDump> {
    #[cfg(unix)]
    {
        unix::install(signal, Box::new(unix::write_to_stderr))
    }
    #[cfg(not(unix))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("coro::trace::dump_on_signal({signal}): signals exist only on Unix targets"),
        ))
    }
}

#[cfg(unix)]
mod unix {
    use super::SignalDump;
    use crate::trace::dump_all;
    use signal_hook::consts::signal::*;
    use signal_hook::iterator::{Handle, Signals};
    use signal_hook::low_level::signal_name;
    use std::collections::BTreeSet;
    use std::io::{self, Write};
    use std::sync::Mutex;
    use std::thread::{self, JoinHandle};

    /// Where a dump goes: stderr, or a test's sink.
    pub(super) type Sink = Box<dyn FnMut(&[u8]) + Send>;

    /// The signals with a dump installed (a guard alive).
    static INSTALLED: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

    /// signal-hook's iterator panics on a number at or above this (its table's size).
    const MAX_SIGNUM: i32 = 128;

    pub(super) struct Installed {
        pub(super) signal: i32,
        handle: Handle,
        thread: Option<JoinHandle<()>>,
    }

    impl Drop for Installed {
        fn drop(&mut self) {
            // Wakes the thread out of `forever()`, which then ends; a dump in progress finishes.
            self.handle.close();
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
            // The thread dropped its `Signals`; dropping `handle` (after this) unregisters
            // the action from signal-hook's handler.
            installed().remove(&self.signal);
        }
    }

    fn installed() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
        // Only inserts and removes of integers happen under it.
        INSTALLED.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The signal's name (`SIGQUIT`), or `signal 40` for one without a name here.
    fn name(signal: i32) -> String {
        match signal_name(signal) {
            Some(name) => name.to_string(),
            None => format!("signal {signal}"),
        }
    }

    /// Why a signal is refused, if it is.
    fn refusal(signal: i32) -> Option<&'static str> {
        match signal {
            SIGKILL | SIGSTOP => Some("it cannot be caught"),
            SIGSEGV | SIGBUS | SIGILL | SIGFPE | SIGTRAP | SIGSYS => Some(
                "it reports a fault of the thread that raised it; a handler that returns would \
                 resume the faulting instruction or hide the crash",
            ),
            SIGABRT => Some(
                "abort() ends the process as soon as the handlers return, before a dump could \
                 be written",
            ),
            _ if signal_hook::consts::FORBIDDEN.contains(&signal) => {
                Some("signal-hook refuses to handle it")
            }
            _ => None,
        }
    }

    pub(super) fn install(signal: i32, mut sink: Sink) -> io::Result<SignalDump> {
        let invalid = |why: String| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("coro::trace::dump_on_signal: {why}"),
            )
        };
        if !(1..MAX_SIGNUM).contains(&signal) {
            return Err(invalid(format!("{signal} is not a signal number")));
        }
        if let Some(why) = refusal(signal) {
            return Err(invalid(format!(
                "refusing {} ({signal}): {why}",
                name(signal)
            )));
        }
        // Held until the guard exists, so that two concurrent installs cannot both succeed.
        let mut installed = installed();
        if installed.contains(&signal) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "coro::trace::dump_on_signal: a task dump is already installed for {} \
                     ({signal}); drop its SignalDump guard first",
                    name(signal)
                ),
            ));
        }
        let mut signals = Signals::new([signal]).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "coro::trace::dump_on_signal: cannot handle {} ({signal}): {e}",
                    name(signal)
                ),
            )
        })?;
        let handle = signals.handle();
        let thread = thread::Builder::new()
            .name("coro-signal-dump".into())
            .spawn(move || {
                for signal in signals.forever() {
                    sink(render(signal).as_bytes());
                }
            });
        let thread = match thread {
            Ok(thread) => thread,
            Err(e) => {
                // The closure, and with it `signals`, is gone; dropping `handle` unregisters.
                handle.close();
                return Err(e);
            }
        };
        installed.insert(signal);
        Ok(SignalDump {
            inner: Installed {
                signal,
                handle,
                thread: Some(thread),
            },
        })
    }

    /// The header line and the tree.
    pub(super) fn render(signal: i32) -> String {
        let dump = dump_all();
        let count = dump.tasks().len();
        format!(
            "coro: task dump on signal {} ({count} task{})\n{dump}",
            name(signal),
            if count == 1 { "" } else { "s" }
        )
    }

    pub(super) fn write_to_stderr(bytes: &[u8]) {
        let mut stderr = io::stderr().lock();
        // Nowhere to report a failure to write to stderr.
        let _ = stderr.write_all(bytes);
        let _ = stderr.flush();
    }
}

#[cfg(all(test, unix, not(loom)))]
mod tests {
    use super::unix::install;
    use signal_hook::consts::{SIGBUS, SIGKILL, SIGSEGV, SIGSTOP, SIGUSR1, SIGUSR2};
    use std::io::ErrorKind;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// A sink sending each dump to a channel.
    fn channel_sink() -> (super::unix::Sink, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        let sink = Box::new(move |bytes: &[u8]| {
            let _ = tx.send(String::from_utf8_lossy(bytes).into_owned());
        });
        (sink, rx)
    }

    /// Raises `signal` in this process and waits (at most 10 s) until `seen` is set by the
    /// test's own signal-hook flag: the signal was delivered and the handlers ran.
    fn raise_and_wait(signal: i32, seen: &AtomicBool) {
        seen.store(false, Ordering::SeqCst);
        signal_hook::low_level::raise(signal).expect("raise");
        let until = Instant::now() + Duration::from_secs(10);
        while !seen.load(Ordering::SeqCst) {
            assert!(Instant::now() < until, "signal {signal} never delivered");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    // SIGUSR1's default action terminates: the test's own flag, registered first and kept for
    // the life of the test binary, keeps signal-hook's handler in place and tells when the
    // signal arrived. No other test here raises SIGUSR1.
    #[test]
    fn dumps_while_installed_and_not_after_the_guard_is_dropped() {
        let seen = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(SIGUSR1, seen.clone()).expect("test flag");
        let (sink, dumps) = channel_sink();
        let guard = install(SIGUSR1, sink).expect("install");
        let release = Arc::new(crate::sync::Baton::new());
        let waiter = crate::Task::new({
            let release = release.clone();
            async move { release.wait().await }
        })
        .named("waiter_for_signal_test")
        .schedule_on(crate::default_pool())
        .start();
        // Its name is published when it first suspends.
        let until = Instant::now() + Duration::from_secs(10);
        while !crate::trace::dump_all()
            .tasks()
            .iter()
            .any(|t| t.name() == "waiter_for_signal_test")
        {
            assert!(Instant::now() < until, "the waiter never suspended");
            std::thread::sleep(Duration::from_millis(1));
        }

        raise_and_wait(SIGUSR1, &seen);
        let dump = dumps
            .recv_timeout(Duration::from_secs(10))
            .expect("a dump after the signal");
        assert!(
            dump.starts_with("coro: task dump on signal SIGUSR1 ("),
            "{dump}"
        );
        assert!(dump.contains("waiter_for_signal_test"), "{dump}");

        drop(guard);
        raise_and_wait(SIGUSR1, &seen);
        // The thread was joined in drop: nothing can come any more; the sink is gone too.
        assert!(
            matches!(
                dumps.recv_timeout(Duration::from_millis(200)),
                Err(mpsc::RecvTimeoutError::Disconnected)
            ),
            "a dump after uninstalling"
        );
        release.post();
        crate::block_wait(waiter).expect("the waiter");
    }

    #[test]
    fn a_second_install_for_the_same_signal_is_refused_until_the_first_is_dropped() {
        let (sink, _dumps) = channel_sink();
        let first = install(SIGUSR2, sink).expect("install");
        let (sink, _) = channel_sink();
        let err = install(SIGUSR2, sink).map(drop).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert!(err.to_string().contains("SIGUSR2"), "{err}");
        drop(first);
        let (sink, _) = channel_sink();
        let again = install(SIGUSR2, sink).expect("install after drop");
        assert_eq!(again.signal(), SIGUSR2);
    }

    #[test]
    fn refused_signals_and_non_signals_are_invalid_input() {
        for signal in [SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, 0, -1, 128, 100_000] {
            let (sink, _) = channel_sink();
            let err = install(signal, sink).map(drop).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{signal}: {err}");
            assert!(err.to_string().contains(&signal.to_string()), "{err}");
        }
        let (sink, _) = channel_sink();
        let err = install(SIGKILL, sink).map(drop).unwrap_err();
        assert_eq!(
            err.to_string(),
            "coro::trace::dump_on_signal: refusing SIGKILL (9): it cannot be caught"
        );
    }
}
