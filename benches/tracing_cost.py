#!/usr/bin/env python3
"""Measures what tracing costs: coro's benches built as shipped (tracing on) against the same
benches built with `--cfg coro_untraced` (tracing compiled out), in alternating processes.

Usage: python3 benches/tracing_cost.py --runs N [CRITERION_ARGS...]
       python3 benches/tracing_cost.py --instructions

Each of the N rounds runs, in two fresh processes, first the traced build and then the
untraced one (in its own target directory, `target/untraced`, so neither rebuilds the other):
`cargo bench -p coro-benches --bench rt_multi_threaded -- /coro CRITERION_ARGS` (coro's engine
and Task-layer functions only) and `--bench task_chain -- coro_task CRITERION_ARGS`. It then
prints, for every coro function, the median time traced and untraced and the median of the N
per-round ratios traced / untraced with their range: the cost of tracing, 1.00 being free.

With `--instructions` it instead counts instructions, which do not vary from run to run as
times do on a small shared machine: it builds `benches/examples/tracing_instructions.rs` both
ways and runs each shape under `valgrind --tool=cachegrind` for 1 and for 3 rounds, so that
the difference, divided by the operations in two rounds, is the count per operation without
the process's start and end. Each shape runs twice so: on a one-worker thread pool (what the
executor benches run on) and inside `block_wait` on the main thread. It prints, per shape and
place, instructions per operation traced and untraced and their ratio. Needs valgrind.

The untraced build exists only for this measurement: it is the same code with the frame links,
trace cells, stack publication and task states left out, and it is not a supported
configuration (task dumps show no frames in it). Python 3 standard library only.
"""

import os
import statistics
import subprocess
import sys
from pathlib import Path

from ratios import SHAPES, human, median_ns, ratio_cell

WORKSPACE = Path(__file__).resolve().parent.parent
# (bench target, criterion filter, [(group, function)])
BENCHES = [
    ("rt_multi_threaded", "/coro",
     [(shape, name) for shape in SHAPES for name in ("coro", "coro_tasks")]),
    ("task_chain", "coro_task",
     [("task_chain", "coro_task"), ("task_chain", "coro_task_suspending")]),
]


def target_dir(untraced: bool) -> Path:
    base = Path(os.environ.get("CARGO_TARGET_DIR", WORKSPACE / "target"))
    return base / "untraced" if untraced else base


def cargo_env(untraced: bool) -> dict:
    """The environment that builds the traced or the untraced benches in their own target."""
    env = dict(os.environ)
    env["CARGO_TARGET_DIR"] = str(target_dir(untraced))
    if untraced:
        env["RUSTFLAGS"] = (env.get("RUSTFLAGS", "") + " --cfg coro_untraced").strip()
    return env


def run_once(untraced: bool, criterion_args) -> dict:
    env = cargo_env(untraced)
    times = {}
    for bench, filter_, functions in BENCHES:
        cmd = ["cargo", "bench", "-q", "-p", "coro-benches", "--bench", bench, "--", filter_]
        subprocess.run(cmd + list(criterion_args), cwd=WORKSPACE, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        for group, function in functions:
            ns = median_ns(target_dir(untraced) / "criterion", group, function)
            if ns is not None:
                times[(group, function)] = ns
    return times


# (shape of examples/tracing_instructions.rs, operations per round, what one operation is)
INSTRUCTION_SHAPES = [
    ("spawn", 1_000, "spawn and await an empty task"),
    ("yield", 10_000, "one yield: wake, requeue, poll"),
    ("chain", 1_000, "one level of a synchronous Task chain"),
    ("chain_suspending", 1_000, "one level of a Task chain that suspends once"),
    ("engine_spawn", 1_000, "spawn and await an empty future on the executor itself"),
    ("engine_yield", 10_000, "one yield of a future on the executor itself"),
]


# Where `tracing_instructions` runs the shapes: (its argument, the column's title)
PLACES = [(["pool"], "on a pool worker"), ([], "inside block_wait")]


def instructions(untraced: bool, shape: str, rounds: int, place) -> int:
    binary = target_dir(untraced) / "release" / "examples" / "tracing_instructions"
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
           str(binary), shape, str(rounds)] + place
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stderr
    for line in out.splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.split(":")[-1].strip().replace(",", ""))
    raise RuntimeError(f"no instruction count in valgrind's output:\n{out}")


def count_instructions() -> int:
    for untraced in (False, True):
        env = cargo_env(untraced)
        subprocess.run(["cargo", "build", "-q", "--release", "-p", "coro-benches", "--example",
                        "tracing_instructions"], cwd=WORKSPACE, env=env, check=True)
    print("Instructions per operation (valgrind cachegrind; (3 rounds - 1 round) / 2 rounds), "
          "traced / untraced = ratio.")
    print()
    print("| shape | one operation | " + " | ".join(title for _, title in PLACES) + " |")
    print("|---|---|" + "---:|" * len(PLACES))
    for shape, ops, what in INSTRUCTION_SHAPES:
        cells = []
        for place, _ in PLACES:
            per_op = []
            for untraced in (False, True):
                delta = (instructions(untraced, shape, 3, place)
                         - instructions(untraced, shape, 1, place))
                per_op.append(delta / (2 * ops))
            traced, untraced = per_op
            cells.append(f"{traced:.0f} / {untraced:.0f} = **{traced / untraced:.2f}**")
        print(f"| `{shape}` | {what} | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    args = sys.argv[1:]
    if args == ["--instructions"]:
        return count_instructions()
    runs = args[1] if len(args) > 1 and args[0] == "--runs" else ""
    if not runs.isdigit() or int(runs) < 1:
        print("usage: python3 benches/tracing_cost.py --runs N [CRITERION_ARGS...], N > 0, "
              "or --instructions; "
              "e.g. python3 benches/tracing_cost.py --runs 3 --warm-up-time 0.5 "
              "--measurement-time 1.5", file=sys.stderr)
        return 2
    runs, criterion_args = int(runs), args[2:]
    rounds = []
    for run in range(runs):
        print(f"round {run + 1} of {runs}: traced...", file=sys.stderr)
        traced = run_once(False, criterion_args)
        print(f"round {run + 1} of {runs}: untraced...", file=sys.stderr)
        rounds.append((traced, run_once(True, criterion_args)))
    print(f"Medians over {runs} rounds; traced / untraced: median of the per-round ratios "
          "(range).")
    print()
    print("| bench | traced | untraced | traced / untraced |")
    print("|---|---:|---:|---:|")
    for _, _, functions in BENCHES:
        for key in functions:
            pairs = [(t[key], u[key]) for t, u in rounds if key in t and key in u]
            if not pairs:
                continue
            traced = statistics.median(t for t, _ in pairs)
            untraced = statistics.median(u for _, u in pairs)
            ratio = ratio_cell([t / u for t, u in pairs])
            print(f"| `{key[0]}/{key[1]}` | {human(traced)} | {human(untraced)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
