#!/usr/bin/env bash
# The service example on coro (examples/service.rs, hyper through coro-hyper) against its twin on
# tokio (benches/examples/service_tokio.rs, hyper-util's tokio server), both under `wrk --latency`.
#
# Usage: benches/wrk.sh [ROUNDS] [DURATION]      (defaults: 3 rounds of 10s runs)
#
# - Installs wrk (Debian package) with apt-get if it is missing (needs root, or sudo).
# - Builds both release binaries and starts each server on its own 127.0.0.1 port. Both have
#   2 workers: tokio's is set; coro's server runs on the default pool, one worker per core, so
#   2 on the 2-core machine the README's figures come from.
# - For each round, for 64 and 256 connections, runs coro then tokio:
#   `wrk --latency -t2 -cN -dDURATION` on /user/{id} with ids 1..64 (a small Lua script), which
#   exercises the DAG, the cache and the single-flight loads.
# - Prints every run, then a markdown table: the median req/s and p99 latency of each server over
#   the rounds, and coro/tokio ratios. Server and wrk share the machine's cores.
#
# Total time with the defaults: about 2.5 minutes after the build.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-10s}
CONNECTIONS=(64 256)
CORO_PORT=${CORO_PORT:-18080}
TOKIO_PORT=${TOKIO_PORT:-18081}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
source "$HERE/wrk-common.sh"

cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p coro-examples --example service
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p coro-benches --example service_tokio
BIN=$CARGO_TARGET_DIR/release/examples

cat >"$WORK/ids.lua" <<'LUA'
-- /user/{id}, ids 1..64 in turn per wrk thread: requests for one id overlap, as in the
-- example's own load generator.
local n = 0
request = function()
    n = n % 64 + 1
    return wrk.format("GET", "/user/" .. n)
end
LUA

start_server coro "http://127.0.0.1:$CORO_PORT/user/1" "$BIN/service" --serve "127.0.0.1:$CORO_PORT"
start_server tokio "http://127.0.0.1:$TOKIO_PORT/user/1" "$BIN/service_tokio" --serve "127.0.0.1:$TOKIO_PORT"

run() { # name port connections duration -> "req/s p99_ms errors"
    wrk_run -c"$3" -d"$4" -s "$WORK/ids.lua" "http://127.0.0.1:$2/"
}

echo "warming up both servers (2s each)"
run coro "$CORO_PORT" 64 2s >/dev/null
run tokio "$TOKIO_PORT" 64 2s >/dev/null

echo "uptime: $(uptime)"
for round in $(seq "$ROUNDS"); do
    for c in "${CONNECTIONS[@]}"; do
        for server in coro tokio; do
            port=$CORO_PORT
            [ "$server" = tokio ] && port=$TOKIO_PORT
            read -r rps p99 errors < <(run "$server" "$port" "$c" "$DURATION")
            printf 'round %d  %-5s  -c%-3d  %10s req/s  p99 %8s ms  errors: %s\n' \
                "$round" "$server" "$c" "$rps" "$p99" "$errors"
            echo "$rps" >>"$WORK/$server-$c.rps"
            echo "$p99" >>"$WORK/$server-$c.p99"
        done
    done
done
echo "uptime: $(uptime)"

echo
echo "| connections | coro req/s | tokio req/s | coro/tokio req/s | coro p99 | tokio p99 | coro/tokio p99 |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
for c in "${CONNECTIONS[@]}"; do
    crps=$(median <"$WORK/coro-$c.rps")
    trps=$(median <"$WORK/tokio-$c.rps")
    cp99=$(median <"$WORK/coro-$c.p99")
    tp99=$(median <"$WORK/tokio-$c.p99")
    awk -v c="$c" -v cr="$crps" -v tr="$trps" -v cp="$cp99" -v tp="$tp99" 'BEGIN {
        printf "| %d | %.0f | %.0f | %.2fx | %.2f ms | %.2f ms | %.2fx |\n", c, cr, tr, cr / tr, cp, tp, cp / tp
    }'
done
echo
echo "medians of $ROUNDS rounds of wrk --latency -t2 -d$DURATION on 127.0.0.1, runs alternating coro and tokio"
