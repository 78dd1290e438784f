//! A list of live tasks: what shutdown walks to drop every unfinished task of a pool, and what
//! task snapshots read.
//!
//! A task parked on a waker that nobody will ever call sits in no queue; only this list still
//! reaches it. A pool's entries keep a [`Waker`] of their task; shutdown takes them all and wakes
//! them, which hands each task to the (now closed) pool, which drops it. Every entry also points
//! at its task's [`TaskHeader`] for snapshots. A task removes its own entry when its future is
//! dropped, so entries never outlive their task.
//!
//! Every task is listed once and unlisted once, so both must be cheap and must not make the
//! workers meet on one cache line. The list is split into shards, one per worker plus a few for
//! other threads, and a spawn lists its task in its own thread's shard:
//! - *listing* takes the shard's owner lock, which only that shard's thread takes in the normal
//!   run of things, so it is uncontended and its cache line stays in that core's cache. The
//!   task is built before: under the lock a listing only takes a slot, records it in the
//!   task's header (its entry) and publishes the header there, so no spawner's code runs under
//!   it;
//! - *unlisting*, often on another worker (the task was stolen), takes no lock: it swaps the
//!   slot's header pointer to null and pushes the slot on the shard's lock-free *returned* stack,
//!   which the owner takes whole when it runs out of free slots (mimalloc's thread-delayed free
//!   list; a take-all pop cannot suffer ABA);
//! - *visiting* (shutdown's `close`, snapshots) is the rare path: it holds the owner lock and
//!   raises the shard's `visitors` count while it reads headers. An unlisting that sees visitors
//!   waits for that lock before it lets its task's future be dropped, so a visitor never reads a
//!   freed header (a Dekker pair: the unlister's swap, fence, load; the visitor's increment,
//!   fence, loads).
//!
//! Shutdown must not return while a task whose entry `close` took is still alive: its runnable
//! may be on its way to the pool's queue from another thread (woken there just before). So
//! `close` counts, per shard, the entries it takes, and such a task's unlisting hands its task a
//! [`ClosedEntry`] whose drop, once the future is dropped too, counts it down:
//! [`dropping`](TaskList::dropping) is the number still to go.

use super::header::TaskHeader;
use crate::loom::UnsafeCell;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*, fence};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::task::Waker;

coro_loom::thread_local_const! {
    /// The task-list shard this thread's spawns list their tasks in: a worker's own index (see
    /// [`set_shard_hint`]), or for any other thread a random value past every worker index (see
    /// `TaskList::insert`).
    static SHARD_HINT: Cell<usize> = Cell::new(usize::MAX);
}

/// The task-list shard hint of this thread (see `SHARD_HINT`). A fixed shard per thread keeps
/// the shard's lock uncontended and its cache line on this core: unlisting a task takes no lock.
pub(crate) fn shard_hint() -> usize {
    SHARD_HINT.with(|h| {
        let mut hint = h.get();
        if hint == usize::MAX {
            use std::hash::{BuildHasher, RandomState};
            let random = RandomState::new().hash_one(std::thread::current().id()) as usize;
            // Past any worker index, and never `usize::MAX` again.
            hint = (random >> 2) | ((usize::MAX >> 1) + 1);
            h.set(hint);
        }
        hint
    })
}

/// Makes this thread (worker `index` of its pool) list its spawns in shard `index`.
pub(crate) fn set_shard_hint(index: usize) {
    SHARD_HINT.with(|h| h.set(index));
}

/// Shards for threads that are not workers of the list's pool (spawns from outside, or from
/// another pool's workers), picked by a per-thread hint.
const OTHER_SHARDS: usize = 4;

/// Slots are allocated a page at a time and never move, so an entry can point at its slot.
const PAGE: usize = 64;

/// Where a task's entry lives: its slot, which names its shard while the task is listed. (One
/// pointer, not two: the key is in every task's header, whose size counts against the memory
/// target.)
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskKey {
    slot: NonNull<Slot>,
}

#[cfg(all(any(loom, shuttle), test))]
impl TaskKey {
    /// The slot's address, for models that check slots are not shared.
    pub(super) fn slot_addr(&self) -> usize {
        self.slot.as_ptr() as usize
    }
}

// SAFETY: a key only points into a `TaskList` (shards and pages are never moved or freed while
// the list lives, and the list outlives its tasks), and everything it reaches there is `Sync`.
unsafe impl Send for TaskKey {}

