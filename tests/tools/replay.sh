#!/bin/sh
# TAP: dv-replay replays allocation logs through an actor on the sim, and
# through a fake peer allocator (--peer).
#   replay.sh DV_REPLAY SOURCE_DIR [PEER.so]
# replay-ours.csv (devactor's log; 2 threads, a free by the other thread,
# a failure row and a free of a block never allocated, both skipped):
#   live after each row: 1 MiB, 3 MiB, 7 MiB (peak), -, 6, 4, -, 4.5, 0.5, 0
#   peak 7 MiB = 7340032; 4 allocations, 4 frees, 10 rows read (9 kept)
# replay-rmm-nil.csv (RMM's): 4096 and 8192 live at once (peak 12288);
#   an "allocate failure" row with a (nil) pointer between them, and the
#   first freed as "deallocate"
# replay-turns.csv (RMM's): two threads take turns, each allocating 1 MiB
#   and freeing it before the other's next allocation: peak live 1 MiB.
#   Taking turns in the log's order (the default), nothing holds more
#   than 1 MiB; with --concurrent each runs ahead of the other's frees.
# replay-rmm.csv (RMM's; times of day, stream handles):
#   256, 8448, 73984 (peak), 73728, 8192, 139264 (peak!), 131072, 0
#   peak 139264; 4 allocations, 4 frees
#
# The fake peer (tests/support/replay_peer.c) rounds each size up to 512
# and reserves whole 2 MiB segments as what is allocated outgrows them.
# replay-ours.csv's sizes (1 MiB a, 2 MiB b, 4 MiB c, 512 KiB f) are
# multiples of 512: rounded, they stay.  With --concurrent its two threads
# run at once, only a free waiting for its allocation, so the peer's own
# peak depends on how they interleave:
#   thread 101: +a, +b, -a, +f, -f      thread 202: +c, -b, -c
#   b and c are always live together (b is freed by 202 after +c);
#   c before -a:           a+b+c = 7 MiB = 7340032
#   c after -a, before -f: b+c+f = 6.5 MiB = 6815744
#   c after -f:            b+c   = 6 MiB = 6291456
# The same rows in one thread (every Thread 101) replay in time order:
#   +a 1 MiB, +b 3, +c 7 (peak), -a 6, -b 4, +f 4.5, -c 0.5, -f 0
#   peak allocated 7340032; reserved 2 MiB, 4, 8: peak 8388608
# A log of 100, 700 and 1000 bytes live at once: the trace's peak 1800;
#   the peer's 512 + 1024 + 1024 = 2560, reserved one segment, 2097152.
replay=$1 src=$2 peer=$3
data=$src/tests/tools/data
n=0 failed=0
check() {
    n=$((n + 1))
    if [ "$2" = yes ]; then echo "ok $n - $1"; else echo "not ok $n - $1"; failed=1; fi
}
field() { echo "$1" | tail -1 | cut -d, -f"$2"; }
columns() { echo "$1" | tail -1 | awk -F, '{ print NF }'; }
yes_if() { if "$@"; then echo yes; else echo no; fi; }
numbers() {
    for v in "$@"; do echo "$v" | grep -Eq '^[0-9]+(\.[0-9]+)?$' || return 1; done
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/replay-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..101"
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
out=$(DV_BACKEND=sim "$replay" --csv "$data/replay-rmm-nil.csv" 2>&1)
rc=$?
check "RMM's failure row with a (nil) pointer is skipped, deallocate is a free (exit $rc)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 2,2,12288)"
err=$(DV_BACKEND=sim "$replay" "$data/replay-bad-action.csv" 2>&1 >/dev/null)
rc=$?
check "an unknown action: exit 1, its line named" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'line 3: unknown action "realloc"')")"
out=$(DV_BACKEND=sim "$replay" --csv "$data/replay-turns.csv" 2>&1)
rc=$?
check "two threads in the log's order hold at most the trace's 1 MiB (exit $rc, $(field "$out" 6))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 5),$(field "$out" 6)" = 1048576,1048576)"
out=$(DV_BACKEND=sim "$replay" --csv --post "$data/replay-turns.csv" 2>&1)
rc=$?
check "--post: the same (exit $rc, $(field "$out" 6))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 6)" = 1048576)"
out=$(DV_BACKEND=sim "$replay" --csv --peer-only --peer "$peer" "$data/replay-turns.csv" 2>&1)
rc=$?
check "through the peer in the log's order: its peak allocated 1 MiB (exit $rc, $(field "$out" 11))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 11)" = 1048576)"
# A tag of 6,000 characters holding commas and numbers: one row still.
tag=$(awk 'BEGIN { for (i = 0; i < 600; i++) printf "x,777777,y," }')
{
    echo "Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId"
    echo "1,1.000001,allocate,0x1000,100,0,0,\"$tag\",1"
    echo "1,1.000002,free,0x1000,100,0,0,t,1"
} >"$tmp/long.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/long.csv" 2>&1)
rc=$?
check "a 6,000-character tag is one row: 1 allocation, 1 free, peak 100 (exit $rc)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 1,1,100)"
# A tag holding a line break, a comma and quotes, quoted as devactor's log
# writes it: the row runs over two lines.
printf '%s\n' "Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId" \
    '1,1.000001,allocate,0x1000,100,0,0,"multi' 'line, with ""quotes""",1' \
    '1,1.000002,free,0x1000,100,0,0,"multi' 'line, with ""quotes""",1' >"$tmp/multiline.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/multiline.csv" 2>&1)
