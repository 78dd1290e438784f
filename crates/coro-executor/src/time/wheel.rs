//! A hierarchical timing wheel: the pure data structure, no threads, no clocks, no locks.
//!
//! Time is measured in *ticks* of 1 ms counted from an origin chosen by the owner (the driver
//! uses a fixed `Instant`). The wheel has [`LEVELS`] levels of [`SLOTS`] slots; a slot of level
//! `L` spans `64^L` ticks, so level 0 has 1 ms slots and the whole wheel spans `64^6` ms
//! (2^36 ms, about 795 days).
//!
//! # Placement rule
//!
//! `elapsed` is the last tick the wheel has been advanced to: every entry whose deadline is
//! `<= elapsed` has been handed out by [`Wheel::advance`] (or sits in the ready list, see below).
//! An entry is filed under its *bucket tick* `b` (its deadline, or a clamped stand-in for
//! deadlines beyond the wheel's range) at the level of the most significant 6-bit digit in which
//! `b` differs from `elapsed`, in the slot given by `b`'s digit at that level. Consequences that
//! the code relies on:
//!
//! * every entry on level `L` shares all digits above `L` with `elapsed` and its digit `L` is
//!   strictly greater than `elapsed`'s (except the wrap-around of the top level, below), so
//!   **any entry on a lower level expires before any entry on a higher level**, and within a
//!   level slots expire in index order after the current one. Finding the next expiry is
//!   therefore "first non-empty level, first occupied slot after the cursor": O(levels) with a
//!   64-bit occupancy mask per level.
//! * when the earliest slot of level `L >= 1` comes due, setting `elapsed` to the slot's start
//!   and re-filing its entries moves each of them to a strictly lower level (they now share digit
//!   `L` with `elapsed`), or to the ready list if its deadline is exactly that tick. This is the
//!   *cascade*; an entry cascades at most once per level, so its total cost is O(levels). The
//!   due slot is spliced onto a *cascade list* in O(1) and its entries are re-filed one per unit
//!   of work ([`Wheel::advance`] takes a budget), so a slot holding a million timers does not
//!   hold the driver's lock for the ~100 ms it takes to move them all.
//! * level-0 slots hold entries of exactly one deadline tick, so a due level-0 slot is moved to
//!   the ready list with one O(1) splice.
//!
//! # Far deadlines
//!
//! A deadline more than [`MAX_DELTA`] ticks after `elapsed` is filed under
//! `elapsed + MAX_DELTA`, i.e. the farthest slot of the top level that cannot be confused with
//! the current one, while the entry keeps its real deadline. When that slot comes due the entry
//! is re-filed against its real deadline, clamped again if it is still out of range. The top
//! level wraps around: a bucket in the next 2^36-tick "epoch" lands in a slot *before* the
//! cursor, and `MAX_DELTA = 63 * 64^5` guarantees it never lands in the cursor's own slot.
//!
//! # Memory
//!
//! Entries live in a slab (`Vec<Node<T>>`) and are chained into intrusive, circular,
//! doubly-linked lists by `u32` index; each list has a sentinel node at a fixed index (one per
//! slot, plus the ready and cascade lists), so unlinking needs neither the slot number nor a branch for "was
//! it the head". With `T = Waker` a node is **32 bytes**: deadline 8 + prev 4 + next 4 + waker 16
//! (`Option<Waker>` uses the waker's non-null niche). Freed nodes go on a free list threaded
//! through `next` and are reused before the slab grows; the slab never shrinks.

/// Number of levels.
pub(crate) const LEVELS: usize = 6;
/// Slots per level.
pub(crate) const SLOTS: usize = 64;
const SLOT_BITS: usize = 6;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// Ticks spanned by the whole wheel: `64^LEVELS` = 2^36 ms.
pub(crate) const WHEEL_SPAN: u64 = 1 << (SLOT_BITS * LEVELS);
/// Ticks spanned by one slot of the top level: 2^30 ms.
const TOP_SLOT_SPAN: u64 = 1 << (SLOT_BITS * (LEVELS - 1));
/// Farthest bucket tick relative to `elapsed`. One top-level slot short of the full span, so a
/// bucket that wraps into the next epoch never lands in the slot the cursor is in (see the module
/// docs); that would make the slot ambiguous between "now" and "one epoch later".
pub(crate) const MAX_DELTA: u64 = WHEEL_SPAN - TOP_SLOT_SPAN;

