async fn block_without_arrow() -> u32 {
    coro::select! {
        v = std::future::ready(1) { v }
    }
}

async fn precondition_without_arrow(allowed: bool) -> u32 {
    coro::select! {
        v = std::future::ready(1), if allowed v,
    }
}

fn main() {}
