async fn pattern_without_future() -> u32 {
    coro::select! {
        v => v,
    }
}

async fn future_without_pattern() -> u32 {
    coro::select! {
        rx.recv() => 1,
    }
}

fn main() {}