rc=$?
check "a tag holding a line break: 1 allocation, 1 free (exit $rc)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3)" = 1,1)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,-5,0\n' >"$tmp/neg.csv"
err=$(DV_BACKEND=sim "$replay" "$tmp/neg.csv" 2>&1 >/dev/null)
rc=$?
check "a negative size does not parse: exit 1, line 2 named" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'line 2: a field does not parse')")"
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream \
    1,23:59:59.999990,allocate,0x1000,100,0x0 1,00:00:00.000010,free,0x1000,100,0x0 \
    >"$tmp/midnight.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/midnight.csv" 2>&1)
rc=$?
check "an RMM log past midnight keeps its order: the free frees (exit $rc)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3)" = 1,1)"
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

# --peer: columns 10-15 are peer_failures, peer_peak_allocated,
# peer_peak_reserved, peer_ops_per_s, reserved_vs_peer, ops_vs_peer; then
# (16-18 with a peer, 10-12 without) the actor's mappings made, unmapped
# and driver calls per pass; then the later passes' rate (19, or 13), with
# a peer the peer's (20) and their ratio (21); last the actor's driver
# calls a pass over the later passes (22, or 14).
out=$(DV_BACKEND=sim "$replay" --csv --concurrent --peer "$peer" "$data/replay-ours.csv" 2>&1)
rc=$?
check "through the peer too: exit $rc, $(columns "$out") columns, $(field "$out" 10) peer failures" \
    "$(yes_if test $rc = 0 -a "$(columns "$out")" = 25 -a "$(field "$out" 10)" = 0)"
p=$(field "$out" 11)
check "the peer's peak allocated ($p) is 6, 6.5 or 7 MiB, the trace's still 7 MiB" \
    "$(yes_if test \( "$p" = 6291456 -o "$p" = 6815744 -o "$p" = 7340032 \) \
        -a "$(field "$out" 5)" = 7340032)"
awk -F, 'BEGIN { OFS = "," } NR > 1 { $1 = 101 } { print }' "$data/replay-ours.csv" >"$tmp/one.csv"
out=$(DV_BACKEND=sim "$replay" --csv --peer "$peer" "$tmp/one.csv" 2>&1)
rc=$?
check "in one thread: exit $rc, peer peak allocated 7340032 ($(field "$out" 11)), reserved 8388608 ($(field "$out" 12))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 11),$(field "$out" 12)" = 7340032,8388608)"
check "the comparisons are numbers ($(field "$out" 13), $(field "$out" 14), $(field "$out" 15))" \
    "$(yes_if numbers "$(field "$out" 13)" "$(field "$out" 14)" "$(field "$out" 15)")"
printf '%s\n' 'Thread,Time,Action,Pointer,Size,Stream' \
    '1,1.000001,allocate,0x1000,100,0' '1,1.000002,allocate,0x2000,700,0' \
    '1,1.000003,allocate,0x3000,1000,0' '1,1.000004,free,0x1000,100,0' \
    '1,1.000005,free,0x2000,700,0' '1,1.000006,free,0x3000,1000,0' >"$tmp/small.csv"
out=$(DV_BACKEND=sim "$replay" --csv --peer "$peer" "$tmp/small.csv" 2>&1)
check "rounded to 512: trace 1800 ($(field "$out" 5)), peer 2560 ($(field "$out" 11)), reserved 2097152 ($(field "$out" 12))" \
    "$(yes_if test "$(field "$out" 5),$(field "$out" 11),$(field "$out" 12)" = 1800,2560,2097152)"
