#[coro::test(threads = 2)]
async fn unknown_option() {}

fn main() {}
