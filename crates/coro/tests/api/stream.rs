//! Streams: `coro::stream::generator` (folly's AsyncGenerator) and
//! `coro::stream::buffered`.

use coro::cancel::{CancellationSource, Cancelled, cancellable};
use coro::stream::{Co, buffered, generator};
use coro::sync::Baton;
use coro::trace::{TaskSnapshot, current_stack, dump_all};
use coro::{Task, ThreadPool, block_wait};
use futures::{FutureExt, Stream, StreamExt};
use std::future::{pending, poll_fn};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, mpsc};
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::support;
use support::{CountDrop, ms, panic_message, wait_until};

fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

fn assert_send_unpin<T: Send + Unpin>(_: &T) {}

/// Polls `stream` once for its next item, from a plain thread.
fn next_now<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    block_wait(stream.next())
}

/// Runs `task` on a fresh pool of `workers`, failing (not hanging) after 10 s.
fn on_pool<T: Send + 'static>(workers: usize, task: Task<T>) -> T {
    let pool = ThreadPool::new(workers).unwrap();
    coro::__private::block_wait_timeout(task.schedule_on(&pool), 10_000, pool)
}

/// Polls `dump_all` until some task satisfies `pred`, or panics after 10 s.
fn dump_until(what: &str, pred: impl Fn(&[TaskSnapshot]) -> bool) -> Vec<TaskSnapshot> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dump = dump_all();
        if pred(dump.tasks()) {
            return dump.tasks().to_vec();
        }
        assert!(Instant::now() < deadline, "never saw {what} in:\n{dump}");
        std::thread::sleep(ms(2));
    }
}

fn frame_names(task: &TaskSnapshot) -> Vec<&str> {
    task.frames().iter().map(|f| f.name()).collect()
}

mod generators {
    use super::*;

    #[test]
    fn nothing_runs_until_the_first_poll() {
        let made = Arc::new(AtomicBool::new(false));
        let ran = Arc::new(AtomicBool::new(false));
        let mut numbers = generator({
            let (made, ran) = (made.clone(), ran.clone());
            move |co: Co<u32>| {
                made.store(true, SeqCst);
                async move {
                    ran.store(true, SeqCst);
                    co.yield_(1).await;
                }
            }
        });
        assert_send_unpin(&numbers);
        std::thread::sleep(ms(10));
        assert!(!made.load(SeqCst), "the closure ran before the first poll");
        assert!(!ran.load(SeqCst), "the body ran before the first poll");
        assert_eq!(next_now(&mut numbers), Some(1));
        assert!(made.load(SeqCst) && ran.load(SeqCst));
    }

    #[test]
    fn values_come_in_the_order_yielded_and_the_end_is_sticky() {
        let mut numbers = generator(|co| async move {
            for i in 0..100u32 {
                if i % 7 == 0 {
                    coro::yield_now().await;
                }
                co.yield_(i).await;
            }
        });
        let all = block_wait(async {
            let mut all = Vec::new();
            while let Some(i) = numbers.next().await {
                all.push(i);
            }
            all
        });
        assert_eq!(all, (0..100).collect::<Vec<_>>());
        assert!(futures::stream::FusedStream::is_terminated(&numbers));
        for _ in 0..3 {
            assert_eq!(next_now(&mut numbers), None);
        }
        assert_eq!(numbers.size_hint(), (0, Some(0)));
    }

    #[test]
    fn the_body_never_runs_ahead_of_its_consumer() {
        let progress = counter();
        let mut numbers = generator({
            let progress = progress.clone();
            move |co| async move {
                for i in 0..3u32 {
                    co.yield_(i).await;
                    progress.fetch_add(1, SeqCst);
                }
            }
        });
        for i in 0..3 {
            assert_eq!(next_now(&mut numbers), Some(i));
            // The yield of `i` completes only when the consumer asks for the next value.
            assert_eq!(progress.load(SeqCst), i as usize);
        }
        assert_eq!(next_now(&mut numbers), None);
        assert_eq!(progress.load(SeqCst), 3);
    }

