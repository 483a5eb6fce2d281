#!/usr/bin/env bash
# Run devactor's tests and tools against the cuda backend on a GPU machine,
# from a build made elsewhere (`make gpu-bundle` writes build-gpu/; its
# binaries link Concurrency Kit statically and load libcuda at run time, so
# they need nothing installed there).  Prints one line per step and a
# summary; exits non-zero when any step failed.
#
#   tools/gpu-check.sh [BUILD_DIR | BUNDLE.tar.xz] [OUT_DIR]
#
# (BUNDLE.tar.xz: what `make gpu-pack` writes, unpacked into a temporary
# folder first.)
#
# OUT_DIR (default $OUT, else /tmp) receives gpu-check-summary.txt and
# gpu-check-logs.txt (every step's full output).
#
# Steps: every TAP test (tests on the sim run too), four actor tests again
# with DV_POOL_ALIAS=1 (the pool with aliases), dv-demo on cuda, then
# compute-sanitizer (memcheck over the device-port and resource conformance
# suites, the guard's tests, the demo, the actor's basic, staging, launch and
# checker tests, the GEMM task, the BLAS and FFT library actors' tests and a
# short dv-stress run; racecheck and
# synccheck over the device-port suite, the launch tests and the GEMM task;
# memcheck over the pool with aliases, alias_cuda)
# where compute-sanitizer is installed, then dv-stress with the
# stream-order checker for GPU_CHECK_STRESS_SECONDS (60; its report goes to
# OUT_DIR/dv-stress.txt), and as long over the pool with aliases
# (dv-stress-alias.txt), then two runs of GPU_CHECK_OVERHEAD_SECONDS (20;
# 0 skips them) with one seed, with and without the checker, for its cost
# (dv-stress-check.txt, dv-stress-nocheck.txt), then dv-bench (its table
# goes to OUT_DIR/dv-bench.txt; GPU_CHECK_BENCH=0 skips it) with PyTorch's
# caching allocator as a peer where python3 has PyTorch
# (tools/peers/build-torch-peer.sh), and its actor section
# GPU_CHECK_ACTOR_RUNS - 1 more times (default 3 runs in all;
# dv-bench-actor-N.txt).
set -u
build=${1:-build-gpu}
out=${2:-${OUT:-/tmp}}
. "$(dirname "$0")/gpu-unpack.sh" # a packed bundle: unpacked first
logs=$(mktemp -d)
mkdir -p "$logs"
export DV_BACKEND=cuda
pass=0 fail=0 skipped=0
summary=()

run_step() { # name, command...
    local name=$1; shift
    local log="$logs/$(echo "$name" | tr '/ ' '__').log"
    local t0=$(date +%s%N)
    "$@" >"$log" 2>&1
    local rc=$?
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    local dt=$(printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)))
    local verdict
    if [ $rc -ne 0 ]; then
        verdict=FAIL; fail=$((fail + 1))
    elif grep -q '^1\.\.0 # SKIP' "$log"; then
        verdict=SKIP; skipped=$((skipped + 1))
    else
        verdict=PASS; pass=$((pass + 1))
    fi
    local tap=$(grep -c '^ok ' "$log"); local notok=$(grep -c '^not ok ' "$log")
    local line=$(printf '%-4s %-44s rc=%-3s %6ss  tap ok=%s not-ok=%s' "$verdict" "$name" "$rc" "$dt" "$tap" "$notok")
    summary+=("$line")
    echo "$line"
    if [ "$verdict" = FAIL ]; then grep -E '^not ok|^#|rror' "$log" | head -20 | sed 's/^/      /'; fi
}

echo "== devactor gpu-check: $(date -u +%Y-%m-%dT%H:%MZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/== gpu: /'

