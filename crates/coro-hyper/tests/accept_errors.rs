//! Running out of file descriptors (`EMFILE` from `accept`) pauses accepting; it does not end
//! `serve`. A test binary of its own: it lowers the process's descriptor limit.

mod common;

use common::{Server, get, read, within};
use hyper::StatusCode;
use std::fs::File;
use std::time::Duration;

/// Lowers the soft `RLIMIT_NOFILE` to `to` (if it is higher); restores it when dropped.
struct LowerLimit(libc::rlimit);

impl LowerLimit {
    fn to(to: libc::rlim_t) -> LowerLimit {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read and write the structs they are given.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut old), 0);
            let new = libc::rlimit {
                rlim_cur: old.rlim_cur.min(to),
                rlim_max: old.rlim_max,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &new), 0);
        }
        LowerLimit(old)
    }
}

impl Drop for LowerLimit {
    fn drop(&mut self) {
        // SAFETY: setrlimit only reads the struct it is given, a valid `rlimit`.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &self.0) };
    }
}

#[coro::test(worker_threads = 2, timeout_ms = 30_000)]
async fn running_out_of_descriptors_pauses_accepting_without_ending_serve() {
    common::watchdog();
    let server = Server::start(|s| s).await;
    let addr = server.addr;
    let limit = LowerLimit::to(1024);

    // Take every free descriptor.
    let mut filler = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => filler.push(file),
            Err(err) if err.raw_os_error() == Some(libc::EMFILE) => break,
            Err(err) => panic!("opening /dev/null failed: {err}"),
        }
    }
    assert!(filler.len() > 10, "too few descriptors to test with");
    // Connect a client on a descriptor freed just for it: the server's accept, which can only
    // start once the connection exists, finds none left (EMFILE). (One client only: with a
    // connection already waiting, the server's retry could take a descriptor freed for the next.)
    drop(filler.pop());
    let client = std::net::TcpStream::connect(addr).unwrap();
    let client = coro::net::TcpStream::try_from(client).unwrap();
    let (mut sender, _conn) = {
        let io = coro_hyper::CoroIo::new(client);
        let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        (sender, coro::spawn(conn))
    };
    let request =
        coro::spawn(async move { read(sender.send_request(get("/waited")).await.unwrap()).await });

    // The server cannot accept: the request waits, and the server goes on (logging EMFILE).
    coro::time::sleep(Duration::from_millis(300)).await.unwrap();
    assert!(
        !request.is_finished(),
        "the server accepted without a free descriptor"
    );
    assert!(!server.task.is_finished(), "serve ended on EMFILE");

    // Descriptors free again: the server accepts the waiting connection after its pause.
    drop(filler);
    drop(limit);
    let (status, body) = within(Duration::from_secs(5), request).await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "hello /waited"));
    assert_eq!(
        common::get_once(addr, "/after").await,
        (StatusCode::OK, "hello /after".to_owned())
    );
    server.stop().await;
}
