#!/bin/sh
# Make sure the build's dependencies are present: cmake, ninja, a C
# compiler (and a C++ one for the package tests), Concurrency Kit (ck_ring.h and libck.a), and for the tests the
# host BLAS and FFTW the simulated device calls.  As root on Debian or
# Ubuntu, install what is missing; otherwise print the command that would.
# `tools/ensure-deps.sh fuzz` checks for clang and libFuzzer too.
missing=""
command -v cmake >/dev/null 2>&1 || missing="$missing cmake"
command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
# The package tests build C++ consumers of the public headers.
command -v c++ >/dev/null 2>&1 || missing="$missing g++"
command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
# With the argument "fuzz" (make fuzz): clang and its libFuzzer runtime,
# which Debian's clang only recommends, so a fuzzer is test-linked.
if [ "${1:-}" = fuzz ]; then
    if ! command -v clang >/dev/null 2>&1; then
        missing="$missing clang libclang-rt-dev"
    elif ! printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }\n' |
        clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1; then
        missing="$missing libclang-rt-dev"
    fi
fi
ck_found=no
for dir in /usr/include /usr/local/include; do
    [ -f "$dir/ck_ring.h" ] && ck_found=yes
done
ck_lib=no
for lib in /usr/lib/*/libck.a /usr/lib/libck.a /usr/local/lib/libck.a; do
    [ -f "$lib" ] && ck_lib=yes
done
[ "$ck_found" = yes ] && [ "$ck_lib" = yes ] || missing="$missing libck-dev"
# The host libraries the simulated device runs the library actors' calls
# with (opened at run time; devactor builds without them, and their tests
# need them): a CBLAS and FFTW in both precisions.
have_lib() { { ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | grep -q "$1"; }
have_lib 'libopenblas\.so\.0\|libcblas\.so\.3' || missing="$missing libopenblas0-pthread"
have_lib 'libfftw3f\.so\.3' || missing="$missing libfftw3-single3"
have_lib 'libfftw3\.so\.3' || missing="$missing libfftw3-double3"
[ -z "$missing" ] && exit 0

cmd="apt-get install -y$missing"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "devactor: installing:$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive $cmd -qq || {
        echo "devactor: '$cmd' failed" >&2
        exit 1
    }
else
    echo "devactor: missing:$missing" >&2
    echo "devactor: install them with: sudo apt-get update && sudo $cmd" >&2
    exit 1
fi
