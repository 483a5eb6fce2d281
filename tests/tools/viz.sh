#!/bin/sh
# TAP: dv-viz on small hand-written inputs (tests/tools/data/viz-*.csv):
# exact per-series numbers from --csv, well-formed SVG and HTML that hold
# the peak label and the escaped tags, the snapshot charts, and the errors
# (a malformed row named by its line, exit 1; a usage error, exit 2).
#   viz.sh DV_VIZ SOURCE_DIR WORK_DIR
#
# viz-log.csv, times in seconds since its first row (1764170000.250000),
# sizes in MiB; tag K is `kv "hot",cache<1>` (a comma, quotes and a <).
# The rows at 0.5/0.4 and 0.8/0.7 are written in the wrong order, and K's
# first block has weights' address on another device.
#
#   t    row                                     weights  K  activations  total
#   0.0  allocate weights 0x1000 dev0 6 (q42)       6     0      0          6
#   0.1  allocate activations 0x2000 1 (q43)        6     0      1          7
#   0.2  allocate K 0x1000 dev1 2 (no query)        6     2      1          9
#   0.3  free 0x9000: no allocation, ignored        6     2      1          9
#   0.4  allocate activations 0x4000 3 (q42)        6     2      4         12
#   0.5  allocate failure 64                        6     2      4         12
#   0.6  free 0x2000                                6     2      3         11
#   0.7  allocate K 0x5000 3 (no query)             6     5      3         14  peak
#   0.8  free 0x4000                                6     5      0         11
#   0.9  free 0x1000 dev1                           6     3      0          9
#   1.0  allocate activations 0x2000 2 (q43)        6     3      2         11
#   1.1  free 0x1000 dev0                           0     3      2          5
#   1.2  free 0x2000                                0     3      0          3
#   1.3  free 0x5000                                0     0      0          0
#
# By tag: weights peaks at 6 MiB (6291456) at 0.0, K at 5 MiB (5242880) at
# 0.7, activations at 4 MiB (4194304) at 0.4; totals 6, 5 and 1+3+2 = 6 MiB.
# Overall 14 MiB (14680064) at 0.7: "peak 14.0 MiB at 0.700 s"; replayed in
# file order it would be 12 MiB at 0.4.
# By query: q42 = weights + activations 0x4000: 6, 9 at 0.4 (9437184), 6, 0;
# no query = K; q43 = activations 0x2000 twice: 1, 0, 2 at 1.0 (2097152),
# total 3 MiB.  By device: dev0 = weights + activations, 10 MiB at 0.4,
# 12 MiB allocated in 4; dev1 = K.
# --top 1: weights, and other = K + activations: 1, 3, 6, 5, 8 at 0.7
# (8388608), 5, 3, 5, 3, 0; 11 MiB in 5 allocations.
#
# viz-snapshot.csv, at 1764170700.750000 (each row's Time + Age):
#   weights      6 MiB (6000000 asked), age 700.5           > 10 min
#   activations  2 MiB (2000000) 100.75 s + 1 MiB (1000000) 10.75 s
#   K            1 MiB (1048576) 0.5 s + 512 KiB (500000) 5 s
#   no tag       256 KiB, 30 s
# So activations 3145728 in 2 blocks, K 1572864 (1548576 asked) in 2, and
# by age 10-60 s holds 1 MiB + 256 KiB = 1310720 in 2 blocks.

viz=$1
data=$2/tests/tools/data
work=$3
if [ ! -x "$viz" ] || [ ! -d "$data" ] || [ -z "$work" ]; then
    echo "usage: viz.sh DV_VIZ SOURCE_DIR WORK_DIR" >&2
    exit 2
fi
mkdir -p "$work" || exit 2
log=$data/viz-log.csv
snap=$data/viz-snapshot.csv

echo "1..28"
n=0
failed=0

pass() {
    n=$((n + 1))
    echo "ok $n - $1"
}

fail() {
    n=$((n + 1))
    failed=$((failed + 1))
    echo "not ok $n - $1"
}

# check DESCRIPTION COMMAND...: a point that passes when the command does.
check() {
    desc=$1
    shift
    if "$@"; then pass "$desc"; else fail "$desc"; fi
}

