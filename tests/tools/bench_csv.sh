#!/bin/sh
# TAP: dv-bench --csv gives every row as many fields as its header (names
# that hold commas are quoted), on the launch section, whose row names do.
#   bench_csv.sh DV_BENCH
bench=$1
echo "1..2"
if ! out=$("$bench" --backend sim --csv --section launch --seconds 0.01 2>/dev/null); then
    echo "not ok 1 - dv-bench --csv --section launch ran"; exit 1
fi
rows=$(printf '%s\n' "$out" | grep -c '^launch,')
if [ "$rows" -ge 3 ]; then
    echo "ok 1 - dv-bench --csv --section launch ran ($rows rows)"
else
    echo "not ok 1 - dv-bench --csv --section launch gave $rows rows"; exit 1
fi
# Drop quoted fields' insides, then count fields per line.
bad=$(printf '%s\n' "$out" | sed 's/"[^"]*"/Q/g' |
      awk -F, '/^section,/ { n = NF; next } n && NF != n { bad++ } END { print bad + 0 }')
if [ "$bad" -eq 0 ]; then
    echo "ok 2 - every row has its header's fields"
else
    echo "not ok 2 - $bad rows with a field count other than their header's"
    printf '%s\n' "$out" | sed 's/^/# /'
    exit 1
fi
