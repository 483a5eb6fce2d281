#!/usr/bin/env bash
# Replay the PyTorch traces of tools/traces/data on a GPU through devactor
# and through PyTorch's caching allocator in the same run (dv-replay
# --peer), RUNS times each, and print one CSV line per replay.  Configs:
#   post-xN    the default pool, allocations post-only, REPEAT passes
#              (default 20: the steady state, both allocators warm)
#   kept-xN    the same with pool_keep_mapped:1 (memory never moves)
#   stack-xN   REPEAT passes on the actor's thread through its resource
#              stack (dv-replay --stack: the allocator without messages)
#   alias-post-xN, alias-stack-xN
#              post-xN and stack-xN with pool_alias:1 (the pool with
#              aliases)
#   awaited    one pass, each allocation awaited (dv_ref_access)
#
#   tools/gpu-replay.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR (default build-gpu) holds tools/dv-replay; OUT_DIR (default
# $OUT, else /tmp) receives replay.csv.  The PyTorch peer is built with
# tools/peers/build-torch-peer.sh where python3 has PyTorch; without it the
# devactor rows alone are written.  RUNS (default 3), TRACES (default: all
# four), CONFIGS, EXTRA (more dv-replay options) and BACKEND (cuda; sim to
# try it here) come from the environment.
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
echo "trace,config,run,rows,allocs,frees,failures,peak_live,peak_held,peak_reserved,reserved_over_live,ops_per_s,peer_failures,peer_peak_allocated,peer_peak_reserved,peer_ops_per_s,reserved_vs_peer,ops_vs_peer,maps_per_pass,unmaps_per_pass,driver_calls_per_pass" >"$csv"
status=0
for t in $traces; do
    for run in $(seq 1 "$runs"); do
        for conf in ${CONFIGS:-"post-x$repeat" "kept-x$repeat" awaited}; do
            args=(--backend "${BACKEND:-cuda}" --csv --quiet ${EXTRA:-})
            case $conf in
            post-x*) args+=(--post --repeat "$repeat") ;;
            kept-x*) args+=(--post --repeat "$repeat" --conf pool_keep_mapped:1) ;;
            stack-x*) args+=(--stack --repeat "$repeat") ;;
            alias-post-x*) args+=(--post --repeat "$repeat" --conf pool_alias:1) ;;
            alias-stack-x*) args+=(--stack --repeat "$repeat" --conf pool_alias:1) ;;
            esac
            # The peer in the same run (after the actor).
            [ -n "$peer" ] && args+=(--peer "$peer")
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
