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
# - For each round, for each route and for 64 and 256 connections, runs coro then tokio (then
#   base, if given).
# - Prints every run, then a markdown table: the median req/s and p99 latency of each server over
#   the rounds, and its ratios to tokio's. Servers and wrk share the machine's cores.
# - CORO_BIN / TOKIO_BIN name other server binaries; BASE_BIN adds a third server, "base" (say,
#   throughput_coro built from another commit), run in the same rounds, so that two builds of
#   coro are compared side by side with tokio under the same load.
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
BASE_PORT=${BASE_PORT:-18084}
SERVERS=(coro tokio)
if [ -n "${BASE_BIN:-}" ]; then SERVERS=(coro tokio base); fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
source "$HERE/wrk-common.sh"

if [ -z "${CORO_BIN:-}" ] || [ -z "${TOKIO_BIN:-}" ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p coro-benches \
        --example throughput_coro --example throughput_tokio
fi
CORO_BIN=${CORO_BIN:-$CARGO_TARGET_DIR/release/examples/throughput_coro}
TOKIO_BIN=${TOKIO_BIN:-$CARGO_TARGET_DIR/release/examples/throughput_tokio}

start_server coro "http://127.0.0.1:$CORO_PORT/plaintext" "$CORO_BIN" --serve "127.0.0.1:$CORO_PORT"
start_server tokio "http://127.0.0.1:$TOKIO_PORT/plaintext" "$TOKIO_BIN" --serve "127.0.0.1:$TOKIO_PORT"
if [ -n "${BASE_BIN:-}" ]; then
    start_server base "http://127.0.0.1:$BASE_PORT/plaintext" "$BASE_BIN" --serve "127.0.0.1:$BASE_PORT"
fi
port_of() {
    case $1 in
        coro) echo "$CORO_PORT" ;;
        base) echo "$BASE_PORT" ;;
        tokio) echo "$TOKIO_PORT" ;;
    esac
}

run() { # port route connections duration -> "req/s p99_ms errors"
    wrk_run -c"$3" -d"$4" "http://127.0.0.1:$1/$2"
}

echo "warming up the servers (2s each)"
for server in "${SERVERS[@]}"; do
    run "$(port_of "$server")" plaintext 64 2s >/dev/null
done

echo "uptime: $(uptime)"
for round in $(seq "$ROUNDS"); do
    for route in "${ROUTES[@]}"; do
        for c in "${CONNECTIONS[@]}"; do
            for server in "${SERVERS[@]}"; do
                read -r rps p99 errors < <(run "$(port_of "$server")" "$route" "$c" "$DURATION")
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
echo "| route, connections | server | req/s | p99 | req/s vs tokio | p99 vs tokio |"
echo "|---|---|---:|---:|---:|---:|"
for route in "${ROUTES[@]}"; do
    for c in "${CONNECTIONS[@]}"; do
        trps=$(median <"$WORK/tokio-$route-$c.rps")
        tp99=$(median <"$WORK/tokio-$route-$c.p99")
        for server in "${SERVERS[@]}"; do
            rps=$(median <"$WORK/$server-$route-$c.rps")
            p99=$(median <"$WORK/$server-$route-$c.p99")
            awk -v r="$route" -v c="$c" -v s="$server" -v sr="$rps" -v tr="$trps" -v sp="$p99" -v tp="$tp99" 'BEGIN {
                printf "| /%s c%d | %s | %.0f | %.2f ms | %.2fx | %.2fx |\n", r, c, s, sr, sp, sr / tr, sp / tp
            }'
        done
    done
done
echo
echo "medians of $ROUNDS rounds of wrk --latency -t2 -d$DURATION on 127.0.0.1, runs alternating ${SERVERS[*]}"
