//! `SharedMutexFair`, folly's fair reader-writer lock, with its grant order made visible.
//!
//! While a writer holds the lock, five waiters queue in this order: an upgradable reader U1,
//! readers S1 and S2, a writer W, a reader S3. On release U1, S1 and S2 are granted together,
//! then W, then S3: a reader that arrives behind a queued writer waits for it. Then an
//! upgradable read fills a cache on a miss without letting a writer in between.
//!
//! Run it with `cargo run --release --example rwlock`.

use coro::sync::{Baton, SharedMutexFair};
use coro::time::timeout;
use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(5);

/// Awaits `acquire`, posting `queued` once it has been polled (and so is in the lock's queue).
async fn announce<F: Future>(acquire: F, queued: &Baton) -> F::Output {
    let mut acquire = pin!(acquire);
    poll_fn(|cx| {
        let poll = acquire.as_mut().poll(cx);
        queued.post();
        poll
    })
    .await
}

/// What the waiters share: the lock, a log of grants, and a baton for the first readers.
#[derive(Default)]
struct Shared {
    lock: SharedMutexFair<u32>,
    log: Mutex<Log>,
    readers_in: Baton, // posted once three tasks hold the lock at once
}

#[derive(Default)]
struct Log {
    holders: Vec<&'static str>,
    grants: Vec<String>,
}

/// Queues for `lock` as `name` (U.. upgradable, S.. shared, W exclusive) and logs the grant.
async fn waiter(name: &'static str, shared: Arc<Shared>, queued: Arc<Baton>) {
    let (lock, log, readers_in) = (&shared.lock, &shared.log, &shared.readers_in);
    let _guard: Box<dyn Send + '_> = match &name[..1] {
        "U" => Box::new(announce(lock.upgradable_read(), &queued).await),
        "S" => Box::new(announce(lock.read(), &queued).await),
        _ => Box::new(announce(lock.write(), &queued).await),
    };
    let holders = {
        let Log { holders, grants } = &mut *log.lock().unwrap();
        holders.push(name);
        grants.push(format!("{name} granted, holders now {holders:?}"));
        holders.len()
    };
    // U1, S1 and S2 each keep the lock until all three hold it: proof they hold it together.
    if holders == 3 {
        readers_in.post();
    }
    if ["U1", "S1", "S2"].contains(&name) {
        let together = timeout(LIMIT, readers_in.wait()).await;
        together.expect("U1, S1 and S2 should hold the lock together");
    }
    log.lock().unwrap().holders.retain(|h| *h != name);
}

#[coro::main(worker_threads = 2)]
async fn main() {
    let shared = Arc::new(Shared::default());
    let lock = &shared.lock;
    let writer = lock.write().await;
    let mut waiters = Vec::new();
    for name in ["U1", "S1", "S2", "W", "S3"] {
        let queued = Arc::new(Baton::new());
        waiters.push(coro::spawn(waiter(name, shared.clone(), queued.clone())));
        // Start the next waiter only once this one is queued, so the queue order is fixed.
        timeout(LIMIT, queued.wait()).await.expect("not queued");
    }
    assert!(lock.try_read().is_none()); // a reader may not pass a queued writer
    println!("writer releases; queue was U1, S1, S2, W, S3");
    drop(writer);
    for waiter in waiters {
        timeout(LIMIT, waiter).await.expect("waiter hung").unwrap();
    }
    let grants = std::mem::take(&mut shared.log.lock().unwrap().grants);
    for grant in &grants {
        println!("  {grant}");
    }
    let mut first_three: Vec<&str> = grants[..3].iter().map(|g| &g[..2]).collect();
    first_three.sort();
    assert_eq!(first_three, ["S1", "S2", "U1"]);
    assert_eq!(grants[3], r#"W granted, holders now ["W"]"#);
    assert_eq!(grants[4], r#"S3 granted, holders now ["S3"]"#);

    // An upgradable read: check the cache, and on a miss upgrade to write and fill it.
    let cache = SharedMutexFair::new(HashMap::new());
    for attempt in 1..=2 {
        let entry = cache.upgradable_read().await;
        assert!(cache.try_read().is_some()); // plain readers share an upgradable read
        if let Some(hit) = entry.get("ada") {
            println!("attempt {attempt}: hit {hit:?}");
            assert_eq!(attempt, 2);
            continue;
        }
        println!("attempt {attempt}: miss, upgrading to fill the cache");
        let mut writer = timeout(LIMIT, entry.upgrade()).await.expect("upgrade hung");
        writer.insert("ada", "Ada Lovelace, 1815");
    }
    assert_eq!(cache.into_inner().len(), 1);
}
