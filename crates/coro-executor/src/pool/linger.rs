//! The searcher's linger (Go's spinning threads), and the signal it follows: a searcher that
//! found nothing searches again for a while instead of parking at once, while another worker is
//! awake, for as long as lingering saves wake-ups.
//!
//! What a linger is for: while a worker searches, a task pushed elsewhere wakes nobody (Go's
//! `wakep` wakes a parked worker only if nobody is searching). Without it, a worker whose tasks
//! keep waking each other into its next slot (a channel ping-pong) woke the parked worker about
//! every 14 µs, paying a futex wake each time for a worker that found the task already run and
//! parked again. Note that such a linger never finds work itself (the busy worker runs the task
//! from its next slot): what it earns is the wake-ups it absorbs, so that is what it counts.
//! What it costs: every pass is CPU taken from the other threads of the machine; in an
//! IO-bound client sharing its cores with its database, a fixed 50 µs linger after every
//! wake-up was an eighth of all CPU samples and absorbed almost nothing.
//!
//! The rule:
//! - a push that finds a searcher does not wake a parked worker; if a linger is watching, the
//!   push counts itself as absorbed ([`Absorbed::note`], where the push already reads the
//!   searcher count);
//! - a linger goes on, pass after pass, while pushes keep being absorbed: it parks after
//!   `patience` passes in a row during which none was, or at the latest after `SEARCH_LINGER`
//!   (in the models: after `MODEL_PASSES` passes);
//! - each worker's `patience` (1 to [`MAX_PATIENCE`] passes) follows what its lingers earned:
//!   a linger that absorbed a push or found work doubles it; one that did neither is judged
//!   when the worker is next woken: by a push less than `SEARCH_LINGER` after it parked, that
//!   wake-up is one a longer linger would have absorbed (the pushes came further apart than
//!   the passes it waited through), and the patience doubles; later, or woken otherwise, the
//!   linger was right to give up, and it halves.
//!
//! A socket wait is not a push: the event it waits for reaches no queue a searcher reads, but the
//! OS, where nobody waits while a searcher lingers (the parked worker that would is the one that
//! lingers). So a socket wait that finds a searcher while nobody waits in the OS asks it to look
//! there ([`LookAtIo`]) instead of counting as absorbed, and the linger's next pass polls the OS
//! without waiting (Go's `findRunnable` polls the network before it steals). Counting those
//! waits as absorbed kept lingers spinning for their whole bound while the events they were
//! waiting for sat in the OS, until the busy worker's look on its 61st tick. Only a requested
//! look is made: looking on every pass cost a server's tail latency (benches/README.md, "HTTP
//! client").
//!
//! A ping-pong's lingers absorb a push every pass and so keep lingering the whole bound; when
//! the pair is split over two workers, so that its pushes come a few µs apart, the quick
//! wake-ups grow the patience until the lingers absorb them. A pool whose lingers absorb
//! nothing and whose workers sleep longer than the bound backs off to one pass per linger.
//!
//! The linger is counted in passes, so that the loom and shuttle models, which have no clock,
//! run it too (`loom_protocol.rs` runs the pool's own worker loop, linger included); only the
//! time bound is left out of them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// The longest a linger lasts, whatever it absorbs: then the searcher parks, and the next push
/// that finds nobody searching wakes it.
#[cfg(not(any(loom, shuttle)))]
const SEARCH_LINGER: std::time::Duration = std::time::Duration::from_micros(50);

/// The most passes a linger makes in the models: two, so that a linger goes round more than
/// once, and few enough to keep their state space small.
#[cfg(any(loom, shuttle))]
const MODEL_PASSES: u32 = 2;

/// The most quiet passes in a row a linger waits through, which a fresh worker starts with: a
/// pass is a search and a pause (see [`pause`]), about 1 µs on a 2-core AMD EPYC,
/// so that the 50 µs bound, not the patience, ends a linger that keeps paying. In the models,
/// `MODEL_PASSES`.
#[cfg(not(any(loom, shuttle)))]
pub(super) const MAX_PATIENCE: u32 = 64;
#[cfg(any(loom, shuttle))]
pub(super) const MAX_PATIENCE: u32 = MODEL_PASSES;

/// Pause instructions after a pass (see [`pause`]): the passes read the other workers' queue
/// ends and next slots, lines their owners write on every wake-up.
#[cfg(not(any(loom, shuttle)))]
const LINGER_PAUSES: u32 = 32;