err=$(DV_BACKEND=sim "$replay" --peer /nonexistent.so "$data/replay-ours.csv" 2>&1 >/dev/null)
rc=$?
check "a peer that does not load: exit $rc, said so" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'peer /nonexistent.so')")"
err=$(DV_BACKEND=sim "$replay" --peer libm.so.6 "$data/replay-ours.csv" 2>&1 >/dev/null)
rc=$?
check "a library that is no peer: exit $rc, said so" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'peer libm.so.6')")"
out=$(DV_BACKEND=sim "$replay" --csv --repeat 3 --peer "$peer" "$data/replay-ours.csv" 2>&1)
rc=$?
check "--repeat 3: exit $rc, 12 allocations and 12 frees ($(field "$out" 2), $(field "$out" 3))" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3)" = 12,12)"
check "--repeat 3: the later passes' rates and their ratio are numbers ($(field "$out" 19), $(field "$out" 20), $(field "$out" 21))" \
    "$(yes_if numbers "$(field "$out" 19)" "$(field "$out" 20)" "$(field "$out" 21)")"
check "--repeat 3: the later passes' driver calls a pass, a number ($(field "$out" 22))" \
    "$(yes_if numbers "$(field "$out" 22)")"
check "--repeat 3: the median pass rates and their ratio are numbers ($(field "$out" 23), $(field "$out" 24), $(field "$out" 25))" \
    "$(yes_if numbers "$(field "$out" 23)" "$(field "$out" 24)" "$(field "$out" 25)")"
out=$(DV_BACKEND=sim "$replay" --csv "$data/replay-ours.csv" 2>&1)
check "one pass: 15 columns, the later passes' rate, calls and median n/a ($(field "$out" 13), $(field "$out" 14), $(field "$out" 15))" \
    "$(yes_if test "$(columns "$out"),$(field "$out" 13),$(field "$out" 14),$(field "$out" 15)" = 15,n/a,n/a,n/a)"
out=$(DV_BACKEND=sim "$replay" --repeat 3 --peer "$peer" "$data/replay-ours.csv" 2>&1)
check "--repeat 3: the first pass's rate and the later passes', for both" \
    "$(yes_if test "$(echo "$out" | grep -c '^  first pass [0-9]* ops/s, passes 2-3 [0-9]* ops/s (a pass: median [0-9]*, slowest [0-9]*, fastest [0-9]*)$')" = 2)"
out=$(DV_BACKEND=sim "$replay" "$data/replay-ours.csv" 2>&1)
check "one pass: no split" "$(yes_if test "$(echo "$out" | grep -c 'first pass')" = 0)"
gzip -c "$data/replay-ours.csv" >"$tmp/replay ours.csv.gz"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/replay ours.csv.gz" 2>&1)
rc=$?
check "a .gz copy replays: exit $rc, peak 7340032 ($(field "$out" 5)), 4 allocations" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 5),$(field "$out" 2)" = 7340032,4)"
out=$(REPLAY_PEER_LIMIT=4194304 DV_BACKEND=sim "$replay" --csv --peer "$peer" \
    "$data/replay-ours.csv" 2>&1)
rc=$?
check "a peer of 4 MiB refuses b or c: exit $rc, $(field "$out" 10) peer failures, named" \
    "$(yes_if test $rc = 1 -a "$(field "$out" 10)" -ge 1 -a "$(field "$out" 4)" = 0 \
        -a -n "$(echo "$out" | grep 'peer: line')")"
out=$(REPLAY_PEER_NO_STATS=1 DV_BACKEND=sim "$replay" --csv --peer "$peer" \
    "$data/replay-ours.csv" 2>&1)
check "a peer without statistics: n/a ($(field "$out" 11),$(field "$out" 12),$(field "$out" 14))" \
    "$(yes_if test "$(field "$out" 11),$(field "$out" 12),$(field "$out" 14)" = n/a,n/a,n/a)"
out=$(DV_BACKEND=sim "$replay" --csv --peer-only --peer "$peer" "$tmp/one.csv" 2>&1)
rc=$?
check "--peer-only: exit $rc, the actor's columns n/a, the peer's peak 7340032" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 6),$(field "$out" 9),$(field "$out" 11)" = \
        n/a,n/a,7340032)"