    #[test]
    fn concurrent_yields_of_one_body_take_turns() {
        let mut pairs = generator(|co| async move {
            futures::join!(co.yield_(1u32), co.yield_(2));
            co.yield_(3).await;
        });
        let all = block_wait(async {
            let mut all = Vec::new();
            while let Some(i) = pairs.next().await {
                all.push(i);
            }
            all
        });
        assert_eq!(all, [1, 2, 3]);
    }

    #[test]
    fn a_yield_dropped_before_its_value_was_taken_takes_it_back() {
        let dropped = counter();
        let mut values = generator({
            let dropped = dropped.clone();
            move |co| async move {
                let mut first = co.yield_((1u32, CountDrop(dropped.clone())));
                // Polled once (its value is in the slot), then abandoned, in the same poll.
                poll_fn(|cx| {
                    assert!(first.poll_unpin(cx).is_pending());
                    Poll::Ready(())
                })
                .await;
                drop(first);
                co.yield_((2, CountDrop(dropped.clone()))).await;
            }
        });
        let (value, guard) = next_now(&mut values).unwrap();
        assert_eq!(value, 2, "the abandoned value was delivered");
        assert_eq!(
            dropped.load(SeqCst),
            1,
            "the abandoned value was not dropped"
        );
        drop(guard);
        assert_eq!(next_now(&mut values).map(|(v, _)| v), None);
        assert_eq!(dropped.load(SeqCst), 2);
    }

    #[test]
    fn the_generator_has_its_own_frame_above_the_consumers() {
        let line = line!() + 3;
        let (names, location, nested) = block_wait(
            Task::new(async {
                let mut stacks = generator(|co| async move {
                    co.yield_(current_stack()).await;
                    let nested = Task::new(async { current_stack() }).named("nested").await;
                    co.yield_(nested).await;
                });
                let stack = stacks.next().await.unwrap();
                let nested = stacks.next().await.unwrap();
                let names: Vec<String> =
                    stack.frames().iter().map(|f| f.name().to_owned()).collect();
                (names, stack.frames()[0].location(), nested)
            })
            .named("consumer"),
        );
        assert_eq!(names, ["generator", "consumer"]);
        assert!(location.file().ends_with("stream.rs"), "{location}");
        assert_eq!(
            location.line(),
            line,
            "the frame's location is where generator was called"
        );
        let nested: Vec<_> = nested.frames().iter().map(|f| f.name()).collect();
        assert_eq!(nested, ["nested", "generator", "consumer"]);
    }

    #[test]
    fn named_renames_the_frame() {
        let mut stacks = generator(|co| async move {
            co.yield_(current_stack()).await;
        })
        .named("read_lines");
        let stack = block_wait(Task::new(async move { stacks.next().await.unwrap() }));
        assert_eq!(stack.frames()[0].name(), "read_lines");
    }

