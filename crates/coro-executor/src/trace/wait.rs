//! [`WaitOn`] and [`WaitRegistration`]: what a suspended task waits on, registered by the
//! primitive it waits in (a join handle, a lock, a channel, a timer, a socket, a promise) for
//! snapshots and the wait-for graph.
//!
//! Rule: a registration is made inside the task's poll, kept by the waiting future, and undone
//! when that future stops waiting (ready or dropped). The task's slot is the upper 56 bits of
//! its header's state word (the state byte below it is kept): a kind, a count of
//! registrations alive and an argument. Only the polling thread writes the word during a poll,
//! so a load and a store suffice. Two registrations at once (a `select!` over a lock and a
//! timer) make the slot read [`WaitOn::Other`] until all but one are gone: a snapshot never
//! claims a task waits only on a lock when something else can wake it too.
//!
//! A wait with no future to hold its registration (a socket's readiness polled through
//! `poll_*` functions, a promise's future that must stay small) is made with
//! [`wait_until_polled`]: it lasts until the task's next poll starts, which is exactly while a
//! task that returned `Pending` from there waits on it. Such waits of one poll count as one
//! registration, marked in the slot, which the next poll start removes (`poll_starts`).

use super::wait_slot::{
    ARG_MAX, ARG_SHIFT, COUNT_MASK, COUNT_ONE, KIND_MASK, OTHER, SLOT_SHIFT, TIMER, UNTIL_POLLED,
    add_one, remove_one,
};
use crate::task::current;
use crate::task::header::{STATE_BYTE, TaskHeader};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// The kind of lock a task waits for, in [`WaitOn::Lock`].
///
/// ```
/// assert_eq!(coro_executor::trace::LockKind::Mutex.name(), "Mutex");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// An exclusive lock (coro's `Mutex`).
    Mutex,
    /// A reader-writer lock (coro's `SharedMutexFair`).
    SharedMutexFair,
    /// A counting semaphore.
    Semaphore,
}

impl LockKind {
    /// The lock type's name.
    ///
    /// ```
    /// assert_eq!(coro_executor::trace::LockKind::Semaphore.name(), "Semaphore");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "Mutex",
            LockKind::SharedMutexFair => "SharedMutexFair",
            LockKind::Semaphore => "Semaphore",
        }
    }
}

/// What a suspended task waits on.
///
/// ```
/// use coro_executor::trace::WaitOn;
/// assert_ne!(WaitOn::Task(3), WaitOn::Channel(3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitOn {
    /// Another task's end (a join handle, a collect's child).
    Task(u64),
    /// A lock, by its id.
    Lock {
        /// The lock's id (unique for the life of the process).
        id: u64,
        /// Its type.
        kind: LockKind,
    },
    /// A channel, by its id.
    Channel(u64),
    /// A timer's deadline.
    Timer(Instant),
    /// A socket's readiness, by its file descriptor.
    Io(i32),
    /// A promise's value, by the promise's id.
    Promise(u64),
    /// Several things at once, or something coro does not name.
    Other,
}

impl WaitOn {
    fn pack(self) -> u64 {
        let (kind, arg) = match self {
            WaitOn::Task(id) => (1, id),
            WaitOn::Lock { id, kind } => (
                match kind {
                    LockKind::Mutex => 2,
                    LockKind::SharedMutexFair => 3,
                    LockKind::Semaphore => 4,
                },
                id,
            ),
            WaitOn::Channel(id) => (5, id),
            WaitOn::Timer(deadline) => (TIMER, super::stats::ns_of(deadline) / 1000),
            WaitOn::Io(fd) => (7, fd as u32 as u64),
            WaitOn::Promise(id) => (8, id),
            WaitOn::Other => (OTHER, 0),
        };
        if arg > ARG_MAX {
            return OTHER;
        }
        kind | (arg << ARG_SHIFT)
    }