pub(super) struct Slot {
    /// The task's header while it is listed; null while the slot is free. Whoever swaps a
    /// non-null value out owns `waker` and, for an unlister, the slot.
    header: AtomicPtr<TaskHeader>,
    /// Shutdown wakes the task through it (pools only; `None` for other executors' tasks).
    /// Written by the lister before it publishes `header`, taken by whoever swaps `header` out.
    waker: UnsafeCell<Option<Waker>>,
    /// While the slot is free: the next slot in a free list or the returned stack. While it is
    /// listed: its shard, for the unlister. Written only by the slot's current owner (the
    /// shard's lock holder, or the unlister pushing it); the shard is written by the lister
    /// before it publishes `header` and read by the task's one unlister.
    link: UnsafeCell<Link>,
}

/// What [`Slot::link`] holds.
#[derive(Clone, Copy)]
union Link {
    next_free: *const Slot,
    shard: *const Shard,
}

impl Slot {
    fn vacant() -> Slot {
        Slot {
            header: AtomicPtr::new(ptr::null_mut()),
            waker: UnsafeCell::new(None),
            link: UnsafeCell::new(Link {
                next_free: ptr::null(),
            }),
        }
    }
}

/// The part of a shard behind its lock.
pub(super) struct Owned {
    // Boxed on purpose: pages never move, so entries can point at their slots.
    #[allow(clippy::vec_box)]
    pages: Vec<Box<[Slot; PAGE]>>,
    /// Slots handed out so far (the rest of the last page is untouched).
    used: usize,
    /// Free slots for this shard's next listings.
    free: *const Slot,
    closed: bool,
}

/// Aligned so that the owner's line and the unlisters' line never share a cache line.
#[repr(align(128))]
struct Padded<T>(T);

struct Shard {
    owned: Padded<Mutex<Owned>>,
    unlisting: Padded<Unlisting>,
}

/// What unlisters touch.
pub(super) struct Unlisting {
    /// Slots freed by unlisters, for the owner to take whole.
    returned: AtomicPtr<Slot>,
    /// Visitors reading this shard's headers right now (they hold the lock).
    visitors: AtomicUsize,
    /// Tasks whose entries `close` took and whose futures are not dropped yet (see
    /// [`ClosedEntry`]). Only shutdown touches it.
    closing: AtomicUsize,
}

/// What unlisting a task whose entry [`TaskList::close`] took gives back: dropped once the
/// task's future is dropped too, it counts the task out of [`TaskList::dropping`], which
/// shutdown waits on.
#[must_use = "dropping it says the task's future is dropped"]
pub(crate) struct ClosedEntry {
    closing: NonNull<AtomicUsize>,
}

// SAFETY: it only points at a shard's atomic counter (`Sync`), which outlives the task (see
// `TaskKey`).
unsafe impl Send for ClosedEntry {}

impl Drop for ClosedEntry {
    fn drop(&mut self) {
        // SAFETY: the list, and so the shard's counter, outlives its tasks (see `TaskKey`), and
        // this is dropped while its task is being dropped.
        let closing = unsafe { self.closing.as_ref() };
        // Release: whatever the future's destructor did happens before shutdown, which reads
        // the count with Acquire, returns.
        closing.fetch_sub(1, Release);
    }
}

// SAFETY: the raw pointers in `Owned` point into the shard's own pages and are only used under
// its lock; the slots' cells are accessed only by their current owner as the `Slot` docs say.
unsafe impl Send for Shard {}
// SAFETY: shared, a shard is used only through its lock (the `Owned` pointers into its pages)
// and through the slots' cells, which only their current owner touches, as the `Slot` docs say.
unsafe impl Sync for Shard {}

pub(crate) struct TaskList {
    shards: Box<[Shard]>,
    workers: usize,
}

impl TaskList {
    /// A list with one shard per worker (hints `0..workers`) plus a few for other threads.
    pub(crate) fn new(workers: usize) -> TaskList {
        let shards = (0..workers + OTHER_SHARDS)
            .map(|_| Shard {
                owned: Padded(Mutex::new(Owned {
                    pages: Vec::new(),
                    used: 0,
                    free: ptr::null(),
                    closed: false,
                })),
                unlisting: Padded(Unlisting {
                    returned: AtomicPtr::new(ptr::null_mut()),
                    visitors: AtomicUsize::new(0),
                    closing: AtomicUsize::new(0),
                }),
            })
            .collect();
        TaskList { shards, workers }
    }

    fn shard_for(&self, hint: usize) -> &Shard {
        let index = if hint < self.workers {
            hint
        } else {
            self.workers + hint % OTHER_SHARDS
        };
        &self.shards[index]
    }

