#!/bin/sh
# TAP: a query's memory, by its id, in the statistics, the log, a snapshot
# and the chart.  tools/examples/queries.c runs queries 1..8 on 2 threads
# (query q allocates q, q/2 and q/4 MiB: a peak of 1.75 q MiB) and prints
# each query's peak from dv_memory_usage_get; dv-viz reads its log and its
# snapshot (taken while queries 1 and 2 held their buffers).
#   queries.sh DV_EXAMPLE_QUERIES DV_VIZ WORK_DIR
example=$1 viz=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
n=0 failed=0
check() { # name, then a command that must succeed
    n=$((n + 1))
    name=$1
    shift
    if "$@"; then echo "ok $n - $name"; else echo "not ok $n - $name"; failed=1; fi
}
MiB=1048576
echo "1..9"
DV_BACKEND=sim "$example" --log "$work/log.csv" --snapshot "$work/snap.csv" \
    >"$work/stats.csv" 2>"$work/example.err"
check "the example ran (queries 1..8, a log and a snapshot)" test $? = 0
# The statistics: every query, peak 1.75 q MiB, total the same, 3 blocks.
want=""
for q in 1 2 3 4 5 6 7 8; do
    want="$want$q,$((q * MiB + q * MiB / 2 + q * MiB / 4)),$((q * MiB + q * MiB / 2 + q * MiB / 4)),3
"
done
got=$(tail -n +2 "$work/stats.csv" | sort -t, -k1,1n)
check "dv_memory_usage_get: each query's peak and total is 1.75 q MiB, 3 blocks" \
    test "$got" = "$(printf '%s' "$want")"
# The log, read by dv-viz by query: the same peaks.
"$viz" --csv --by query "$work/log.csv" >"$work/log-by-query.csv" 2>"$work/viz.err"
check "dv-viz reads the log" test $? = 0
ok_log=yes
for q in 1 2 3 4 5 6 7 8; do
    line=$(grep "^query $q," "$work/log-by-query.csv")
    peak=$(echo "$line" | cut -d, -f2) total=$(echo "$line" | cut -d, -f4) allocs=$(echo "$line" | cut -d, -f5)
    expect=$((q * MiB + q * MiB / 2 + q * MiB / 4))
    if [ "$peak" != "$expect" ] || [ "$total" != "$expect" ] || [ "$allocs" != 3 ]; then
        echo "#   query $q in the log: '$line', want peak and total $expect, 3 allocations"
        ok_log=no
    fi
done
check "the log: every query's peak, total and allocations by its QueryId" test $ok_log = yes
# The log names the worker threads (two of them), never one thread for all.
threads=$(tail -n +2 "$work/log.csv" | cut -d, -f1 | sort -u | wc -l)
check "the log's rows name the posting threads ($threads)" test "$threads" -ge 2
# The snapshot: queries 1 and 2 live, 1.75 and 3.5 MiB.
"$viz" --csv --by query "$work/snap.csv" >"$work/snap-by-query.csv" 2>>"$work/viz.err"
check "dv-viz reads the snapshot" test $? = 0
s1=$(grep "^query 1," "$work/snap-by-query.csv" | cut -d, -f3)
s2=$(grep "^query 2," "$work/snap-by-query.csv" | cut -d, -f3)
others=$(grep -c "^query" "$work/snap-by-query.csv")
check "the snapshot: query 1 holds 1.75 MiB, query 2 3.5 MiB, no other ($s1, $s2, $others rows)" \
    test "$s1" = $((MiB * 7 / 4)) -a "$s2" = $((MiB * 7 / 2)) -a "$others" = 2
# The chart, by query: every query in the legend, the peak marked.
"$viz" --by query -o "$work/chart.html" "$work/log.csv" 2>>"$work/viz.err"
check "the chart renders" test $? = 0 -a -s "$work/chart.html"
legend=yes
for q in 1 2 3 4 5 6 7 8; do grep -q "query $q" "$work/chart.html" || legend=no; done
check "the chart names every query and marks the peak" test $legend = yes -a \
    "$(grep -c 'peak ' "$work/chart.html")" -ge 1
[ $failed = 0 ] || sed 's/^/# /' "$work/example.err" "$work/viz.err"
exit $failed