    #[test]
    fn dumps_show_where_the_consumer_really_waits() {
        let pool = ThreadPool::new(1).unwrap();
        let in_body = Arc::new(Baton::new());
        let after_yield = Arc::new(Baton::new());
        let handle = Task::new({
            let (in_body, after_yield) = (in_body.clone(), after_yield.clone());
            async move {
                let mut values = generator(|co| async move {
                    Task::new(async move { in_body.wait().await })
                        .named("body_wait")
                        .await;
                    co.yield_(1u32).await;
                });
                assert_eq!(values.next().await, Some(1));
                // Took a value: the yield is not where this task waits.
                Task::new(async move { after_yield.wait().await })
                    .named("consumer_wait")
                    .await;
                assert_eq!(values.next().await, None);
            }
        })
        .named("consumer")
        .schedule_on(&pool)
        .start();
        let waits_in = |frames: &'static [&'static str]| {
            move |tasks: &[TaskSnapshot]| {
                tasks
                    .iter()
                    .any(|t| t.name() == "consumer" && frame_names(t) == frames)
            }
        };
        dump_until(
            "the consumer waiting inside the generator's body",
            waits_in(&["body_wait", "generator", "consumer"]),
        );
        in_body.post();
        dump_until(
            "the consumer waiting after the yield",
            waits_in(&["consumer_wait", "consumer"]),
        );
        after_yield.post();
        block_wait(handle).unwrap();
    }

    #[test]
    fn the_body_sees_the_consumers_cancellation_token() {
        let source = CancellationSource::new();
        let seen = block_wait(
            Task::new(async {
                let mut tokens = generator(|co| async move {
                    co.yield_(coro::current_cancellation_token()).await;
                });
                tokens.next().await.unwrap()
            })
            .with_cancellation(source.token()),
        );
        assert_eq!(seen, source.token());
    }

    #[test]
    fn cancelling_the_consumer_stops_a_wait_in_the_body() {
        let source = CancellationSource::new();
        let waiting = Arc::new(AtomicBool::new(false));
        let canceller = std::thread::spawn({
            let (source, waiting) = (source.clone(), waiting.clone());
            move || {
                wait_until("the body waits", || waiting.load(SeqCst));
                std::thread::sleep(ms(10));
                source.request_cancellation();
            }
        });
        let outcome = on_pool(
            2,
            Task::new(async move {
                let mut outcomes = generator(|co| async move {
                    waiting.store(true, SeqCst);
                    let outcome = cancellable(pending::<()>()).await;
                    co.yield_(outcome).await;
                    let slept = coro::time::sleep(Duration::from_secs(60)).await;
                    co.yield_(slept).await;
                });
                let first = outcomes.next().await.unwrap();
                let second = outcomes.next().await.unwrap();
                (first, second)
            })
            .with_cancellation(source.token()),
        );
        canceller.join().unwrap();
        assert_eq!(outcome, (Err(Cancelled), Err(Cancelled)));
    }

    #[test]
    fn dropping_the_stream_drops_the_body_where_it_waits() {
        for taken in 0..3 {
            let locals = counter();
            let values = counter();
            let mut stream = generator({
                let (locals, values) = (locals.clone(), values.clone());
                move |co| async move {
                    let _a = CountDrop(locals.clone());
                    co.yield_(CountDrop(values.clone())).await;
                    let _b = CountDrop(locals.clone());
                    co.yield_(CountDrop(values.clone())).await;
                    pending::<()>().await;
                    unreachable!("the body never gets past its wait");
                }
            });
            for _ in 0..taken {
                drop(next_now(&mut stream).unwrap());
            }
            let alive_locals = taken.min(2);
            assert_eq!(locals.load(SeqCst), 0, "a local was dropped while alive");
            drop(stream);
            assert_eq!(locals.load(SeqCst), alive_locals, "after {taken} values");
            assert_eq!(values.load(SeqCst), taken, "after {taken} values");
            assert_eq!(Arc::strong_count(&locals), 1, "a local leaked");
            assert_eq!(Arc::strong_count(&values), 1, "a value leaked");
        }
    }

    #[test]
    fn dropping_an_unpolled_stream_drops_its_closure() {
        let captured = counter();
        let guard = CountDrop(captured.clone());
        let stream = generator(move |co: Co<u32>| async move {
            let _guard = guard;
            co.yield_(1).await;
        });
        drop(stream);
        assert_eq!(captured.load(SeqCst), 1);
        assert_eq!(Arc::strong_count(&captured), 1);
    }

    #[test]
    fn a_panic_in_the_body_reaches_the_consumer_and_ends_the_stream() {
        let locals = counter();
        let mut stream = generator({
            let locals = locals.clone();
            move |co| async move {
                let _local = CountDrop(locals);
                co.yield_(1u32).await;
                panic!("the body broke");
            }
        });
        assert_eq!(next_now(&mut stream), Some(1));
        let payload = catch_unwind(AssertUnwindSafe(|| next_now(&mut stream))).unwrap_err();
        assert_eq!(panic_message(&*payload), "the body broke");
        assert_eq!(
            locals.load(SeqCst),
            1,
            "the body's locals were dropped once"
        );
        assert_eq!(next_now(&mut stream), None);
        assert_eq!(next_now(&mut stream), None);
        assert_eq!(locals.load(SeqCst), 1);
    }

    #[test]
    fn a_panic_inside_a_consumer_task_is_resumed_in_its_awaiter() {
        let outcome = Task::new(async {
            let mut stream = generator(|co: Co<u32>| async move {
                co.yield_(1).await;
                panic!("deep failure");
            });
            stream.next().await;
            stream.next().await;
        })
        .settle();
        let error = block_wait(outcome).unwrap_err();
        assert!(error.to_string().contains("deep failure"), "{error}");
    }

    #[test]
    fn a_co_used_after_its_generator_ended_panics_with_a_clear_message() {
        let (tx, rx) = mpsc::channel();
        let mut stream = generator(move |co: Co<u32>| async move {
            tx.send(co).unwrap();
        });
        assert_eq!(next_now(&mut stream), None);
        let co = rx.recv().unwrap();
        let payload = catch_unwind(AssertUnwindSafe(|| block_wait(co.yield_(1)))).unwrap_err();
        let message = panic_message(&*payload);
        assert!(
            message.contains("outside its generator's body"),
            "unclear message: {message}"
        );
    }

    #[test]
    fn a_co_moved_into_another_generator_or_task_panics() {
        // Into another generator's body, while its own generator is alive and polled.
        let (tx, rx) = mpsc::channel::<Co<u32>>();
        let mut outer = generator(move |co: Co<u32>| async move {
            tx.send(co).unwrap();
            pending::<()>().await;
        });
        assert!(outer.next().now_or_never().is_none());
        let stolen = rx.recv().unwrap();
        let mut thief = generator(move |_own: Co<u32>| async move {
            stolen.yield_(7).await;
        });
        let payload = catch_unwind(AssertUnwindSafe(|| next_now(&mut thief))).unwrap_err();
        assert!(panic_message(&*payload).contains("outside its generator's body"));

        // Into a spawned task.
        let (tx, rx) = mpsc::channel::<Co<u32>>();
        let mut outer = generator(move |co: Co<u32>| async move {
            tx.send(co).unwrap();
            pending::<()>().await;
        });
        assert!(outer.next().now_or_never().is_none());
        let stolen = rx.recv().unwrap();
        let error = block_wait(coro::spawn(async move { stolen.yield_(7).await })).unwrap_err();
        assert!(
            error.to_string().contains("outside its generator's body"),
            "{error}"
        );
    }

    #[test]
    fn generators_nest() {
        fn count(to: u32) -> impl Stream<Item = u32> + Send + Unpin {
            generator(move |co| async move {
                for i in 0..to {
                    co.yield_(i).await;
                }
            })
        }
        let mut sums = generator(|co| async move {
            for n in 1..=4 {
                let mut inner = count(n);
                let mut sum = 0;
                while let Some(i) = inner.next().await {
                    sum += i;
                }
                co.yield_(sum).await;
            }
        });
        let all: Vec<u32> = block_wait(async { (&mut sums).collect().await });
        assert_eq!(all, [0, 1, 3, 6]);
    }
}