/// Index of the ready list's sentinel: entries that are due, in deadline order.
const READY: u32 = (LEVELS * SLOTS) as u32;
/// Index of the cascade list's sentinel: entries of a due slot above level 0, waiting to be
/// re-filed relative to `elapsed` (which is that slot's start while the list is non-empty).
const CASCADE: u32 = READY + 1;
/// Nodes `0..SENTINELS` are list heads; entries start after them.
const SENTINELS: u32 = CASCADE + 1;
/// "No node". Marks a free node's `prev` (live nodes are always linked into some list).
const NIL: u32 = u32::MAX;

/// One slab node: a list sentinel, a pending entry, or a free node.
#[derive(Debug)]
pub(crate) struct Node<T> {
    /// Real deadline in ticks (entries only).
    deadline: u64,
    /// Previous node in the circular list; `NIL` when the node is free.
    prev: u32,
    /// Next node in the circular list, or the next free node.
    next: u32,
    /// The payload; `None` for sentinels and free nodes.
    value: Option<T>,
}

/// A hierarchical timing wheel holding values of type `T` (the driver uses `Waker`).
///
/// Keys returned by [`Wheel::insert`] are small dense integers, valid until the entry is
/// cancelled or handed out by [`Wheel::advance`]; after that the key may be reused. The wheel panics
/// if given a key that is not live (that is always a bug in the caller).
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    nodes: Vec<Node<T>>,
    /// Head of the free list (threaded through `next`), or `NIL`.
    free: u32,
    /// Number of live entries.
    len: usize,
    /// Everything with a deadline `<= elapsed` has been moved to the ready list.
    elapsed: u64,
    /// Bit `s` of `occupied[l]` is set iff slot `s` of level `l` is non-empty.
    occupied: [u64; LEVELS],
}

/// Result of one unit of work in [`Wheel::step`].
enum Step<T> {
    /// A due entry, removed from the wheel.
    Fired(u32, T),
    /// Internal progress (a slot dequeued or an entry re-filed); call again.
    Moved,
    /// Nothing is due at the given tick.
    Idle,
}

