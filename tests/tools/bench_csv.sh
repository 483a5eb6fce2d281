#!/bin/sh
# TAP: dv-bench --csv gives every row as many fields as its header (names
# that hold commas are quoted), on the launch section, whose row names do,
# and on the collectives section on the sim (two simulated devices,
# devactor's rows alone), whose rows must each carry a time; the random
# section gives one header over both pools' rows.
#   bench_csv.sh DV_BENCH
bench=$1
echo "1..17"

# Rows whose field count is not their header's: quoted fields' insides
# dropped, then fields counted per line.
bad_rows() {
    printf '%s\n' "$1" | sed 's/"[^"]*"/Q/g' |
        awk -F, '/^section,/ { n = NF; next } n && NF != n { bad++ } END { print bad + 0 }'
}

if ! out=$("$bench" --backend sim --csv --section launch --seconds 0.01 2>/dev/null); then
    echo "not ok 1 - dv-bench --csv --section launch ran"; exit 1
fi
rows=$(printf '%s\n' "$out" | grep -c '^launch,')
if [ "$rows" -ge 3 ]; then
    echo "ok 1 - dv-bench --csv --section launch ran ($rows rows)"
else
    echo "not ok 1 - dv-bench --csv --section launch gave $rows rows"; exit 1
fi
bad=$(bad_rows "$out")
if [ "$bad" -eq 0 ]; then
    echo "ok 2 - every launch row has its header's fields"
else
    echo "not ok 2 - $bad launch rows with a field count other than their header's"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi

if ! out=$("$bench" --backend sim --csv --section collectives --seconds 0.01 2>/dev/null); then
    echo "not ok 3 - dv-bench --csv --section collectives ran"; exit 1
fi
# The sim's rows: all-reduce at 1 and 4 MiB, and the latency row.
sizes=$(printf '%s\n' "$out" | grep -c '^collectives,all-reduce,')
latency=$(printf '%s\n' "$out" | grep -c '^collectives,latency,8,')
if [ "$sizes" -ge 2 ] && [ "$latency" -eq 1 ]; then
    echo "ok 3 - dv-bench --csv --section collectives ran ($sizes sizes and the latency row)"
else
    echo "not ok 3 - collectives gave $sizes all-reduce rows and $latency latency rows"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi
bad=$(bad_rows "$out")
if [ "$bad" -eq 0 ]; then
    echo "ok 4 - every collectives row has its header's fields"
else
    echo "not ok 4 - $bad collectives rows with a field count other than their header's"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi
# devactor_us (field 6) and devactor_device_us (13) above zero, and no result
# found wrong.
bad=$(printf '%s\n' "$out" | sed 's/"[^"]*WRONG[^"]*"/WRONG/; s/"[^"]*"/Q/g' |
      awk -F, '$1 == "collectives" && (!($6 > 0) || !($13 > 0) || $15 == "WRONG") { bad++ }
               END { print bad + 0 }')
if [ "$bad" -eq 0 ]; then
    echo "ok 5 - every collectives row has devactor's time and its device time, and its result checked"
else
    echo "not ok 5 - $bad collectives rows without a time or with a wrong result"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi

# Every launch row measured: a time above zero (a failed launch is said on
# stderr and the exit status is 1, never a negative time).
failed=0
out=$("$bench" --backend sim --csv --section launch --seconds 0.01 2>/dev/null)
neg=$(printf '%s\n' "$out" | sed 's/"[^"]*"/Q/g' | awk -F, '/^launch,/ { if ($4 + 0 <= 0) n++ } END { print n + 0 }')
if [ "$neg" -eq 0 ]; then
    echo "ok 6 - every launch row, with 0, 2 and 8 handles, has a time above zero"
else
    echo "not ok 6 - $neg launch rows without a time"
    printf '%s\n' "$out" | sed 's/^/# /'
    failed=1
fi
"$bench" --backend sim --section nope >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then
    echo "ok 7 - an unknown section: exit 2"
else
    echo "not ok 7 - an unknown section: exit $rc"
    failed=1
fi
"$bench" --backend gpu --section alloc >/dev/null 2>&1
rc1=$?
"$bench" --backend sim --section alloc stray >/dev/null 2>&1
rc2=$?
if [ "$rc1" -eq 2 ] && [ "$rc2" -eq 2 ]; then
    echo "ok 8 - an unknown backend and a stray argument: exit 2"
else
    echo "not ok 8 - an unknown backend: exit $rc1, a stray argument: exit $rc2"
    failed=1
fi
"$bench" --backend sim --section alloc --seconds inf >/dev/null 2>&1
rc=$?
if [ "$rc" -eq 2 ]; then
    echo "ok 9 - --seconds inf: exit 2"
else
    echo "not ok 9 - --seconds inf: exit $rc"
    failed=1
fi
# A peer that does not load: the actor section still runs, its peer
# columns read n/a (not 0), and the exit status says a measurement failed.
out=$("$bench" --backend sim --csv --section actor --seconds 0.01 --peer /nonexistent-peer.so 2>/dev/null)
rc=$?
if [ "$rc" -eq 1 ]; then
    echo "ok 10 - a peer that does not load: exit 1"
else
    echo "not ok 10 - a peer that does not load: exit $rc"
    failed=1
fi
na=$(printf '%s\n' "$out" | grep -c '^actor,one client,[0-9]*,[0-9.]*,[0-9.]*,n/a,n/a$')
if [ "$na" -eq 4 ]; then
    echo "ok 11 - without a peer, the pairs rows' peer columns read n/a (4 rows)"
else
    echo "not ok 11 - without a peer, $na of 4 pairs rows read n/a"
    printf '%s\n' "$out" | grep '^actor,one client' | sed 's/^/# /'
    failed=1
fi
# Each actor row under the header of its own table: the rows per thread
# count under one whose third field is threads, the pairs under bytes.
misread=$(printf '%s\n' "$out" | sed 's/"[^"]*"/Q/g' |
    awk -F, '/^section,/ { h = $3; next } /^actor,Q,/ && h != "threads" { bad++ }
             /^actor,one client,/ && h != "bytes" { bad++ } END { print bad + 0 }')
if [ "$misread" -eq 0 ]; then
    echo "ok 16 - every actor row follows its own table's header"
else
    echo "not ok 16 - $misread actor rows follow another table's header"
    failed=1
fi
# Its output lost (a full disk): said, exit 1, not a silent 0.
if [ -w /dev/full ]; then
    err=$("$bench" --backend sim --csv --section mapping 2>&1 >/dev/full)
    rc=$?
    if [ "$rc" -eq 1 ] && echo "$err" | grep -q "stdout"; then
        echo "ok 17 - standard output full: exit 1, said"
    else
        echo "not ok 17 - standard output full: exit $rc ($err)"
        failed=1
    fi
else
    echo "ok 17 # SKIP no /dev/full here"
fi
# random_allocations on both pools: one header, three rows each, named in
# the last field, and nothing else on stdout.
out=$("$bench" --backend sim --csv --section random 2>/dev/null)
rc=$?
headers=$(printf '%s\n' "$out" | grep -c '^section,')
plain=$(printf '%s\n' "$out" | grep -c '^random,[0-9]*,[0-9]*,[0-9.]*,[0-9]*,[0-9.]*,[0-9.]*,[0-9]*,[0-9]*,"pool(async)"$')
alias=$(printf '%s\n' "$out" | grep -c '^random,[0-9]*,[0-9]*,[0-9.]*,[0-9]*,[0-9.]*,[0-9.]*,[0-9]*,[0-9]*,"pool(async,alias)"$')
lines=$(printf '%s\n' "$out" | grep -c .)
if [ "$rc" -eq 0 ] && [ "$headers" -eq 1 ] && [ "$plain" -eq 3 ] && [ "$alias" -eq 3 ] &&
    [ "$lines" -eq 7 ] && [ "$(bad_rows "$out")" -eq 0 ]; then
    echo "ok 12 - --section random --csv: one header, 3 rows for each pool"
else
    echo "not ok 12 - --section random --csv: exit $rc, $headers headers, $plain and $alias rows, $lines lines"
    printf '%s\n' "$out" | sed 's/^/# /'
    failed=1
fi
# The virtual memory calls: six rows under one header, each a time above
# zero, and the extent's per-granule cost below a granule's own.
out=$("$bench" --backend sim --csv --section mapping 2>/dev/null)
rc=$?
rows=$(printf '%s\n' "$out" | awk -F, '/^mapping,/ && $5 > 0 && $6 > 0 { n++ } END { print n + 0 }')
cheaper=$(printf '%s\n' "$out" | awk -F, '$2 == "map_granule" { g = $6 } $2 == "map_extent" { e = $6 }
                                    END { print (e > 0 && e < g) ? "yes" : "no" }')
if [ "$rc" -eq 0 ] && [ "$rows" -eq 6 ] && [ "$cheaper" = yes ] && [ "$(bad_rows "$out")" -eq 0 ]; then
    echo "ok 13 - --section mapping --csv: 6 rows with times, a granule cheaper in an extent than alone"
else
    echo "not ok 13 - --section mapping --csv: exit $rc, $rows rows with times, extent cheaper: $cheaper"
    printf '%s\n' "$out" | sed 's/^/# /'
    failed=1
fi
# Sizes with a suffix; a measurement that fails (a size past the device)
# is said on stderr and the exit status is 1.
out=$("$bench" --backend sim --csv --section random --max-size 4K 2>/dev/null)
rc=$?
if [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q '^random,1000,4096,'; then
    echo "ok 14 - --max-size 4K is 4096 bytes"
else
    echo "not ok 14 - --max-size 4K: exit $rc"
    printf '%s\n' "$out" | sed 's/^/# /'
    failed=1
fi
err=$("$bench" --backend sim --section random --max-size 64G 2>&1 >/dev/null)
rc=$?
if [ "$rc" -eq 1 ] && printf '%s\n' "$err" | grep -q '^dv-bench: random_allocations on pool(async): '; then
    echo "ok 15 - a random section the device refuses: exit 1, said on stderr"
else
    echo "not ok 15 - a random section the device refuses: exit $rc"
    printf '%s\n' "$err" | sed 's/^/# /'
    failed=1
fi
exit $failed