"$replay" --peer-only "$data/replay-ours.csv" >/dev/null 2>&1
check "--peer-only without --peer: exit 2" "$(yes_if test $? = 2)"
# --post: allocations posted without waiting; a refusal is still named
# (at the block's free or after the pass) and still fails the run.
out=$(DV_BACKEND=sim "$replay" --post --csv "$data/replay-ours.csv" 2>&1)
rc=$?
check "--post: exit $rc, 4 allocations and 4 frees, peak 7340032" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 4,4,7340032)"
err=$(DV_BACKEND=sim "$replay" --post --conf budget:2M "$data/replay-ours.csv" 2>&1 >/dev/null)
rc=$?
# (a refusal still pending at its free is counted, not named)
check "--post under a 2 MiB budget: exit 1, the refused row named or counted" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep -e 'line 4: 4194304 bytes: DV_EOUT_OF_BUDGET' -e 'refusals not named')")"
# --stack: on the actor's thread through its resource stack, every row in
# the log's order (one thread): held peaks at the trace's 7 MiB exactly.
out=$(DV_BACKEND=sim "$replay" --stack --csv "$data/replay-ours.csv" 2>&1)
rc=$?
check "--stack: exit $rc, 4 allocations and 4 frees, trace and held peaks 7340032" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5),$(field "$out" 6)" = \
        4,4,7340032,7340032)"
err=$(DV_BACKEND=sim "$replay" --stack --conf budget:2M "$data/replay-ours.csv" 2>&1 >/dev/null)
rc=$?
check "--stack under a 2 MiB budget: exit 1, the refused row named" \
    "$(yes_if test $rc = 1 -a -n "$(echo "$err" | grep 'line 4: 4194304 bytes: DV_EOUT_OF_BUDGET')")"
"$replay" --stack --post "$data/replay-ours.csv" >/dev/null 2>&1
check "--stack with --post: exit 2" "$(yes_if test $? = 2)"
out=$(DV_BACKEND=sim "$replay" --stack --csv --repeat 2 "$data/trace-cnn-s16.csv.gz" 2>&1)
rc=$?
ratio=$(field "$out" 8)
check "--stack, trace cnn (1/16) twice: exit $rc, no failure, reserved $ratio x live in [1, 1.15]" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 4)" = 0 \
        -a "$(awk -v r="$ratio" 'BEGIN { print (r >= 1 && r <= 1.15) }')" = 1)"
