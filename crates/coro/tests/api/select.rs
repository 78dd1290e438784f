//! `coro::select!`: the first ready branch wins and the others are dropped before
//! its body runs; a random start per poll (fair) unless `biased;`; `default` when nothing is
//! ready; refuted patterns and false preconditions disable branches; `else` when all are.

use crate::support::{CountDrop, ms, panic_message};
use coro::{Task, ThreadPool, block_wait};
use futures::StreamExt;
use futures::channel::{mpsc, oneshot};
use std::cell::Cell;
use std::future::{pending, ready};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

/// Never completes; counts into `drops` when dropped (polled or not).
fn pending_counted(drops: &Arc<AtomicUsize>) -> impl Future<Output = u32> + Send + 'static {
    let guard = CountDrop(drops.clone());
    async move {
        let _guard = guard;
        pending::<u32>().await
    }
}

/// Ready after `polls` pending polls (waking itself each time).
fn ready_after<T>(polls: usize, value: T) -> impl Future<Output = T> {
    let mut left = polls;
    let mut value = Some(value);
    std::future::poll_fn(move |cx| {
        if left == 0 {
            return std::task::Poll::Ready(value.take().expect("polled after completion"));
        }
        left -= 1;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
}

#[test]
fn the_first_ready_branch_wins() {
    let got = block_wait(async {
        coro::select! {
            a = pending::<u32>() => a,
            b = ready_after(3, 2) => b * 10,
            c = ready_after(50, 3) => c,
        }
    });
    assert_eq!(got, 20);

    let got = block_wait(async {
        coro::select! {
            a = ready_after(2, "late") => a,
            b = ready_after(0, "now") => b,
        }
    });
    assert_eq!(got, "now");
}

#[test]
fn losers_are_dropped_exactly_once_before_the_body_runs() {
    for _ in 0..50 {
        let drops = Arc::new(AtomicUsize::new(0));
        let seen_in_body = block_wait(async {
            coro::select! {
                a = pending_counted(&drops) => a,
                b = pending_counted(&drops) => b,
                c = ready_after(1, 7) => {
                    assert_eq!(c, 7);
                    drops.load(SeqCst) as u32
                }
                d = pending_counted(&drops) => d,
            }
        });
        assert_eq!(
            seen_in_body, 3,
            "the losers were not all dropped before the body ran"
        );
        assert_eq!(drops.load(SeqCst), 3, "a loser was dropped more than once");
    }
}

#[test]
fn a_body_can_use_what_the_futures_borrowed() {
    let mut log = Vec::new();
    let winner = block_wait(async {
        coro::select! {
            _ = async {
                log.push("loser ran");
                pending::<()>().await
            } => unreachable!(),
            v = ready_after(1, "winner") => {
                // The loser held `&mut log`: it is gone by now.
                log.push(v);
                v
            }
        }
    });
    assert_eq!(winner, "winner");
    assert_eq!(log.last(), Some(&"winner"));
}

#[test]
fn the_start_is_random_so_always_ready_branches_share_the_wins() {
    let (mut first, mut second) = (0, 0);
    for _ in 0..1000 {
        block_wait(async {
            coro::select! {
                _ = ready(()) => first += 1,
                _ = ready(()) => second += 1,
            }
        });
    }
    assert_eq!(first + second, 1000);
    assert!(
        first >= 300 && second >= 300,
        "unfair: first {first}, second {second}"
    );

    // Three branches: each one gets its share too.
    let mut wins = [0; 3];
    for _ in 0..1500 {
        let i = block_wait(async {
            coro::select! {
                i = ready(0) => i,
                i = ready(1) => i,
                i = ready(2) => i,
            }
        });
        wins[i] += 1;
    }
    assert!(wins.iter().all(|&w| w >= 300), "unfair: {wins:?}");
}

#[test]
fn biased_polls_in_written_order() {
    for _ in 0..1000 {
        let got = block_wait(async {
            coro::select! {
                biased;
                a = ready(1) => a,
                b = ready(2) => b,
            }
        });
        assert_eq!(got, 1);
    }
    for _ in 0..200 {
        let got = block_wait(async {
            coro::select! {
                biased;
                a = pending::<u32>() => a,
                b = ready_after(1, 2) => b,
                c = ready_after(1, 3) => c,
            }
        });
        assert_eq!(got, 2, "biased picked a later ready branch");
    }
}

#[test]
fn default_runs_only_when_nothing_is_ready_on_the_first_poll() {
    let drops = Arc::new(AtomicUsize::new(0));
    let got = block_wait(async {
        coro::select! {
            a = pending_counted(&drops) => a,
            b = ready_after(1, 2) => b, // ready on the second poll: too late
            default => {
                assert_eq!(drops.load(SeqCst), 1, "the branches outlived the select");
                0
            }
        }
    });
    assert_eq!(got, 0);

    for _ in 0..200 {
        let got = block_wait(async {
            coro::select! {
                a = pending::<u32>() => a,
                b = ready(2) => b,
                default => 0,
            }
        });
        assert_eq!(got, 2, "default was taken although a branch was ready");
    }
}

#[test]
fn a_refuted_pattern_disables_its_branch_and_the_select_waits_on_the_rest() {
    let got = block_wait(async {
        coro::select! {
            biased;
            Some(x) = ready(None::<u32>) => x,
            Ok(y) = ready(Err::<u32, ()>(())) => y,
            z = ready_after(3, 9) => z * 2,
        }
    });
    assert_eq!(got, 18);

    // A closed channel disables its `recv` branch; the other one still delivers.
    let (tx, mut closed) = mpsc::unbounded::<u32>();
    drop(tx);
    let (tx2, mut open) = mpsc::unbounded::<u32>();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(ms(5));
        tx2.unbounded_send(5).unwrap();
    });
    let got = block_wait(async {
        coro::select! {
            Some(v) = closed.next() => v,
            Some(v) = open.next() => v + 100,
        }
    });
    assert_eq!(got, 105);
    sender.join().unwrap();

    // Every branch disabled, a `default` but no `else`: the default runs.
    let got = block_wait(async {
        coro::select! {
            Some(x) = ready(None::<u32>) => x,
            default => 7,
        }
    });
    assert_eq!(got, 7);
}

