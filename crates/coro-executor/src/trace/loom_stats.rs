//! Models of a task's statistics block against a snapshot taken on another thread:
//! - `loom_a_snapshot_never_sees_the_counters_a_recycled_block_held`: a thread hands back the
//!   block of a task that ended (its counters those of many polls) to its spares, then a task
//!   it polls suspends for the first time while statistics are on and gets that block
//!   (`TaskHeader::install_block`); a snapshot racing the install sees either no block (zero
//!   counters) or the block with the new task's counters (one poll), never the old ones. The
//!   install's `Release` store of the tagged trace word, paired with the snapshot's `Acquire`
//!   load of it (`TaskHeader::stats`), is what orders the counters' reset before the read:
//!   with that store `Relaxed`, loom finds the snapshot reading the old poll count.
//!
//! The models drive the block's functions directly, with statistics off process-wide (other
//! models run beside them in the same binary): the switch only decides whether a poll calls
//! them. Run with the other models (see `crate::loom` for the two checkers and how to run them).

use super::StatsBlock;
use super::snapshot_of;
use super::stats::FirstPoll;
use crate::loom::model_exhaustive;
use crate::loom::sync::Arc;
use crate::loom::thread;
use crate::task::TaskHeader;
use std::ptr::{self, NonNull};

/// Polls the old block counted, so that its counters differ from a new task's.
const OLD_POLLS: u64 = 4;

/// A block handed to the poller thread.
struct Handed(NonNull<StatsBlock>);

// SAFETY: the block is in no header and no list: only the thread holding this uses it.
unsafe impl Send for Handed {}

impl Handed {
    /// The block (a method, so that a closure captures the whole `Handed`, not its field).
    fn take(self) -> NonNull<StatsBlock> {
        self.0
    }
}

#[test]
fn loom_a_snapshot_never_sees_the_counters_a_recycled_block_held() {
    model_exhaustive(|| {
        let task = Arc::new(TaskHeader::new());
        // Made before the threads start, so that its making is seen by both: only the
        // counters written after (its old task's polls) can be seen out of order.
        let first = FirstPoll {
            at: 0,
            spawned: 0,
            now: 0,
        };
        let old = Handed(StatsBlock::for_first_poll(ptr::null_mut(), &first));
        let poller = {
            let task = task.clone();
            thread::spawn(move || {
                // The block of a task that ended on this thread: counted, then handed back.
                let old = old.take();
                // SAFETY: the block is this thread's alone: it was never installed anywhere.
                let old_stats = unsafe { &old.as_ref().stats };
                for _ in 1..OLD_POLLS {
                    old_stats.poll_started();
                    old_stats.poll_ended();
                }
                // SAFETY: from `for_first_poll`, in no header, handed back once.
                unsafe { StatsBlock::hand_back_keeping(old, true) };
                // The new task's first counted poll suspends: it gets the spare.
                task.install_block(0, 0);
                let installed = task.stats().expect("installed");
                assert!(
                    ptr::eq(installed, old_stats),
                    "the spare block was reused, so the model checks a recycled block"
                );
            })
        };
        // Loom runs the spawned thread first only once this one yields; it interleaves from
        // there.
        thread::yield_now();
        // SAFETY: the header lives in the `Arc` until both threads are done with it.
        let seen = unsafe { snapshot_of(&task) };
        assert!(
            seen.polls() <= 1,
            "a snapshot saw the counters of the block's previous task: {} polls",
            seen.polls()
        );
        poller.join().unwrap();
        // SAFETY: the header lives in the `Arc` until both threads are done with it, and the
        // poller, the only other thread, is joined.
        let after = unsafe { snapshot_of(&task) };
        assert_eq!(after.polls(), 1, "the new task's first poll, counted");
    });
}