# same EXPECTED ACTUAL: the files are equal; the difference as comments.
same() {
    if cmp -s "$1" "$2"; then
        return 0
    fi
    diff "$1" "$2" | sed 's/^/# /'
    return 1
}

# has FILE TEXT: the file holds the text (fixed string).
has() {
    grep -F -q -e "$2" "$1"
}

# --- 1-4: the per-series numbers.
cat > "$work/tag.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
weights,6291456,0.000000,6291456,1
"kv ""hot"",cache<1>",5242880,0.700000,5242880,2
activations,4194304,0.400000,6291456,3
EOF
"$viz" --csv "$log" > "$work/tag.csv" 2> "$work/tag.err"
check "--csv by tag: peaks, their times, totals and counts" same "$work/tag.expected" "$work/tag.csv"

cat > "$work/query.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
query 42,9437184,0.400000,9437184,2
no query,5242880,0.700000,5242880,2
query 43,2097152,1.000000,3145728,2
EOF
"$viz" --csv --by query "$log" > "$work/query.csv" 2>/dev/null
check "--csv --by query: query 0 is \"no query\"" same "$work/query.expected" "$work/query.csv"

cat > "$work/device.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
device 0,10485760,0.400000,12582912,4
device 1,5242880,0.700000,5242880,2
EOF
"$viz" --csv --by device "$log" > "$work/device.csv" 2>/dev/null
check "--csv --by device: blocks matched by (device, pointer)" \
    same "$work/device.expected" "$work/device.csv"

cat > "$work/top1.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
weights,6291456,0.000000,6291456,1
other,8388608,0.700000,11534336,5
EOF
"$viz" --csv --top 1 "$log" > "$work/top1.csv" 2>/dev/null
check "--top 1 merges the rest into other (its own peak)" same "$work/top1.expected" "$work/top1.csv"

# --- 5-6: the summary line; CRLF line ends.
check "summary: 14 rows, 3 series, peak 14680064 bytes, 1 allocation failure" \
    grep -q '14 rows, 3 series, peak 14680064 bytes.*, 1 allocation failures' "$work/tag.err"

sed 's/$/\r/' "$log" > "$work/crlf.csv"
"$viz" --csv "$work/crlf.csv" > "$work/crlf.out" 2>/dev/null
check "CRLF line ends read the same" same "$work/tag.expected" "$work/crlf.out"

# --- 7-8: SVG (the format from -o's name).
"$viz" -o "$work/log.svg" "$log" 2>/dev/null
check "-o x.svg writes SVG" sh -c 'sed -n 1p "$1" | grep -E -q "^(<\?xml|<svg)" &&
    ! grep -q "<html" "$1"' sh "$work/log.svg"
n=$((n + 1))
if ! command -v xmllint > /dev/null 2>&1; then
    echo "ok $n - # SKIP xmllint not installed"
elif xmllint --noout "$work/log.svg" 2> "$work/xmllint.err"; then
    echo "ok $n - the SVG is well-formed XML"
else
    failed=$((failed + 1))
    echo "not ok $n - the SVG is well-formed XML"
    sed 's/^/# /' "$work/xmllint.err"
fi

# --- 9-12: HTML.
"$viz" -o "$work/log.html" "$log" 2>/dev/null
check "-o x.html writes an HTML page" has "$work/log.html" "<html"
check "the HTML marks the peak: peak 14.0 MiB at 0.700 s" \
    has "$work/log.html" "peak 14.0 MiB at 0.700 s"
check "the HTML escapes the tag (&quot;, &lt;) and never writes it raw" sh -c '
    grep -F -q "kv &quot;hot&quot;,cache&lt;1&gt;" "$1" && ! grep -F -q "cache<1>" "$1"' \
    sh "$work/log.html"
check "the HTML names every series and counts the unmatched free" sh -c '
    grep -F -q ">weights</text>" "$1" && grep -F -q ">activations</text>" "$1" &&
    grep -F -q "Frees without a matching allocation</th><td class=\"n\">1<" "$1" &&
    grep -F -q "allocation failure (1)" "$1"' sh "$work/log.html"