/// The pool's count of pushes absorbed by a searcher while a linger watched: what lingers earn.
///
/// One word, `count << 1 | watched`, on its own cache line. A push that finds a searcher reads
/// it (one relaxed load, beside its read of the searcher count) and writes it only if a linger
/// set `watched`: it then bumps the count and clears the bit. A linger re-arms the bit on each
/// pass that saw the count move. So a busy pool whose searchers do not linger only reads the
/// word, and a linger costs its pushers one write per pass. Plain loads and stores, no
/// read-modify-write: two pushes racing may count once, which is enough, since a linger only
/// asks whether the count moved.
///
/// A heuristic outside the wake/park protocol (it only chooses between another search pass and
/// parking, both of which the protocol makes safe), so it is std's atomic in the models too:
/// the checkers need not switch threads at it.
#[derive(Default)]
#[repr(align(128))]
pub(super) struct Absorbed(AtomicUsize);

const WATCHED: usize = 1;

impl Absorbed {
    /// A push found a searcher (and so woke nobody): counts it if a linger watches.
    #[inline]
    pub(super) fn note(&self) {
        let word = self.0.load(Relaxed);
        if word & WATCHED != 0 {
            // `count << 1 | 1` plus one: the count bumped, the bit cleared.
            self.0.store(word + 1, Relaxed);
        }
    }

    /// The count so far, and the bit set, so that the next absorbed push counts.
    pub(super) fn watch(&self) -> usize {
        let word = self.0.load(Relaxed);
        if word & WATCHED == 0 {
            self.0.store(word | WATCHED, Relaxed);
        }
        word >> 1
    }
}

/// A socket wait's request that a searcher look at the OS: set by a task that starts waiting
/// on a socket while nobody waits in the OS and a worker searches (`Idle::io_wait_should_wake`),
/// taken by the next linger pass, which then polls the OS without waiting. On its own cache
/// line, like [`Absorbed`]: the waits of a busy worker only read it once it is set.
///
/// A heuristic beside the protocol, as [`Absorbed`] is: the searcher it asks must park (and
/// then wait in the OS itself) or find work (and then, the last searcher, wake a parked
/// worker) whether or not it looks, so a request that goes unseen delays an event no more than
/// before there were requests.
#[derive(Default)]
#[repr(align(128))]
pub(super) struct LookAtIo(AtomicBool);

impl LookAtIo {
    /// A socket wait found a searcher while nobody waited in the OS.
    #[inline]
    pub(super) fn ask(&self) {
        if !self.0.load(Relaxed) {
            self.0.store(true, Relaxed);
        }
    }

    /// Whether a look was asked for since the last one; takes the request.
    #[inline]
    pub(super) fn take(&self) -> bool {
        self.0.load(Relaxed) && self.0.swap(false, Relaxed)
    }
}

/// One worker's linger: the one under way, and how patient the next may be.
#[derive(Debug)]
pub(super) struct Linger {
    /// Passes made in the linger under way (0: none is under way).
    passes: u32,
    /// Passes in a row, in the linger under way, that absorbed no push.
    quiet: u32,
    /// Whether the linger under way absorbed a push or found work.
    paid: bool,
    /// The last linger absorbed nothing, and waits for the next wake-up to be judged.
    vain: bool,
    /// The absorbed count when the linger under way last looked.
    seen: usize,
    /// Quiet passes in a row after which a linger parks: 1 to [`MAX_PATIENCE`].
    patience: u32,
    /// When the linger under way began.
    #[cfg(not(any(loom, shuttle)))]
    began: std::time::Instant,
    /// The longest a linger lasts: `SEARCH_LINGER` (the unit tests lift it).
    #[cfg(not(any(loom, shuttle)))]
    bound: std::time::Duration,
    /// When this worker last parked.
    #[cfg(not(any(loom, shuttle)))]
    parked: std::time::Instant,
}

impl Linger {
    pub(super) fn new() -> Linger {
        Linger {
            passes: 0,
            quiet: 0,
            paid: false,
            vain: false,
            seen: 0,
            patience: MAX_PATIENCE,
            #[cfg(not(any(loom, shuttle)))]
            began: std::time::Instant::now(),
            #[cfg(not(any(loom, shuttle)))]
            bound: SEARCH_LINGER,
            #[cfg(not(any(loom, shuttle)))]
            parked: std::time::Instant::now(),
        }
    }

    /// A linger with no time bound, so that the passes a test counts do not depend on the
    /// speed of the build.
    #[cfg(all(test, not(any(loom, shuttle))))]
    fn unbounded() -> Linger {
        Linger {
            bound: std::time::Duration::MAX,
            ..Linger::new()
        }
    }