    /// Lists the built task whose header is `header` in the shard for `hint` (a worker's index
    /// for its own shard; any other value picks one of the shards for other threads): takes a
    /// slot, records it as the header's entry (which [`unlist`](Self::unlist) reads) and stores
    /// `waker` (shutdown wakes the task through it) and the header there. Once the list is
    /// closed by shutdown, lists nothing (the header's entry stays null) and gives the waker
    /// back.
    ///
    /// The header must be a new task's, not listed yet and not shared with another thread yet.
    pub(crate) fn insert(
        &self,
        hint: usize,
        header: NonNull<TaskHeader>,
        waker: Option<Waker>,
    ) -> Result<TaskKey, Option<Waker>> {
        let shard = self.shard_for(hint);
        // Only what needs the lock happens under it: the closed check, which makes "closed"
        // and "listed" exclusive (shutdown cannot miss a task being spawned), and the slot.
        let mut owned = shard.owned.0.lock().unwrap();
        if owned.closed {
            return Err(waker);
        }
        let slot = match NonNull::new(owned.free.cast_mut()) {
            Some(slot) => slot,
            None => {
                // Take back every slot unlisters returned, or grow.
                let returned = shard.unlisting.0.returned.swap(ptr::null_mut(), Acquire);
                match NonNull::new(returned) {
                    Some(slot) => slot,
                    None => owned.grow(),
                }
            }
        };
        // SAFETY: `slot` is a free slot of this shard (from its free list, its returned stack,
        // or fresh), so it is ours under the lock, and its link is the rest of the list; from
        // now on it names the shard, for the unlister.
        let slot_ref = unsafe { slot.as_ref() };
        // SAFETY: the slot is free and we hold the shard's lock, so its link is ours to read
        // and rewrite.
        owned.free = slot_ref.link.with_mut(|link| unsafe {
            let next = (*link).next_free;
            *link = Link {
                shard: ptr::from_ref(shard),
            };
            next
        });
        // SAFETY: the caller's header is alive and not shared yet (see above).
        unsafe { header.as_ref() }.set_entry(slot.as_ptr().cast());
        // SAFETY: the slot is free (null header), so nobody else reads or writes its waker.
        slot_ref.waker.with_mut(|w| unsafe { *w = waker });
        // Release: a visitor or unlister that sees the header also sees the waker.
        slot_ref.header.store(header.as_ptr(), Release);
        Ok(TaskKey { slot })
    }

    /// Unlists the task of `header` if it was listed (see [`remove`](Self::remove)); a task
    /// that never was (refused at shutdown, or built unlisted) has nothing to unlist.
    pub(crate) fn unlist(header: &TaskHeader) -> Option<ClosedEntry> {
        let slot = NonNull::new(header.entry().cast::<Slot>())?;
        Self::remove(TaskKey { slot })
    }

    /// Unlists a task (its future is about to be dropped). Returns only once no visitor can be
    /// reading the task's header any more. If shutdown's [`close`](Self::close) took the entry
    /// first, returns the [`ClosedEntry`] to drop once the future is dropped.
    pub(crate) fn remove(key: TaskKey) -> Option<ClosedEntry> {
        // SAFETY: see `TaskKey`: the list, and so the shard and slot, outlive the task. The
        // slot's link names its shard while the task is listed (written before the task
        // existed), and only this, the task's one unlisting, changes it again.
        let (slot, shard) = unsafe {
            let slot = key.slot.as_ref();
            (slot, &*slot.link.with(|link| (*link).shard))
        };
        let unlisting = &shard.unlisting.0;
        let header = slot.header.swap(ptr::null_mut(), AcqRel);
        // The fence orders the swap before the load (store buffering); it pairs with the fence
        // in `visit`: either the visitor sees the null header or we see the visitor.
        // Acquire: a visitor that has just finished (its Release decrement) happened before us.
        fence(SeqCst);
        if unlisting.visitors.load(Acquire) != 0 {
            // A visitor may have read our header before the swap: wait until it is done.
            drop(shard.owned.0.lock().unwrap());
        }
        if header.is_null() {
            // Shutdown's `close` took the entry (and its waker, and counted it in `closing`
            // before its swap, which our swap read); the slot is no longer used.
            return Some(ClosedEntry {
                closing: NonNull::from(&unlisting.closing),
            });
        }
        // SAFETY: we swapped the header out, so the waker and the slot are ours now.
        let waker = slot.waker.with_mut(|w| unsafe { (*w).take() });
        let mut head = unlisting.returned.load(Relaxed);
        loop {
            // SAFETY: the slot is ours until the exchange below publishes it.
            slot.link
                .with_mut(|link| unsafe { *link = Link { next_free: head } });
            match unlisting.returned.compare_exchange_weak(
                head,
                key.slot.as_ptr(),
                Release,
                Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => head = actual,
            }
        }
        // Dropped last: releasing a waker may free the task, whose destructor may spawn or
        // complete other tasks and come back here.
        drop(waker);
        None
    }