# PyTorch traces captured on an H100 (tools/traces), at 1/16 of their
# sizes: each replays without a failure, with the peak the converter
# computed, and the pool, growing in place, reserves within a bound of the
# live peak (chunks of 64 MiB and more took 2.2 to 4.3 times it; the pool
# growing in place, moving memory past the most it mapped, took 1.021,
# 1.106, 1.166 and 1.600 on the sim, the last with granules of 2 MiB
# under blocks of 1/16 of their size).
for t in cnn:30806272:1.15 transformer:267456256:1.25 inference:62956544:1.30 \
         multistream:15729664:2.2; do
    name=${t%%:*} rest=${t#*:} peak=${rest%%:*} bound=${rest#*:}
    out=$(DV_BACKEND=sim "$replay" --csv "$data/trace-$name-s16.csv.gz" 2>&1)
    rc=$?
    ratio=$(field "$out" 8)
    check "trace $name (1/16): exit $rc, no failure, peak $(field "$out" 5), reserved $ratio x live <= $bound" \
        "$(yes_if test $rc = 0 -a "$(field "$out" 4)" = 0 -a "$(field "$out" 5)" = "$peak" \
            -a "$(awk -v r="$ratio" -v b="$bound" 'BEGIN { print (r + 0 > 0 && r <= b) }')" = 1)"
done
# With aliases (pool_alias:1) a trace that repeats maps nothing once it
# has run: the mappings of 8 passes are those of 4.  (At 1/16 of their
# sizes, with 2 MiB granules, cnn, transformer and inference hold 1.089,
# 1.145 and 1.133 times their live peak on the sim; multistream 2.0.)
for t in cnn:1.15 transformer:1.20 inference:1.20 multistream:2.5; do
    name=${t%%:*} bound=${t#*:}
    four=$(DV_BACKEND=sim "$replay" --stack --csv --repeat 4 --conf pool_alias:1 "$data/trace-$name-s16.csv.gz" 2>&1)
    rc4=$?
    eight=$(DV_BACKEND=sim "$replay" --stack --csv --repeat 8 --conf pool_alias:1 "$data/trace-$name-s16.csv.gz" 2>&1)
    rc8=$?
    ratio=$(field "$eight" 8)
    check "aliases, trace $name (1/16) 4 and 8 times: exit $rc4 and $rc8, no failure, reserved $ratio x live <= $bound" \
        "$(yes_if test $rc4 = 0 -a $rc8 = 0 -a "$(field "$four" 4),$(field "$eight" 4)" = 0,0 \
            -a "$(awk -v r="$ratio" -v b="$bound" 'BEGIN { print (r + 0 > 0 && r <= b) }')" = 1)"
    if [ "$name" != multistream ]; then
        check "aliases, trace $name: passes 5-8 map nothing ($(field "$four" 10) and $(field "$eight" 10) a pass)" \
            "$(yes_if awk -v a="$(field "$four" 10)" -v b="$(field "$eight" 10)" \
                'BEGIN { d = 8 * b - 4 * a; exit !(a > 0 && d < 1 && d > -1) }')"
        check "aliases, trace $name: passes 2-8 call the driver as often as passes 2-4 did in all ($(field "$four" 14) and $(field "$eight" 14) a pass)" \
            "$(yes_if awk -v a="$(field "$four" 14)" -v b="$(field "$eight" 14)" \
                'BEGIN { d = 7 * b - 3 * a; exit !(a != "" && d < 1 && d > -1) }')"
    fi
done
# The per-pass driver work: a replay that grows maps at least once; none of
# it unmapped without mapping; numbers either way.
out=$(DV_BACKEND=sim "$replay" --csv "$data/trace-cnn-s16.csv.gz" 2>&1)
check "per pass: $(field "$out" 10) mappings made, $(field "$out" 11) unmapped, $(field "$out" 12) driver calls" \
    "$(yes_if numbers "$(field "$out" 10)" "$(field "$out" 11)" "$(field "$out" 12)")"
check "the cnn trace maps memory (>= 1 per pass) and calls the driver more often than that" \
    "$(yes_if awk -v m="$(field "$out" 10)" -v c="$(field "$out" 12)" 'BEGIN { exit !(m >= 1 && c > m) }')"
# Zero-byte allocations are skipped with their frees (none of which is
# counted as a free of no live block); an allocation at a live block's address frees that
# block first (the trace's live peak and devactor's held peak agree).
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,0,0\n1,2.0,allocate,0x2000,100,0\n1,3.0,free,0x1000,0,0\n1,4.0,free,0x2000,100,0\n' >"$tmp/zero.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/zero.csv" 2>&1)
check "a zero-byte allocation and its free are skipped: 1 allocation, 1 free, peak 100" \
    "$(yes_if test "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 1,1,100)"
out=$(DV_BACKEND=sim "$replay" "$tmp/zero.csv" 2>&1)
check "the report says so, and no free is counted as a free of no live block" \
    "$(yes_if sh -c 'echo "$1" | grep -q "1 zero-byte allocations skipped" && echo "$1" | grep -q "(0 frees of no live block"' - "$out")"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,2000,0\n1,2.0,allocate,0x1000,3000,0\n1,3.0,free,0x1000,3000,0\n' >"$tmp/twice.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/twice.csv" 2>&1)
check "an allocation at a live block's address: peak live $(field "$out" 5), held $(field "$out" 6) (both 3000)" \
    "$(yes_if test "$(field "$out" 5),$(field "$out" 6)" = 3000,3000)"
check "and a warning names its line and the live block's" \
    "$(yes_if sh -c 'echo "$1" | grep -q "line 3: allocate at 0x1000 while the block of line 2 is live"' - "$out")"
# A zero-byte allocation at a live block's address (skipped) leaves the
# block live: its own free is the first at the address, the block's the
# second.  Live: 1024, +4096 = 5120 (peak), then the block's free.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0.1,allocate,0x1000,1024,0\n1,0.2,allocate,0x1000,0,0\n1,0.3,free,0x1000,0,0\n1,0.4,allocate,0x2000,4096,0\n1,0.5,free,0x1000,1024,0\n' >"$tmp/zero-over.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/zero-over.csv" 2>&1)
check "a zero-byte allocation over a live block frees nothing: 2 allocations, 1 free, peak 5120, held 5120" \
    "$(yes_if test "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5),$(field "$out" 6)" = 2,1,5120,5120)"
# An allocation at the address of a block a zero-byte row lies over frees
# that block first: 100, then 10 in its place (the free), then 1000.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0.1,allocate,0x1000,100,0\n1,0.2,allocate,0x1000,0,0\n1,0.3,allocate,0x1000,10,0\n1,0.4,free,0x1000,10,0\n1,0.5,allocate,0x2000,1000,0\n1,0.6,free,0x2000,1000,0\n' >"$tmp/zero-under.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/zero-under.csv" 2>&1)
check "an allocation over a zero-byte row frees the block under it: peak live $(field "$out" 5), held $(field "$out" 6) (both 1000)" \
    "$(yes_if test "$(field "$out" 5),$(field "$out" 6)" = 1000,1000)"
# Zero-byte rows over one another: each free matches the one above.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,0.1,allocate,0x0,0,0\n1,0.2,allocate,0x0,0,0\n1,0.3,allocate,0x0,0,0\n1,0.4,free,0x0,0,0\n1,0.5,free,0x0,0,0\n1,0.6,free,0x0,0,0\n1,0.7,allocate,0x1000,64,0\n1,0.8,free,0x1000,64,0\n' >"$tmp/zeros.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/zeros.csv" 2>&1)
check "three zero-byte rows at one address, three frees: none a free of no live block" \
    "$(yes_if sh -c 'echo "$1" | grep -q "3 zero-byte allocations skipped" && echo "$1" | grep -q "(0 frees of no live block"' - "$out")"
out=$("$replay" --backend sim --stack --concurrent "$tmp/zeros.csv" 2>&1)
rc=$?
check "--stack --concurrent: a usage error (exit $rc), said" \
    "$(yes_if sh -c '[ "$1" -eq 2 ] && echo "$2" | grep -q "do not go together"' - "$rc" "$out")"
printf 'Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId\n1,1.0,allocate,0x1000,100,0,0,a,0\n1,2.0,allocate,0x1000,100,0,1,a,0\n' >"$tmp/devices.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/devices.csv" 2>&1)
check "rows of two devices: said on stderr, replayed on the one actor" \
    "$(yes_if sh -c 'echo "$1" | grep -q "more than one device (0, 1"' - "$out")"
# --conf given twice: the second over the first (the device's 64 MiB kept).
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,104857600,0\n1,2.0,free,0x1000,104857600,0\n' >"$tmp/hundred.csv"
out=$("$replay" --backend sim --csv --conf sim_memory:64M --conf pool_alias:1 "$tmp/hundred.csv" 2>&1)
rc=$?
check "--conf sim_memory:64M --conf pool_alias:1: 100 MiB refused (exit $rc, $(field "$out" 4) failures)" \
    "$(yes_if test "$rc,$(field "$out" 4)" = 1,1)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,free,0x1000,10,0\n' >"$tmp/nolive.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/nolive.csv" 2>&1)
check "nothing live in the trace: reserved over live is n/a ($(field "$out" 8))" \
    "$(yes_if test "$(field "$out" 8)" = n/a)"
# More than 20 failures: 20 named, the rest counted on stderr.
{ echo 'Thread,Time,Action,Pointer,Size,Stream'
  i=1; while [ $i -le 25 ]; do printf '1,%d.0,allocate,0x%x,268435456,0\n' $i $((i * 4096)); i=$((i + 1)); done
} >"$tmp/many.csv"
out=$(DV_BACKEND=sim "$replay" --conf budget:4M "$tmp/many.csv" 2>&1)
rc=$?
check "25 refusals: exit $rc, 20 named, the other 5 said" \
    "$(yes_if sh -c 'test "$2" = 1 && test "$(echo "$1" | grep -c "^dv-replay: line")" = 20 && echo "$1" | grep -q "5 more refusals not named"' - "$out" $rc)"
# A line holding a NUL byte, an impossible time of day: the log refused.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x10,5,0\n\000\000\n' >"$tmp/nul.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/nul.csv" 2>&1)
rc=$?
check "a line with a NUL byte: exit $rc, named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 3: holds a NUL byte"' - "$out" $rc)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,25:61:99.5,allocate,0x10,5,0\n' >"$tmp/tod.csv"
DV_BACKEND=sim "$replay" "$tmp/tod.csv" >/dev/null 2>&1
rc=$?
check "a time of day 25:61:99.5 does not parse (exit $rc)" "$(yes_if test $rc = 1)"
# Usage errors say what was wrong (exit 2); an actor that cannot be made
# exits 2 as well.
out=$("$replay" --repeat 4294967297 "$tmp/tod.csv" 2>&1)
rc=$?
check "--repeat 4294967297: exit $rc, the reason given" \
    "$(yes_if sh -c 'test "$2" = 2 && echo "$1" | grep -q "repeat takes a number"' - "$out" $rc)"
out=$("$replay" --backend sim "$tmp/zero.csv" extra 2>&1)
rc=$?
check "a second log: exit $rc, named" \
    "$(yes_if sh -c 'test "$2" = 2 && echo "$1" | grep -q "a second: extra"' - "$out" $rc)"
"$replay" --backend sim --conf streams:0 "$tmp/zero.csv" >/dev/null 2>&1
rc=$?
check "--conf streams:0 (the actor refuses it): exit $rc" "$(yes_if test $rc = 2)"
# Line ends of any kind; a byte-order mark; logs that are not logs.
printf 'Thread,Time,Action,Pointer,Size,Stream\r1,1.0,allocate,0x10,4096,0\r1,2.0,allocate,0x2000,8192,0\r1,3.0,free,0x10,4096,0\r' >"$tmp/cr.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/cr.csv" 2>&1)
rc=$?
check "lone CR line ends: exit $rc, 3 rows, peak live $(field "$out" 5) (12288)" \
    "$(yes_if test "$rc,$(field "$out" 1),$(field "$out" 5)" = 0,3,12288)"
printf '\357\273\277Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x10,4096,0\n' >"$tmp/bom.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/bom.csv" 2>&1)
rc=$?
check "a UTF-8 byte-order mark before the header: exit $rc, peak live $(field "$out" 5) (4096)" \
    "$(yes_if test "$rc,$(field "$out" 5)" = 0,4096)"
