use std::future::ready;

async fn different_types() {
    let _ = coro::select! {
        a = ready(1u32) => a,
        b = ready("two") => b,
    };
}

fn main() {}
