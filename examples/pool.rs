//! A bounded `AsyncScope` as a task pool: at most N jobs run at once, the rest wait in line.
//!
//! `spawn` fails with `ScopeError::Full` when every slot is taken; `spawn_wait` queues for a
//! slot in FIFO order; `set_capacity` admits waiters at once; `join` waits for every job.
//!
//! Run it with `cargo run --release --example pool`.

use coro::sync::Baton;
use coro::time::{sleep, timeout};
use coro::{AsyncScope, ScopeError, ScopeStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(5);

/// Polls `done` every millisecond; panics with `what` if it is still false after `LIMIT`.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LIMIT, "timed out waiting until {what}");
        sleep(Duration::from_millis(1)).await.unwrap();
    }
}

fn status(running: usize, waiting: usize, capacity: usize) -> ScopeStatus {
    let capacity = Some(capacity);
    ScopeStatus {
        running,
        waiting,
        capacity,
    }
}

#[coro::main(worker_threads = 2)]
async fn main() {
    let scope = Arc::new(AsyncScope::bounded(2));
    // Job i runs until `release[i]` is posted, so the test decides when slots free up.
    let release: Vec<Arc<Baton>> = (0..=6).map(|_| Arc::new(Baton::new())).collect();
    let job = |i: usize| {
        let release = release[i].clone();
        async move {
            timeout(LIMIT, release.wait())
                .await
                .expect("job never released")
        }
    };

    let first = [scope.spawn(job(1)).unwrap(), scope.spawn(job(2)).unwrap()];
    let refused = scope.spawn(job(0)).unwrap_err();
    println!("two jobs run; a third spawn: {refused:?} ({refused})");
    assert_eq!(refused, ScopeError::Full);
    println!("{:?}", scope.status());

    // Jobs 3..=6 queue with spawn_wait, each submitted once the one before it is waiting.
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let mut submitters = Vec::new();
    for i in 3..=6 {
        let (pool, admitted, job) = (scope.clone(), admitted.clone(), job(i));
        submitters.push(coro::spawn(async move {
            let handle = pool.spawn_wait(job).await.unwrap();
            admitted.lock().unwrap().push(i);
            handle.await.unwrap();
        }));
        eventually("the submitter waits", || scope.status().waiting == i - 2).await;
    }
    println!("{:?}", scope.status());
    assert_eq!(scope.status(), status(2, 4, 2));

    scope.set_capacity(4); // two more slots: the two oldest waiters get them
    println!("set_capacity(4): {:?}", scope.status());
    assert_eq!(scope.status(), status(4, 2, 4));
    eventually("jobs 3 and 4 are admitted", || {
        admitted.lock().unwrap().len() == 2
    })
    .await;
    let mut let_in = admitted.lock().unwrap().clone();
    let_in.sort(); // admitted together: they may record it in either order
    println!("the two oldest waiters got the new slots: jobs {let_in:?}");
    assert_eq!(let_in, [3, 4]);

    // Each finished job frees one slot, which goes to the oldest waiter.
    for (finish, next) in [(1, 5), (2, 6)] {
        release[finish].post();
        let in_line = || admitted.lock().unwrap().last() == Some(&next);
        eventually("the next waiter is admitted", in_line).await;
        println!(
            "job {finish} done, job {next} admitted: {:?}",
            scope.status()
        );
    }
    assert_eq!(admitted.lock().unwrap()[2..], [5, 6]);

    release.iter().for_each(|baton| baton.post());
    timeout(LIMIT, scope.join()).await.expect("join hung");
    for handle in first.into_iter().chain(submitters) {
        handle.await.unwrap();
    }
    println!("joined: {:?}", scope.status());
    assert_eq!(scope.status(), status(0, 0, 4));
}