#[test]
fn a_false_precondition_skips_the_future_expression() {
    let evaluated = Cell::new(false);
    let allowed = false;
    let got = block_wait(async {
        coro::select! {
            a = {
                evaluated.set(true);
                ready(1)
            }, if allowed => a,
            b = ready_after(2, 2), if !allowed => b,
        }
    });
    assert_eq!(got, 2);
    assert!(
        !evaluated.get(),
        "the future of a disabled branch was evaluated"
    );
}

#[test]
fn else_runs_when_every_branch_is_disabled() {
    let got = block_wait(async {
        coro::select! {
            a = ready(1), if false => a,
            Some(b) = ready_after(2, None::<u32>) => b,
            else => 0,
        }
    });
    assert_eq!(got, 0);

    // `else` is not taken while a branch can still win, and wins over `default` when all are
    // disabled.
    let got = block_wait(async {
        coro::select! {
            a = ready(1), if false => a,
            b = ready_after(1, 2) => b,
            else => 0,
        }
    });
    assert_eq!(got, 2);
    let got = block_wait(async {
        coro::select! {
            a = ready(1), if false => a,
            default => 3,
            else => 4,
        }
    });
    assert_eq!(got, 4);
}

#[test]
fn every_branch_disabled_without_else_panics_saying_how_to_fix_it() {
    let payload = std::panic::catch_unwind(|| {
        block_wait(async {
            coro::select! {
                Some(a) = ready(None::<u32>) => a,
                b = ready(2), if false => b,
            }
        })
    })
    .unwrap_err();
    let message = panic_message(&*payload);
    assert!(
        message.contains("every branch is disabled") && message.contains("add `else => ...`"),
        "{message}"
    );
}

#[test]
fn patterns_bind_as_in_a_match() {
    let got = block_wait(async {
        let a = coro::select! {
            mut v = ready(1) => {
                v += 1;
                v
            }
            (a, b) = pending::<(i32, i32)>() => a + b,
        };
        let b = coro::select! {
            &x = ready(&5) => x,
            Some(&y) = ready(Some(&6)), if false => y,
        };
        let c = coro::select! {
            Some(ref s) = ready(Some(String::from("abc"))) => s.len() as i32,
            Ok(mut n) | Err(mut n) = pending::<Result<i32, i32>>() => {
                n += 1;
                n
            }
        };
        let d = coro::select! {
            "yes" = ready("no") => 0,
            n @ 1..=9 = ready(4) => n,
        };
        let e = coro::select! {
            biased;
            None = ready(Some(1)) => 0,
            Some(_) = ready(Some(2)) => 5,
        };
        let f = coro::select! {
            Ok(_) = ready(Ok::<(), ()>(())) => 6,
            _ = pending::<()>() => 0,
        };
        a + b + c + d + e + f
    });
    assert_eq!(got, 2 + 5 + 3 + 4 + 5 + 6);
}