: >"$tmp/empty.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/empty.csv" 2>&1)
rc=$?
check "an empty file is refused: exit $rc, said" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "empty: not a devactor or RMM allocation log"' - "$out" $rc)"
out=$(DV_BACKEND=sim "$replay" "$tmp" 2>&1)
rc=$?
check "a directory is refused: exit $rc, said" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "Is a directory"' - "$out" $rc)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x10,4096,0\nthis is not a row\n' >"$tmp/short.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/short.csv" 2>&1)
rc=$?
check "a row of one field: exit $rc, too few fields named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 3: too few fields"' - "$out" $rc)"
# --scale N: every size times N.
out=$(DV_BACKEND=sim "$replay" --csv --scale 3 "$data/replay-ours.csv" 2>&1)
rc=$?
check "--scale 3: exit $rc, the trace's peak three times 7 MiB ($(field "$out" 5))" \
    "$(yes_if test "$rc,$(field "$out" 5)" = 0,22020096)"
out=$("$replay" --scale 1025 "$data/replay-ours.csv" 2>&1)
rc=$?
check "--scale 1025: exit $rc, the reason given" \
    "$(yes_if sh -c 'test "$2" = 2 && echo "$1" | grep -q "scale takes a number from 1 to 1024"' - "$out" $rc)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x10,18446744073709551615,0\n' >"$tmp/huge.csv"
