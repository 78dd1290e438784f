#!/usr/bin/env python3
"""Prints the README table of `cargo bench -p coro-benches --bench rt_multi_threaded`, or of
another comparison bench with `--bench NAME` (`user_path`, `channel`, `http_client`).

Reads criterion's median point estimates from
`<target>/criterion/<group>/<function>/new/estimates.json` and prints a markdown table:
shape | coro | coro_tasks | tokio | async-executor | coro / best | coro_tasks / coro, where
"coro / best" is coro's median divided by min(tokio, async-executor) (below 1: coro is faster)
and the last column is the cost of coro's Task layer over its engine.

With `--bench user_path` (or `--bench channel`, `--bench ecosystem`) the columns are the
function ids found under criterion's `user_path_<shape>/` (`channel_<shape>/`) directories
(coro first, then its diagnostic rows such as `coro_boxed`, then the peers), and "coro / best"
divides coro's median by the fastest peer's, a peer being every function whose id does not
start with `coro` (`tokio`, `async_executor`, and `tokio_watch` for `fanout_10k`; `tokio`,
`async_channel` and `flume` for `channel`; `tokio` for `ecosystem`, whose groups are the shapes
themselves: `postgres_point_select/`, `redis_get/`). A dash marks a function the shape does not have.

Usage: python3 benches/ratios.py [--bench NAME] [CRITERION_DIR]
CRITERION_DIR defaults to $CARGO_TARGET_DIR/criterion, else target/criterion at the workspace
root (the parent of this script's directory). NAME defaults to rt_multi_threaded. Python 3
standard library only. This prints whatever estimates are on disk, possibly of different
invocations; it says on stderr when the oldest and newest of them were written.

Usage: python3 benches/ratios.py [--bench NAME] [--features FEATURES] --runs N [CRITERION_ARGS...]
runs the bench N times, each in a fresh process (`cargo bench -p coro-benches --bench
NAME -- CRITERION_ARGS`), and prints the same table from the N runs: each time
is the median over the runs, each ratio the median of the N per-run ratios with their range.
On a small machine one process can sit in a slow or a fast mode for its whole life (heap
layout, thread placement), so one run can mislead; N runs show the modes. After the table it
lists each run's ratios. `--features mimalloc` runs every runtime on mimalloc instead of the
system allocator.

Only estimates a run wrote count for that run: a shape whose functions the run rewrote only in
part (a bench that failed or was cut short, a filter matching part of a shape, a function the
bench no longer has), a shape measured in some runs and not in others, a run that wrote nothing,
and an estimates file that does not parse are errors, never a table that mixes in an older run
or quietly leaves a run out. Shapes no run measured (a filter) are listed as not run.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
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
# The target for coro / best (a bench may set its own).
TARGET = 0.8


@dataclass
class Bench:
    """What to read of one bench's criterion output, and how to lay out its table."""

    # The table's rows; each is the criterion group `group_prefix + shape`.
    shapes: list
    # Criterion stores the group `user_path/task_chain` as the directory `user_path_task_chain`.
    group_prefix: str = ""
    # (function id, column header) in table order; None: the function ids found on disk.
    columns: list = None
    # (numerator, denominator) function ids of an extra ratio column, or None.
    layer: tuple = None
    # The target for coro / best on this bench.
    target: float = TARGET


