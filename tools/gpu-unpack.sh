# Sourced by tools/gpu-check.sh and tools/gpu-replay.sh with $build set:
# where it names a bundle packed by tools/gpu-pack.sh (make gpu-pack), the
# bundle is unpacked into a temporary folder (removed at exit) and $build
# becomes the build folder in it.
case $build in
*.tar.xz)
    unpacked=$(mktemp -d) && tar -C "$unpacked" -xJf "$build" || exit 2
    trap 'rm -rf "$unpacked"' EXIT
    build=$(find "$unpacked" -mindepth 1 -maxdepth 1 -type d | head -1)
    ;;
esac
