//! The determinism check's report: where two runs of one seed first took different decisions.
//!
//! Rule: the report names the first differing decision of each run (with the stacks of the
//! tasks polled there) and the few decisions before it, which both runs share.

use coro_executor::sim::Decision;
use std::fmt::Write as _;

/// Decisions shown before the first difference, for context.
const CONTEXT: usize = 3;

/// Describes the first decision where `first` and `second` differ.
pub(super) fn first_difference(first: &[Decision], second: &[Decision]) -> String {
    let at = first
        .iter()
        .zip(second)
        .position(|(a, b)| a != b)
        .unwrap_or(first.len().min(second.len()));
    let mut text = String::new();
    if at > 0 {
        let _ = writeln!(
            text,
            "Both runs agreed up to there; the last shared decisions:"
        );
        for (index, decision) in first
            .iter()
            .enumerate()
            .take(at)
            .skip(at.saturating_sub(CONTEXT))
        {
            let _ = writeln!(text, "  #{index}: {decision}");
        }
    }
    let show = |decision: Option<&Decision>| match decision {
        Some(decision) => decision.to_string(),
        None => String::from("(the run ended here)"),
    };
    let _ = writeln!(text, "First difference, decision #{at}:");
    let _ = writeln!(text, "  first run:  {}", show(first.get(at)));
    let _ = write!(text, "  second run: {}", show(second.get(at)));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_first_differing_decision_and_both_sides() {
        let step = |worker| Decision::Idle {
            worker,
            what: "parked",
        };
        let first = [step(0), step(1), step(0)];
        let second = [step(0), step(1), step(1)];
        let text = first_difference(&first, &second);
        assert!(text.contains("decision #2"), "{text}");
        assert!(text.contains("first run:  worker 0 parked"), "{text}");
        assert!(text.contains("second run: worker 1 parked"), "{text}");
        let shorter = first_difference(&first[..2], &first);
        assert!(shorter.contains("(the run ended here)"), "{shorter}");
    }
}