BENCHES = {
    "rt_multi_threaded": Bench(
        SHAPES,
        columns=[(CORO, CORO), (CORO_TASKS, CORO_TASKS)]
        + [(name, name.replace("_", "-")) for name in OTHERS],
        layer=(CORO_TASKS, CORO),
    ),
    "user_path": Bench(
        ["spawn_many_local", "task_chain", "fanout_10k", "rwlock_mixed"],
        group_prefix="user_path_",
    ),
    # Peers: `tokio` (tokio::sync::mpsc), `async_channel` and `flume` (both on async-executor).
    "channel": Bench(
        ["ping_pong", "mpmc_bounded", "mpmc_unbounded", "pipeline", "ping_pong_fresh_pool"],
        group_prefix="channel_",
    ),
    # tokio's ecosystem (tokio-postgres, redis-rs) on coro and on tokio; the peer is `tokio`.
    # The target: coro serves at least tokio's queries per second (coro / tokio <= 1.0).
    "ecosystem": Bench(["postgres_point_select", "redis_get"], target=1.0),
    # Peer: `tokio` (hyper-util's legacy client and auto server on a tokio runtime).
    "http_client": Bench(["get"], group_prefix="http_client_"),
}
DEFAULT_BENCH = "rt_multi_threaded"


def is_peer(function: str) -> bool:
    """Whether `function` is a competitor of coro's (every id not starting with `coro`)."""
    return not function.startswith(CORO)


def workspace_criterion_dir() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR")
    if target:
        return Path(target) / "criterion"
    return Path(__file__).resolve().parent.parent / "target" / "criterion"


def criterion_dir(arg=None) -> Path:
    return Path(arg) if arg else workspace_criterion_dir()


class BenchError(Exception):
    """A bench's output that cannot make a table: the message says what and how to fix it."""


def estimates_path(root: Path, group: str, function: str) -> Path:
    return root / group / function / "new" / "estimates.json"


def median_ns(root: Path, group: str, function: str):
    """The median point estimate in nanoseconds, or None if the bench has not run."""
    path = estimates_path(root, group, function)
    try:
        with open(path, encoding="utf-8") as f:
            return float(json.load(f)["median"]["point_estimate"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{path}: not a criterion estimates file ({e!r}); rerun the bench, "
                         f"or delete {path.parent.parent} if the bench no longer has "
                         f"{function!r}") from e


def functions_on_disk(root: Path, group: str) -> list:
    """The function ids criterion has estimates for in `group`."""
    path = root / group
    if not path.is_dir():
        return []
    return sorted(d.name for d in path.iterdir() if (d / "new" / "estimates.json").is_file())


def estimate_stamps(root: Path, groups) -> dict:
    """{(group, function): modification time in ns} of every estimates file in `groups`."""
    stamps = {}
    for group in groups:
        for function in functions_on_disk(root, group):
            try:
                stamps[(group, function)] = estimates_path(root, group, function).stat().st_mtime_ns
            except FileNotFoundError:
                pass  # removed since the listing: the same as never written
    return stamps


def written_by_run(before: dict, after: dict) -> set:
    """The (group, function)s whose estimates a run wrote, from the stamps around it."""
    return {key for key, stamp in after.items() if before.get(key) != stamp}


def expected_functions(bench: Bench, group: str, stamps) -> list:
    """The functions a run of `group` must write: the bench's columns, else those on disk."""
    if bench.columns is not None:
        return [name for name, _ in bench.columns]
    return sorted({function for g, function in stamps if g == group})


def run_shapes(bench: Bench, run: int, before: dict, after: dict) -> dict:
    """{shape: [functions]} of the shapes run `run` measured, each in full (else BenchError)."""
    written = written_by_run(before, after)
    measured = {}
    for shape in bench.shapes:
        group = bench.group_prefix + shape
        expected = expected_functions(bench, group, {**before, **after})
        missing = [name for name in expected if (group, name) not in written]
        if len(missing) == len(expected):
            continue  # not measured by this run (a filter); checked across runs by the caller
        if missing:
            raise BenchError(
                f"run {run + 1}: shape {shape!r}: no estimates written by this run for "
                f"{', '.join(missing)} (the bench failed or stopped early, a filter matched "
                f"part of the shape, or the bench no longer has them: then delete their "
                f"directories under the criterion dir's {group}/); refusing to mix in an "
                f"older run's")
        measured[shape] = expected
    if not measured:
        raise BenchError(f"run {run + 1} wrote no estimates for any shape of {bench.shapes} "
                         f"(did a criterion filter match nothing?)")
    return measured


def peer_rank(function: str):
    """Peers in `OTHERS` order (tokio's variants with tokio), any other after them."""
    family = [i for i, name in enumerate(OTHERS) if function.startswith(name)]
    return (family[0] if family else len(OTHERS), function)


def table_columns(bench: Bench, found) -> list:
    """The bench's columns; if it names none, `found` in order: coro, coro_*, then peers."""
    if bench.columns is not None:
        return bench.columns
    names = set(found)
    order = [CORO] if CORO in names else []
    order += sorted(n for n in names if n != CORO and not is_peer(n))
    order += sorted((n for n in names if is_peer(n)), key=peer_rank)
    return [(name, name) for name in order]


def human(ns) -> str:
    if ns is None:
        return "n/a"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}" if ns / scale < 100 else f"{ns / scale:.0f} {unit}"
    return f"{ns:.3g} ns"


