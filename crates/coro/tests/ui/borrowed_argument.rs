#[coro::task]
async fn borrows(name: &str) -> usize {
    name.len()
}

fn main() {}
