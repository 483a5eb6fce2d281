#!/bin/sh
# TAP: dv-stress --conf on the sim: the pool with aliases (pool_alias:1)
# under the mix, with and without injected faults and rebuilds, every
# byte read back right; a key dv_actor_config_parse refuses exits 2; the
# run follows what --conf sets (streams, the checker); backend is refused.
#   stress_conf.sh DV_STRESS
stress=$1
echo "1..6"
n=0 failed=0
run() {
    n=$((n + 1))
    what=$1
    shift
    out=$("$stress" "$@" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^result: PASS$' &&
       printf '%s\n' "$out" | grep -q '^integrity: .*(0 bytes wrong)'; then
        echo "ok $n - $what: PASS, 0 bytes wrong"
    else
        echo "not ok $n - $what: exit $rc"
        printf '%s\n' "$out" | sed 's/^/# /'
        failed=1
    fi
}
run "pool_alias:1, 3 s" --backend sim --threads 2 --seconds 3 --seed 5 --conf pool_alias:1
run "pool_alias:1 with faults, 4 s" --backend sim --threads 2 --seconds 4 --seed 6 --faults \
    --conf pool_alias:1
n=$((n + 1))
err=$("$stress" --backend sim --conf no_such_key:1 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && printf '%s\n' "$err" | grep -q 'no_such_key: unknown key'; then
    echo "ok $n - --conf no_such_key:1: exit 2, the key named"
else
    echo "not ok $n - --conf no_such_key:1: exit $rc"
    failed=1
fi
run "streams:2 over the default 4" --backend sim --threads 2 --ops 300 --seed 7 --conf streams:2
n=$((n + 1))
out=$("$stress" --backend sim --threads 2 --ops 100 --seed 7 --conf streams:2,check_order:0 2>&1)
if printf '%s\n' "$out" | grep -q ' 2 streams,' &&
   printf '%s\n' "$out" | grep -q '^dv-stress: stream-order checker off'; then
    echo "ok $n - the report says what --conf set: 2 streams, the checker off"
else
    echo "not ok $n - the report does not say what --conf set"
    printf '%s\n' "$out" | head -3 | sed 's/^/# /'
    failed=1
fi
n=$((n + 1))
err=$("$stress" --backend sim --conf backend:cuda 2>&1)
rc=$?
if [ "$rc" -eq 2 ] && printf '%s\n' "$err" | grep -q 'use --backend'; then
    echo "ok $n - --conf backend:cuda: exit 2, --backend named"
else
    echo "not ok $n - --conf backend:cuda: exit $rc"
    failed=1
fi
exit $failed