    /// After a search that found nothing, while this worker searches and another is awake:
    /// true to search again (after [`pause`]), false to park (the linger is over).
    pub(super) fn another_pass(&mut self, absorbed: &Absorbed) -> bool {
        let count = absorbed.watch();
        if self.passes == 0 {
            // A vain linger whose worker was not woken by a push since (it found work, or woke
            // for its own IO or timers) gets no credit for a quick wake-up.
            self.judge_vain(false);
            self.seen = count;
            self.quiet = 0;
            self.paid = false;
            #[cfg(not(any(loom, shuttle)))]
            {
                self.began = std::time::Instant::now();
            }
        } else if count != self.seen {
            self.seen = count;
            self.quiet = 0;
            self.paid = true;
        } else {
            self.quiet += 1;
        }
        if self.quiet >= self.patience || self.out_of_time() {
            self.end();
            return false;
        }
        self.passes += 1;
        true
    }

    /// Whether the linger under way reached its bound.
    #[cfg(not(any(loom, shuttle)))]
    fn out_of_time(&self) -> bool {
        self.passes != 0 && self.began.elapsed() >= self.bound
    }

    #[cfg(any(loom, shuttle))]
    fn out_of_time(&self) -> bool {
        self.passes >= MODEL_PASSES
    }

    /// The worker found work: a linger under way paid.
    #[inline]
    pub(super) fn found_work(&mut self) {
        if self.passes != 0 {
            self.paid = true;
            self.end();
        }
    }

    /// The linger under way (if any) is over: the worker parks, stopped searching, or nobody
    /// else is awake. One that paid doubles the patience; a vain one waits for its verdict.
    pub(super) fn end(&mut self) {
        if self.passes == 0 {
            return;
        }
        self.passes = 0;
        if self.paid {
            self.patience = (self.patience * 2).min(MAX_PATIENCE);
        } else {
            self.vain = true;
        }
    }

    /// The worker parks (after [`end`](Self::end)): the time a wake-up is measured from.
    pub(super) fn parking(&mut self) {
        #[cfg(not(any(loom, shuttle)))]
        {
            self.parked = std::time::Instant::now();
        }
    }

    /// A notifier woke the worker, for a push that found nobody searching: the verdict on the
    /// vain linger before the park, if there was one. The models have no clock, and count
    /// every wake-up as late.
    pub(super) fn woken(&mut self) {
        #[cfg(not(any(loom, shuttle)))]
        let soon = self.parked.elapsed() < SEARCH_LINGER;
        #[cfg(any(loom, shuttle))]
        let soon = false;
        self.judge_vain(soon);
    }

    /// Settles a vain linger's verdict: `longer_would_pay`, the patience doubles, else it halves.
    fn judge_vain(&mut self, longer_would_pay: bool) {
        if std::mem::take(&mut self.vain) {
            self.patience = if longer_would_pay {
                (self.patience * 2).min(MAX_PATIENCE)
            } else {
                (self.patience / 2).max(1)
            };
        }
    }

    /// Quiet passes in a row after which the next linger parks.
    #[cfg(all(test, not(any(loom, shuttle))))]
    fn patience(&self) -> u32 {
        self.patience
    }
}

/// The pause after a pass: [`LINGER_PAUSES`] pause instructions, and every
/// [`YIELD_EVERY`]th time a `sched_yield` instead, which hands the CPU to another thread
/// waiting for it on this core (a database's backend, a load generator, another process's
/// worker) and returns at once when there is none. A linger of pause loops alone held its core
/// for up to 50 µs while such a thread waited: a PostgreSQL client on 2 cores beside its server
/// served fewer queries per second than tokio's, whose workers park at once (benches/README.md,
/// "The linger yields"). A yield after every pass instead cost the pool's own shapes (a chain of
/// spawns, an unbounded MPMC channel) a syscall per pass. In a model, no pause at all: the
/// passes' own atomic operations are the checker's switch points, and a yield there would hand
/// the turn to the other threads after every pass, so that a linger could end before they moved
/// only by preempting them at each pass, which a preemption bound of two leaves unexplored.
pub(super) fn pause() {
    #[cfg(not(any(loom, shuttle)))]
    if PAUSES.with(|n| {
        n.set(n.get().wrapping_add(1));
        n.get() % YIELD_EVERY == 0
    }) {
        std::thread::yield_now();
    } else {
        for _ in 0..LINGER_PAUSES {
            std::hint::spin_loop();
        }
    }
}

/// Every this many pauses of a thread's lingers, one yields the CPU (see [`pause`]).
#[cfg(not(any(loom, shuttle)))]
const YIELD_EVERY: u32 = 4;

