#!/bin/sh
# TAP: programs outside devactor's tree build against it and run on the sim,
# in C and in C++ (-std=c++17 -Wall -Wextra -pedantic -Werror).
#
#   consumers.sh subdir    SOURCE_DIR BUILD_DIR WORK_DIR CC CXX
#       add_subdirectory and FetchContent of the source tree (devactor's
#       tools and tests are not built for a consumer)
#   consumers.sh installed SOURCE_DIR BUILD_DIR WORK_DIR CC CXX
#       cmake --install of BUILD_DIR into WORK_DIR/prefix, then
#       find_package against the install and against the build tree, and
#       pkg-config against the install and the build tree (its
#       devactor-uninstalled.pc), each static and shared
mode=$1 src=$2 build=$3 work=$4 cc=$5 cxx=$6
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() {
    n=$((n + 1)) failed=$((failed + 1))
    echo "not ok $n - $1"
    [ -n "${2:-}" ] && [ -f "$2" ] && tail -25 "$2" | sed 's/^/#   /'
}
# step NAME LOG command...: one test point, the command's output in LOG.
step() {
    name=$1 log=$2
    shift 2
    if "$@" >"$log" 2>&1; then ok "$name"; else not_ok "$name" "$log"; return 1; fi
}
# run NAME BINARY: runs on the sim, prints what it printed.
run() {
    if out=$(DV_BACKEND=sim "$2" 2>&1); then ok "$1: $out"; else not_ok "$1: $out"; fi
}
# needs NAME BINARY PATTERN yes|no: what the binary's dynamic section names.
needs() {
    deps=$(readelf -d "$2" 2>/dev/null | grep NEEDED)
    if echo "$deps" | grep -q "$3"; then has=yes; else has=no; fi
    if [ "$has" = "$4" ]; then ok "$1"; else not_ok "$1 (NEEDED: $(echo "$deps" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' '))"; fi
}
rm -rf "$work"
mkdir -p "$work"
cflags="-std=c11 -Wall -Wextra -pedantic -Werror"
cxxflags="-std=c++17 -Wall -Wextra -pedantic -Werror"

case $mode in
subdir)
    echo "1..8"
    for how in add_subdirectory FetchContent; do
        b=$work/$how
        fetch=OFF
        [ $how = FetchContent ] && fetch=ON
        step "$how: configured" "$b.log" cmake -S "$src/tests/package/subdir" -B "$b" -G Ninja \
            -DDEVACTOR_DIR="$src" -DUSE_FETCHCONTENT=$fetch -DCMAKE_C_COMPILER="$cc" \
            -DCMAKE_CXX_COMPILER="$cxx" -DDV_CUDA=OFF || continue
        step "$how: built, C and C++" "$b.build.log" cmake --build "$b" || continue
        if find "$b" -name dv-stress -o -name 'basic.t' | grep -q .; then
            not_ok "$how: devactor's tools or tests were built for a consumer"
        fi
        run "$how: C" "$b/app"
        run "$how: C++" "$b/app_cxx"
    done
    ;;
installed)
    echo "1..29"
    prefix=$work/prefix
    # The build's install manifest is the user's (their own install's list
    # of files): kept as it was.
    manifest=$build/install_manifest.txt
    [ -f "$manifest" ] && cp "$manifest" "$work/manifest.saved"
    step "cmake --install into a prefix" "$work/install.log" \
        cmake --install "$build" --prefix "$prefix" || { echo "Bail out! no install"; exit 1; }
    if [ -f "$work/manifest.saved" ]; then mv "$work/manifest.saved" "$manifest"; else rm -f "$manifest"; fi
    libdir=$(dirname "$(find "$prefix" -name libdevactor.a | head -1)")
    for where in installed build-tree; do
        b=$work/find-$where
        if [ $where = installed ]; then loc="-DCMAKE_PREFIX_PATH=$prefix"; else loc="-Ddevactor_DIR=$build"; fi
        step "find_package ($where): configured" "$b.log" cmake -S "$src/tests/package/find" -B "$b" \
            -G Ninja "$loc" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
            || continue
        step "find_package ($where): built, C and C++" "$b.build.log" cmake --build "$b" || continue
        run "find_package ($where): C, static" "$b/app"
        run "find_package ($where): C++, static" "$b/app_cxx"
        run "find_package ($where): C, shared" "$b/app_shared"
        needs "find_package ($where): the static program needs no libdevactor, no libck" \
            "$b/app" 'libdevactor\|libck' no
    done
    for where in installed build-tree; do
        b=$work/pc-$where
        mkdir -p "$b"
        if [ $where = installed ]; then pcpath=$libdir/pkgconfig; else pcpath=$build; fi
        export PKG_CONFIG_PATH=$pcpath
        if ! flags=$(pkg-config --cflags devactor) || ! libs=$(pkg-config --libs devactor) ||
            ! slibs=$(pkg-config --static --libs devactor); then
            not_ok "pkg-config ($where): devactor.pc found"
            continue
        fi
        ok "pkg-config ($where): $libs"
        ldir=$(pkg-config --variable=libdir devactor)
        # shellcheck disable=SC2086
        step "pkg-config ($where): C and C++, shared and static, built" "$b.log" sh -c "
            $cc $cflags $flags -o $b/app $src/tests/package/app.c $libs -Wl,-rpath,$ldir &&
            $cxx $cxxflags $flags -o $b/app_cxx $src/tests/package/app.cpp $libs -Wl,-rpath,$ldir &&
            $cc $cflags $flags -o $b/app_static $src/tests/package/app.c -L$ldir -Wl,-Bstatic -ldevactor \
                -Wl,-Bdynamic $(echo "$slibs" | sed 's/-ldevactor//')" ||
            continue
        run "pkg-config ($where): C, shared" "$b/app"
        run "pkg-config ($where): C++, shared" "$b/app_cxx"
        run "pkg-config ($where): C, static" "$b/app_static"
        needs "pkg-config ($where): the shared program needs libdevactor.so.0" \
            "$b/app_cxx" 'libdevactor\.so\.0\]' yes
        needs "pkg-config ($where): the shared program needs no libck" "$b/app_cxx" 'libck' no
        needs "pkg-config ($where): the static program needs no libdevactor" "$b/app_static" \
            'libdevactor\|libck' no
    done
    ;;
*)
    echo "consumers.sh: mode subdir or installed" >&2
    exit 2
    ;;
esac
[ "$n" -gt 0 ] && [ "$failed" = 0 ]
