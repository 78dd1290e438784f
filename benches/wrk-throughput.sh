#!/usr/bin/env bash
# A throughput-bound HTTP comparison: coro_hyper::serve (benches/examples/throughput_coro.rs)
# against hyper 1.x's standard server loop on tokio (benches/examples/throughput_tokio.rs), both
# with 2 workers, under `wrk --latency -t2`, HTTP/1.1 keep-alive on 127.0.0.1. Nothing in either
# service sleeps (unlike benches/wrk.sh's, whose simulated backends cap it near 10k req/s), so
# this measures the IO path and the scheduler.
#
# Usage: benches/wrk-throughput.sh [ROUNDS] [DURATION]      (defaults: 3 rounds of 10s runs)
#
# - Routes: /plaintext ("Hello, World!", TechEmpower's plaintext without pipelining) and /dag
#   (three children joined, each a small CPU job around one yield).
# - For each round, for each route and for 64 and 256 connections, runs coro then tokio.
# - Prints every run, then a markdown table: the median req/s and p99 latency of each server over
#   the rounds, and the coro/tokio ratios. Server and wrk share the machine's cores.
# - CORO_BIN / TOKIO_BIN name other server binaries (to compare builds of coro side by side).
#
# Total time with the defaults: about 3 minutes after the build. Run it holding the bench lock
# (`flock /tmp/coro-bench.lock benches/wrk-throughput.sh`) on a shared machine.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-10s}
ROUTES=(plaintext dag)
CONNECTIONS=(64 256)
CORO_PORT=${CORO_PORT:-18082}
TOKIO_PORT=${TOKIO_PORT:-18083}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
WORK=$(mktemp -d)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v wrk >/dev/null; then
    echo "wrk is missing: installing it with apt-get" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update && $SUDO apt-get install -y wrk
fi

if [ -z "${CORO_BIN:-}" ] || [ -z "${TOKIO_BIN:-}" ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p coro-benches \
        --example throughput_coro --example throughput_tokio
fi
CORO_BIN=${CORO_BIN:-$CARGO_TARGET_DIR/release/examples/throughput_coro}
TOKIO_BIN=${TOKIO_BIN:-$CARGO_TARGET_DIR/release/examples/throughput_tokio}

start_server() { # name port command...
    local name=$1 port=$2
    shift 2
    "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do
        if curl -fs -o /dev/null "http://127.0.0.1:$port/plaintext" 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "$name did not start:" >&2
    cat "$WORK/$name.log" >&2
    exit 1
}

start_server coro "$CORO_PORT" "$CORO_BIN" --serve "127.0.0.1:$CORO_PORT"
start_server tokio "$TOKIO_PORT" "$TOKIO_BIN" --serve "127.0.0.1:$TOKIO_PORT"

# Latency as wrk prints it (850.00us, 1.20ms, 2.00s) in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else { print "nan" }
    }'
}

run() { # port route connections duration -> "req/s p99_ms errors"
    local out
    out=$(wrk --latency -t2 -c"$3" -d"$4" "http://127.0.0.1:$1/$2" 2>&1)
    local rps p99 errors
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    errors=$(awk '/Non-2xx|Socket errors/ { e = e $0 "; " } END { print (e == "" ? "-" : e) }' <<<"$out")
    echo "$rps $p99 $errors"
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "warming up both servers (2s each)"
run "$CORO_PORT" plaintext 64 2s >/dev/null
run "$TOKIO_PORT" plaintext 64 2s >/dev/null

echo "uptime: $(uptime)"
for round in $(seq "$ROUNDS"); do
    for route in "${ROUTES[@]}"; do
        for c in "${CONNECTIONS[@]}"; do
            for server in coro tokio; do
                port=$CORO_PORT
                [ "$server" = tokio ] && port=$TOKIO_PORT
                read -r rps p99 errors < <(run "$port" "$route" "$c" "$DURATION")
                printf 'round %d  %-5s  /%-9s -c%-3d  %10s req/s  p99 %8s ms  errors: %s\n' \
                    "$round" "$server" "$route" "$c" "$rps" "$p99" "$errors"
                echo "$rps" >>"$WORK/$server-$route-$c.rps"
                echo "$p99" >>"$WORK/$server-$route-$c.p99"
            done
        done
    done
done
echo "uptime: $(uptime)"

echo
echo "| route, connections | coro req/s | tokio req/s | coro/tokio req/s | coro p99 | tokio p99 | coro/tokio p99 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for route in "${ROUTES[@]}"; do
    for c in "${CONNECTIONS[@]}"; do
        crps=$(median <"$WORK/coro-$route-$c.rps")
        trps=$(median <"$WORK/tokio-$route-$c.rps")
        cp99=$(median <"$WORK/coro-$route-$c.p99")
        tp99=$(median <"$WORK/tokio-$route-$c.p99")
        awk -v r="$route" -v c="$c" -v cr="$crps" -v tr="$trps" -v cp="$cp99" -v tp="$tp99" 'BEGIN {
            printf "| /%s c%d | %.0f | %.0f | %.2fx | %.2f ms | %.2f ms | %.2fx |\n", r, c, cr, tr, cr / tr, cp, tp, cp / tp
        }'
    done
done
echo
echo "medians of $ROUNDS rounds of wrk --latency -t2 -d$DURATION on 127.0.0.1, runs alternating coro and tokio"
