//! The console end to end: each route fetched with a real HTTP client (coro-hyper's) while a
//! workload runs, the console answering while every worker of the service is stuck, bad
//! routes, and a half-open client that must not hold anything up.

use coro_hyper::client;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{StatusCode, Uri};
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// GETs `path` from the console at `addr`: the status, the content type and the body.
fn get(addr: SocketAddr, path: &str) -> (StatusCode, String, String) {
    let uri: Uri = format!("http://{addr}{path}").parse().unwrap();
    // On a pool of its own: the client must not depend on the service's workers either.
    let pool = coro::ThreadPool::builder()
        .thread_name("test-client")
        .worker_threads(1)
        .build()
        .unwrap();
    coro::block_wait(
        coro::Task::new(async move {
            let response = client::<Empty<Bytes>>().get(uri).await.unwrap();
            let status = response.status();
            let content_type = response
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                content_type,
                String::from_utf8(body.to_vec()).unwrap(),
            )
        })
        .schedule_on(&pool),
    )
}

#[test]
fn every_route_answers_while_a_workload_runs() {
    let console = coro_console::spawn("127.0.0.1:0").unwrap();
    let addr = console.local_addr();
    let service = coro::ThreadPool::builder()
        .thread_name("service")
        .worker_threads(2)
        .build()
        .unwrap();
    let (stop, stopped) = coro::channel::bounded::<()>(1);
    let workload = coro::Task::new(async move {
        let (tx, rx) = coro::channel::bounded::<u32>(8);
        let consumer = coro::spawn(
            coro::Task::new(async move { while rx.recv().await.is_ok() {} }).named("consumer"),
        );
        let mut i = 0;
        while stopped.try_recv().is_err() {
            tx.send(i).await.unwrap();
            i += 1;
            coro::time::sleep(Duration::from_micros(200)).await.unwrap();
        }
        drop(tx);
        consumer.await.unwrap();
    })
    .named("producer")
    .schedule_on(&service)
    .start();
    std::thread::sleep(Duration::from_millis(50));

    let (status, kind, page) = get(addr, "/");
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/html; charset=utf-8")
    );
    assert!(page.contains("<script>") && page.contains("/tasks.json"));
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "no external assets"
    );

    let (status, kind, json) = get(addr, "/tasks.json");
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "application/json")
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = value["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"producer") && names.contains(&"consumer"),
        "{names:?}"
    );
    let producer = value["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "producer")
        .unwrap();
    assert_eq!(producer["pool"], "service");
    assert!(producer["polls"].as_u64().unwrap() > 0, "{producer}");
    assert!(
        value["pools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "service")
    );

    let (status, kind, text) = get(addr, "/tasks.txt");
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/plain; charset=utf-8")
    );
    assert!(
        text.contains(" producer [") && text.contains("  at producer ("),
        "{text}"
    );

    let (status, kind, metrics) = get(addr, "/metrics");
    assert_eq!(
        (status, kind.as_str()),
        (StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(metrics.contains("# TYPE coro_worker_polls_total counter\n"));
    assert!(metrics.contains("coro_pool_tasks{pool=\"service\"} "));
    assert!(metrics.contains("coro_worker_polls_total{pool=\"service\",worker=\"1\"} "));
    assert!(metrics.contains("coro_warnings{kind=\"deadlock\"} 0\n"));
    // Every line is a comment or `name{labels} value`.
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let value = line.rsplit(' ').next().unwrap();
        assert!(value.parse::<f64>().is_ok(), "bad sample line {line:?}");
    }

    stop.try_send(()).unwrap();
    coro::block_wait(workload).unwrap();
}

#[test]
fn unknown_routes_are_404_and_other_methods_405() {
    let console = coro_console::spawn("127.0.0.1:0").unwrap();
    let (status, _, body) = get(console.local_addr(), "/nope");
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("/tasks.json"), "{body}");
    let mut raw = std::net::TcpStream::connect(console.local_addr()).unwrap();
    raw.write_all(
        b"POST /tasks.json HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut raw, &mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
}

#[test]
fn the_console_answers_while_every_service_worker_is_stuck() {
    let console = coro_console::spawn("127.0.0.1:0").unwrap();
    let service = coro::ThreadPool::builder()
        .thread_name("stuck-service")
        .worker_threads(2)
        .stall_threshold(Duration::from_millis(20))
        .on_stall(|_| {})
        .build()
        .unwrap();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = std::sync::Arc::new(std::sync::Mutex::new(released));
    let mut stuck = Vec::new();
    for _ in 0..2 {
        let released = released.clone();
        stuck.push(
            coro::Task::new(async move {
                let _ = released
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
            })
            .named("stuck")
            .schedule_on(&service)
            .start(),
        );
    }
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let (status, _, text) = get(console.local_addr(), "/tasks.txt");
    assert_eq!(status, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(text.contains("long poll: task "), "{text}");
    for _ in 0..2 {
        release.send(()).unwrap();
    }
    for task in stuck {
        coro::block_wait(task).unwrap();
    }
}

#[test]
fn a_half_open_client_does_not_hold_up_the_console() {
    let console = coro_console::spawn("127.0.0.1:0").unwrap();
    // Sends half a request and then nothing, keeping the connection open; and another that
    // asks for the JSON and never reads it.
    let mut half = std::net::TcpStream::connect(console.local_addr()).unwrap();
    half.write_all(b"GET /tasks.json HTTP/1.1\r\nHo").unwrap();
    let mut unread = std::net::TcpStream::connect(console.local_addr()).unwrap();
    unread
        .write_all(b"GET /tasks.json HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    for _ in 0..5 {
        let started = Instant::now();
        let (status, _, _) = get(console.local_addr(), "/metrics");
        assert_eq!(status, StatusCode::OK);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    drop((half, unread));
}
