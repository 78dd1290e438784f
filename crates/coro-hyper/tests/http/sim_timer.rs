//! `CoroTimer` inside a `coro::sim` simulation: hyper's clock and sleeps are virtual there, so
//! hyper's own deadlines (header read timeouts, keep-alive) run in virtual time.

use hyper::rt::Timer;
use std::time::Duration;

#[test]
fn coro_timer_reads_and_sleeps_in_virtual_time() {
    let wall = std::time::Instant::now();
    let (slept, outside) = coro::sim::Builder::new().seed(1).run(async {
        let timer = coro_hyper::CoroTimer::new();
        let start = timer.now();
        timer.sleep(Duration::from_secs(3600)).await;
        let deadline = timer.now() + Duration::from_secs(60);
        timer.sleep_until(deadline).await;
        (
            timer.now().duration_since(start),
            std::time::Instant::now().duration_since(start),
        )
    });
    assert!(slept >= Duration::from_secs(3660), "{slept:?}");
    // The real clock is behind hyper's virtual one: the run took no hour of wall time.
    assert!(outside < Duration::from_secs(60), "{outside:?}");
    assert!(wall.elapsed() < Duration::from_secs(10));
}
