async fn missing_comma() -> u32 {
    coro::select! {
        a = std::future::ready(1) => a + 1
        b = std::future::ready(2) => b,
    }
}

fn main() {}