mod buffered {
    use super::*;

    /// How long a CPU-bound child spins waiting to see its sibling running beside it.
    const GIVE_UP: Duration = Duration::from_millis(2_000);

    #[test]
    fn nothing_is_pulled_or_started_until_the_first_poll() {
        let pulled = counter();
        let mapped = counter();
        let input = futures::stream::iter(0..3u32).inspect({
            let pulled = pulled.clone();
            move |_| {
                pulled.fetch_add(1, SeqCst);
            }
        });
        let mut doubled = buffered(input, 2, {
            let mapped = mapped.clone();
            move |i| {
                mapped.fetch_add(1, SeqCst);
                async move { i * 2 }
            }
        });
        assert_send_unpin(&doubled);
        std::thread::sleep(ms(10));
        assert_eq!((pulled.load(SeqCst), mapped.load(SeqCst)), (0, 0));
        // One `block_wait` for the whole stream: the children run on its thread while it waits.
        let all = block_wait(async {
            let first = doubled.next().await;
            assert_eq!((pulled.load(SeqCst), mapped.load(SeqCst)), (2, 2));
            let rest: Vec<u32> = (&mut doubled).collect().await;
            (first, rest)
        });
        assert_eq!(all, (Some(0), vec![2, 4]));
        assert_eq!(next_now(&mut doubled), None);
    }

