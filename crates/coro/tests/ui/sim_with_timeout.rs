#[coro::test(sim, timeout_ms = 100)]
async fn timed() {}

fn main() {}
