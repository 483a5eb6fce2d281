#!/bin/sh
# Pack a GPU build (make gpu-bundle) for copying to a GPU machine: what
# tools/gpu-check.sh and tools/gpu-replay.sh run (the test and tool
# binaries, the library, CTest's files), without the object files, static
# libraries and build system's state, binaries stripped, as one .tar.xz
# whose top folder is the build folder's name.  The bundle stripped is
# about 62 MB; packed, about 4 MB.
#
#   tools/gpu-pack.sh [BUILD_DIR] [OUT.tar.xz]
#
# On the GPU machine: tools/gpu-check.sh OUT.tar.xz (or tools/gpu-replay.sh),
# which unpack it into a temporary folder, or tar -xJf OUT.tar.xz first.
set -eu
build=${1:-build-gpu}
out=${2:-$build.tar.xz}
[ -d "$build" ] || { echo "gpu-pack: no $build (make gpu-bundle first)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-pack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
name=$(basename "$build")
cp -RP "$build" "$tmp/$name"
find "$tmp/$name" -name CMakeFiles -type d -prune -exec rm -rf {} +
find "$tmp/$name" \( -name '*.o' -o -name '*.a' -o -name '.ninja*' \) -exec rm -f {} +
# Strip what is an ELF file (strip refuses the rest: scripts, data).
find "$tmp/$name" -type f -perm -u+x -exec sh -c \
    'for f; do head -c 4 "$f" | grep -q ELF && strip "$f"; done; true' sh {} +
tar -C "$tmp" -cf - "$name" | xz -T0 -6 >"$out"
echo "$out: $(wc -c <"$out") bytes"
