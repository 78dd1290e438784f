# The parts benches/wrk.sh and benches/wrk-throughput.sh share; sourced, not run.
#
# Sets WORK (a temporary directory, removed at exit with every server started through
# start_server), installs wrk with apt-get if it is missing, and defines start_server, to_ms,
# wrk_run and median.

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

# Starts a server in the background and waits until URL answers (10 s at most).
start_server() { # name url command...
    local name=$1 url=$2
    shift 2
    "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 100); do
        if curl -fs -o /dev/null "$url" 2>/dev/null; then return; fi
        sleep 0.1
    done
    echo "$name did not start:" >&2
    cat "$WORK/$name.log" >&2
    exit 1
}

# Latency as wrk prints it (850.00us, 1.20ms, 2.00s) in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else { print "nan" }
    }'
}

# Runs wrk with --latency -t2 and the given arguments; prints "req/s p99_ms errors".
wrk_run() { # wrk arguments...
    local out
    out=$(wrk --latency -t2 "$@" 2>&1)
    local rps p99 errors
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    errors=$(awk '/Non-2xx|Socket errors/ { e = e $0 "; " } END { print (e == "" ? "-" : e) }' <<<"$out")
    echo "$rps $p99 $errors"
}

# The median of the numbers on stdin, one a line.
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