    #[test]
    fn outputs_come_in_input_order_whatever_order_children_finish_in() {
        const N: usize = 6;
        let finished = Arc::new(Mutex::new(Vec::new()));
        // Child `i` finishes only after child `i + 1` did: the last one first.
        let done: Arc<Vec<Baton>> = Arc::new((0..N).map(|_| Baton::new()).collect());
        let outputs = on_pool(
            2,
            Task::new({
                let finished = finished.clone();
                async move {
                    let children = buffered(futures::stream::iter(0..N), N, move |i| {
                        let (finished, done) = (finished.clone(), done.clone());
                        async move {
                            if i + 1 < N {
                                done[i + 1].wait().await;
                            }
                            finished.lock().unwrap().push(i);
                            done[i].post();
                            i * 10
                        }
                    });
                    children.collect::<Vec<_>>().await
                }
            }),
        );
        assert_eq!(outputs, (0..N).map(|i| i * 10).collect::<Vec<_>>());
        let finished = finished.lock().unwrap().clone();
        assert_eq!(
            finished,
            (0..N).rev().collect::<Vec<_>>(),
            "not out of order"
        );
    }

    #[test]
    fn two_cpu_bound_children_run_in_parallel() {
        for round in 0..10 {
            let running = counter();
            let overlapped = counter();
            let outputs = on_pool(
                2,
                Task::new({
                    let (running, overlapped) = (running.clone(), overlapped.clone());
                    async move {
                        let children = buffered(futures::stream::iter(0..2u32), 2, move |i| {
                            let (running, overlapped) = (running.clone(), overlapped.clone());
                            async move {
                                running.fetch_add(1, SeqCst);
                                let start = Instant::now();
                                while start.elapsed() < GIVE_UP {
                                    if running.load(SeqCst) >= 2 {
                                        overlapped.fetch_add(1, SeqCst);
                                        break;
                                    }
                                    std::hint::spin_loop();
                                }
                                // Stay running until the sibling had its chance to see us.
                                while overlapped.load(SeqCst) < 2 && start.elapsed() < GIVE_UP {
                                    std::hint::spin_loop();
                                }
                                i
                            }
                        });
                        children.collect::<Vec<_>>().await
                    }
                }),
            );
            assert_eq!(outputs, [0, 1]);
            assert_eq!(
                overlapped.load(SeqCst),
                2,
                "round {round}: the two CPU-bound children ran one after the other"
            );
        }
    }

    #[test]
    fn at_most_limit_children_are_outstanding() {
        const LIMIT: usize = 3;
        let in_flight = counter();
        let max_in_flight = counter();
        let started = counter();
        let outputs = on_pool(
            4,
            Task::new({
                let (in_flight, max_in_flight, started) =
                    (in_flight.clone(), max_in_flight.clone(), started.clone());
                async move {
                    let mut children = buffered(futures::stream::iter(0..20u64), LIMIT, {
                        let (in_flight, started) = (in_flight.clone(), started.clone());
                        move |i| {
                            started.fetch_add(1, SeqCst);
                            let in_flight = in_flight.clone();
                            let max_in_flight = max_in_flight.clone();
                            async move {
                                let now = in_flight.fetch_add(1, SeqCst) + 1;
                                max_in_flight.fetch_max(now, SeqCst);
                                coro::time::sleep(ms(2 + i % 3)).await.unwrap();
                                in_flight.fetch_sub(1, SeqCst);
                                i
                            }
                        }
                    });
                    let mut outputs = Vec::new();
                    while let Some(i) = children.next().await {
                        // Started but not yet yielded: never more than the limit.
                        let outstanding = started.load(SeqCst) - outputs.len();
                        assert!(outstanding <= LIMIT, "{outstanding} outstanding");
                        outputs.push(i);
                        if i % 5 == 0 {
                            // A slow consumer: finished children wait, still counted.
                            coro::time::sleep(ms(5)).await.unwrap();
                        }
                    }
                    outputs
                }
            }),
        );
        assert_eq!(outputs, (0..20).collect::<Vec<_>>());
        let max = max_in_flight.load(SeqCst);
        assert!(max <= LIMIT, "{max} children ran at once");
        assert!(max >= 2, "the children never ran concurrently");
        assert_eq!(in_flight.load(SeqCst), 0);
    }

