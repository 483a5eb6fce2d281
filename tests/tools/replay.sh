#!/bin/sh
# TAP: dv-replay replays allocation logs through an actor on the sim.
#   replay.sh DV_REPLAY SOURCE_DIR
# replay-ours.csv (devactor's log; 2 threads, a free by the other thread,
# a failure row and a free of a block never allocated, both skipped):
#   live after each row: 1 MiB, 3 MiB, 7 MiB (peak), -, 6, 4, -, 4.5, 0.5, 0
#   peak 7 MiB = 7340032; 4 allocations, 4 frees, 10 rows read (9 kept)
# replay-rmm.csv (RMM's; times of day, stream handles):
#   256, 8448, 73984 (peak), 73728, 8192, 139264 (peak!), 131072, 0
#   peak 139264; 4 allocations, 4 frees
replay=$1 src=$2
data=$src/tests/tools/data
n=0 failed=0
check() {
    n=$((n + 1))
    if [ "$2" = yes ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; failed=1; fi
}
field() { echo "$1" | tail -1 | cut -d, -f"$2"; }
yes_if() { if "$@"; then echo yes; else echo no; fi; }
echo "1..10"
out=$(DV_BACKEND=sim "$replay" --csv "$data/replay-ours.csv" 2>&1)
rc=$?
check "devactor's log replays without a failure (exit $rc)" "$(yes_if test $rc = 0)"
check "its trace peak is 7 MiB ($(field "$out" 5))" "$(yes_if test "$(field "$out" 5)" = 7340032)"
check "4 allocations and 4 frees, the failure row and the late free skipped" \
    "$(yes_if test "$(field "$out" 2),$(field "$out" 3),$(field "$out" 4)" = 4,4,0)"
check "devactor held at least 1 MiB at its peak, reserved at least that" \
    "$(yes_if test "$(field "$out" 6)" -ge 1048576 -a "$(field "$out" 7)" -ge "$(field "$out" 6)")"
out=$(DV_BACKEND=sim "$replay" --csv "$data/replay-rmm.csv" 2>&1)
rc=$?
check "RMM's log replays (exit $rc), peak 139264 ($(field "$out" 5))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 5)" = 139264)"
check "4 allocations and 4 frees" "$(yes_if test "$(field "$out" 2),$(field "$out" 3)" = 4,4)"
err=$(DV_BACKEND=sim "$replay" --conf budget:2M "$data/replay-ours.csv" 2>&1 >/dev/null)
rc=$?
check "under a 2 MiB budget: exit 1, the refused row named" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'line 4: 4194304 bytes: DV_EOUT_OF_BUDGET')")"
DV_BACKEND=sim "$replay" "$data/viz-bad.csv" >/dev/null 2>&1
rc=$?
check "a log that does not parse: exit 1" "$(yes_if test $rc = 1)"
"$replay" --help >/dev/null 2>&1
check "--help: exit 0" "$(yes_if test $? = 0)"
"$replay" --bogus >/dev/null 2>&1
check "an unknown option: exit 2" "$(yes_if test $? = 2)"
exit $failed
