#[coro::test(seed = 3)]
async fn seeded() {}

fn main() {}