/// The earliest non-empty slot.
#[derive(Debug, Clone, Copy)]
struct Expiration {
    level: usize,
    slot: usize,
    /// First tick covered by the slot.
    deadline: u64,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Wheel<T> {
    /// An empty wheel at tick 0.
    pub(crate) fn new() -> Self {
        let nodes = (0..SENTINELS)
            .map(|i| Node {
                deadline: 0,
                prev: i,
                next: i,
                value: None,
            })
            .collect();
        Self {
            nodes,
            free: NIL,
            len: 0,
            elapsed: 0,
            occupied: [0; LEVELS],
        }
    }

    /// Number of pending entries (including due ones not yet returned by `poll`).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The tick the wheel has been advanced to.
    #[cfg(test)]
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// Deadline of a live entry.
    #[cfg(test)]
    pub(crate) fn deadline(&self, key: u32) -> u64 {
        self.nodes[self.live(key) as usize].deadline
    }

    /// Adds an entry expiring at tick `deadline`. O(1).
    ///
    /// Returns `Err(value)` without storing anything if `deadline <= elapsed`: that tick has
    /// already been processed, so the caller must treat the timer as expired.
    pub(crate) fn insert(&mut self, deadline: u64, value: T) -> Result<u32, T> {
        if deadline <= self.elapsed {
            return Err(value);
        }
        let node = self.alloc(deadline, value);
        self.link(node);
        Ok(node - SENTINELS)
    }

    /// Removes a live entry and returns its value. O(1).
    pub(crate) fn cancel(&mut self, key: u32) -> T {
        let node = self.live(key);
        self.unlink(node);
        self.release(node)
    }

    /// Moves a live entry to a new deadline, keeping its key and value. O(1).
    ///
    /// If `deadline <= elapsed` the entry is removed and its value returned as `Err`, exactly as
    /// [`Wheel::insert`] would refuse it.
    pub(crate) fn reset(&mut self, key: u32, deadline: u64) -> Result<(), T> {
        let node = self.live(key);
        self.unlink(node);
        if deadline <= self.elapsed {
            return Err(self.release(node));
        }
        self.nodes[node as usize].deadline = deadline;
        self.link(node);
        Ok(())
    }

    /// The value of a live entry.
    pub(crate) fn value(&self, key: u32) -> &T {
        let node = self.live(key);
        self.nodes[node as usize]
            .value
            .as_ref()
            .expect("live entries hold a value")
    }

    /// Replaces the value of a live entry, returning the old one.
    pub(crate) fn replace(&mut self, key: u32, value: T) -> T {
        let node = self.live(key);
        self.nodes[node as usize]
            .value
            .replace(value)
            .expect("live entries hold a value")
    }

    /// The tick at which the wheel next has work to do, or `None` if the wheel is empty.
    ///
    /// This is a lower bound on the earliest deadline (for levels above 0 it is the start of the
    /// earliest slot, where a cascade is due), never later than it, so sleeping until it can
    /// never make a timer late. It is `elapsed` itself while due entries wait in the ready list
    /// or a cascade is unfinished.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if !self.is_empty_list(READY) || !self.is_empty_list(CASCADE) {
            return Some(self.elapsed);
        }
        self.next_slot().map(|e| e.deadline)
    }

    /// Advances the wheel to tick `now` and returns one entry whose deadline is `<= now`, if
    /// any, in nondecreasing deadline order. Call repeatedly until it returns `None`.
    ///
    /// Unbounded: it completes any cascade it meets. The driver uses [`Wheel::advance`].
    #[cfg(test)]
    pub(crate) fn poll(&mut self, now: u64) -> Option<(u32, T)> {
        loop {
            match self.step(now) {
                Step::Fired(key, value) => return Some((key, value)),
                Step::Moved => {}
                Step::Idle => return None,
            }
        }
    }

    /// Advances the wheel towards tick `now`, doing at most `budget` units of work (one per entry
    /// fired or re-filed, one per slot emptied) and passing each entry whose deadline is
    /// `<= now` to `fired`, in nondecreasing deadline order. Returns `true` when nothing more is
    /// due at `now`, `false` if the budget ran out first (call again to continue).
    ///
    /// The budget is what bounds the driver's lock hold times: cascading a slot that holds a
    /// million entries is a million units of work, so it is spread over many calls. Between
    /// calls the wheel may be used freely (insert, cancel, reset), including on entries that are
    /// mid-cascade or due.
    pub(crate) fn advance(
        &mut self,
        now: u64,
        budget: usize,
        mut fired: impl FnMut(u32, T),
    ) -> bool {
        for _ in 0..budget {
            match self.step(now) {
                Step::Fired(key, value) => fired(key, value),
                Step::Moved => {}
                Step::Idle => return true,
            }
        }
        false
    }

    /// One unit of work towards `now`.
    ///
    /// Order matters: due entries first (they are the earliest: anything in the cascade list
    /// has a deadline `>= elapsed`), then the unfinished cascade (which must be complete before
    /// `elapsed` moves on, since its entries are positioned relative to the current `elapsed`),
    /// then the next slot.
    fn step(&mut self, now: u64) -> Step<T> {
        let first = self.nodes[READY as usize].next;
        if first != READY {
            debug_assert!(self.nodes[first as usize].deadline <= self.elapsed);
            self.unlink(first);
            return Step::Fired(first - SENTINELS, self.release(first));
        }
        let first = self.nodes[CASCADE as usize].next;
        if first != CASCADE {
            // Re-file one entry relative to `elapsed` (the start of the slot it came from). It
            // shares that slot's digit with `elapsed` now, so it goes to a strictly lower level,
            // or to the ready list if its deadline is exactly `elapsed`; never back to the level
            // it came from, and never to the cascade list.
            self.unlink(first);
            if self.nodes[first as usize].deadline <= self.elapsed {
                self.push_back(READY, first);
            } else {
                self.link(first);
            }
            return Step::Moved;
        }
        match self.next_slot() {
            Some(exp) if exp.deadline <= now => {
                // `exp` is the earliest non-empty slot, so nothing is filed before its start,
                // and moving `elapsed` there keeps every other entry's position valid (same
                // argument as below).
                self.elapsed = exp.deadline;
                self.occupied[exp.level] &= !(1 << exp.slot);
                let head = sentinel(exp.level, exp.slot);
                // A level-0 slot holds entries of exactly this deadline: all due. A higher slot
                // is queued for cascading, one entry per step.
                self.splice_back(head, if exp.level == 0 { READY } else { CASCADE });
                Step::Moved
            }
            _ => {
                // Nothing is due by `now`: jump `elapsed` forward. This keeps every entry at a
                // valid position: each non-empty slot starts after `now`, so `now` still shares
                // with each entry the digits above the entry's level and has a smaller digit at
                // that level (it cannot have passed a slot without reaching its start). Later
                // inserts are then filed relative to the newer time.
                self.elapsed = self.elapsed.max(now);
                Step::Idle
            }
        }
    }

    fn is_empty_list(&self, head: u32) -> bool {
        self.nodes[head as usize].next == head
    }

    /// Moves the whole list at `from` to the end of the list at `to`. O(1).
    fn splice_back(&mut self, from: u32, to: u32) {
        let first = self.nodes[from as usize].next;
        if first == from {
            return;
        }
        let last = self.nodes[from as usize].prev;
        let tail = self.nodes[to as usize].prev;
        self.nodes[tail as usize].next = first;
        self.nodes[first as usize].prev = tail;
        self.nodes[last as usize].next = to;
        self.nodes[to as usize].prev = last;
        self.nodes[from as usize].next = from;
        self.nodes[from as usize].prev = from;
    }

    /// The earliest non-empty slot, if any.
    fn next_slot(&self) -> Option<Expiration> {
        // Lower levels always expire first (module docs), so the first non-empty level wins.
        let level = self.occupied.iter().position(|&mask| mask != 0)?;
        let shift = level * SLOT_BITS;
        let cursor = ((self.elapsed >> shift) & SLOT_MASK) as u32;
        // First occupied slot strictly after the cursor, wrapping around. Only the top level can
        // actually wrap (its slots before the cursor belong to the next epoch); the cursor's own
        // slot is never occupied (entries differ from `elapsed` in this digit).
        let start = (cursor + 1) % SLOTS as u32;
        let rotated = self.occupied[level].rotate_right(start);
        let slot = (start + rotated.trailing_zeros()) % SLOTS as u32;
        debug_assert_ne!(slot, cursor);
        let slot_span = 1u64 << shift;
        let level_span = slot_span << SLOT_BITS;
        let mut deadline = (self.elapsed & !(level_span - 1)) + u64::from(slot) * slot_span;
        if slot < cursor {
            debug_assert_eq!(level, LEVELS - 1, "only the top level wraps");
            deadline += level_span;
        }
        debug_assert!(deadline > self.elapsed, "next slot is not in the future");
        Some(Expiration {
            level,
            slot: slot as usize,
            deadline,
        })
    }

    /// Files a node (not in any list) under its bucket tick. O(1).
    fn link(&mut self, node: u32) {
        let deadline = self.nodes[node as usize].deadline;
        debug_assert!(deadline > self.elapsed);
        let bucket = deadline.min(self.elapsed.saturating_add(MAX_DELTA));
        let level = level_for(self.elapsed, bucket);
        let slot = ((bucket >> (level * SLOT_BITS)) & SLOT_MASK) as usize;
        self.push_back(sentinel(level, slot), node);
        self.occupied[level] |= 1 << slot;
    }

    /// Appends `node` to the circular list whose sentinel is `head`.
    fn push_back(&mut self, head: u32, node: u32) {
        let tail = self.nodes[head as usize].prev;
        self.nodes[node as usize].prev = tail;
        self.nodes[node as usize].next = head;
        self.nodes[tail as usize].next = node;
        self.nodes[head as usize].prev = node;
    }

    /// Takes `node` out of whatever list it is in, clearing the slot's occupancy bit if that
    /// emptied it. O(1), and needs no slot number: with circular lists a list is empty exactly
    /// when the neighbours left behind are both its sentinel.
    fn unlink(&mut self, node: u32) {
        let Node { prev, next, .. } = self.nodes[node as usize];
        self.nodes[prev as usize].next = next;
        self.nodes[next as usize].prev = prev;
        if prev == next && prev < READY {
            let (level, slot) = (prev as usize / SLOTS, prev as usize % SLOTS);
            self.occupied[level] &= !(1 << slot);
        }
    }

    fn alloc(&mut self, deadline: u64, value: T) -> u32 {
        self.len += 1;
        let node = Node {
            deadline,
            prev: NIL,
            next: NIL,
            value: Some(value),
        };
        if self.free != NIL {
            let index = self.free;
            self.free = self.nodes[index as usize].next;
            self.nodes[index as usize] = node;
            index
        } else {
            let index = u32::try_from(self.nodes.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("timer wheel is full (2^32 entries)");
            self.nodes.push(node);
            index
        }
    }

    /// Frees an unlinked node and returns its value.
    fn release(&mut self, node: u32) -> T {
        self.len -= 1;
        let n = &mut self.nodes[node as usize];
        n.prev = NIL;
        n.next = self.free;
        self.free = node;
        n.value.take().expect("live entries hold a value")
    }

    /// Node index of a live key; panics otherwise.
    fn live(&self, key: u32) -> u32 {
        let node = key.checked_add(SENTINELS).expect("invalid timer key");
        assert!(
            self.nodes.get(node as usize).is_some_and(|n| n.prev != NIL),
            "timer key {key} is not live"
        );
        node
    }
}

