//! A list of live tasks: what shutdown walks to drop every unfinished task of a pool, and what
//! task snapshots read.
//!
//! A task parked on a waker that nobody will ever call sits in no queue; only this list still
//! reaches it. A pool's entries keep a [`Waker`] of their task; shutdown takes them all and wakes
//! them, which hands each task to the (now closed) pool, which drops it. Every entry also points
//! at its task's [`TaskHeader`] for snapshots. A task removes its own entry when its future is
//! dropped, so entries never outlive their task.
//!
//! The list is sharded (one lock per shard, shards >= 4x workers, each on its own cache line) so
//! that spawning and completing tasks on different workers rarely meet on a lock.

use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::trace::{TaskHeader, TaskSnapshot};
use std::ptr::NonNull;
use std::task::Waker;

const NONE: u32 = u32::MAX;

/// Where a task's entry lives: shard and slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskKey {
    shard: u32,
    slot: u32,
}

/// Slots are allocated a page at a time, so a shard grows linearly with its tasks instead of
/// doubling a `Vec` (which costs up to twice the memory at the wrong moment).
const PAGE: usize = 64;

enum Slot {
    Vacant {
        next_free: u32,
    },
    Occupied {
        /// Shutdown wakes the task through it (pools only; `None` for other executors' tasks).
        waker: Option<Waker>,
        header: HeaderPtr,
    },
}

/// The task's header, read by snapshots under the shard lock. Non-null, which lets `Slot` keep
/// its discriminant in the pointer's niche (24 bytes a slot).
struct HeaderPtr(NonNull<TaskHeader>);

// SAFETY: the header lives in the task's allocation and is only read (it is `Sync`) by a
// snapshot holding this shard's lock while the entry exists: the task removes its entry under
// that lock before its future is dropped, and the allocation outlives the future.
unsafe impl Send for HeaderPtr {}

struct ShardInner {
    // Boxed on purpose: growing the list then moves and doubles only page pointers, never the
    // 1.5 KiB pages themselves, so a shard's memory tracks its task count.
    #[allow(clippy::vec_box)]
    pages: Vec<Box<[Slot; PAGE]>>,
    /// Slots handed out so far (the rest of the last page is untouched).
    used: u32,
    free_head: u32,
    closed: bool,
}

impl ShardInner {
    fn slot(&mut self, index: u32) -> &mut Slot {
        &mut self.pages[index as usize / PAGE][index as usize % PAGE]
    }

    fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.pages
            .iter()
            .flat_map(|p| p.iter())
            .take(self.used as usize)
    }
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
                    pages: Vec::new(),
                    used: 0,
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
    /// build the task around them) and stores the waker and header `make` returns. Once the
    /// list is closed by shutdown, gives `value` back without calling `make`.
    pub(crate) fn insert<V, R>(
        &self,
        hint: usize,
        value: V,
        make: impl FnOnce(TaskKey, V) -> (Option<Waker>, NonNull<TaskHeader>, R),
    ) -> Result<R, V> {
        let shard_index = hint & (self.shards.len() - 1);
        let mut shard = self.shards[shard_index].0.lock().unwrap();
        if shard.closed {
            return Err(value);
        }
        let slot = match shard.free_head {
            NONE => {
                if shard.used as usize == shard.pages.len() * PAGE {
                    shard
                        .pages
                        .push(Box::new(std::array::from_fn(|_| Slot::Vacant {
                            next_free: NONE,
                        })));
                }
                shard.used += 1;
                shard.used - 1
            }
            free => {
                let Slot::Vacant { next_free } = *shard.slot(free) else {
                    unreachable!("the free list only links vacant slots")
                };
                shard.free_head = next_free;
                free
            }
        };
        // `make` allocates the task; doing it under the shard lock makes "closed" and "inserted"
        // exclusive, so shutdown cannot miss a task that is being spawned, and no one can see
        // the slot before it is filled.
        let (waker, header, out) = make(
            TaskKey {
                shard: shard_index as u32,
                slot,
            },
            value,
        );
        *shard.slot(slot) = Slot::Occupied {
            waker,
            header: HeaderPtr(header),
        };
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
            let old = std::mem::replace(shard.slot(key.slot), Slot::Vacant { next_free });
            // Counted down under the lock: `close` takes the same locks before it resets the
            // count, so a decrement can never land after the reset and wrap it.
            self.live.fetch_sub(1, Relaxed);
            match old {
                Slot::Occupied { waker, .. } => waker,
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
            for page in std::mem::take(&mut shard.pages) {
                for slot in *page {
                    if let Slot::Occupied {
                        waker: Some(waker), ..
                    } = slot
                    {
                        wakers.push(waker);
                    }
                }
            }
            shard.used = 0;
            shard.free_head = NONE;
        }
        self.live.store(0, Relaxed);
        wakers
    }

    /// Appends a snapshot of every listed task to `out`.
    pub(crate) fn snapshot_into(&self, out: &mut Vec<TaskSnapshot>) {
        for shard in self.shards.iter() {
            let shard = shard.0.lock().unwrap();
            for slot in shard.slots() {
                if let Slot::Occupied {
                    header: HeaderPtr(header),
                    ..
                } = slot
                {
                    // SAFETY: see `HeaderPtr`: we hold the shard lock and the entry exists, so
                    // the task's allocation is alive; holding that lock is also `snapshot`'s
                    // contract.
                    out.push(unsafe { header.as_ref().snapshot() });
                }
            }
        }
    }

    /// Tasks spawned and not yet finished or dropped.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Relaxed)
    }
}
