//! [`LockTrace`]: what a lock tells task snapshots: its id, the tasks holding it, and the
//! registration of a task that waits for it (the wait-for graph's edges).
//!
//! Rule: a guard records the task that made it (one compare-and-swap into a small slot array,
//! on the acquiring thread) and clears its slot when dropped; a lock held by more tasks than
//! there are slots, or by code outside any task, counts those holders as untracked, and a
//! snapshot then knows its holders only in part (a waiter on it is never part of a proven
//! deadlock). While a task waits for the lock, the lock's trace is listed in [`WAITED`] under
//! its id: the waiting future borrows the lock, so the listed address stays valid until the
//! wait ends and unlists it (under the same mutex a snapshot reads it under). A guard moved to
//! another task stays attributed to the task that acquired it.

use coro_executor::trace::{LockKind, WaitOn, WaitRegistration, current_task_id, wait_on};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Holder slots per lock: exclusive locks need one; a few readers fit.
const SLOTS: usize = 4;

/// Ids of locks, handed out when a lock is first waited for.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The locks some task waits for right now: id -> (trace address, waits).
static WAITED: Mutex<Option<HashMap<u64, (usize, usize)>>> = Mutex::new(None);

/// A lock's holders and id, inside the lock.
pub(crate) struct LockTrace {
    kind: LockKind,
    /// 0 until the lock is first waited for.
    id: AtomicU64,
    holders: [AtomicU64; SLOTS],
    /// Holders not in a slot (slots full, or held outside a task).
    untracked: AtomicUsize,
}

/// The holder slot a guard took; from [`LockTrace::hold`], given back to
/// [`LockTrace::release`].
#[derive(Debug)]
pub(crate) struct Held(u8);

const UNTRACKED: u8 = u8::MAX;
const NOTHING: u8 = u8::MAX - 1;

impl Held {
    /// Takes the record out, leaving one that releases nothing (for a guard that hands its
    /// holding on to another guard).
    pub(crate) fn take(&mut self) -> Held {
        std::mem::replace(self, Held(NOTHING))
    }
}

impl LockTrace {
    pub(crate) const fn new(kind: LockKind) -> LockTrace {
        LockTrace {
            kind,
            id: AtomicU64::new(0),
            holders: [const { AtomicU64::new(0) }; SLOTS],
            untracked: AtomicUsize::new(0),
        }
    }

    /// Records the running task as a holder.
    #[inline]
    pub(crate) fn hold(&self) -> Held {
        if let Some(task) = current_task_id() {
            let start = task as usize % SLOTS;
            for i in 0..SLOTS {
                let slot = (start + i) % SLOTS;
                if self.holders[slot]
                    .compare_exchange(0, task, Relaxed, Relaxed)
                    .is_ok()
                {
                    return Held(slot as u8);
                }
            }
        }
        self.untracked.fetch_add(1, Relaxed);
        Held(UNTRACKED)
    }

    /// The holder `held` is gone.
    #[inline]
    pub(crate) fn release(&self, held: Held) {
        match held.0 {
            NOTHING => {}
            UNTRACKED => {
                self.untracked.fetch_sub(1, Relaxed);
            }
            slot => self.holders[slot as usize].store(0, Relaxed),
        }
    }

    fn id(&self) -> u64 {
        match self.id.load(Relaxed) {
            0 => {
                let new = NEXT_ID.fetch_add(1, Relaxed);
                match self.id.compare_exchange(0, new, Relaxed, Relaxed) {
                    Ok(_) => new,
                    Err(set) => set,
                }
            }
            id => id,
        }
    }

    /// Registers that the running task waits for this lock, until the returned value drops.
    /// The lock must stay where it is meanwhile (the waiting future borrows it).
    pub(crate) fn wait(&self) -> LockWait {
        let id = self.id();
        let mut waited = WAITED.lock().unwrap();
        let entry = waited
            .get_or_insert_with(HashMap::new)
            .entry(id)
            .or_insert((self as *const LockTrace as usize, 0));
        entry.1 += 1;
        drop(waited);
        LockWait {
            id,
            _registration: wait_on(WaitOn::Lock {
                id,
                kind: self.kind,
            }),
        }
    }
}

/// A task's wait for a lock; from [`LockTrace::wait`], undone on drop.
#[derive(Debug)]
pub(crate) struct LockWait {
    id: u64,
    _registration: WaitRegistration,
}

impl Drop for LockWait {
    fn drop(&mut self) {
        let mut waited = WAITED.lock().unwrap();
        if let Some(map) = waited.as_mut()
            && let Some(entry) = map.get_mut(&self.id)
        {
            entry.1 -= 1;
            if entry.1 == 0 {
                map.remove(&self.id);
            }
        }
    }
}

/// The tasks holding lock `id` while some task waits for it: `Some` with all of them, or
/// `None` if some are untracked or nobody waits for it any more.
pub(crate) fn holders_of(id: u64) -> Option<Vec<u64>> {
    let waited = WAITED.lock().unwrap();
    let &(address, _) = waited.as_ref()?.get(&id)?;
    // SAFETY: listed under `WAITED`, which we hold: a task waits for the lock, whose future
    // borrows it, and the entry is removed (under this mutex) before that wait ends, so the
    // trace is alive and unmoved.
    let trace = unsafe { &*(address as *const LockTrace) };
    if trace.untracked.load(Relaxed) != 0 {
        return None;
    }
    Some(
        trace
            .holders
            .iter()
            .map(|h| h.load(Relaxed))
            .filter(|&h| h != 0)
            .collect(),
    )
}
