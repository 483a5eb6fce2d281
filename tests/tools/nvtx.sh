#!/bin/sh
# TAP: the actor's NVTX ranges as a profiler sees them.  tests/support/
# nvtx_probe.c is loaded through NVTX_INJECTION64_PATH, as Nsight Systems
# is, and counts what the library tells it while tools/examples/queries.c
# runs 8 queries (24 allocations, 24 frees, 24 memsets) on the sim.
#   nvtx.sh DV_EXAMPLE_QUERIES LIBNVTX_PROBE WORK_DIR
example=$1 probe=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
out=$work/nvtx.txt
echo "1..6"
NVTX_INJECTION64_PATH=$probe NVTX_PROBE_OUT=$out DV_BACKEND=sim "$example" >/dev/null 2>"$work/err"
rc=$?
n=0 failed=0
check() {
    n=$((n + 1))
    if [ "$2" = yes ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; failed=1; fi
}
yes_if() { if "$@"; then echo yes; else echo no; fi; }
check "the example ran with the probe loaded" "$(yes_if test $rc = 0 -a -s "$out")"
check "the domain \"devactor\"" "$(yes_if grep -qx 'domain devactor' "$out")"
check "the actor's thread named \"devactor device 0\"" \
    "$(yes_if grep -qx 'thread devactor device 0' "$out")"
check "a range per allocation, free and memset (24 each)" "$(yes_if test \
    "$(grep -c -x -e 'push allocate 24' -e 'push free 24' -e 'push memset 24' "$out")" = 3)"
pushes=$(awk '$1 == "push" {s += $NF} END {print s + 0}' "$out")
pops=$(awk '$1 == "pops" {print $2}' "$out")
check "every range pushed was popped ($pushes, $pops)" "$(yes_if test "$pushes" = "$pops" -a "$pushes" -gt 0)"
check "every range named (registered strings)" "$(yes_if grep -qx 'unnamed 0' "$out")"
[ $failed = 0 ] || sed 's/^/# /' "$out" "$work/err"
exit $failed
