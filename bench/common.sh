# Shared by the bench/*.sh scripts: start `servetune sim` on a free loopback port, pinned to a
# core when the machine has more than one, and stop it on exit. Source it; needs $BIN.
BIN=${BIN:-build/servetune}
OUT=${OUT:-runs/bench}
mkdir -p "$OUT"
NCPU=$(nproc)
if [ "$NCPU" -ge 2 ]; then
    SIM_PIN="taskset -c 0"
    CLIENT_PIN="taskset -c 1"
else
    SIM_PIN=""
    CLIENT_PIN=""
fi

SIM_PID=""
BUSY_PIDS=""

# Stops what the script started: the simulator and the busy loops.
cleanup() {
    if [ -n "$SIM_PID" ]; then
        kill "$SIM_PID" 2>/dev/null
        wait "$SIM_PID" 2>/dev/null
        SIM_PID=""
    fi
    for p in $BUSY_PIDS; do
        kill "$p" 2>/dev/null
    done
    BUSY_PIDS=""
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM PIPE

# Keeps $1 cores busy (one busy loop each) until cleanup: another process's load on the host.
# Each loop also ends as soon as this script is gone (it checks its parent at every turn). Run a
# script that uses it under `flock -o`, so that the loops do not hold the lock.
busy_start() {
    i=0
    while [ "$i" -lt "$1" ]; do
        sh -c 'while kill -0 $PPID 2>/dev/null; do :; done' &
        BUSY_PIDS="$BUSY_PIDS $!"
        i=$((i + 1))
    done
}

start_sim() {
    log="$OUT/sim.log"
    # shellcheck disable=SC2086
    $SIM_PIN "$BIN" sim --listen 127.0.0.1:0 "$@" >"$log" 2>&1 &
    SIM_PID=$!
    for _ in $(seq 100); do
        ADDR=$(sed -n 's/^listening on //p' "$log" | head -n 1)
        [ -n "$ADDR" ] && return 0
        sleep 0.05
    done
    echo "bench: simulator did not start" >&2
    cat "$log" >&2
    exit 1
}

stop_sim() {
    kill "$SIM_PID" 2>/dev/null
    wait "$SIM_PID" 2>/dev/null
    SIM_PID=""
}

jq_py() {
    # Prints a Python expression evaluated over the JSON file $1 bound to d.
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"
}

jq_py_line() {
    # Prints a Python expression over the first JSON line of file $1 bound to r.
    python3 -c "import json,sys; r=json.loads(open(sys.argv[1]).readline()); print($2)" "$1"
}
