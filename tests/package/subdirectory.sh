#!/bin/sh
# TAP: a project of its own takes devactor in with add_subdirectory,
# builds (devactor's tools and tests are not built for it) and runs.
#   subdirectory.sh SOURCE_DIR WORK_DIR C_COMPILER
src=$1 work=$2 cc=$3
echo "1..3"
rm -rf "$work"
if cmake -S "$src/tests/package/consumer" -B "$work" -G Ninja -DDEVACTOR_DIR="$src" \
    -DCMAKE_C_COMPILER="$cc" -DDV_CUDA=OFF >"$work.log" 2>&1; then
    echo "ok 1 - configured with add_subdirectory"
else
    echo "not ok 1 - configured with add_subdirectory"; sed 's/^/# /' "$work.log" | tail -20; exit 1
fi
if cmake --build "$work" >>"$work.log" 2>&1; then
    echo "ok 2 - built (the library alone: no tools, no tests)"
else
    echo "not ok 2 - built"; sed 's/^/# /' "$work.log" | tail -20; exit 1
fi
if [ -e "$work/devactor/tools/dv-stress" ] || [ -d "$work/devactor/tests/actor" ]; then
    echo "not ok 3 - devactor's tools or tests were built for a consumer"; exit 1
fi
if out=$("$work/app" 2>&1); then
    echo "ok 3 - runs: $out"
else
    echo "not ok 3 - runs: $out"; exit 1
fi