    /// For each shard: holds its lock, runs `on_shard`, and raises its visitor count while it
    /// runs `on_task` on each listed task's slot, so that no listed header is freed meanwhile.
    pub(super) fn visit(
        &self,
        mut on_shard: impl FnMut(&mut Owned),
        mut on_task: impl FnMut(&Unlisting, &Slot, NonNull<TaskHeader>),
    ) {
        for shard in self.shards.iter() {
            let mut owned = shard.owned.0.lock().unwrap();
            on_shard(&mut owned);
            let visitors = &shard.unlisting.0.visitors;
            visitors.fetch_add(1, Relaxed);
            // Pairs with the fence in `remove` (see there).
            fence(SeqCst);
            for index in 0..owned.used {
                let slot = &owned.pages[index / PAGE][index % PAGE];
                if let Some(header) = NonNull::new(slot.header.load(Acquire)) {
                    on_task(&shard.unlisting.0, slot, header);
                }
            }
            visitors.fetch_sub(1, Release);
        }
    }

    /// Refuses every later insert (they give their value back), keeping the entries listed
    /// until [`close`](Self::close): shutdown's first step, so that a spawn into a pool that is
    /// shutting down drops its future at once.
    pub(crate) fn refuse_inserts(&self) {
        for shard in self.shards.iter() {
            shard.owned.0.lock().unwrap().closed = true;
        }
    }

    /// Closes the list: later inserts fail, and every entry's waker is returned for shutdown to
    /// wake. Each task whose entry it took counts in [`dropping`](Self::dropping) until its
    /// future is dropped.
    pub(crate) fn close(&self) -> Vec<Waker> {
        let mut wakers = Vec::new();
        self.visit(
            |owned| owned.closed = true,
            |unlisting, slot, _| {
                // Counted before the swap: an unlister that reads our null counts down after
                // this (see `remove`), so the count never goes below the truth.
                unlisting.closing.fetch_add(1, Relaxed);
                if slot.header.swap(ptr::null_mut(), SeqCst).is_null() {
                    // Its unlister got there first: it drops the future without us.
                    unlisting.closing.fetch_sub(1, Relaxed);
                } else {
                    // SAFETY: we swapped the header out, so the waker is ours.
                    wakers.extend(slot.waker.with_mut(|w| unsafe { (*w).take() }));
                }
            },
        );
        wakers
    }

    /// Tasks whose entries [`close`](Self::close) took and whose futures are not dropped yet
    /// (their [`ClosedEntry`] is not dropped). Acquire: each destructor that counted itself out
    /// happened before the caller sees the lower count.
    pub(crate) fn dropping(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.unlisting.0.closing.load(Acquire))
            .sum()
    }

    /// Runs `f` on the header of every listed task, while that task cannot finish being
    /// unlisted: its header, and its future with any trace cell attached there, stay alive
    /// until `f` returns (a task is unlisted before its future is dropped).
    pub(crate) fn for_each_listed(&self, mut f: impl FnMut(&TaskHeader)) {
        // SAFETY: `visit` hands out headers of listed tasks only, kept alive while `on_task` runs.
        self.visit(|_| {}, |_, _, header| f(unsafe { header.as_ref() }));
    }

    /// Runs `f` on `header` if its task is listed (a task that finished is not, and its header
    /// is never read), with the guarantee of [`for_each_listed`](Self::for_each_listed).
    pub(crate) fn with_listed<R>(
        &self,
        header: *const TaskHeader,
        f: impl FnOnce(&TaskHeader) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        let mut found = None;
        self.visit(
            |_| {},
            |_, _, listed| {
                if std::ptr::eq(listed.as_ptr(), header) {
                    if let Some(f) = f.take() {
                        // SAFETY: `visit` hands out headers of listed tasks only, kept alive
                        // while this callback runs.
                        found = Some(f(unsafe { listed.as_ref() }));
                    }
                }
            },
        );
        found
    }

    /// Tasks spawned and not yet finished or dropped (nor taken by [`close`](Self::close)).
    ///
    /// Counted by looking at every slot, under each shard's lock: this is for metrics, which
    /// are rare, and it spares every spawn and every exit a shared counter.
    pub(crate) fn live(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let owned = shard.owned.0.lock().unwrap();
                (0..owned.used)
                    .filter(|&index| {
                        let slot = &owned.pages[index / PAGE][index % PAGE];
                        !slot.header.load(Relaxed).is_null()
                    })
                    .count()
            })
            .sum()
    }
}

impl Owned {
    /// A never-used slot, adding a page if needed.
    fn grow(&mut self) -> NonNull<Slot> {
        if self.used == self.pages.len() * PAGE {
            self.pages
                .push(Box::new(std::array::from_fn(|_| Slot::vacant())));
        }
        let index = self.used;
        self.used += 1;
        NonNull::from(&self.pages[index / PAGE][index % PAGE])
    }
}
