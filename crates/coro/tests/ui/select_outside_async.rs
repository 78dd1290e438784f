use std::future::ready;

fn not_async() -> u32 {
    coro::select! {
        a = ready(1) => a,
    }
}

fn main() {}
