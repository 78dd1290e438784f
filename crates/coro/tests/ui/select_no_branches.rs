async fn empty() {
    coro::select! {}
}

async fn only_default() -> u32 {
    coro::select! {
        default => 1,
    }
}

fn main() {}
