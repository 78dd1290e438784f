async fn default_binding() -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        default(x) => x,
    }
}

async fn default_as_future() -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        x = default => x,
    }
}

async fn default_with_precondition(allowed: bool) -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        default, if allowed => 0,
    }
}

async fn else_binding() -> u32 {
    coro::select! {
        v = std::future::pending::<u32>() => v,
        else(x) => x,
    }
}

fn main() {}