    fn unpack(word: u64) -> Option<WaitOn> {
        let arg = word >> ARG_SHIFT;
        Some(match word & KIND_MASK {
            0 => return None,
            1 => WaitOn::Task(arg),
            2 => WaitOn::Lock {
                id: arg,
                kind: LockKind::Mutex,
            },
            3 => WaitOn::Lock {
                id: arg,
                kind: LockKind::SharedMutexFair,
            },
            4 => WaitOn::Lock {
                id: arg,
                kind: LockKind::Semaphore,
            },
            5 => WaitOn::Channel(arg),
            TIMER => WaitOn::Timer(super::stats::instant_of(arg.saturating_mul(1000))),
            7 => WaitOn::Io(arg as u32 as i32),
            8 => WaitOn::Promise(arg),
            _ => WaitOn::Other,
        })
    }
}

/// What the task of `header` waits on now, if it registered anything.
pub(crate) fn read_slot(header: &TaskHeader) -> Option<WaitOn> {
    WaitOn::unpack(header.state.load(Relaxed) >> SLOT_SHIFT)
}

/// Replaces the slot of `header`'s task by what `f` makes of it. Only the thread polling the
/// task calls it, so the word cannot change between the load and the store (module doc).
fn update_slot(header: &TaskHeader, f: impl FnOnce(u64) -> u64) {
    let word = header.state.load(Relaxed);
    let slot = f(word >> SLOT_SHIFT);
    header
        .state
        .store((slot << SLOT_SHIFT) | (word & STATE_BYTE), Relaxed);
}

