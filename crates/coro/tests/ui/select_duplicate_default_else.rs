async fn two_defaults() -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        default => 1,
        default => 2,
    }
}

async fn two_elses() -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        else => 1,
        else => 2,
    }
}

fn main() {}
