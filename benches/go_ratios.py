#!/usr/bin/env python3
"""Runs the `channel` criterion bench and its Go twin (benches/go) back to back, N times, and
prints coro / best Rust peer and coro / Go for every shape.

Each run is one fresh process of `cargo bench -p coro-benches --bench channel -- ARGS`, then
one of the Go twin (built once with `go build`, GOMAXPROCS=2, the same shapes, item counts and
checks). Times are medians over the runs; each ratio is the median of the per-run ratios, with
their range. Go is a measuring tool here, not a dependency: CI never runs this script.

Usage: python3 benches/go_ratios.py [--runs N] [--go-args "ARGS"] [CRITERION_ARGS...]
N defaults to 1. CRITERION_ARGS go to criterion (e.g. a filter `'ping_pong/|mpmc_unbounded'`
or `--warm-up-time 0.5 --measurement-time 1.5`); --go-args go to the Go twin (default: none;
its own defaults are 1 s warm-up and 3 s measurement per shape, and `-shape REGEXP` filters).
Python 3 standard library only; needs `go` on PATH (`apt-get install golang-go`).
"""

import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ratios import BENCHES, CORO, functions_on_disk, human, is_peer, median_ns, peer_rank
from ratios import ratio_cell, workspace_criterion_dir

BENCH = "channel"
GO = "go"


def build_go_twin(workspace: Path) -> Path:
    """Builds benches/go into the target directory; returns the binary's path."""
    out = workspace_criterion_dir().parent / "go" / "channel"
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=workspace / "benches" / "go",
                   check=True)
    return out


def run_go_twin(binary: Path, go_args) -> dict:
    """One process of the Go twin: shape -> median nanoseconds per iteration."""
    done = subprocess.run([str(binary)] + go_args, check=True, capture_output=True, text=True)
    return {row["shape"]: float(row["median_ns"])
            for row in map(json.loads, done.stdout.splitlines())}


def main() -> int:
    args = sys.argv[1:]
    runs, go_args = 1, []
    while args and args[0] in ("--runs", "--go-args"):
        if len(args) < 2:
            print(f"{args[0]} needs a value, e.g. --runs 3", file=sys.stderr)
            return 2
        if args[0] == "--runs":
            if not args[1].isdigit() or int(args[1]) < 1:
                print(f"--runs needs a positive number, got {args[1]!r}", file=sys.stderr)
                return 2
            runs = int(args[1])
        else:
            go_args = shlex.split(args[1])
        args = args[2:]
    bench = BENCHES[BENCH]
    workspace = Path(__file__).resolve().parent.parent
    root = workspace_criterion_dir()
    binary = build_go_twin(workspace)
    times = {}
    for run in range(runs):
        print(f"run {run + 1} of {runs}: criterion, then Go...", file=sys.stderr)
        started = time.time()
        subprocess.run(["cargo", "bench", "-q", "-p", "coro-benches", "--bench", BENCH, "--"]
                       + args, cwd=workspace, check=True, stdout=subprocess.DEVNULL)
        for shape in bench.shapes:
            group = bench.group_prefix + shape
            for name in functions_on_disk(root, group):
                # Only what this run measured (a filter leaves older estimates on disk).
                estimates = root / group / name / "new" / "estimates.json"
                if estimates.stat().st_mtime >= started:
                    times.setdefault((shape, name), {})[run] = median_ns(root, group, name)
        for shape, ns in run_go_twin(binary, go_args).items():
            times.setdefault((shape, GO), {})[run] = ns
    names = {name for _, name in times}
    columns = [CORO] + sorted((n for n in names if is_peer(n) and n != GO), key=peer_rank)
    columns.append(GO)
    print(f"Medians over {runs} runs; ratios: median of the per-run ratios (range).")
    print()
    head = ["shape"] + columns + ["coro / best Rust peer", "coro / Go"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))
    for shape in bench.shapes:
        series = {name: times.get((shape, name), {}) for name in columns}
        if not any(series.values()):
            continue
        to_best, to_go = [], []
        for run in range(runs):
            coro = series[CORO].get(run)
            peers = [series[n][run] for n in columns if n not in (CORO, GO) and run in series[n]]
            if coro is not None and peers:
                to_best.append(coro / min(peers))
            if coro is not None and run in series[GO]:
                to_go.append(coro / series[GO][run])
        cells = [human(statistics.median(v.values())) if v else "–" for v in series.values()]
        cells += [ratio_cell(to_best) if to_best else "–", ratio_cell(to_go) if to_go else "–"]
        print(f"| `{shape}` | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
