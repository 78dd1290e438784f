#[coro::task]
fn not_async() -> u32 {
    1
}

fn main() {}
