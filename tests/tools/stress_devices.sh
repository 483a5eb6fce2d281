#!/bin/sh
# TAP: dv-stress --devices on the sim: two simulated devices, peer copies
# and collectives run, every byte read back right, exit status 0; and the
# option's refusals (one device, with --faults) exit 2.
#   stress_devices.sh DV_STRESS
stress=$1
echo "1..4"

out=$("$stress" --backend sim --devices 2 --threads 2 --seconds 3 --seed 11 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^result: PASS$'; then
    echo "ok 1 - --devices 2 --seconds 3 passed"
else
    echo "not ok 1 - --devices 2 --seconds 3 exited $rc"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi

# The "devices:" line: fixed keys, each followed by its count.
line=$(printf '%s\n' "$out" | grep '^devices: ')
field() {
    printf '%s\n' "$line" | sed -n "s/.*[ ,]$1 \([0-9][0-9]*\).*/\1/p"
}
peer=$(field peer_copies)
peer_checks=$(field peer_checks)
colls=$(field collectives)
checks=$(field collective_checks)
peer_wrong=$(field peer_wrong_bytes)
coll_wrong=$(field collective_wrong_bytes)
if [ "${peer:-0}" -gt 0 ] && [ "${peer_checks:-0}" -gt 0 ] && [ "${colls:-0}" -gt 0 ] &&
   [ "${checks:-0}" -gt 0 ]; then
    echo "ok 2 - $peer peer copies ($peer_checks read back) and $colls collectives ($checks checked) ran"
else
    echo "not ok 2 - peer copies '$peer', read back '$peer_checks', collectives '$colls', checked '$checks'"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi
wrong=$(printf '%s\n' "$out" | sed -n 's/^integrity: .*(\([0-9][0-9]*\) bytes wrong).*/\1/p')
if [ "$peer_wrong" = 0 ] && [ "$coll_wrong" = 0 ] && [ "$wrong" = 0 ]; then
    echo "ok 3 - 0 wrong bytes (peer copies, collectives, every read-back)"
else
    echo "not ok 3 - wrong bytes: peer '$peer_wrong', collectives '$coll_wrong', all '$wrong'"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi

"$stress" --backend sim --devices 1 --seconds 1 >/dev/null 2>&1
one=$?
"$stress" --backend sim --devices 2 --faults --seconds 1 >/dev/null 2>&1
faults=$?
if [ "$one" -eq 2 ] && [ "$faults" -eq 2 ]; then
    echo "ok 4 - --devices 1 and --devices 2 --faults are refused (exit 2)"
else
    echo "not ok 4 - --devices 1 exited $one, --devices 2 --faults exited $faults"
    exit 1
fi