/// A wait registered for the task running on this thread; undone when dropped. From
/// [`wait_on`].
///
/// ```
/// use coro_executor::trace::{WaitOn, current_task_id, snapshot_tasks, wait_on};
///
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let seen = futures::executor::block_on(pool.spawn(async {
///     let _waiting = wait_on(WaitOn::Channel(42));
///     let me = current_task_id().unwrap();
///     snapshot_tasks().into_iter().find(|t| t.id() == me).unwrap().waiting_on()
/// }))
/// .unwrap();
/// assert_eq!(seen, Some(WaitOn::Channel(42)));
/// ```
#[derive(Debug)]
#[must_use = "the wait is undone when the registration is dropped"]
pub struct WaitRegistration {
    /// The registering task's id; 0 when made outside a task (nothing registered).
    task: u64,
}

/// Registers that the task running on this thread waits on `on`, until the registration is
/// dropped. Outside a task it registers nothing. Keep the registration in the future that
/// waits (it is undone only when dropped inside that task's poll, or with the task).
///
/// ```
/// let registration = coro_executor::trace::wait_on(coro_executor::trace::WaitOn::Other);
/// drop(registration); // outside a task: nothing was registered
/// ```
pub fn wait_on(on: WaitOn) -> WaitRegistration {
    let Some(header) = current::header() else {
        return WaitRegistration { task: 0 };
    };
    let new = on.pack();
    update_slot(header, |word| add_one(word, new));
    WaitRegistration { task: header.id() }
}

/// Registers that the task running on this thread waits on `on` until its next poll starts:
/// for a poll function that returns `Pending` with no future of its own to keep a
/// [`WaitRegistration`] in (coro's sockets register their readiness waits so, and its
/// promises). Outside a task it does nothing. A future that registers so and is then dropped
/// in the same poll (a `select!` branch that lost) leaves the wait shown until the next poll.
///
/// ```
/// use coro_executor::trace::{WaitOn, current_task_id, snapshot_tasks, wait_until_polled};
/// use std::task::Poll;
///
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let (tx, rx) = std::sync::mpsc::channel();
/// let mut polls = 0;
/// let task = pool.spawn(std::future::poll_fn(move |cx| {
///     polls += 1;
///     if polls == 1 {
///         tx.send(current_task_id().unwrap()).unwrap();
///         wait_until_polled(WaitOn::Io(9));
///         cx.waker().wake_by_ref();
///         return Poll::Pending;
///     }
///     Poll::Ready(())
/// }));
/// let id = rx.recv().unwrap();
/// futures::executor::block_on(task).unwrap();
/// // Between its two polls the task was shown waiting on fd 9; its second poll ended it.
/// assert!(snapshot_tasks().iter().all(|t| t.id() != id));
/// ```
pub fn wait_until_polled(on: WaitOn) {
    let Some(header) = current::header() else {
        return;
    };
    let new = on.pack();
    update_slot(header, |word| {
        if word & UNTIL_POLLED == 0 {
            add_one(word, new) | UNTIL_POLLED
        } else if word & COUNT_MASK == COUNT_ONE && word & !UNTIL_POLLED & !COUNT_MASK == new {
            // The same target again in this poll (a read and a write on one socket).
            word
        } else {
            // Another target in this poll: counted with the first, as Other.
            (word & !KIND_MASK & !(ARG_MAX << ARG_SHIFT)) | OTHER
        }
    });
}

/// Registers that the task running on this thread waits on `on`, without a guard: for a
/// waiting future with no room for one (a `Sleep`), which calls [`end_wait`] with the same
/// target when it stops waiting. Outside a task it does nothing.
///
/// ```
/// use coro_executor::trace::{WaitOn, begin_wait, current_task_id, end_wait, snapshot_tasks};
///
/// let pool = coro_executor::ThreadPool::new(1).unwrap();
/// let (during, after) = futures::executor::block_on(pool.spawn(async {
///     let me = current_task_id().unwrap();
///     let waiting = || snapshot_tasks().into_iter().find(|t| t.id() == me).unwrap().waiting_on();
///     begin_wait(WaitOn::Io(4));
///     let during = waiting();
///     end_wait(WaitOn::Io(4));
///     (during, waiting())
/// }))
/// .unwrap();
/// assert_eq!((during, after), (Some(WaitOn::Io(4)), None));
/// ```
pub fn begin_wait(on: WaitOn) {
    std::mem::forget(wait_on(on));
}

/// Undoes a [`begin_wait`] of `on` by the task running on this thread. A task whose slot holds
/// another target is left alone (the waiting future moved to another task, say).
///
/// ```
/// coro_executor::trace::end_wait(coro_executor::trace::WaitOn::Other); // outside a task: nothing
/// ```
pub fn end_wait(on: WaitOn) {
    if let Some(header) = current::header() {
        let target = on.pack();
        let word = header.state.load(Relaxed) >> SLOT_SHIFT;
        // Ours alone, or one of several (then the slot reads Other and only counts down).
        let count = word & COUNT_MASK;
        // A deadline is packed from the clock each time, so two packings of one may differ in
        // their last microsecond: a timer matches by kind.
        // A last registration left of several reads Other and cannot be told apart: it is
        // this one (the caller began it and has not ended it).
        let kind = word & KIND_MASK;
        let same = kind == OTHER
            || (kind == target & KIND_MASK
                && (kind == TIMER || word >> ARG_SHIFT == target >> ARG_SHIFT));
        if (count == COUNT_ONE && same) || count > COUNT_ONE {
            clear_one(header);
        }
    }
}

impl Drop for WaitRegistration {
    fn drop(&mut self) {
        if self.task == 0 {
            return;
        }
        // Only the registering task's own poll undoes it; dropped elsewhere (the task's future
        // is being dropped), the task is going away with its slot.
        let Some(header) = current::header().filter(|h| h.id() == self.task) else {
            return;
        };
        clear_one(header);
    }
}

fn clear_one(header: &TaskHeader) {
    update_slot(header, remove_one);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn every_target_survives_packing() {
        let deadline = Instant::now() + Duration::from_secs(30);
        for on in [
            WaitOn::Task(7),
            WaitOn::Lock {
                id: 3,
                kind: LockKind::SharedMutexFair,
            },
            WaitOn::Channel(1 << 40),
            WaitOn::Io(5),
            WaitOn::Promise(9),
            WaitOn::Other,
        ] {
            assert_eq!(WaitOn::unpack(on.pack() | COUNT_ONE), Some(on));
        }
        let Some(WaitOn::Timer(back)) = WaitOn::unpack(WaitOn::Timer(deadline).pack()) else {
            panic!("not a timer");
        };
        let off = if back > deadline {
            back - deadline
        } else {
            deadline - back
        };
        assert!(off < Duration::from_millis(1), "{off:?}");
    }
}