# --- 13-16: the snapshot.
cat > "$work/snap.expected" <<'EOF'
series,live_bytes,requested_bytes,blocks,oldest_age_s
weights,6291456,6000000,1,700.500000
activations,3145728,3000000,2,100.750000
"kv ""hot"",cache<1>",1572864,1548576,2,5.000000
no tag,262144,262144,1,30.000000
EOF
"$viz" --csv "$snap" > "$work/snap.csv" 2>/dev/null
check "snapshot --csv: live bytes per series" same "$work/snap.expected" "$work/snap.csv"

"$viz" --format svg "$snap" > "$work/snap.svg" 2>/dev/null
check "snapshot --format svg to stdout: bars labelled with bytes and blocks" sh -c '
    sed -n 1p "$1" | grep -E -q "^(<\?xml|<svg)" && grep -F -q "6.0 MiB, 1 block<" "$1" &&
    grep -F -q "1.5 MiB, 2 blocks<" "$1" &&
    { ! command -v xmllint > /dev/null 2>&1 || xmllint --noout "$1"; }' sh "$work/snap.svg"

"$viz" -o "$work/snap.html" "$snap" 2>/dev/null
check "snapshot HTML: 10-60 s holds 1310720 bytes in 2 blocks" \
    grep -q '<tr><td>10.*60 s</td><td class="n" title="1310720 bytes">1.2 MiB</td><td class="n">2</td>' \
    "$work/snap.html"

cat > "$work/snap2.expected" <<'EOF'
series,live_bytes,requested_bytes,blocks,oldest_age_s
weights,6291456,6000000,1,700.500000
activations,3145728,3000000,2,100.750000
other,1835008,1810720,3,30.000000
EOF
"$viz" --csv --top 2 "$snap" > "$work/snap2.csv" 2>/dev/null
check "snapshot --top 2 merges the rest into other" same "$work/snap2.expected" "$work/snap2.csv"

# --- 17: an allocation over a live block: a warning, the old block freed.
# 100 a 100 B at 0x10; 101 b 300 B at 0x10 (a's free is missing: a goes to
# 0, b to 300); 102 free b, then a 50 B at 0x20 (same time: file order);
# 103 free 0x20.  Peak 300 at 1.0 s; a peaks at 100, 150 B in 2.
cat > "$work/reuse.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
b,300,1.000000,300,1
a,100,0.000000,150,2
EOF
"$viz" --csv "$data/viz-reuse.csv" > "$work/reuse.csv" 2> "$work/reuse.err"
check "an allocation over a live block: a warning at line 3, the old block freed" sh -c '
    grep -q "viz-reuse.csv:3: warning" "$3" && grep -q "peak 300 bytes" "$3" &&
    cmp -s "$1" "$2"' sh "$work/reuse.expected" "$work/reuse.csv" "$work/reuse.err"

# --- 18-20: malformed inputs.
# viz-bad.csv: line 3's tag runs onto line 4, and line 5 has 8 fields.
"$viz" --csv "$data/viz-bad.csv" > /dev/null 2> "$work/bad.err"
rc=$?
check "a row with 8 fields: exit 1, naming viz-bad.csv line 5 (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "viz-bad.csv:5: 8 fields" "$2"' sh "$rc" "$work/bad.err"

{
    sed -n 1,2p "$log"
    echo '1001,1764170000.300000,allocate,0x7000,12x,1,0,weights,42'
} > "$work/badnum.csv"
"$viz" "$work/badnum.csv" > /dev/null 2> "$work/badnum.err"
rc=$?
check "an unparsable Size: exit 1, naming line 3 and the column (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "badnum.csv:3: Size" "$2"' sh "$rc" "$work/badnum.err"

{
    sed -n 1,2p "$log"
    printf '1001,1764170000.300000,allocate,0x7000,12\0003,1,0,weights,42\n'
} > "$work/nul.csv"
"$viz" --csv "$work/nul.csv" > /dev/null 2> "$work/nul.err"
rc=$?
check "a NUL byte in a Size: exit 1, naming line 3 (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "nul.csv:3: a NUL byte" "$2"' sh "$rc" "$work/nul.err"

