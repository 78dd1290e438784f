//! Where a task woken after its pool shut down is dropped: never inside the `wake` that found
//! the pool closed.
//!
//! The waker's caller may hold a lock that the task's destructor takes: h2 wakes its stream
//! tasks while holding its streams mutex (when a connection goes away), and dropping a stream's
//! task locks that mutex, so dropping the task inline deadlocked the thread on itself. Such
//! tasks go to one process-wide `coro-reaper` thread, started the first time it is needed,
//! which drops them once the waker's caller has moved on. The pool's own shutdown, which wakes
//! every task it still lists from `ThreadPool::drop` (no user lock held), drops them inline, so
//! that shutdown still returns with every task dropped.

use crate::task::Runnable;
use std::cell::Cell;

thread_local! {
    /// Set while the pool's shutdown wakes its listed tasks: they are dropped inline.
    static DROP_INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Puts the flag back as it was, even on unwinding.
struct Restore(bool);

impl Drop for Restore {
    fn drop(&mut self) {
        DROP_INLINE.with(|inline| inline.set(self.0));
    }
}

/// Runs `f` (the shutdown's wake-ups), dropping the tasks it wakes inline.
pub(crate) fn dropping_inline(f: impl FnOnce()) {
    let _restore = Restore(DROP_INLINE.with(|inline| inline.replace(true)));
    f();
}

/// Drops `runnable`, whose pool is closed: inline during the pool's own shutdown, else on the
/// reaper thread.
pub(crate) fn drop_closed(runnable: Runnable) {
    if DROP_INLINE.with(Cell::get) {
        // The shutdown's own wake-up. Tasks that this drop wakes in turn (a connection's
        // destructor waking its streams under its lock) go to the reaper.
        let _restore = Restore(DROP_INLINE.with(|inline| inline.replace(false)));
        drop(runnable);
        return;
    }
    #[cfg(not(any(loom, shuttle)))]
    if let Err(unsent) = reaper().send(runnable) {
        // No reaper (it could not start): dropping here is all that is left.
        drop(unsent.0);
    }
    #[cfg(any(loom, shuttle))]
    drop(runnable);
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
