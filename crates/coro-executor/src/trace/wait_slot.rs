//! The encoding of a task's wait slot (what it waits on, `wait.rs`) in the upper 56 bits of its
//! header's state word: a kind, a count of registrations alive, a mark for the waits that last
//! until the task's next poll, and an argument. Apart from `wait.rs` so that the poll start
//! (`task/current.rs`), which ends those waits, needs nothing that imports it.

use crate::task::header::STATE_BYTE;

/// Where the slot starts in the header's state word: above the state byte.
pub(super) const SLOT_SHIFT: u32 = STATE_BYTE.count_ones();
pub(super) const KIND_BITS: u32 = 4;
/// The kind of `WaitOn::Timer` in a packed slot.
pub(super) const TIMER: u64 = 6;
/// The kind of `WaitOn::Other` in a packed slot.
pub(super) const OTHER: u64 = 9;
/// Up to 7 registrations alive are counted; more leave the slot `WaitOn::Other` for good.
pub(super) const COUNT_BITS: u32 = 3;
/// One of the counted registrations is the poll's `wait_until_polled` ones.
pub(super) const UNTIL_POLLED: u64 = 1 << (KIND_BITS + COUNT_BITS);
pub(super) const ARG_SHIFT: u32 = KIND_BITS + COUNT_BITS + 1;
pub(super) const KIND_MASK: u64 = (1 << KIND_BITS) - 1;
pub(super) const COUNT_ONE: u64 = 1 << KIND_BITS;
pub(super) const COUNT_MASK: u64 = ((1 << COUNT_BITS) - 1) << KIND_BITS;
/// Arguments are kept to the 48 bits above the kind and count: ids (a target past it reads as
/// `WaitOn::Other`) and fds fit, and deadlines, in microseconds since the process's epoch,
/// for nearly nine years of uptime.
pub(super) const ARG_MAX: u64 = (1 << (64 - SLOT_SHIFT - ARG_SHIFT)) - 1;

/// `word` (a slot) with one more registration, of `new` (packed).
pub(super) fn add_one(word: u64, new: u64) -> u64 {
    let count = word & COUNT_MASK;
    if count == 0 {
        new | COUNT_ONE
    } else if count == COUNT_MASK {
        // Saturated: stays Other until the task's slot is reset by ends.
        word
    } else {
        OTHER | (word & UNTIL_POLLED) | (count + COUNT_ONE)
    }
}

/// `word` (a slot) with one registration fewer.
pub(super) fn remove_one(word: u64) -> u64 {
    let count = word & COUNT_MASK;
    match count {
        0 => word,
        COUNT_ONE => 0,
        _ => (word & !COUNT_MASK) | (count - COUNT_ONE),
    }
}

/// Removes the `wait_until_polled` waits from `word`, a task's state word, as its next poll
/// starts; returns it unchanged if there are none (the common case: one test of a word the
/// poll start loads anyway).
#[inline]
pub(crate) fn poll_starts(word: u64) -> u64 {
    if word & (UNTIL_POLLED << SLOT_SHIFT) == 0 {
        return word;
    }
    let slot = (word >> SLOT_SHIFT) & !UNTIL_POLLED;
    (remove_one(slot) << SLOT_SHIFT) | (word & STATE_BYTE)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL: u64 = 5 | (42 << ARG_SHIFT);
    const IO: u64 = 7 | (3 << ARG_SHIFT);

    fn word(slot: u64, state: u64) -> u64 {
        (slot << SLOT_SHIFT) | state
    }

    #[test]
    fn a_poll_start_ends_only_the_waits_until_polled_and_keeps_the_state_byte() {
        // Nothing to end: the word as it was.
        let guarded = word(add_one(0, CHANNEL), 2);
        assert_eq!(poll_starts(guarded), guarded);
        // Alone: the slot empties, the state byte stays.
        let until_polled = word(add_one(0, IO) | UNTIL_POLLED, 2 | 4);
        assert_eq!(poll_starts(until_polled), 2 | 4);
        // Beside a guarded wait: one registration left (Other: the two were merged).
        let both = word(add_one(add_one(0, CHANNEL), IO) | UNTIL_POLLED, 1);
        let left = poll_starts(both);
        assert_eq!(left & STATE_BYTE, 1);
        assert_eq!((left >> SLOT_SHIFT) & COUNT_MASK, COUNT_ONE);
        assert_eq!((left >> SLOT_SHIFT) & UNTIL_POLLED, 0);
        assert_eq!(remove_one(left >> SLOT_SHIFT), 0);
    }

    #[test]
    fn counts_saturate_as_other_and_the_argument_keeps_48_bits() {
        let mut slot = 0;
        for _ in 0..20 {
            slot = add_one(slot, CHANNEL);
        }
        assert_eq!(slot & COUNT_MASK, COUNT_MASK);
        assert_eq!(slot & KIND_MASK, OTHER);
        assert_eq!(ARG_MAX, (1 << 48) - 1);
        assert_eq!(ARG_SHIFT + SLOT_SHIFT + 48, 64);
    }
}
