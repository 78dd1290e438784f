//! Where a task woken after its pool shut down is dropped: never inside the `wake` that found
//! the pool closed.
//!
//! The waker's caller may hold a lock that the task's destructor takes: h2 wakes its stream
//! tasks while holding its streams mutex (when a connection goes away), and dropping a stream's
//! task locks that mutex, so dropping the task inline deadlocked the thread on itself. Such
//! tasks go to one process-wide `coro-reaper` thread, started the first time it is needed,
//! which drops them once the waker's caller has moved on.
//!
//! Shutdown never relies on it: the pool's global queue stays open until every task shutdown
//! knew of is dropped (see `Shared::begin_shutdown`), so what reaches the reaper is only a
//! wake-up after that (of a task that had finished or was never listed), or, when the pool was
//! shut down from inside one of its own tasks, what that task's worker drops after its poll.

use crate::task::Runnable;

/// Drops `runnable`, whose pool is closed, on the reaper thread.
#[cfg(not(any(loom, shuttle)))]
pub(crate) fn drop_closed(runnable: Runnable) {
    if let Err(unsent) = reaper().send(runnable) {
        // No reaper (it could not start): dropping here is all that is left.
        drop(unsent.0);
    }
}

#[cfg(any(loom, shuttle))]
std::thread_local! {
    /// The models' reaper: what [`drop_closed`] hands over, until a model thread runs
    /// [`reap`]. A std thread-local is the model's own and shared by its threads (the checkers
    /// run them all on the test's OS thread, see `crate::loom`), so a model that reaches
    /// `drop_closed` must `reap` before it ends.
    static REAPED: std::cell::RefCell<Vec<Runnable>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Under the models: hands `runnable` to the model's reaper (see `REAPED`), which drops it when
/// the model runs [`reap`], at whatever point the checker picks, as the real reaper thread drops
/// tasks whenever it gets to them.
#[cfg(any(loom, shuttle))]
pub(crate) fn drop_closed(runnable: Runnable) {
    REAPED.with(|reaped| reaped.borrow_mut().push(runnable));
}

/// The model's reaper: drops what [`drop_closed`] handed over so far. Returns how many.
#[cfg(all(test, any(loom, shuttle)))]
pub(crate) fn reap() -> usize {
    // Dropped outside the borrow: a destructor may hand over more.
    let reaped = REAPED.with(|reaped| std::mem::take(&mut *reaped.borrow_mut()));
    let count = reaped.len();
    drop(reaped);
    count
}

#[cfg(not(any(loom, shuttle)))]
fn reaper() -> &'static std::sync::mpsc::Sender<Runnable> {
    static REAPER: std::sync::OnceLock<std::sync::mpsc::Sender<Runnable>> =
        std::sync::OnceLock::new();
    REAPER.get_or_init(|| {
        let (sender, receiver) = std::sync::mpsc::channel::<Runnable>();
        let started = std::thread::Builder::new()
            .name("coro-reaper".into())
            .spawn(move || {
                for runnable in receiver {
                    // A destructor's panic was reported by the hook; the reaper goes on.
                    let _ =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(runnable)));
                }
            });
        if let Err(err) = started {
            eprintln!(
                "coro: could not start the thread that drops tasks of shut-down pools: {err}"
            );
        }
        sender
    })
}
