//! Runs the `signal_dump` example as a child process and sends it SIGQUIT: its stderr must get
//! the task dump (names and frame locations), and the child must keep running and serving.
//!
//! Run it with `cargo test -p coro-examples --test signal_dump`. The test builds the example
//! itself (a no-op when it is fresh), as `cargo test --test ...` does not build examples.
//! Every wait is bounded, and the child is killed if the test fails.

#![cfg(unix)]

mod support;

use support::Example;

fn sigquit(example: &Example) {
    example.signal(libc::SIGQUIT);
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn sigquit_dumps_the_stuck_tasks_to_stderr_and_the_service_keeps_running() {
    let mut example = Example::start("signal_dump", &[]);
    example.expect_line("ready");

    sigquit(&example);
    // The two stuck requests, each with its child stuck in wait_for_config: the header, then
    // the whole tree (it is written at once, but may be read in pieces).
    let header = "coro: task dump on signal SIGQUIT (";
    let dump = example.stderr_until("a whole dump", |err| {
        count(err, header) == 1 && count(err, "at wait_for_config (") == 2
    });
    // The two requests, as tasks (their children's stacks continue into theirs, so the frame
    // shows under each child as well).
    assert_eq!(count(&dump, " handle_request [suspended]"), 2, "{dump}");
    assert!(
        dump.contains("at wait_for_config (examples/signal_dump.rs:"),
        "{dump}"
    );
    assert!(
        dump.contains("at handle_request (examples/signal_dump.rs:"),
        "{dump}"
    );
    assert!(dump.contains("[suspended]"), "{dump}");

    // The dump did not stop the process, nor the pool: a task still answers.
    assert!(example.still_running(), "the example exited after SIGQUIT");
    example.send_line("ping");
    example.expect_line("pong 1");

    // And the next SIGQUIT dumps again.
    sigquit(&example);
    example.stderr_until("a second dump", |err| {
        count(err, header) == 2 && count(err, "at wait_for_config (") == 4
    });
    assert!(example.still_running(), "the example exited after SIGQUIT");

    // Closing stdin lets it release the requests and exit normally.
    let status = example.finish();
    assert!(status.success(), "{status}; stderr:\n{}", example.stderr());
    example.expect_line("user1 served with config v1");
    example.expect_line("user2 served with config v1");
}
