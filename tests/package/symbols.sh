#!/bin/sh
# TAP: libdevactor exports the public API and nothing else.
#   symbols.sh SOURCE_DIR libdevactor.so libdevactor.a
# cmake/devactor.sym is the list; it must name exactly the DV_EXPORT
# functions of include/*.h, the shared library's dynamic symbols must be
# exactly the list (Concurrency Kit and the internals hidden), and so
# must the static archive's globals.
src=$1 so=$2 ar=$3
tmp=${TMPDIR:-/tmp}/dv-symbols.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "1..5"
grep '^[A-Za-z_]' "$src/cmake/devactor.sym" | sort -u >"$tmp/list"
# Every declaration marked DV_EXPORT, joined across lines: the name
# before its parameter list.
cat "$src"/include/*.h | grep -v '^#' | tr '\n' ' ' | grep -o 'DV_EXPORT[^;(]*(' |
    sed 's/[[:space:]]*($//; s/.*[^A-Za-z0-9_]//' | sort -u >"$tmp/headers"
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVWiu]$/ {print $3}' | sed 's/@.*//' |
    grep -v '^DEVACTOR_' | sort -u >"$tmp/so"
nm -g --defined-only "$ar" | awk 'NF == 3 && $2 != "A" {print $3}' | sort -u >"$tmp/ar"
check() {
    if diff "$2" "$3" >"$tmp/diff"; then
        echo "ok $1 - $4 ($(wc -l <"$2") names)"
    else
        echo "not ok $1 - $4"
        sed 's/^/#   /' "$tmp/diff"
        failed=1
    fi
}
failed=0
[ -s "$tmp/list" ] && [ -s "$tmp/headers" ] || { echo "Bail out! empty symbol list or headers"; exit 1; }
check 1 "$tmp/list" "$tmp/headers" "cmake/devactor.sym names exactly the headers' DV_EXPORT functions"
check 2 "$tmp/list" "$tmp/so" "the shared library exports exactly the list"
check 3 "$tmp/list" "$tmp/ar" "the static archive's globals are exactly the list"
if nm -D "$so" | grep -q ' ck_\| dv__'; then
    echo "not ok 4 - no Concurrency Kit or internal symbol is visible"; failed=1
else
    echo "ok 4 - no Concurrency Kit or internal symbol is visible"
fi
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
major=$(sed -n 's/^#define DV_VERSION_MAJOR \([0-9]*\)$/\1/p' "$src/include/devactor.h")
if [ "$soname" = "libdevactor.so.$major" ]; then
    echo "ok 5 - SONAME $soname (DV_VERSION_MAJOR $major)"
else
    echo "not ok 5 - SONAME '$soname', want libdevactor.so.$major"; failed=1
fi
exit $failed