printf 'when,what\n1,2\n' > "$work/other.csv"
"$viz" "$work/other.csv" > /dev/null 2> "$work/other.err"
rc=$?
check "another header: exit 1 (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "other.csv:1: not a devactor" "$2"' sh "$rc" "$work/other.err"

# --- 21-23: the command line.
"$viz" --no-such-option "$log" > "$work/unknown.out" 2> "$work/unknown.err"
rc=$?
check "an unknown option: exit 2, usage on stderr (rc $rc)" sh -c '
    [ "$1" -eq 2 ] && grep -q "^usage: dv-viz" "$2" && [ ! -s "$3" ]' \
    sh "$rc" "$work/unknown.err" "$work/unknown.out"

"$viz" --help > "$work/help.out" 2>&1
rc=$?
check "--help: exit 0, every option listed (rc $rc)" sh -c '
    [ "$1" -eq 0 ] || exit 1
    for o in --output --format --by --top --width --height --title --csv --help; do
        grep -q -e "$o" "$2" || exit 1
    done' sh "$rc" "$work/help.out"

"$viz" --csv -o - < "$log" > "$work/stdin.csv" 2>/dev/null
check "standard input to standard output (-o -)" same "$work/tag.expected" "$work/stdin.csv"

# --- 24: a tag of the program's own named "other" joins the merged band:
# one row of that name (other 100 + a 200, peak 300 with both live).
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId \
    1,1.0,allocate,0x1000,100,0,0,other,0 1,1.1,allocate,0x2000,200,0,0,a,0 \
    1,1.2,allocate,0x3000,300,0,0,b,0 1,1.3,allocate,0x4000,400,0,0,c,0 > "$work/named-other.csv"
cat > "$work/named-other.expected" <<'EOF'
series,peak_bytes,peak_time_s,total_bytes,allocations
c,400,0.300000,400,1
b,300,0.200000,300,1
other,300,0.100000,300,2
EOF
"$viz" --csv -n 2 "$work/named-other.csv" > "$work/named-other.out" 2>/dev/null
check "a tag named other joins the merged band: one row named other" same \
    "$work/named-other.expected" "$work/named-other.out"

# --- 26-28: sizes near 2^64.  Live bytes past 2^64 - 1 are malformed
# input (named by line); a series' total stops at 2^64 - 1.
big=18446744073709551615
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId \
    1,1.0,allocate,0x1000,$big,0,0,a,0 1,1.1,allocate,0x2000,1,0,0,a,0 > "$work/past64.csv"
"$viz" --csv "$work/past64.csv" > "$work/past64.out" 2> "$work/past64.err"
rc=$?
check "live bytes past 2^64 - 1: exit 1, naming line 3 (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "past64.csv:3: .*past 2^64" "$2"' sh "$rc" "$work/past64.err"
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId \
    1,1.0,allocate,0x1000,$big,0,0,a,0 1,1.1,free,0x1000,$big,0,0,a,0 \
    1,1.2,allocate,0x1000,$big,0,0,a,0 > "$work/total64.csv"
printf '%s\n' series,peak_bytes,peak_time_s,total_bytes,allocations \
    "a,$big,0.000000,$big,2" > "$work/total64.expected"
"$viz" --csv "$work/total64.csv" > "$work/total64.out" 2>/dev/null
check "a series' total stops at 2^64 - 1" same "$work/total64.expected" "$work/total64.out"
printf '%s\n' Pointer,Size,Requested,Stream,Device,Tag,QueryId,Thread,Time,Age \
    0x1000,$big,1,0,0,a,0,1,1.0,1.0 0x2000,1,1,0,0,a,0,1,1.0,1.0 > "$work/snap64.csv"
"$viz" --csv "$work/snap64.csv" > /dev/null 2> "$work/snap64.err"
rc=$?
check "a snapshot's live bytes past 2^64 - 1: exit 1, naming line 3 (rc $rc)" sh -c '
    [ "$1" -eq 1 ] && grep -q "snap64.csv:3: live bytes past" "$2"' sh "$rc" "$work/snap64.err"

if [ "$n" -ne 28 ]; then
    echo "# planned 28 points, ran $n"
    exit 1
fi
[ "$failed" -eq 0 ]
