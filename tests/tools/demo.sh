#!/bin/sh
# TAP: dv-demo runs on the sim and checks its results (exit 0); a stray
# argument or a value that is not a number is a usage error (exit 2).
#   demo.sh DV_DEMO
demo=$1
failed=0
echo "1..3"
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
exit $failed
