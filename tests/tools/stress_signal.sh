#!/bin/sh
# TAP: SIGINT ends a dv-stress run early, with its checks and report: a
# 120 s run signalled after 3 s exits 0 well before its time, says it was
# stopped, and reports a passing result.
#   stress_signal.sh DV_STRESS
stress=$1
out=$(mktemp "${TMPDIR:-/tmp}/stress-signal.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
echo "1..2"
start=$(date +%s)
DV_BACKEND=sim "$stress" --seconds 120 --threads 2 --seed 5 >"$out" 2>/dev/null &
pid=$!
sleep 3
kill -INT "$pid"
wait "$pid"
rc=$?
took=$(($(date +%s) - start))
if [ "$rc" -eq 0 ] && [ "$took" -lt 100 ]; then
    echo "ok 1 - SIGINT after 3 s: exit $rc after ${took} s of a 120 s run"
else
    echo "not ok 1 - SIGINT after 3 s: exit $rc after ${took} s of a 120 s run"
    sed 's/^/# /' "$out"
    exit 1
fi
if grep -q "stopped early by SIGINT" "$out" && grep -q "^result: PASS" "$out"; then
    echo "ok 2 - it says it stopped early, and its report passes"
else
    echo "not ok 2 - no early-stop line or no passing result"
    sed 's/^/# /' "$out"
    exit 1
fi