out=$(DV_BACKEND=sim "$replay" --scale 2 "$tmp/huge.csv" 2>&1)
rc=$?
check "a size that --scale 2 overflows: exit $rc, line 2 named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 2: the size times --scale overflows"' - "$out" $rc)"
# A log with no row to replay (a header alone; failure rows alone):
# nothing replayed, exit 0, in every mode.
printf 'Thread,Time,Action,Pointer,Size,Stream\n' >"$tmp/header.csv"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate failure,(nil),100,0\n' >"$tmp/onlyfail.csv"
for mode in "" --post --stack; do
    out=$(DV_BACKEND=sim "$replay" $mode --csv "$tmp/header.csv" 2>&1)
    rc=$?
    check "a header alone${mode:+ ($mode)}: exit $rc, $(field "$out" 1) rows" \
        "$(yes_if test "$rc,$(field "$out" 1)" = 0,0)"
done
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/onlyfail.csv" 2>&1)
rc=$?
check "failure rows alone: exit $rc, $(field "$out" 1) rows" "$(yes_if test "$rc,$(field "$out" 1)" = 0,0)"
# A quote inside an unquoted field is text (it opens no field that runs
# on over the next lines); text after a quoted field's closing quote
# stays in the field.
printf 'Thread,Time,Action,Pointer,Size,Stream,Device,Tag,QueryId\n1,1.0,allocate,0x1000,100,0,0,x",0\n1,2.0,allocate,0x2000,200,0,0,y",0\n1,3.0,allocate,0x3000,300,0,0,z,0\n' >"$tmp/stray.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/stray.csv" 2>&1)
rc=$?
check "stray quotes inside fields: exit $rc, every row replayed ($(field "$out" 1) rows, peak $(field "$out" 5))" \
    "$(yes_if test "$rc,$(field "$out" 1),$(field "$out" 5)" = 0,3,600)"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,"100"junk,0\n' >"$tmp/qjunk.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/qjunk.csv" 2>&1)
