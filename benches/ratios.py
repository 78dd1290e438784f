#!/usr/bin/env python3
"""Prints the README table of `cargo bench -p coro-benches --bench rt_multi_threaded`.

Reads criterion's median point estimates from
`<target>/criterion/<group>/<function>/new/estimates.json` and prints a markdown table:
shape | coro | coro_tasks | tokio | async-executor | coro / best | coro_tasks / coro, where
"coro / best" is coro's median divided by min(tokio, async-executor) (below 1: coro is faster)
and the last column is the cost of coro's Task layer over its engine.

Usage: python3 benches/ratios.py [CRITERION_DIR]
CRITERION_DIR defaults to $CARGO_TARGET_DIR/criterion, else target/criterion at the workspace
root (the parent of this script's directory). Python 3 standard library only.

Usage: python3 benches/ratios.py [--features FEATURES] --runs N [CRITERION_ARGS...]
runs the bench N times, each in a fresh process (`cargo bench -p coro-benches --bench
rt_multi_threaded -- CRITERION_ARGS`), and prints the same table from the N runs: each time
is the median over the runs, each ratio the median of the N per-run ratios with their range.
On a small machine one process can sit in a slow or a fast mode for its whole life (heap
layout, thread placement), so one run can mislead; N runs show the modes. After the table it
lists each run's ratios. `--features mimalloc` runs every runtime on mimalloc instead of the
system allocator.
"""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SHAPES = [
    "spawn_many_local",
    "spawn_many_remote_idle",
    "spawn_many_remote_busy",
    "yield_many",
    "ping_pong",
    "chained_spawn",
]
CORO = "coro"
CORO_TASKS = "coro_tasks"
OTHERS = ["tokio", "async_executor"]
# The target for coro / best.
TARGET = 0.8


def criterion_dir() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        return Path(target) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def median_ns(root: Path, group: str, function: str):
    """The median point estimate in nanoseconds, or None if the bench has not run."""
    path = root / group / function / "new" / "estimates.json"
    try:
        with open(path, encoding="utf-8") as f:
            return float(json.load(f)["median"]["point_estimate"])
    except FileNotFoundError:
        return None


def human(ns) -> str:
    if ns is None:
        return "n/a"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns / scale < 100 else f"{ns / scale:.0f} {unit}"
    return f"{ns:.3g} ns"


def workspace_criterion_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        return Path(target) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def ratio_cell(values) -> str:
    if not values:
        return "n/a"
    mid = statistics.median(values)
    if len(values) == 1:
        return f"{mid:.2f}"
    return f"{mid:.2f} ({min(values):.2f}–{max(values):.2f})"


def main_runs(runs: int, criterion_args, features=None) -> int:
    root = workspace_criterion_dir()
    workspace = Path(__file__).resolve().parent.parent
    times = {}
    for run in range(runs):
        print(f"run {run + 1} of {runs}...", file=sys.stderr)
        cmd = ["cargo", "bench", "-q", "-p", "coro-benches", "--bench", "rt_multi_threaded"]
        cmd += ["--features", features] if features else []
        cmd += ["--"]
        subprocess.run(cmd + list(criterion_args), cwd=workspace, check=True,
                       stdout=subprocess.DEVNULL)
        for shape in SHAPES:
            for name in [CORO, CORO_TASKS] + OTHERS:
                ns = median_ns(root, shape, name)
                if ns is not None:
                    times.setdefault((shape, name), []).append(ns)
    print(f"Medians over {runs} runs; ratios: median of the per-run ratios (range).")
    print()
    print("| shape | coro | coro_tasks | tokio | async-executor | coro / best | coro_tasks / coro |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    per_run = []
    for shape in SHAPES:
        series = {name: times.get((shape, name), []) for name in [CORO, CORO_TASKS] + OTHERS}
        ratios, layers = [], []
        for run in range(runs):
            try:
                coro = series[CORO][run]
                best = min(series[name][run] for name in OTHERS)
                ratios.append(coro / best)
                layers.append(series[CORO_TASKS][run] / coro)
            except (IndexError, ValueError):
                pass
        cells = [human(statistics.median(v)) if v else "n/a" for v in series.values()]
        cells += [ratio_cell(ratios), ratio_cell(layers)]
        print(f"| `{shape}` | " + " | ".join(cells) + " |")
        per_run.append((shape, ratios, layers))
    print()
    print("Per run, in run order: coro / best; coro_tasks / coro.")
    print()
    for shape, ratios, layers in per_run:
        within = sum(r <= TARGET for r in ratios)
        print(f"- `{shape}`: " + " ".join(f"{r:.2f}" for r in ratios)
              + f" ({within} of {len(ratios)} at most {TARGET}); "
              + " ".join(f"{r:.2f}" for r in layers))
    return 0


def main() -> int:
    args = sys.argv[1:]
    features = None
    if len(args) > 1 and args[0] == "--features":
        features, args = args[1], args[2:]
    if args and args[0] == "--runs":
        runs = args[1] if len(args) > 1 else ""
        if not runs.isdigit() or int(runs) < 1:
            print(f"--runs needs a positive number of runs, got {runs!r}; "
                  "e.g. python3 benches/ratios.py --runs 5", file=sys.stderr)
            return 2
        return main_runs(int(runs), args[2:], features)
    if features:
        print("--features goes with --runs: e.g. python3 benches/ratios.py --features "
              "mimalloc --runs 3", file=sys.stderr)
        return 2
    root = criterion_dir()
    if not root.is_dir():
        print(f"no criterion results under {root}; run the benches first", file=sys.stderr)
        return 1
    print("| shape | coro | coro_tasks | tokio | async-executor | coro / best | coro_tasks / coro |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        coro = median_ns(root, shape, CORO)
        others = [median_ns(root, shape, name) for name in OTHERS]
        known = [ns for ns in others if ns is not None]
        ratio = f"{coro / min(known):.2f}" if coro is not None and known else "n/a"
        tasks = median_ns(root, shape, CORO_TASKS)
        layer = f"{tasks / coro:.2f}" if coro and tasks is not None else "n/a"
        cells = [human(coro), human(tasks)] + [human(ns) for ns in others] + [ratio, layer]
        print(f"| `{shape}` | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
