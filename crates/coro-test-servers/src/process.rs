//! What both servers share: a free port, finding a binary, a child process that is stopped on
//! drop, and waiting until it is ready (or has died, with its log).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a server may take to become ready before the test fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped server may take to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0 for a free port");
    listener.local_addr().unwrap().port()
}

/// `name` in `dirs` or on `PATH`; `None` (after printing the skip line) if it is not
/// installed, or a panic if `CORO_TEST_SERVERS=require`.
pub(crate) fn find_binary(server: &str, name: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let found = dirs
        .iter()
        .chain(path_dirs.iter())
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file());
    if found.is_none() {
        let required = std::env::var("CORO_TEST_SERVERS").is_ok_and(|v| v == "require");
        assert!(
            !required,
            "CORO_TEST_SERVERS=require, but {server} is not installed ({name} is neither in \
             {dirs:?} nor on PATH): install Debian's package for it"
        );
        println!("skipped: {server} not installed");
    }
    found
}

/// A server process: stopped with `stop_signal` when dropped, killed if it does not exit.
pub(crate) struct ServerProcess {
    child: Child,
    stop_signal: i32,
    log: PathBuf,
    name: &'static str,
}

impl ServerProcess {
    pub(crate) fn new(child: Child, stop_signal: i32, log: PathBuf, name: &'static str) -> Self {
        ServerProcess {
            child,
            stop_signal,
            log,
            name,
        }
    }

    /// Waits until `ready()` says so; panics with the server's log if it exits first or takes
    /// longer than a minute.
    pub(crate) fn wait_ready(&mut self, mut ready: impl FnMut(&Path) -> bool) {
        let start = Instant::now();
        loop {
            if ready(&self.log) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "{} exited ({status}) before it was ready; its log:\n{}",
                    self.name,
                    self.log_text()
                );
            }
            assert!(
                start.elapsed() < READY_TIMEOUT,
                "{} was not ready after {READY_TIMEOUT:?}; its log:\n{}",
                self.name,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(no log: {e})"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SAFETY: `kill` with a pid this process spawned and has not reaped yet (the `Child`
        // is only waited on below): the pid still names our child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, self.stop_signal) };
        let start = Instant::now();
        while start.elapsed() < STOP_TIMEOUT {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
