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
#   tools/gpu-replay.sh [BUILD_DIR | BUNDLE.tar.xz] [OUT_DIR]
#
# BUILD_DIR (default build-gpu) holds tools/dv-replay (a bundle packed by
# `make gpu-pack` is unpacked into a temporary folder first); OUT_DIR (default
# $OUT, else /tmp) receives replay.csv.  The PyTorch peer is built with
# tools/peers/build-torch-peer.sh where python3 has PyTorch; without it the
# devactor rows alone are written.  RUNS (default 3), TRACES (default: all
# four), CONFIGS, EXTRA (more dv-replay options) and BACKEND (cuda; sim to
# try it here) come from the environment.  TRACES may also name logs that
# do not repeat themselves, written into OUT_DIR by
# tools/traces/random_log.py: random1 (200,000 rows, one stream), random4
# (four streams) and random8x (50,000 rows, 8 streams, 16 threads, frees
# on any stream).
set -u
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp}}
. "$(dirname "$0")/gpu-unpack.sh" # a packed bundle: unpacked first
here=$(cd "$(dirname "$0")" && pwd)
data=$here/traces/data
runs=${RUNS:-3}
repeat=${REPEAT:-20}
traces=${TRACES:-cnn transformer inference multistream}
mkdir -p "$out"
csv=$out/replay.csv
peer=$(bash "$here/peers/build-torch-peer.sh" "$out/peer/libdv_torch_peer.so" 2>"$out/peer-build.txt") || peer=
echo "trace,config,run,rows,allocs,frees,failures,peak_live,peak_held,peak_reserved,reserved_over_live,ops_per_s,peer_failures,peer_peak_allocated,peer_peak_reserved,peer_ops_per_s,reserved_vs_peer,ops_vs_peer,maps_per_pass,unmaps_per_pass,driver_calls_per_pass,later_ops_per_s,peer_later_ops_per_s,later_vs_peer,later_calls_per_pass,later_median_ops_per_s,peer_later_median_ops_per_s,later_median_vs_peer" >"$csv"
status=0
# The log of trace t: a captured one, else a random one written here.
log_of() {
    case $1 in
    random1) set -- "$1" --rows 200000 --seed 3 ;;
    random4) set -- "$1" --rows 200000 --streams 4 --seed 1 ;;
    random8x) set -- "$1" --rows 50000 --streams 8 --threads 16 --seed 2 --cross ;;
    *) echo "$data/$1.csv.gz"; return ;;
    esac
    local name=$1
    shift
    [ -f "$out/$name.csv.gz" ] || python3 "$here/traces/random_log.py" "$@" -o "$out/$name.csv.gz"
    echo "$out/$name.csv.gz"
}
for t in $traces; do
    log=$(log_of "$t")
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
            "$build/tools/dv-replay" "${args[@]}" "$log" >"$out/replay-one.txt" \
                2>>"$out/replay-err.txt"
            rc=$?
            line=$(tail -1 "$out/replay-one.txt")
            [ $rc -ne 0 ] && status=1
            echo "$t,$conf,$run,$line" | tee -a "$csv"
        done
    done
done
exit $status