    #[test]
    fn children_run_with_the_consumers_token_and_under_its_task() {
        let source = CancellationSource::new();
        let started = counter();
        let canceller = std::thread::spawn({
            let (source, started) = (source.clone(), started.clone());
            move || {
                wait_until("both children wait", || started.load(SeqCst) == 2);
                let tasks = dump_until("the children under the consumer", |tasks| {
                    let consumer = tasks.iter().find(|t| t.name() == "consumer");
                    let children = tasks.iter().filter(|t| t.name() == "buffered");
                    consumer.is_some_and(|c| {
                        children.filter(|t| t.parent_id() == Some(c.id())).count() == 2
                    })
                });
                drop(tasks);
                source.request_cancellation();
            }
        });
        let outcomes = on_pool(
            2,
            Task::new(async move {
                buffered(futures::stream::iter(0..2u32), 2, move |_| {
                    let started = started.clone();
                    async move {
                        started.fetch_add(1, SeqCst);
                        cancellable(pending::<()>()).await
                    }
                })
                .collect::<Vec<_>>()
                .await
            })
            .named("consumer")
            .with_cancellation(source.token()),
        );
        canceller.join().unwrap();
        assert_eq!(outcomes, [Err(Cancelled), Err(Cancelled)]);
    }

    #[test]
    fn dropping_the_stream_cancels_the_outstanding_children() {
        let guards = counter();
        let started = counter();
        let saw_cancellation = counter();
        let first = on_pool(
            2,
            Task::new({
                let (guards, started, saw) =
                    (guards.clone(), started.clone(), saw_cancellation.clone());
                async move {
                    let counters = (guards, started.clone(), saw);
                    let mut children = buffered(futures::stream::iter(0..10u32), 4, move |i| {
                        let (guards, started, saw) = counters.clone();
                        async move {
                            let _guard = CountDrop(guards);
                            started.fetch_add(1, SeqCst);
                            match i {
                                0 => i,
                                // CPU-bound: stops when its token fires.
                                1 => {
                                    let start = Instant::now();
                                    while !coro::current_cancellation_token()
                                        .is_cancellation_requested()
                                    {
                                        assert!(start.elapsed() < Duration::from_secs(10));
                                        std::hint::spin_loop();
                                    }
                                    saw.fetch_add(1, SeqCst);
                                    i
                                }
                                // Suspended forever: dropped where it waits.
                                _ => pending().await,
                            }
                        }
                    });
                    let first = children.next().await;
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while started.load(SeqCst) < 4 {
                        assert!(Instant::now() < deadline, "the children never started");
                        coro::time::sleep(ms(1)).await.unwrap();
                    }
                    drop(children);
                    first
                }
            }),
        );
        assert_eq!(first, Some(0));
        // Child 0 was yielded, 1, 2 and 3 were outstanding (nothing polled the stream again to
        // start 4): every started child's guard goes.
        wait_until("every started child is dropped", || {
            guards.load(SeqCst) == 4
        });
        assert_eq!(started.load(SeqCst), 4);
        assert_eq!(saw_cancellation.load(SeqCst), 1);
        std::thread::sleep(ms(20));
        assert_eq!(guards.load(SeqCst), started.load(SeqCst));
        wait_until("nothing leaked", || Arc::strong_count(&guards) == 1);
    }

