#!/usr/bin/env python3
"""Prints the README figures of `cargo bench -p coro-benches --bench collect` over N processes.

Usage: python3 benches/collect_ratios.py [--runs N] [CRITERION_ARGS...]

Runs the bench N times (default 5), each in a fresh process (`cargo bench -p coro-benches
--bench collect -- CRITERION_ARGS`), reads criterion's median point estimates from
`<target>/criterion/<group>/<function>/new/estimates.json` after each run, and prints:
- `collect_10k` and `dag`: coro's median time, the others', coro / best inline peer
  (`futures::future::join_all` of the same children in one task, polled inline as
  `collect_all_range` polls them: for `collect_10k` the like-for-like figure, the headline) and
  coro / best spawning peer (a task per child, which `collect_all_range` does not spawn; in
  `dag` coro spawns its 30 shared leaves only, see benches/collect.rs);
- `collect_3_ready`: the per-child overhead of `collect_all!` over `futures::join!`,
  (collect - join) / 30,000 children per iteration.
Each figure is the median over the runs, with the range of the per-run values in brackets.
The target directory is $CARGO_TARGET_DIR, else target/ at the workspace root. Python 3
standard library only. Every figure of a run comes from estimates that run wrote; a function it
did not write, a failed run or an estimates file that does not parse is an error (ratios.py's
checks).
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from ratios import BenchError, estimate_stamps, written_by_run

# group: (coro's function, inline peers (join_all in one task), spawning peers).
GROUPS = {
    "collect_10k": (
        "coro",
        ["tokio_join_all_inline", "async_executor_join_all_inline"],
        ["tokio_joinset", "tokio_join_all", "async_executor"],
    ),
    "dag": ("coro", ["tokio_inline"], ["tokio"]),
}
READY = ("collect_3_ready", "coro_collect_all", "futures_join")
READY_CHILDREN = 30_000


def criterion_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    root = Path(target) if target else Path(__file__).resolve().parent.parent / "target"
    return root / "criterion"


def median_ns(group: str, function: str, written: set) -> float:
    if (group, function) not in written:
        raise BenchError(f"{group}/{function}: no estimates written by this run (the bench "
                         f"failed or stopped early, or a filter left it out); refusing to use "
                         f"an older run's")
    path = criterion_dir() / group / function / "new" / "estimates.json"
    try:
        with open(path, encoding="utf-8") as f:
            return float(json.load(f)["median"]["point_estimate"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{path}: not a criterion estimates file ({e!r}); rerun the bench") from e


def one_run(criterion_args) -> dict:
    cmd = ["cargo", "bench", "-p", "coro-benches", "--bench", "collect", "--", *criterion_args]
    groups = [*GROUPS, READY[0]]
    before = estimate_stamps(criterion_dir(), groups)
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} failed (exit status {done.returncode}); run it to "
                         f"see why")
    written = written_by_run(before, estimate_stamps(criterion_dir(), groups))
    figures = {}
    for group, (coro, inline, spawning) in GROUPS.items():
        times = {name: median_ns(group, name, written) for name in [coro, *inline, *spawning]}
        figures[group] = (
            times,
            times[coro] / min(times[o] for o in inline),
            times[coro] / min(times[o] for o in spawning),
        )
    group, collect, join = READY
    figures[group] = (
        median_ns(group, collect, written) - median_ns(group, join, written)
    ) / READY_CHILDREN
    return figures


def fmt_ns(ns: float) -> str:
    for unit, scale in (("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def spread(values) -> str:
    return f"{statistics.median(values):.2f} [{min(values):.2f}-{max(values):.2f}]"


def main() -> None:
    args = sys.argv[1:]
    runs = 5
    if args[:1] == ["--runs"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            sys.exit("--runs needs a positive number of runs, e.g. --runs 5")
        runs, args = int(args[1]), args[2:]
    results = [one_run(args) for _ in range(runs)]
    print(f"{runs} runs; medians over the runs, per-run range in brackets\n")
    for group, (coro, inline, spawning) in GROUPS.items():
        cells = []
        for name in [coro, *inline, *spawning]:
            cells.append(f"{name} {fmt_ns(statistics.median(r[group][0][name] for r in results))}")
        print(f"{group}: {', '.join(cells)}")
        print(f"  coro / best inline peer (join_all in one task) "
              f"{spread([r[group][1] for r in results])}; coro / best spawning peer "
              f"{spread([r[group][2] for r in results])}")
    overheads = [r[READY[0]] for r in results]
    print(f"{READY[0]}: per-child overhead {spread(overheads)} ns")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        sys.exit(f"collect_ratios.py: {e}")
