//! The pool's list of live tasks: what shutdown walks to drop every unfinished task.
//!
//! A task parked on a waker that nobody will ever call sits in no queue; only this list still
//! reaches it. Each entry keeps a [`Waker`] of its task; shutdown takes them all and wakes them,
//! which hands each task to the (now closed) pool, which drops it. A task removes its own entry
//! when its future is dropped, so entries never outlive their task.
//!
//! The list is sharded (one lock per shard, shards >= 4x workers, each on its own cache line) so
//! that spawning and completing tasks on different workers rarely meet on a lock.

use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use std::task::Waker;

const NONE: u32 = u32::MAX;

/// Where a task's entry lives: shard and slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskKey {
    shard: u32,
    slot: u32,
}

enum Slot {
    Vacant {
        next_free: u32,
    },
    /// `None` between reserving the slot and the task handing over its waker.
    Occupied(Option<Waker>),
}

struct ShardInner {
    slots: Vec<Slot>,
    free_head: u32,
    closed: bool,
}

#[repr(align(128))]
struct Shard(Mutex<ShardInner>);

pub(crate) struct TaskList {
    shards: Box<[Shard]>,
    live: AtomicUsize,
}

impl TaskList {
    pub(crate) fn new(workers: usize) -> TaskList {
        let count = (workers * 4).next_power_of_two();
        let shards = (0..count)
            .map(|_| {
                Shard(Mutex::new(ShardInner {
                    slots: Vec::new(),
                    free_head: NONE,
                    closed: false,
                }))
            })
            .collect();
        TaskList {
            shards,
            live: AtomicUsize::new(0),
        }
    }

    /// Reserves an entry in the shard picked by `hint`, runs `make` with its key and `value` (to
    /// build the task around them) and stores the waker `make` returns. Once the list is closed
    /// by shutdown, gives `value` back without calling `make`.
    pub(crate) fn insert<V, R>(
        &self,
        hint: usize,
        value: V,
        make: impl FnOnce(TaskKey, V) -> (Waker, R),
    ) -> Result<R, V> {
        let shard_index = hint & (self.shards.len() - 1);
        let mut shard = self.shards[shard_index].0.lock().unwrap();
        if shard.closed {
            return Err(value);
        }
        let slot = match shard.free_head {
            NONE => {
                shard.slots.push(Slot::Occupied(None));
                (shard.slots.len() - 1) as u32
            }
            free => {
                let Slot::Vacant { next_free } = shard.slots[free as usize] else {
                    unreachable!("the free list only links vacant slots")
                };
                shard.free_head = next_free;
                shard.slots[free as usize] = Slot::Occupied(None);
                free
            }
        };
        // `make` allocates the task; doing it under the shard lock makes "closed" and "inserted"
        // exclusive, so shutdown cannot miss a task that is being spawned.
        let (waker, out) = make(
            TaskKey {
                shard: shard_index as u32,
                slot,
            },
            value,
        );
        shard.slots[slot as usize] = Slot::Occupied(Some(waker));
        self.live.fetch_add(1, Relaxed);
        Ok(out)
    }

    /// Removes a task's entry (its future is being dropped). A no-op after shutdown took it.
    pub(crate) fn remove(&self, key: TaskKey) {
        let waker = {
            let mut shard = self.shards[key.shard as usize].0.lock().unwrap();
            if shard.closed {
                return;
            }
            let next_free = shard.free_head;
            shard.free_head = key.slot;
            let old = std::mem::replace(
                &mut shard.slots[key.slot as usize],
                Slot::Vacant { next_free },
            );
            // Counted down under the lock: `close` takes the same locks before it resets the
            // count, so a decrement can never land after the reset and wrap it.
            self.live.fetch_sub(1, Relaxed);
            match old {
                Slot::Occupied(waker) => waker,
                Slot::Vacant { .. } => unreachable!("task entry removed twice"),
            }
        };
        // Dropped outside the lock: releasing a waker may free the task, whose destructor may
        // spawn or complete other tasks and come back here.
        drop(waker);
    }

    /// Closes the list: later inserts fail, and every entry's waker is returned for shutdown to
    /// wake.
    pub(crate) fn close(&self) -> Vec<Waker> {
        let mut wakers = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.0.lock().unwrap();
            shard.closed = true;
            for slot in shard.slots.drain(..) {
                if let Slot::Occupied(Some(waker)) = slot {
                    wakers.push(waker);
                }
            }
            shard.free_head = NONE;
        }
        self.live.store(0, Relaxed);
        wakers
    }

    /// Tasks spawned and not yet finished or dropped.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Relaxed)
    }
}