    #[test]
    fn a_childs_panic_reaches_the_consumer_after_the_outputs_before_it() {
        let pulled = counter();
        let cancelled = counter();
        let (outputs, payload, after) = on_pool(
            2,
            Task::new({
                let (pulled, cancelled) = (pulled.clone(), cancelled.clone());
                async move {
                    let input = futures::stream::iter(0..100u32).inspect(move |_| {
                        pulled.fetch_add(1, SeqCst);
                    });
                    let mut children = buffered(input, 3, move |i| {
                        let cancelled = cancelled.clone();
                        async move {
                            match i {
                                // Finishes (once child 1's failure cancelled it) with its
                                // output, which is still yielded.
                                0 => {
                                    assert!(cancellable(pending::<()>()).await.is_err());
                                    i
                                }
                                1 => panic!("child 1 failed"),
                                _ => {
                                    if cancellable(pending::<()>()).await.is_err() {
                                        cancelled.fetch_add(1, SeqCst);
                                    }
                                    i
                                }
                            }
                        }
                    });
                    let mut outputs = Vec::new();
                    let payload = loop {
                        match AssertUnwindSafe(children.next()).catch_unwind().await {
                            Ok(Some(i)) => outputs.push(i),
                            Ok(None) => panic!("the stream ended without the panic"),
                            Err(payload) => break panic_message(&*payload),
                        }
                    };
                    (outputs, payload, children.next().await)
                }
            }),
        );
        assert_eq!(outputs, [0], "the output before the failure is yielded");
        assert_eq!(payload, "child 1 failed");
        assert_eq!(after, None, "the stream ends after the panic");
        assert_eq!(
            cancelled.load(SeqCst),
            1,
            "the sibling saw the cancellation"
        );
        assert_eq!(
            pulled.load(SeqCst),
            3,
            "items were pulled after the failure"
        );
    }

    #[test]
    fn a_panic_surfaces_from_block_wait_too() {
        let payload = catch_unwind(|| {
            block_wait(
                buffered(futures::stream::iter(0..3u32), 2, |i| async move {
                    assert_ne!(i, 2, "item 2 is bad");
                    i
                })
                .collect::<Vec<_>>(),
            )
        })
        .unwrap_err();
        assert!(panic_message(&*payload).contains("item 2 is bad"));
    }

    #[test]
    #[should_panic(expected = "limit is 0")]
    fn a_zero_limit_panics_at_once() {
        let _ = buffered(futures::stream::iter(0..3u32), 0, |i| async move { i });
    }

    #[test]
    fn a_generator_feeds_buffered_children() {
        let squares = on_pool(
            2,
            Task::new(async {
                let numbers = generator(|co| async move {
                    for i in 0..10u64 {
                        co.yield_(i).await;
                    }
                });
                buffered(numbers, 3, |i| async move { i * i })
                    .collect::<Vec<_>>()
                    .await
            }),
        );
        assert_eq!(squares, (0..10).map(|i| i * i).collect::<Vec<_>>());
    }

    #[test]
    fn an_unpin_input_is_not_required() {
        let input = futures::stream::unfold(0u32, |i| async move { (i < 3).then_some((i, i + 1)) });
        let mut doubled = Box::pin(buffered(input, 2, |i| async move { i * 2 }));
        let all: Vec<u32> = block_wait(doubled.as_mut().collect());
        assert_eq!(all, [0, 2, 4]);
    }
}

#[test]
fn pipe_yields_what_was_written_then_ends_and_fails_writes_once_the_stream_is_gone() {
    use futures::StreamExt;
    let (writer, stream) = coro::stream::pipe();
    let producer = std::thread::spawn(move || {
        for i in 0..1_000u32 {
            writer.write(i).unwrap();
        }
    });
    let got: Vec<u32> = coro::block_wait(stream.collect());
    producer.join().unwrap();
    assert_eq!(got, (0..1_000).collect::<Vec<_>>());

    let drops = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (writer, stream) = coro::stream::pipe();
    assert!(writer.write(support::CountDrop(drops.clone())).is_ok());
    drop(stream);
    assert_eq!(
        drops.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "unread values go with the stream"
    );
    assert!(writer.is_closed());
    assert!(writer.write(support::CountDrop(drops.clone())).is_err());
}
