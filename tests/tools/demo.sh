#!/bin/sh
# TAP: dv-demo runs on the sim and checks its results (exit 0); a stray
# argument or a value that is not a number is a usage error (exit 2).
#   demo.sh DV_DEMO
demo=$1
failed=0
echo "1..5"
DV_BACKEND=sim "$demo" --elements 4096 --rounds 2 >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then echo "ok 1 - dv-demo on the sim: exit 0"; else echo "not ok 1 - dv-demo on the sim: exit $rc"; failed=1; fi
DV_BACKEND=sim "$demo" --elements 4096 stray >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then echo "ok 2 - a stray argument: exit 2"; else echo "not ok 2 - a stray argument: exit $rc"; failed=1; fi
DV_BACKEND=sim "$demo" --device x >/dev/null 2>&1
rc1=$?
DV_BACKEND=sim "$demo" --rounds -1 >/dev/null 2>&1
rc2=$?
if [ "$rc1" -eq 2 ] && [ "$rc2" -eq 2 ]; then echo "ok 3 - --device x and --rounds -1: exit 2"; else echo "not ok 3 - --device x: exit $rc1, --rounds -1: exit $rc2"; failed=1; fi
DV_BACKEND=sim "$demo" --elements " 5" >/dev/null 2>&1
rc1=$?
DV_BACKEND=sim "$demo" -n 4096 >/dev/null 2>&1
rc2=$?
if [ "$rc1" -eq 2 ] && [ "$rc2" -eq 2 ]; then echo "ok 4 - a number after a space, a short option not listed: exit 2"; else echo "not ok 4 - \" 5\": exit $rc1, -n: exit $rc2"; failed=1; fi
# Its report lost (a full disk): said, exit 2, not a silent 0.
if [ -w /dev/full ]; then
    err=$(DV_BACKEND=sim "$demo" --elements 4096 --rounds 1 2>&1 >/dev/full)
    rc=$?
    if [ "$rc" -eq 2 ] && echo "$err" | grep -q "stdout"; then echo "ok 5 - standard output full: exit 2, said"; else echo "not ok 5 - standard output full: exit $rc ($err)"; failed=1; fi
else
    echo "ok 5 # SKIP no /dev/full here"
fi
exit $failed
