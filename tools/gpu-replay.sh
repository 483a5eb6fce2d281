#!/usr/bin/env bash
# Replay the PyTorch traces of tools/traces/data on a GPU through devactor
# (the pool growing in place, each allocation awaited and post-only
# (--post), and post-only REPEAT times in a row (default 20: the steady
# state, both allocators warm); and the older chunks for comparison) and
# through PyTorch's caching allocator in the same run (dv-replay --peer),
# RUNS times each, and print one CSV line per replay.
#
#   tools/gpu-replay.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build-gpu) holds tools/dv-replay; OUT_DIR (default
# $OUT, else /tmp) receives replay.csv.  The PyTorch peer is built with
# tools/peers/build-torch-peer.sh where python3 has PyTorch; without it the
# devactor rows alone are written.  RUNS (default 3), TRACES (default: all
# four), EXTRA (more dv-replay options) and BACKEND (cuda; sim to try it
# here) come from the environment.
set -u
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp}}
here=$(cd "$(dirname "$0")" && pwd)
data=$here/traces/data
runs=${RUNS:-3}
repeat=${REPEAT:-20}
traces=${TRACES:-cnn transformer inference multistream}
mkdir -p "$out"
csv=$out/replay.csv
peer=$(bash "$here/peers/build-torch-peer.sh" "$out/peer/libdv_torch_peer.so" 2>"$out/peer-build.txt") || peer=
echo "trace,config,run,rows,allocs,frees,failures,peak_live,peak_held,peak_reserved,reserved_over_live,ops_per_s,peer_failures,peer_peak_allocated,peer_peak_reserved,peer_ops_per_s,reserved_vs_peer,ops_vs_peer" >"$csv"
status=0
for t in $traces; do
    for run in $(seq 1 "$runs"); do
        for conf in default post "post-x$repeat" pool_chunks:1; do
            [ "$conf" = post-x1 ] && continue
            args=(--backend "${BACKEND:-cuda}" --csv --quiet ${EXTRA:-})
            [ "$conf" = post ] && args+=(--post)
            [ "$conf" = "post-x$repeat" ] && args+=(--post --repeat "$repeat")
            [ "$conf" = pool_chunks:1 ] && args+=(--conf "$conf")
            # The peer in the same run (after the actor).
            [ -n "$peer" ] && [ "$conf" != pool_chunks:1 ] && args+=(--peer "$peer")
            "$build/tools/dv-replay" "${args[@]}" "$data/$t.csv.gz" >"$out/replay-one.txt" \
                2>>"$out/replay-err.txt"
            rc=$?
            line=$(tail -1 "$out/replay-one.txt")
            [ $rc -ne 0 ] && status=1
            echo "$t,$conf,$run,$line" | tee -a "$csv"
        done
    done
done
exit $status