def time_cell(bench: Bench, root: Path, group: str, function: str, ns) -> str:
    """`ns` in human units; a dash for a derived column this shape has no function for."""
    if ns is None and bench.columns is None and not (root / group / function).is_dir():
        return "–"
    return human(ns)


def print_header(bench: Bench, columns) -> None:
    head = ["shape"] + [header for _, header in columns] + ["coro / best"]
    if bench.layer:
        head.append(" / ".join(bench.layer))
    print("| " + " | ".join(head) + " |")
    print("|---|" + "---:|" * (len(head) - 1))


def ratio_cell(values) -> str:
    if not values:
        return "n/a"
    mid = statistics.median(values)
    if len(values) == 1:
        return f"{mid:.2f}"
    return f"{mid:.2f} ({min(values):.2f}–{max(values):.2f})"


def main_runs(bench_name: str, runs: int, criterion_args, features=None) -> int:
    bench = BENCHES[bench_name]
    root = workspace_criterion_dir()
    workspace = Path(__file__).resolve().parent.parent
    groups = [bench.group_prefix + shape for shape in bench.shapes]
    # times[(shape, function)][run]: only what that run wrote.
    times = {}
    measured_in = {shape: [] for shape in bench.shapes}
    for run in range(runs):
        print(f"run {run + 1} of {runs}...", file=sys.stderr)
        cmd = ["cargo", "bench", "-q", "-p", "coro-benches", "--bench", bench_name]
        cmd += ["--features", features] if features else []
        cmd += ["--"]
        before = estimate_stamps(root, groups)
        done = subprocess.run(cmd + list(criterion_args), cwd=workspace,
                              stdout=subprocess.DEVNULL)
        if done.returncode != 0:
            raise BenchError(f"run {run + 1}: {' '.join(cmd)} failed "
                             f"(exit status {done.returncode}); see its output above")
        after = estimate_stamps(root, groups)
        for shape, functions in run_shapes(bench, run, before, after).items():
            measured_in[shape].append(run)
            group = bench.group_prefix + shape
            for name in functions:
                times.setdefault((shape, name), {})[run] = median_ns(root, group, name)
    for shape, measured in measured_in.items():
        if measured and len(measured) != runs:
            raise BenchError(f"shape {shape!r} was measured in runs "
                             f"{', '.join(str(r + 1) for r in measured)} only, of {runs}")
    columns = table_columns(bench, {name for _, name in times})
    print(f"Medians over {runs} runs; ratios: median of the per-run ratios (range).")
    print()
    print_header(bench, columns)
    per_run = []
    for shape in bench.shapes:
        group = bench.group_prefix + shape
        if not measured_in[shape]:
            print(f"| `{shape}` | " + " | ".join(["not run"] * (len(columns) + 1
                                                            + bool(bench.layer))) + " |")
            continue
        series = {name: times.get((shape, name), {}) for name, _ in columns}
        # A derived column counts as a peer only in the shapes that have it.
        peers = [name for name in series if is_peer(name) and series[name]]
        ratios, layers = [], []
        for run in range(runs):
            if CORO in series and series[CORO] and peers:
                ratios.append(series[CORO][run] / min(series[name][run] for name in peers))
            if bench.layer:
                top, bottom = bench.layer
                layers.append(series[top][run] / series[bottom][run])
        cells = [human(statistics.median(v.values())) if v
                 else time_cell(bench, root, group, name, None)
                 for name, v in series.items()]
        cells.append(ratio_cell(ratios))
        if bench.layer:
            cells.append(ratio_cell(layers))
        print(f"| `{shape}` | " + " | ".join(cells) + " |")
        per_run.append((shape, ratios, layers))
    print()
    layer = f"; {' / '.join(bench.layer)}" if bench.layer else ""
    print(f"Per run, in run order: coro / best{layer}.")
    print()
    for shape, ratios, layers in per_run:
        within = sum(r <= bench.target for r in ratios)
        line = (f"- `{shape}`: " + " ".join(f"{r:.2f}" for r in ratios)
                + f" ({within} of {len(ratios)} at most {bench.target})")
        if bench.layer:
            line += "; " + " ".join(f"{r:.2f}" for r in layers)
        print(line)
    return 0