rc=$?
check "text after a quoted size: exit $rc, line 2 does not parse" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 2: a field does not parse"' - "$out" $rc)"
# Times: a time of day is HH:MM:SS[.fraction], and one log keeps to one
# form.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,12:00:00:000900,allocate,0x1000,100,0\n' >"$tmp/colon.csv"
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.5,allocate,0x1000,100,0\n1,12:00:01.5,free,0x1000,100,0\n' >"$tmp/mixed.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/colon.csv" 2>&1)
rc=$?
check "a time of day with a fourth part: exit $rc, line 2 does not parse" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 2: a field does not parse"' - "$out" $rc)"
out=$(DV_BACKEND=sim "$replay" "$tmp/mixed.csv" 2>&1)
rc=$?
check "seconds and times of day in one log: exit $rc, line 3 named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 3: a time of day where the rows before give seconds"' - "$out" $rc)"
# With aliases, a device held whole by 3 MiB blocks of four streams: a
# request for which no granule is left goes where one granule of idle
# memory completes the room in use (20 blocks of 3 MiB, then 21 pairs of
# a free and a request on another stream, on a 64 MiB device).
for mode in --post --stack; do
    out=$(DV_BACKEND=sim "$replay" --csv $mode --conf sim_memory:64M,pool_alias:1 "$data/replay-alias-churn.csv" 2>&1)
    rc=$?
    check "aliases, a device held whole by four streams ($mode): exit $rc, $(field "$out" 4) failures" \
        "$(yes_if test "$rc,$(field "$out" 4)" = 0,0)"
done
# --post --quiet: refusals counted, none named, and no line saying why
# they were not.
{
    echo Thread,Time,Action,Pointer,Size,Stream
    for i in $(seq 1 25); do
        echo "7,$i.0,allocate,0x${i}00000,2147483648,0"
        echo "7,$i.5,free,0x${i}00000,2147483648,0"
    done
} >"$tmp/quiet.csv"
out=$(DV_BACKEND=sim "$replay" --csv --post --quiet "$tmp/quiet.csv" 2>&1)
rc=$?
check "--post --quiet: exit $rc, $(field "$out" 4) failures, no line about them" \
    "$(yes_if sh -c 'test "$2,$3" = 1,25 && ! echo "$1" | grep -q "not named"' - "$out" $rc "$(field "$out" 4)")"
# A row with more fields than its header: refused, named.
printf 'Thread,Time,Action,Pointer,Size,Stream\n1,1.0,allocate,0x1000,100,0,7\n' >"$tmp/long.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/long.csv" 2>&1)
rc=$?
check "a row with 7 fields under RMM's 6: exit $rc, line 2 named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 2: too many fields"' - "$out" $rc)"
# Output that cannot be written: exit 1, said.
if [ -w /dev/full ]; then
    err=$(DV_BACKEND=sim "$replay" --csv "$data/replay-rmm.csv" 2>&1 >/dev/full)
    rc=$?
    check "standard output full: exit $rc, said" \
        "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "stdout"' - "$err" $rc)"
else
    check "standard output full (no /dev/full here: nothing to try)" yes
fi
# RMM's log as RMM writes it for 0 bytes: a null pointer, "(nil)", for
# the allocation and its free; skipped with its free.
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream 1,10:30:45.000001,allocate,"(nil)",0,0 \
    1,10:30:45.000002,allocate,0x1000,2048,0 1,10:30:45.000003,free,"(nil)",0,0 \
    1,10:30:45.000004,free,0x1000,2048,0 >"$tmp/nil0.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/nil0.csv" 2>&1)
rc=$?
check "RMM's zero-byte rows with (nil) pointers are skipped: exit $rc, peak $(field "$out" 5)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 1,1,2048)"
# A header quoted as a CSV writer quoting every field writes it.
printf '%s\n' '"Thread","Time","Action","Pointer","Size","Stream"' \
    '1,1.0,"allocate","0x1000",100,0' '1,2.0,"free","0x1000",100,0' >"$tmp/quoted.csv"
out=$(DV_BACKEND=sim "$replay" --csv "$tmp/quoted.csv" 2>&1)
rc=$?
check "a quoted header: exit $rc, 1 allocation, 1 free, peak $(field "$out" 5)" \
    "$(yes_if test $rc = 0 -a "$(field "$out" 2),$(field "$out" 3),$(field "$out" 5)" = 1,1,100)"
# A trailing comma is one more (empty) field: refused as more of them are.
printf '%s\n' Thread,Time,Action,Pointer,Size,Stream 1,1.0,allocate,0x1000,100,0, >"$tmp/trail.csv"
out=$(DV_BACKEND=sim "$replay" "$tmp/trail.csv" 2>&1)
rc=$?
check "a row ending in a comma (7 fields under RMM's 6): exit $rc, line 2 named" \
    "$(yes_if sh -c 'test "$2" = 1 && echo "$1" | grep -q "line 2: too many fields"' - "$out" $rc)"
exit $failed
