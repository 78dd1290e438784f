//! Running an example as a child process, for the tests that watch it from outside (signals,
//! exit status): build it, start it with piped stdio, read its stdout by lines and collect its
//! stderr, send it signals, and wait (bounded) for it to exit. A child still running when the
//! test ends, or fails, is killed and reaped.

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bound on each wait for the child.
pub const STEP: Duration = Duration::from_secs(15);

/// Builds the example `name` with the profile and target directory of this test binary
/// (`<target>/<profile>/deps/<test>-<hash>`) and returns its path. `cargo test --test ...` does
/// not build examples; this does (a no-op when it is fresh).
pub fn example_binary(name: &str) -> PathBuf {
    let test_exe = std::env::current_exe().expect("the test's path");
    let profile_dir = test_exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary is in <target>/<profile>/deps");
    let target_dir = profile_dir.parent().expect("a target directory");
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev",
        Some(name) => name,
        None => panic!("no profile directory in {}", test_exe.display()),
    };
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "-p",
            "coro-examples",
            "--example",
            name,
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build --example {name} failed");
    let binary = profile_dir.join("examples").join(name);
    assert!(binary.exists(), "no example at {}", binary.display());
    binary
}

/// A running example; killed and reaped on drop if the test did not finish with it.
pub struct Example {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Example {
    /// Builds and starts the example `name` with `args`.
    pub fn start(name: &str, args: &[&str]) -> Example {
        let mut child = Command::new(example_binary(name))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the example");
        let stdin = child.stdin.take();
        let (lines, stdout) = mpsc::channel();
        let out = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("stderr");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]);
                collected.lock().unwrap().push_str(&text);
            }
        });
        Example {
            child,
            stdin,
            stdout,
            stderr,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (bounded) for a stdout line that satisfies `want` and returns it; panics with what
    /// came instead.
    pub fn expect_line_where(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + STEP;
        let mut seen = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) if want(&line) => return line,
                Ok(line) => seen.push(line),
                Err(e) => panic!(
                    "no line {what} on stdout ({e}); got {seen:?}; stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    /// Waits (bounded) for the stdout line `want`.
    pub fn expect_line(&self, want: &str) {
        self.expect_line_where(&format!("{want:?}"), |line| line == want);
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until stderr satisfies `cond`, and returns it.
    pub fn stderr_until(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + STEP;
        loop {
            let text = self.stderr();
            if cond(&text) {
                return text;
            }
            assert!(
                Instant::now() < until,
                "stderr never showed {what}:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write to the example's stdin");
        stdin.flush().expect("flush the example's stdin");
    }

    pub fn still_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Sends `signum` to the example.
    pub fn signal(&self, signum: i32) {
        let pid = self.pid();
        // SAFETY: kill(2) has no memory-safety preconditions.
        let rc = unsafe { libc::kill(pid, signum) };
        assert_eq!(
            rc,
            0,
            "kill -{signum} {pid}: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Waits (at most `within`) for the example to exit by itself, and returns its status.
    pub fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let until = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the example did not exit within {within:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Closes stdin and waits (bounded) for the example to exit by itself.
    pub fn finish(&mut self) -> ExitStatus {
        drop(self.stdin.take());
        self.exit_status(STEP)
    }
}

impl Drop for Example {
    fn drop(&mut self) {
        if self.still_running() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
