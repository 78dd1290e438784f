//! [`Redis`]: a throwaway `redis-server` with no persistence.

use crate::process::{ServerProcess, find_binary, free_port};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A `redis-server` on a free port of 127.0.0.1, with no persistence (no RDB snapshots, no
/// AOF), in a temporary directory; stopped when dropped.
///
/// ```no_run
/// let Some(redis) = coro_test_servers::Redis::start() else { return };
/// assert!(redis.url().starts_with("redis://127.0.0.1:"));
/// ```
pub struct Redis {
    port: u16,
    // Declared before the directory: the server stops before its directory is removed.
    _process: ServerProcess,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Starts a server and waits until it answers `PING`; `None` if `redis-server` is not
    /// installed (see the crate docs).
    pub fn start() -> Option<Redis> {
        let binary = find_binary("redis-server", "redis-server", &[])?;
        let dir = tempfile::tempdir().expect("creating a temporary directory for redis-server");
        let port = free_port();
        let log = dir.path().join("redis.log");
        let child = Command::new(binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "yes", "--logfile", ""])
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("creating redis.log"))
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting redis-server");
        let mut process = ServerProcess::new(child, libc::SIGTERM, log, "redis-server");
        process.wait_ready(|_| ping(port));
        Some(Redis {
            port,
            _process: process,
            _dir: dir,
        })
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

/// Whether a server on `port` answers `PING` with `+PONG`.
fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && &reply == b"+PONG\r\n"
}
