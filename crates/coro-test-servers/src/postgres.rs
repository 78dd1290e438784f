//! [`Postgres`]: a throwaway PostgreSQL cluster made with `initdb`.

use crate::process::{ServerProcess, find_binary, free_port};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The user a cluster runs as when the tests run as root (PostgreSQL refuses to run as root).
const UNPRIVILEGED: (u32, u32) = (65534, 65534); // nobody:nogroup

/// A PostgreSQL cluster made with `initdb` in a temporary directory, its server on a free port
/// of 127.0.0.1 (no Unix socket outside that directory), trust authentication for user
/// `postgres`, fsync off; stopped (fast shutdown) when dropped. Run as `nobody` when the tests
/// run as root.
///
/// ```no_run
/// let Some(pg) = coro_test_servers::Postgres::start() else { return };
/// println!("{}", pg.url()); // postgres://postgres@127.0.0.1:PORT/postgres
/// ```
pub struct Postgres {
    port: u16,
    // Declared before the directory: the server stops before its directory is removed.
    _process: ServerProcess,
    _dir: tempfile::TempDir,
}

impl Postgres {
    /// Makes a cluster and starts its server, waiting until it accepts connections; `None` if
    /// PostgreSQL is not installed (see the crate docs).
    pub fn start() -> Option<Postgres> {
        let bin_dirs = debian_bin_dirs();
        let initdb = find_binary("postgres", "initdb", &bin_dirs)?;
        let postgres = find_binary("postgres", "postgres", &bin_dirs)?;
        let dir = tempfile::tempdir().expect("creating a temporary directory for postgres");
        let as_root = is_root();
        if as_root {
            chown(dir.path());
        }
        let data = dir.path().join("data");
        let log = dir.path().join("postgres.log");
        let status = command(&initdb, as_root)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"])
            .args(["--locale=C", "--no-instructions"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("creating postgres.log"))
            .status()
            .expect("running initdb");
        if as_root {
            chown(&log);
        }
        assert!(
            status.success(),
            "initdb failed ({status}); its output:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        let port = free_port();
        let child = command(&postgres, as_root)
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .arg("-k")
            .arg(dir.path())
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .append(true)
                    .open(&log)
                    .expect("opening postgres.log"),
            )
            .spawn()
            .expect("starting postgres");
        // SIGINT: PostgreSQL's fast shutdown (ends sessions, no waiting for clients).
        let mut process = ServerProcess::new(child, libc::SIGINT, log, "postgres");
        process.wait_ready(|log| {
            std::fs::read_to_string(log)
                .is_ok_and(|text| text.contains("ready to accept connections"))
        });
        Some(Postgres {
            port,
            _process: process,
            _dir: dir,
        })
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

/// Debian keeps the server binaries off PATH, in /usr/lib/postgresql/VERSION/bin: newest first.
fn debian_bin_dirs() -> Vec<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

fn is_root() -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A command that runs as [`UNPRIVILEGED`] when the tests run as root.
fn command(program: &Path, as_root: bool) -> Command {
    let mut command = Command::new(program);
    command.env("LC_ALL", "C");
    if as_root {
        command.uid(UNPRIVILEGED.0).gid(UNPRIVILEGED.1);
    }
    command
}

/// Gives `path` to [`UNPRIVILEGED`], so that the server can write there.
fn chown(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::chown(c_path.as_ptr(), UNPRIVILEGED.0, UNPRIVILEGED.1) };
    assert_eq!(
        rc,
        0,
        "chown {} to nobody: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}
