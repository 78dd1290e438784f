//! [`Decision`]: one entry of a simulation's log of scheduling decisions, what two runs of a
//! seed are compared by.
//!
//! Rule: an entry names only what is the same in every run of a seed (logical worker indices,
//! tasks by the order the simulation first ran them, draws, virtual time), never a process-wide
//! id or an address; a task's stack rides along for the report but is left out of comparisons.

use std::fmt;
use std::time::Duration;

/// One scheduling decision of a simulation, in the order they were taken.
///
/// ```
/// use coro_executor::sim::{Decision, Simulation};
///
/// let mut sim = Simulation::new(7, 2);
/// sim.keep_log(true);
/// let done = sim.handle().spawn(async { 1 + 1 });
/// sim.run_until(|| done.is_finished()).unwrap();
/// let log = sim.take_log();
/// assert!(log.iter().any(|d| matches!(d, Decision::Ran { task: 0, .. })));
/// ```
#[derive(Clone, Debug)]
pub enum Decision {
    /// Logical worker `worker` polled the task the simulation first ran as number `task`.
    Ran {
        /// The logical worker.
        worker: usize,
        /// The task, numbered by first run.
        task: u64,
        /// The task's async stack before the poll, if the simulation logs stacks.
        stack: Option<String>,
    },
    /// Logical worker `worker` took a step that polled no task: it searched, took an offer,
    /// parked, or woke.
    Idle {
        /// The logical worker.
        worker: usize,
        /// What it did.
        what: &'static str,
    },
    /// A seeded draw: `value` for `what`.
    Draw {
        /// What the value decides.
        what: &'static str,
        /// The value drawn.
        value: u64,
    },
    /// Every task was idle: the virtual clock jumped to `to` after the simulation's start.
    Advance {
        /// The new virtual time, from the start.
        to: Duration,
    },
}

impl Decision {
    /// Folds this decision into a running hash (FNV-1a's step, a word at a time, over its
    /// fields; the stack is left out, as in comparisons).
    pub(crate) fn mix_into(&self, mut hash: u64) -> u64 {
        let mut mix = |value: u64| {
            hash = (hash ^ value)
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(29);
        };
        let text = |mix: &mut dyn FnMut(u64), text: &str| {
            for chunk in text.as_bytes().chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                mix(u64::from_le_bytes(word));
            }
        };
        match self {
            Decision::Ran { worker, task, .. } => {
                mix(1);
                mix(*worker as u64);
                mix(*task);
            }
            Decision::Idle { worker, what } => {
                mix(2);
                mix(*worker as u64);
                text(&mut mix, what);
            }
            Decision::Draw { what, value } => {
                mix(3);
                text(&mut mix, what);
                mix(*value);
            }
            Decision::Advance { to } => {
                mix(4);
                mix(to.as_nanos() as u64);
            }
        }
        hash
    }
}

impl PartialEq for Decision {
    /// Equal decisions: the stacks are not compared (they are the report, not the decision).
    fn eq(&self, other: &Decision) -> bool {
        use Decision::*;
        match (self, other) {
            (
                Ran {
                    worker: a, task: b, ..
                },
                Ran {
                    worker: c, task: d, ..
                },
            ) => a == c && b == d,
            (Idle { worker: a, what: b }, Idle { worker: c, what: d }) => a == c && b == d,
            (Draw { what: a, value: b }, Draw { what: c, value: d }) => a == c && b == d,
            (Advance { to: a }, Advance { to: b }) => a == b,
            _ => false,
        }
    }
}

impl Eq for Decision {}

impl fmt::Display for Decision {
    /// One line, plus the stack (indented) if it was logged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Ran {
                worker,
                task,
                stack,
            } => {
                write!(f, "worker {worker} polled task #{task}")?;
                if let Some(stack) = stack {
                    for line in stack.lines() {
                        write!(f, "\n    {line}")?;
                    }
                }
                Ok(())
            }
            Decision::Idle { worker, what } => write!(f, "worker {worker} {what}"),
            Decision::Draw { what, value } => write!(f, "drew {value} for {what}"),
            Decision::Advance { to } => write!(f, "virtual clock jumped to {to:?}"),
        }
    }
}