#[cfg(not(any(loom, shuttle)))]
std::thread_local! {
    /// This thread's pauses so far (wrapping): which of them yields.
    static PAUSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

#[cfg(all(test, not(any(loom, shuttle))))]
mod tests {
    use super::*;

    /// Lingers with nothing absorbed until the linger parks, then is woken late (or, with
    /// `soon`, at once); returns the passes it made.
    fn linger_in_vain(linger: &mut Linger, absorbed: &Absorbed, soon: bool) -> u32 {
        let mut passes = 0;
        while linger.another_pass(absorbed) {
            passes += 1;
        }
        linger.parking();
        if !soon {
            std::thread::sleep(SEARCH_LINGER * 2);
        }
        linger.woken();
        passes
    }

    /// A fresh unbounded linger after `vain` lingers in vain, each followed by a long sleep.
    fn after_vain_lingers(vain: usize) -> (Linger, Absorbed) {
        let (mut linger, absorbed) = (Linger::unbounded(), Absorbed::default());
        for _ in 0..vain {
            linger_in_vain(&mut linger, &absorbed, false);
        }
        (linger, absorbed)
    }

    #[test]
    fn a_fresh_worker_waits_through_its_whole_patience() {
        assert_eq!(
            linger_in_vain(&mut Linger::unbounded(), &Absorbed::default(), false),
            MAX_PATIENCE
        );
    }

    #[test]
    fn a_linger_that_keeps_absorbing_pushes_ends_at_the_time_bound() {
        let (mut linger, absorbed) = (Linger::new(), Absorbed::default());
        let start = std::time::Instant::now();
        while linger.another_pass(&absorbed) {
            absorbed.note();
        }
        assert!(start.elapsed() >= SEARCH_LINGER);
    }

    #[test]
    fn lingers_that_absorb_nothing_before_a_long_sleep_back_off_to_one_pass() {
        let (mut linger, absorbed) = (Linger::unbounded(), Absorbed::default());
        let made: Vec<u32> = (0..8)
            .map(|_| linger_in_vain(&mut linger, &absorbed, false))
            .collect();
        assert_eq!(made, [64, 32, 16, 8, 4, 2, 1, 1]);
    }

    #[test]
    fn a_vain_linger_before_a_quick_wake_up_grows_the_patience() {
        let (mut linger, absorbed) = after_vain_lingers(7);
        assert_eq!(linger.patience(), 1);
        let made: Vec<u32> = (0..4)
            .map(|_| linger_in_vain(&mut linger, &absorbed, true))
            .collect();
        assert_eq!(
            made,
            [1, 2, 4, 8],
            "each linger was too short for the next push"
        );
    }

    #[test]
    fn a_linger_goes_on_while_pushes_are_absorbed_and_doubles_the_patience() {
        let (mut linger, absorbed) = after_vain_lingers(4);
        assert_eq!(linger.patience(), 4);
        // A push absorbed every pass: the linger goes on past its patience, as long as pushes
        // come (up to the time bound, lifted here).
        for pass in 0..100 {
            assert!(linger.another_pass(&absorbed), "parked after {pass} passes");
            absorbed.note();
        }
        linger.end();
        assert_eq!(linger.patience(), 8, "a linger that paid doubles it");
        linger.parking();
        std::thread::sleep(SEARCH_LINGER * 2);
        linger.woken();
        assert_eq!(
            linger.patience(),
            8,
            "a late wake-up after a linger that paid changes nothing"
        );
    }

    #[test]
    fn a_push_counts_only_while_a_linger_watches() {
        let absorbed = Absorbed::default();
        absorbed.note();
        assert_eq!(
            absorbed.watch(),
            0,
            "nobody watched: the push wrote nothing"
        );
        absorbed.note();
        absorbed.note();
        assert_eq!(
            absorbed.watch(),
            1,
            "the first push counted and cleared the bit"
        );
        assert_eq!(absorbed.watch(), 1);
    }

    #[test]
    fn a_look_is_taken_once_per_request() {
        let look = LookAtIo::default();
        assert!(!look.take(), "nobody asked");
        look.ask();
        look.ask();
        assert!(look.take(), "asked twice before the look: one look");
        assert!(!look.take(), "the look took the request");
    }

    #[test]
    fn finding_work_pays_and_a_vain_linger_not_followed_by_a_push_wake_up_halves() {
        let (mut linger, absorbed) = after_vain_lingers(5);
        assert_eq!(linger.patience(), 2);
        linger.found_work();
        assert_eq!(linger.patience(), 2, "no linger was under way");
        assert!(linger.another_pass(&absorbed));
        linger.found_work();
        assert_eq!(linger.patience(), 4, "a linger that found work doubles it");
        // A vain linger cut short, then the worker runs and lingers again without a wake-up
        // by a push in between: judged late.
        assert!(linger.another_pass(&absorbed));
        linger.end();
        assert_eq!(linger.patience(), 4, "judged at the next wake-up or linger");
        assert!(linger.another_pass(&absorbed));
        assert_eq!(linger.patience(), 2);
    }
}
