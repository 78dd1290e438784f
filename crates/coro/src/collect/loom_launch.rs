//! Loom models of how a collect hands out its children (`launch.rs`, `slot.rs`): every child
//! slot has one owner at a time, whoever claimed it (the collect's own start loop, or an idle
//! worker taking from the collect's offer) or the closing of a dropped collect, and once the
//! collect has made its last claim it finds every child an idle worker took.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 \
//!     cargo test -p coro --lib --release --target-dir target/loom -- loom_collect
//! ```
//!
//! The children here are counters in loom cells rather than futures: loom then checks every
//! access to a slot against every other (two owners at once is a reported data race), and the
//! counts show that each child was polled or dropped unstarted exactly once.
//!
//! - `loom_collect_start_races_taker`: the collect's start loop claims and polls children
//!   while an idle worker takes one; every child is polled once, and the list of taken
//!   children the collect reads after its last claim holds exactly the taker's, also when
//!   that claim was of the last index (no failing claim follows it). (It fails if the taker
//!   raises `tried_taking` after its claim instead of before.)
//!   The taker copies the collect's chain of frames (`awaiter.rs`) for its driver while the
//!   collect lends it: reading the taken list ends the loan, and loom reports a taker's read
//!   of the loan that is not ordered before. (It fails if the taker copies the chain once it
//!   has released the taken list's lock: a child already handed to its driver, linked too
//!   late.)
//! - `loom_collect_start_races_taker_and_a_suspended_child`: the same, with the collect also
//!   copying the chain for a child that suspended; the two copies race for the first.
//! - `loom_collect_close_races_taker`: a dropped collect closes (dropping the children nobody
//!   claimed) while an idle worker takes one; every child is polled or dropped, once, and a
//!   taker's read of the collect's lent chain comes before closing ends the loan. (It fails if
//!   closing also drops the last claimed slot.)

use super::{Collect, Driven};
use crate::collect::awaiter::AwaiterChain;
use crate::collect::slot::ChildSlots;
use crate::task::context::TaskContext;
use coro_executor::trace::Frame;
use coro_loom::UnsafeCell;
use coro_loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use coro_loom::thread;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

/// What happened to a child: `POLLED` added once per poll, `DROPPED` once per drop.
const POLLED: u32 = 1;
const DROPPED: u32 = 100;
const CHILDREN: usize = 3;

/// Children that count what is done to them.
struct Counted {
    cells: Vec<UnsafeCell<u32>>,
}

// SAFETY: the model shares the cells exactly as a collect shares its slots; a second owner at
// once is what loom is here to report.
unsafe impl Sync for Counted {}

impl Counted {
    fn new() -> Counted {
        Counted {
            cells: (0..CHILDREN).map(|_| UnsafeCell::new(0)).collect(),
        }
    }

    /// What was done to each child, once the model's threads are joined.
    fn outcomes(&self) -> Vec<u32> {
        // SAFETY: every other thread of the model has been joined.
        self.cells
            .iter()
            .map(|c| c.with(|v| unsafe { *v }))
            .collect()
    }
}

impl ChildSlots for Counted {
    fn len(&self) -> usize {
        CHILDREN
    }

    unsafe fn poll(
        &self,
        index: usize,
        _: Option<&TaskContext>,
        _: &mut Context<'_>,
    ) -> Poll<bool> {
        // SAFETY: the caller owns the slot (what the model checks).
        self.cells[index].with_mut(|v| unsafe { *v += POLLED });
        Poll::Ready(false)
    }

    unsafe fn frame(&self, _: usize) -> Option<Frame> {
        None
    }

    unsafe fn drop_unstarted(&self, index: usize) {
        // SAFETY: the caller owns the slot (what the model checks).
        self.cells[index].with_mut(|v| unsafe { *v += DROPPED });
    }
}

/// An idle worker taking from `collect`'s offer: the claimed child is polled there at once
/// (its driver's first poll), and counted in `took`.
fn take(collect: &Collect<Counted>, took: &AtomicUsize) {
    collect.take_with(|index, _awaiter| {
        let mut cx = Context::from_waker(Waker::noop());
        // SAFETY: `take_with` hands us the claimed slot.
        let _ = unsafe { collect.poll_child(index, false, &mut cx) };
        took.fetch_add(1, SeqCst);
        Driven {
            index,
            handle: None,
        }
    });
}

/// A thread that takes one child from `collect`'s offer, as an idle worker would.
fn spawn_taker(collect: &Arc<Collect<Counted>>, took: &Arc<AtomicUsize>) -> thread::JoinHandle<()> {
    let (collect, took) = (collect.clone(), took.clone());
    thread::spawn(move || take(&collect, &took))
}

/// The collect's start poll racing an idle worker that takes a child; `suspends`: the first
/// child the collect polls suspends, so the collect copies its chain for that child's driver
/// too.
fn start_races_taker(suspends: bool) {
    loom::model(move || {
        let collect = Collect::start(Counted::new(), false);
        let took = Arc::new(AtomicUsize::new(0));
        // `run`'s start loop: the first claim before offering (the spawn stands for the
        // post, which releases it to takers), then the rest while offering, then its read of
        // what was taken.
        let first = Collect::claim_first(&collect);
        let chain = AwaiterChain::here();
        // SAFETY: before the post; the chain outlives the loan (`take_taken` ends it).
        unsafe { collect.lent.lend(&chain) };
        let taker = spawn_taker(&collect, &took);
        let mut cx = Context::from_waker(Waker::noop());
        collect.claim_each(first, |index| {
            // SAFETY: the claim made the slot ours.
            let _ = unsafe { collect.poll_child(index, false, &mut cx) };
            if suspends && index == 0 {
                // The child suspended: its driver gets the collect's chain.
                // SAFETY: this is the collect's start poll, on its own thread.
                drop(unsafe { chain.frames() });
            }
        });
        // Ends the loan of the chain.
        let taken = collect.take_taken();
        assert_eq!(
            taken.len(),
            took.load(SeqCst),
            "the collect missed a child an idle worker took"
        );
        taker.join().unwrap();
        assert_eq!(collect.children().outcomes(), [POLLED; CHILDREN]);
    });
}

#[test]
fn loom_collect_start_races_taker() {
    // The taker's copy of the collect's chain is the first.
    start_races_taker(false);
}

#[test]
fn loom_collect_start_races_taker_and_a_suspended_child() {
    // The collect copies the chain too: either copy may come first, the other shares it.
    start_races_taker(true);
}

#[test]
fn loom_collect_close_races_taker() {
    loom::model(|| {
        let collect = Collect::start(Counted::new(), false);
        let took = Arc::new(AtomicUsize::new(0));
        let taker = spawn_taker(&collect, &took);
        // The collect is dropped before starting anything.
        collect.close();
        taker.join().unwrap();
        let outcomes = collect.children.outcomes();
        assert!(
            outcomes.iter().all(|&o| o == POLLED || o == DROPPED),
            "a child was handled twice or not at all: {outcomes:?}"
        );
        let polled = outcomes.iter().filter(|&&o| o == POLLED).count();
        assert_eq!(polled, took.load(SeqCst));
    });
}
