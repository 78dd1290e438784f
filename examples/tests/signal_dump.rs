//! Runs the `signal_dump` example as a child process and sends it SIGQUIT: its stderr must get
//! the task dump (names and frame locations), and the child must keep running and serving.
//!
//! Run it with `cargo test -p coro-examples --test signal_dump`. The test builds the example
//! itself (a no-op when it is fresh), as `cargo test --test ...` does not build examples.
//! Every wait is bounded, and the child is killed if the test fails.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STEP: Duration = Duration::from_secs(15);

/// Builds the example with the profile and target directory of this test binary
/// (`<target>/<profile>/deps/signal_dump-<hash>`) and returns its path.
fn example_binary() -> PathBuf {
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
            "signal_dump",
            "--profile",
            profile,
        ])
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build --example signal_dump failed");
    let binary = profile_dir.join("examples").join("signal_dump");
    assert!(binary.exists(), "no example at {}", binary.display());
    binary
}

/// The running example; killed and reaped on drop if the test did not finish with it.
struct Example {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Example {
    fn start() -> Example {
        let mut child = Command::new(example_binary())
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

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (bounded) for the stdout line `want`; panics with what came instead.
    fn expect_line(&self, want: &str) {
        let until = Instant::now() + STEP;
        let mut seen = Vec::new();
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) if line == want => return,
                Ok(line) => seen.push(line),
                Err(e) => panic!(
                    "no line {want:?} on stdout ({e}); got {seen:?}; stderr:\n{}",
                    self.stderr()
                ),
            }
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits (bounded) until stderr satisfies `cond`, and returns it.
    fn stderr_until(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
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

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write to the example's stdin");
        stdin.flush().expect("flush the example's stdin");
    }

    fn still_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Closes stdin and waits (bounded) for the example to exit by itself.
    fn finish(&mut self) -> ExitStatus {
        drop(self.stdin.take());
        let until = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "the example did not exit after stdin was closed; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
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

fn sigquit(pid: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, libc::SIGQUIT) };
    assert_eq!(
        rc,
        0,
        "kill -QUIT {pid}: {}",
        std::io::Error::last_os_error()
    );
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn sigquit_dumps_the_stuck_tasks_to_stderr_and_the_service_keeps_running() {
    let mut example = Example::start();
    example.expect_line("ready");

    sigquit(example.pid());
    // The two stuck requests, each with its child stuck in wait_for_config: the header, then
    // the whole tree (it is written at once, but may be read in pieces).
    let header = "coro: task dump on signal SIGQUIT (";
    let dump = example.stderr_until("a whole dump", |err| {
        count(err, header) == 1 && count(err, "at wait_for_config (") == 2
    });
    // The two requests, as tasks (their children's stacks continue into theirs, so the frame
    // shows under each child as well).
    assert_eq!(count(&dump, " handle_request [suspended]"), 2, "{dump}");
    assert!(
        dump.contains("at wait_for_config (examples/signal_dump.rs:"),
        "{dump}"
    );
    assert!(
        dump.contains("at handle_request (examples/signal_dump.rs:"),
        "{dump}"
    );
    assert!(dump.contains("[suspended]"), "{dump}");

    // The dump did not stop the process, nor the pool: a task still answers.
    assert!(example.still_running(), "the example exited after SIGQUIT");
    example.send_line("ping");
    example.expect_line("pong 1");

    // And the next SIGQUIT dumps again.
    sigquit(example.pid());
    example.stderr_until("a second dump", |err| {
        count(err, header) == 2 && count(err, "at wait_for_config (") == 4
    });
    assert!(example.still_running(), "the example exited after SIGQUIT");

    // Closing stdin lets it release the requests and exit normally.
    let status = example.finish();
    assert!(status.success(), "{status}; stderr:\n{}", example.stderr());
    example.expect_line("user1 served with config v1");
    example.expect_line("user2 served with config v1");
}