for t in "$build"/tests/*/*.t; do
    name=${t#"$build"/tests/}
    run_step "test $name" "$t"
done
run_step "tool dv-demo (cuda)" "$build/tools/dv-demo" --backend cuda
# Programs written for the default pool, again over the pool with aliases.
for t in actor/basic_cuda actor/oom_cuda actor/reuse_cuda actor/uses_cuda; do
    [ -x "$build/tests/$t.t" ] && run_step "test $t.t +pool_alias" env DV_POOL_ALIAS=1 "$build/tests/$t.t"
done

if command -v compute-sanitizer >/dev/null 2>&1; then
    cs="compute-sanitizer --error-exitcode 99 --print-limit 20"
    # The conformance suite passes bad input on purpose: the driver errors
    # it provokes are expected, so only memory errors and leaks count there.
    run_step "memcheck driver/port_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/driver/port_cuda.t"
    run_step "memcheck resources/conformance_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/resources/conformance_cuda.t"
    run_step "memcheck resources/guard_cuda.t" $cs --tool memcheck --leak-check full \
        "$build/tests/resources/guard_cuda.t"
    run_step "memcheck actor/basic_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/actor/basic_cuda.t"
    # Staged copies: chunks the device and the host hand back and forth
    # through stream memory operations on words in page-locked memory.
    run_step "memcheck actor/staging_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/actor/staging_cuda.t"
    # The driver has no call for a kernel's parameter count: devactor asks
    # for the parameter past the last once per kernel handle, an
    # INVALID_VALUE the sanitizer would report.  devactor checks every
    # other driver result itself, so a real one still fails the tool.
    run_step "memcheck dv-demo" $cs --tool memcheck --report-api-errors no \
        "$build/tools/dv-demo" --backend cuda --rounds 2 --elements 1048576
    if [ -x "$build/tools/dv-stress" ]; then
        run_step "memcheck dv-stress (cuda, 10 s)" $cs --tool memcheck --report-api-errors no \
            "$build/tools/dv-stress" --backend cuda --seconds 10 --threads 4
    fi
    run_step "memcheck actor/launch_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/actor/launch_cuda.t"
    run_step "memcheck tasks/gemm_cuda.t" $cs --tool memcheck --report-api-errors no \
        "$build/tests/tasks/gemm_cuda.t"
    run_step "racecheck actor/launch_cuda.t" $cs --tool racecheck "$build/tests/actor/launch_cuda.t"
    run_step "synccheck actor/launch_cuda.t" $cs --tool synccheck "$build/tests/actor/launch_cuda.t"
    run_step "memcheck actor/checker_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/actor/checker_cuda.t"
    run_step "memcheck resources/alias_cuda.t" $cs --tool memcheck --leak-check full \
        --report-api-errors no "$build/tests/resources/alias_cuda.t"
    run_step "memcheck libs/blas_cuda.t" $cs --tool memcheck --report-api-errors no \
        "$build/tests/libs/blas_cuda.t"
    run_step "memcheck libs/fft_cuda.t" $cs --tool memcheck --report-api-errors no \
        "$build/tests/libs/fft_cuda.t"
    run_step "racecheck tasks/gemm_cuda.t" $cs --tool racecheck "$build/tests/tasks/gemm_cuda.t"
    run_step "synccheck tasks/gemm_cuda.t" $cs --tool synccheck "$build/tests/tasks/gemm_cuda.t"
    run_step "racecheck driver/port_cuda.t" $cs --tool racecheck "$build/tests/driver/port_cuda.t"
    run_step "synccheck driver/port_cuda.t" $cs --tool synccheck "$build/tests/driver/port_cuda.t"
else
    echo "== compute-sanitizer not found: sanitizer steps not run"
fi

if [ -x "$build/tools/dv-stress" ]; then
    mkdir -p "$out"
    secs=${GPU_CHECK_STRESS_SECONDS:-60}
    run_step "stress dv-stress (cuda, $secs s, checker on)" sh -c "'$build/tools/dv-stress' --backend cuda --seconds $secs | tee '$out/dv-stress.txt'"
    run_step "stress dv-stress (cuda, $secs s, pool_alias:1)" sh -c "'$build/tools/dv-stress' --backend cuda --seconds $secs --conf pool_alias:1 | tee '$out/dv-stress-alias.txt'"
    # The checker's cost: the same run without it, for the throughput line.
    osecs=${GPU_CHECK_OVERHEAD_SECONDS:-20}
    if [ "$osecs" != 0 ]; then
        run_step "stress dv-stress (cuda, $osecs s, checker on)" sh -c "'$build/tools/dv-stress' --backend cuda --seconds $osecs --seed 7 | tee '$out/dv-stress-check.txt'"
        run_step "stress dv-stress (cuda, $osecs s, checker off)" sh -c "'$build/tools/dv-stress' --backend cuda --seconds $osecs --seed 7 --no-check-order | tee '$out/dv-stress-nocheck.txt'"
    fi
fi

if [ "${GPU_CHECK_BENCH:-1}" = 1 ] && [ -x "$build/tools/dv-bench" ]; then
    mkdir -p "$out"
    # The peer rows: PyTorch's caching allocator, where python3 has PyTorch.
    if [ -z "${DV_BENCH_PEER:-}" ] && peer=$(tools/peers/build-torch-peer.sh "$logs/peers/libdv_torch_peer.so" 2>"$logs/peer-build.txt"); then
        export DV_BENCH_PEER=$peer
        echo "== peer: $peer"
    else
        echo "== peer: none ($(tail -1 "$logs/peer-build.txt" 2>/dev/null))"
    fi
    run_step "bench dv-bench (cuda)" sh -c "'$build/tools/dv-bench' --backend cuda | tee '$out/dv-bench.txt'"
    # The actor section again, for targets that must hold in three runs.
    for i in $(seq 2 "${GPU_CHECK_ACTOR_RUNS:-3}"); do
        run_step "bench dv-bench actor (cuda, run $i)" sh -c "'$build/tools/dv-bench' --backend cuda --section actor | tee '$out/dv-bench-actor-$i.txt'"
    done
fi

echo
echo "== summary: $pass passed, $fail failed, $skipped skipped"
mkdir -p "$out"
printf '%s\n' "${summary[@]}" > "$out/gpu-check-summary.txt"
echo "$pass passed, $fail failed, $skipped skipped" >> "$out/gpu-check-summary.txt"
for f in "$logs"/*.log; do echo "##### $(basename "$f")"; cat "$f"; done > "$out/gpu-check-logs.txt"
rm -rf "$logs"
[ $fail -eq 0 ]