#[test]
fn bodies_can_return_propagate_errors_break_and_await() {
    async fn early_return() -> u32 {
        coro::select! {
            v = ready(1) => {
                if v == 1 {
                    return 10;
                }
            }
        }
        0
    }
    assert_eq!(block_wait(early_return()), 10);

    async fn propagate() -> Result<u32, String> {
        let v = coro::select! {
            r = ready(Err::<u32, String>("bad".into())) => r?,
        };
        Ok(v)
    }
    assert_eq!(block_wait(propagate()), Err("bad".to_owned()));

    let (sum, rounds) = block_wait(async {
        let (mut sum, mut rounds) = (0, 0);
        'outer: loop {
            rounds += 1;
            coro::select! {
                v = ready(rounds) => {
                    if v % 2 == 0 {
                        continue 'outer;
                    }
                    if v > 5 {
                        break;
                    }
                    sum += async { v }.await;
                }
            }
        }
        (sum, rounds)
    });
    assert_eq!((sum, rounds), (1 + 3 + 5, 7));
}

#[test]
fn inside_a_task_on_a_pool_with_a_timeout_branch() {
    let pool = ThreadPool::new(2).unwrap();

    // Nothing arrives: the timer branch wins and the receive is dropped.
    let (_tx, rx) = oneshot::channel::<u32>();
    let drops = Arc::new(AtomicUsize::new(0));
    let task = {
        let drops = drops.clone();
        Task::new(async move {
            coro::select! {
                v = rx => v.ok(),
                _ = pending_counted(&drops) => None,
                _ = coro::time::sleep(ms(20)) => Some(0),
            }
        })
        .schedule_on(&pool)
    };
    assert_eq!(block_wait(task), Some(0));
    assert_eq!(drops.load(SeqCst), 1);

    // A value arrives first: its branch wins and the timer is dropped.
    let (tx, rx) = oneshot::channel::<u32>();
    let task = Task::new(async move {
        let send = coro::spawn(async move {
            coro::time::sleep(ms(2)).await.unwrap();
            tx.send(42).unwrap();
        });
        let got = coro::select! {
            v = rx => v.ok(),
            _ = coro::time::sleep(std::time::Duration::from_secs(30)) => None,
        };
        send.await.unwrap();
        got
    })
    .schedule_on(&pool);
    assert_eq!(block_wait(task), Some(42));
}

#[coro::test(timeout_ms = 10_000)]
async fn many_selects_over_channels_in_tasks_lose_nothing() {
    // Producers feed two channels; a consumer selects over both until both close. A value is
    // never taken by a dropped branch: futures' `next()` is cancel-safe.
    let (tx_a, mut rx_a) = mpsc::channel::<u32>(4);
    let (tx_b, mut rx_b) = mpsc::channel::<u32>(4);
    let feed = |mut tx: mpsc::Sender<u32>, base: u32| {
        coro::spawn(async move {
            for i in 0..500 {
                futures::SinkExt::send(&mut tx, base + i).await.unwrap();
            }
        })
    };
    let (a, b) = (feed(tx_a, 0), feed(tx_b, 1000));
    let (mut a_open, mut b_open, mut sum, mut count) = (true, true, 0u64, 0);
    loop {
        coro::select! {
            v = rx_a.next(), if a_open => match v {
                Some(v) => (sum, count) = (sum + u64::from(v), count + 1),
                None => a_open = false,
            },
            v = rx_b.next(), if b_open => match v {
                Some(v) => (sum, count) = (sum + u64::from(v), count + 1),
                None => b_open = false,
            },
            else => break,
        }
    }
    a.await.unwrap();
    b.await.unwrap();
    assert_eq!(count, 1000);
    assert_eq!(sum, (0..500).sum::<u64>() + (1000..1500).sum::<u64>());
}