/// Sentinel node of slot `slot` on level `level`.
fn sentinel(level: usize, slot: usize) -> u32 {
    (level * SLOTS + slot) as u32
}

/// The level at which `bucket` is filed when the wheel is at `elapsed`: the index of the most
/// significant 6-bit digit in which they differ (0 if they differ only in the lowest digit).
/// Buckets in the next epoch (differing above bit 36) go to the top level, which wraps.
fn level_for(elapsed: u64, bucket: u64) -> usize {
    let masked = ((elapsed ^ bucket) | SLOT_MASK).min(WHEEL_SPAN - 1);
    let significant = 63 - masked.leading_zeros() as usize;
    significant / SLOT_BITS
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::task::Waker;

    /// Polls everything due at `now`, checking the order, and returns `(key, value)` pairs.
    fn drain<T>(wheel: &mut Wheel<T>, now: u64) -> Vec<(u32, T)> {
        let mut out = Vec::new();
        let mut last = 0;
        while let Some((key, value)) = wheel.poll(now) {
            let d = wheel.elapsed();
            assert!(d <= now, "poll went past now");
            assert!(d >= last, "poll went backwards");
            last = d;
            out.push((key, value));
        }
        out
    }

    #[test]
    fn node_is_32_bytes_with_a_waker() {
        if size_of::<usize>() == 8 {
            assert_eq!(size_of::<Node<Waker>>(), 32);
        }
    }

    #[test]
    fn insert_then_poll_fires_exactly_at_deadline() {
        let mut wheel = Wheel::new();
        let key = wheel.insert(10, "a").unwrap();
        assert_eq!(wheel.len(), 1);
        assert_eq!(wheel.next_expiration(), Some(10));
        assert!(wheel.poll(9).is_none(), "fired a tick early");
        assert_eq!(wheel.elapsed(), 9);
        assert_eq!(wheel.poll(10), Some((key, "a")));
        assert!(wheel.poll(10).is_none());
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_expiration(), None);
    }

    #[test]
    fn insert_at_or_before_elapsed_is_refused() {
        let mut wheel = Wheel::new();
        assert_eq!(wheel.insert(0, 1), Err(1));
        assert!(wheel.poll(100).is_none());
        assert_eq!(wheel.insert(100, 2), Err(2));
        assert_eq!(wheel.insert(99, 3), Err(3));
        assert!(wheel.insert(101, 4).is_ok());
        assert_eq!(wheel.len(), 1);
    }

    #[test]
    fn cancel_removes_and_frees_for_reuse() {
        let mut wheel = Wheel::new();
        let a = wheel.insert(5, 'a').unwrap();
        let b = wheel.insert(5, 'b').unwrap();
        let c = wheel.insert(70_000, 'c').unwrap();
        assert_eq!(wheel.cancel(a), 'a');
        assert_eq!(wheel.cancel(c), 'c');
        assert_eq!(wheel.len(), 1);
        // The slot of `c` is empty again: the next expiration is `b`'s.
        assert_eq!(wheel.next_expiration(), Some(5));
        // Freed nodes are reused before the slab grows.
        let slab = wheel.nodes.len();
        let d = wheel.insert(6, 'd').unwrap();
        let e = wheel.insert(7, 'e').unwrap();
        assert_eq!(wheel.nodes.len(), slab);
        assert!([a, c].contains(&d) && [a, c].contains(&e));
        assert_eq!(drain(&mut wheel, 1000), vec![(b, 'b'), (d, 'd'), (e, 'e')]);
        assert!(wheel.occupied.iter().all(|&m| m == 0));
    }

    #[test]
    #[should_panic(expected = "not live")]
    fn cancel_of_a_fired_key_panics() {
        let mut wheel = Wheel::new();
        let a = wheel.insert(5, ()).unwrap();
        assert!(wheel.poll(5).is_some());
        wheel.cancel(a);
    }

    #[test]
    fn cascade_from_every_level_fires_on_time() {
        for level in 1..LEVELS {
            let span = 1u64 << (level * SLOT_BITS);
            // Deadlines just inside, in the middle of, and at the end of a level-`level` slot.
            for deadline in [span, span + 1, 3 * span + span / 2, 5 * span - 1] {
                let mut wheel = Wheel::new();
                let key = wheel.insert(deadline, ()).unwrap();
                // Step through every "next expiration" the way the driver does; each step must
                // make progress and must not fire early.
                let mut steps = 0;
                loop {
                    let next = wheel.next_expiration().unwrap();
                    assert!(next <= deadline, "would sleep past the deadline");
                    steps += 1;
                    assert!(steps <= 2 * LEVELS, "no progress");
                    match wheel.poll(next) {
                        Some((k, ())) => {
                            assert_eq!((k, next), (key, deadline));
                            break;
                        }
                        None => assert!(next < deadline),
                    }
                }
            }
        }
    }

    #[test]
    fn order_of_expiry_across_level_boundaries() {
        let mut wheel = Wheel::new();
        // Deadlines straddling the 64, 4096 and 262144 boundaries, inserted out of order.
        let deadlines = [
            4097, 63, 64, 65, 4095, 4096, 262_143, 262_144, 262_145, 1, 127, 128,
        ];
        let mut keys = BTreeMap::new();
        for &d in &deadlines {
            keys.insert(wheel.insert(d, d).unwrap(), d);
        }
        // Advance in uneven jumps so slots are processed both one by one and in bulk.
        let mut fired = Vec::new();
        for now in [0, 63, 64, 100, 4096, 5000, 262_144, 300_000] {
            fired.extend(drain(&mut wheel, now).into_iter().map(|(k, d)| {
                assert_eq!(keys[&k], d);
                assert!(d <= now);
                d
            }));
            assert!(
                wheel.next_expiration().is_none_or(|n| n > now),
                "something due at {now} was left behind"
            );
        }
        let mut sorted = deadlines.to_vec();
        sorted.sort_unstable();
        assert_eq!(fired, sorted);
    }

    #[test]
    fn same_tick_entries_fire_in_insertion_order() {
        let mut wheel = Wheel::new();
        for i in 0..10 {
            wheel.insert(300, i).unwrap();
        }
        let order: Vec<_> = drain(&mut wheel, 300).into_iter().map(|(_, v)| v).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn far_future_deadlines_are_clamped_and_refiled() {
        let mut wheel = Wheel::new();
        let far = 5 * WHEEL_SPAN + 12_345;
        let key = wheel.insert(far, "far").unwrap();
        let near = wheel.insert(WHEEL_SPAN - 1, "near").unwrap();
        // The far entry is filed in range: the wheel wakes no later than MAX_DELTA from now.
        assert!(wheel.next_expiration().unwrap() <= MAX_DELTA);
        let mut wakeups = 0;
        let mut fired = Vec::new();
        while let Some(next) = wheel.next_expiration() {
            wakeups += 1;
            assert!(wakeups < 100, "clamped entry is not making progress");
            fired.extend(drain(&mut wheel, next).into_iter().map(|(k, _)| (k, next)));
        }
        assert_eq!(fired, vec![(near, WHEEL_SPAN - 1), (key, far)]);
    }

    #[test]
    fn top_level_wraps_into_the_next_epoch() {
        let mut wheel = Wheel::new();
        // Move close to the end of the first epoch, then insert across the boundary.
        let start = WHEEL_SPAN - 3 * TOP_SLOT_SPAN / 2;
        assert!(wheel.poll(start).is_none());
        let deadlines = [
            WHEEL_SPAN - 1,
            WHEEL_SPAN,
            WHEEL_SPAN + 1,
            start + MAX_DELTA,
            start + MAX_DELTA + 1, // beyond range: clamped
            WHEEL_SPAN + 40 * TOP_SLOT_SPAN,
        ];
        for &d in &deadlines {
            wheel.insert(d, d).unwrap();
        }
        let mut fired = Vec::new();
        let mut wakeups = 0;
        while let Some(next) = wheel.next_expiration() {
            wakeups += 1;
            assert!(wakeups < 100, "no progress at tick {next}");
            for (_, d) in drain(&mut wheel, next) {
                assert_eq!(d, next, "fired at {next}, deadline {d}");
                fired.push(d);
            }
        }
        let mut sorted = deadlines.to_vec();
        sorted.sort_unstable();
        assert_eq!(fired, sorted);
    }

    #[test]
    fn reset_moves_an_entry_both_ways() {
        let mut wheel = Wheel::new();
        let a = wheel.insert(1000, 'a').unwrap();
        let b = wheel.insert(2000, 'b').unwrap();
        wheel.reset(a, 3000).unwrap();
        wheel.reset(b, 10).unwrap();
        assert_eq!(wheel.deadline(a), 3000);
        assert_eq!(drain(&mut wheel, 10), vec![(b, 'b')]);
        assert!(drain(&mut wheel, 2999).is_empty());
        assert_eq!(
            wheel.reset(a, 2999),
            Err('a'),
            "reset into the past expires"
        );
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn due_entries_survive_interleaved_cancel_and_insert() {
        // The driver stops polling after a batch; entries may be cancelled or added while the
        // ready list is non-empty.
        let mut wheel = Wheel::new();
        let keys: Vec<_> = (0..5).map(|i| wheel.insert(50, i).unwrap()).collect();
        assert_eq!(wheel.poll(60), Some((keys[0], 0)));
        assert_eq!(
            wheel.next_expiration(),
            Some(50),
            "ready entries are due now"
        );
        assert_eq!(wheel.cancel(keys[2]), 2);
        wheel.reset(keys[3], 61).unwrap();
        let late = wheel.insert(61, 9).unwrap();
        let rest: Vec<_> = drain(&mut wheel, 60).into_iter().map(|(_, v)| v).collect();
        assert_eq!(rest, vec![1, 4]);
        assert_eq!(drain(&mut wheel, 61), vec![(keys[3], 3), (late, 9)]);
    }

    #[test]
    fn advance_is_bounded_and_resumable() {
        const N: u32 = 10_000;
        let mut wheel = Wheel::new();
        // All in one level-1 slot: one cascade of N entries, then N firings.
        for i in 0..N {
            wheel.insert(64 + u64::from(i % 64), i).unwrap();
        }
        let mut fired = Vec::new();
        let mut calls = 0;
        while !wheel.advance(200, 100, |_, v| fired.push(v)) {
            calls += 1;
            // The wheel stays usable between calls, mid-cascade or with due entries waiting.
            assert_eq!(wheel.next_expiration(), Some(wheel.elapsed()));
            let k = wheel.insert(150, N + calls).unwrap();
            assert_eq!(wheel.cancel(k), N + calls);
        }
        // 2 units per entry (re-file, fire) plus one per slot dequeued.
        assert!(calls >= 2 * N / 100 - 1, "advance did more than its budget");
        assert_eq!(fired.len(), N as usize);
        let mut deadlines: Vec<_> = fired.iter().map(|v| 64 + v % 64).collect();
        assert!(deadlines.is_sorted(), "fired out of order across batches");
        deadlines.dedup();
        assert_eq!(deadlines.len(), 64);
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn cancel_and_reset_mid_cascade() {
        let mut wheel = Wheel::new();
        let keys: Vec<_> = (0..10)
            .map(|i| wheel.insert(4096 + i, i).unwrap())
            .collect();
        // Dequeue the level-2 slot and re-file only a couple of entries.
        assert!(!wheel.advance(5000, 2, |_, _| panic!(
            "budget spent on dequeue and one re-file"
        )));
        assert_eq!(wheel.elapsed(), 4096);
        assert_eq!(wheel.cancel(keys[9]), 9);
        wheel.reset(keys[8], 9000).unwrap();
        assert_eq!(
            wheel.reset(keys[7], 4096),
            Err(7),
            "reset to elapsed expires"
        );
        let mut fired = Vec::new();
        assert!(wheel.advance(5000, usize::MAX, |_, v| fired.push(v)));
        assert_eq!(fired, (0..7).collect::<Vec<_>>());
        assert_eq!(wheel.len(), 1);
        assert_eq!(drain(&mut wheel, 9000), vec![(keys[8], 8)]);
    }

    /// A tiny deterministic PRNG (xorshift64*), to keep the crate dependency-free.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        /// Below `2^k` for a random `k < bits`: every scale is equally likely.
        fn log_uniform(&mut self, bits: u64) -> u64 {
            let k = self.below(bits);
            self.below(1 << k)
        }
    }

    #[test]
    fn randomized_against_a_btreemap_model() {
        let (mut fired, mut far, mut cascades) = (0, 0, 0);
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut wheel = Wheel::new();
            // Model: (deadline, sequence) -> key; plus key -> (deadline, sequence).
            let mut model: BTreeMap<(u64, u64), u32> = BTreeMap::new();
            let mut by_key: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
            let mut seq = 0u64;
            let mut now = 0u64;
            for _ in 0..4000 {
                match rng.below(10) {
                    0..=4 => {
                        // Deadlines at every scale, including beyond the wheel's range.
                        let scale = rng.below(8) as usize;
                        let delta = 1 + rng.below(1u64 << (scale * SLOT_BITS).min(40));
                        let deadline = now + delta;
                        far += usize::from(delta > MAX_DELTA);
                        cascades += usize::from(delta >= SLOTS as u64);
                        let key = wheel.insert(deadline, seq).unwrap();
                        assert!(by_key.insert(key, (deadline, seq)).is_none());
                        model.insert((deadline, seq), key);
                        seq += 1;
                    }
                    5 if !by_key.is_empty() => {
                        let key = *by_key
                            .keys()
                            .nth(rng.below(by_key.len() as u64) as usize)
                            .unwrap();
                        let (d, s) = by_key.remove(&key).unwrap();
                        model.remove(&(d, s));
                        assert_eq!(wheel.cancel(key), s);
                    }
                    6 if !by_key.is_empty() => {
                        let key = *by_key
                            .keys()
                            .nth(rng.below(by_key.len() as u64) as usize)
                            .unwrap();
                        let (d, s) = by_key.remove(&key).unwrap();
                        model.remove(&(d, s));
                        let deadline = now + 1 + rng.log_uniform(38);
                        wheel.reset(key, deadline).unwrap();
                        by_key.insert(key, (deadline, s));
                        model.insert((deadline, s), key);
                    }
                    _ => {
                        // Advance: small steps, jumps to the next expiration, or big leaps.
                        now = match rng.below(3) {
                            0 => now + rng.below(100),
                            1 => wheel.next_expiration().unwrap_or(now).max(now),
                            _ => now + rng.log_uniform(40),
                        };
                        let next = wheel.next_expiration();
                        if let Some((&(earliest, _), _)) = model.iter().next() {
                            assert!(next.unwrap() <= earliest, "next_expiration past a deadline");
                        } else {
                            assert_eq!(next, None);
                        }
                        let mut last = 0;
                        while let Some((key, s)) = wheel.poll(now) {
                            let (d, s2) = by_key.remove(&key).expect("fired an unknown key");
                            assert_eq!(s, s2);
                            assert!(d <= now, "fired early: deadline {d}, now {now}");
                            assert!(d >= last, "fired out of order");
                            last = d;
                            assert_eq!(model.remove(&(d, s)), Some(key));
                            fired += 1;
                        }
                        assert!(
                            model.keys().next().is_none_or(|&(d, _)| d > now),
                            "entry due at {now} not fired"
                        );
                    }
                }
                assert_eq!(wheel.len(), model.len());
            }
        }
        // The run must actually exercise firing, cascading and clamping.
        eprintln!("fired {fired}, far {far}, multi-level {cascades}");
        assert!(fired > 5_000 && far > 500 && cascades > 10_000);
    }
}
