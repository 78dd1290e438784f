//! [`Watch`]: what the monitor remembers of one worker (or helper slot) between looks, for the
//! looks that act on a poll that has gone on for a while (handoff, stall reports).

use std::time::Instant;

/// What the monitor remembers of one worker (or helper slot) between looks, to tell a poll
/// that has gone on for a while.
#[derive(Clone, Copy)]
pub(crate) struct Watch {
    /// The worker's poll counter at the last look.
    pub(crate) polls: u64,
    /// When that counter value was first seen.
    pub(crate) since: Instant,
    /// The counter value already handed off (one handoff per stuck poll).
    pub(crate) handed_off: Option<u64>,
    /// The counter value already reported as a stall (one report per stalled poll).
    pub(crate) stall_reported: Option<u64>,
}

impl Watch {
    pub(crate) fn new(now: Instant) -> Watch {
        Watch {
            polls: 0,
            since: now,
            handed_off: None,
            stall_reported: None,
        }
    }
}
