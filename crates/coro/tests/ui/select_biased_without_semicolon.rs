async fn no_semicolon() -> u32 {
    coro::select! {
        biased
        a = std::future::ready(1) => a,
        b = std::future::ready(2) => b,
    }
}

async fn comma_instead() -> u32 {
    coro::select! {
        biased,
        a = std::future::ready(1) => a,
    }
}

async fn not_first() -> u32 {
    coro::select! {
        a = std::future::ready(1) => a,
        biased;
        b = std::future::ready(2) => b,
    }
}

fn main() {}