def main_table(bench_name: str, root: Path) -> int:
    bench = BENCHES[bench_name]
    if not root.is_dir():
        print(f"no criterion results under {root}; run the benches first", file=sys.stderr)
        return 1
    groups = [bench.group_prefix + shape for shape in bench.shapes]
    columns = table_columns(bench, [f for group in groups for f in functions_on_disk(root, group)])
    if not columns:
        print(f"no {bench_name} results under {root}; run the bench first", file=sys.stderr)
        return 1
    stamps = estimate_stamps(root, groups).values()
    if stamps:
        print("estimates written between "
              + " and ".join(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t / 1e9))
                             for t in (min(stamps), max(stamps))), file=sys.stderr)
    print_header(bench, columns)
    for shape, group in zip(bench.shapes, groups):
        values = {name: median_ns(root, group, name) for name, _ in columns}
        coro = values.get(CORO)
        known = [ns for name, ns in values.items() if is_peer(name) and ns is not None]
        ratio = f"{coro / min(known):.2f}" if coro is not None and known else "n/a"
        cells = [time_cell(bench, root, group, name, ns) for name, ns in values.items()]
        cells.append(ratio)
        if bench.layer:
            top, bottom = (values[name] for name in bench.layer)
            cells.append(f"{top / bottom:.2f}" if bottom and top is not None else "n/a")
        print(f"| `{shape}` | " + " | ".join(cells) + " |")
    return 0


def main() -> int:
    args = sys.argv[1:]
    bench_name = DEFAULT_BENCH
    features = None
    while args and args[0] in ("--bench", "--features"):
        if len(args) < 2:
            print(f"{args[0]} needs a value, e.g. python3 benches/ratios.py --bench user_path",
                  file=sys.stderr)
            return 2
        if args[0] == "--bench":
            bench_name = args[1]
        else:
            features = args[1]
        args = args[2:]
    if bench_name not in BENCHES:
        print(f"unknown bench {bench_name!r}; known: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    if args and args[0] == "--runs":
        runs = args[1] if len(args) > 1 else ""
        if not runs.isdigit() or int(runs) < 1:
            print(f"--runs needs a positive number of runs, got {runs!r}; "
                  "e.g. python3 benches/ratios.py --runs 5", file=sys.stderr)
            return 2
        return main_runs(bench_name, int(runs), args[2:], features)
    if features:
        print("--features goes with --runs: e.g. python3 benches/ratios.py --features "
              "mimalloc --runs 3", file=sys.stderr)
        return 2
    return main_table(bench_name, criterion_dir(args[0] if args else None))


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"ratios.py: {e}", file=sys.stderr)
        sys.exit(1)
