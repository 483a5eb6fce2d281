#!/usr/bin/env bash
# Build dv-bench's PyTorch peer (torch_peer.cpp) against the PyTorch that
# python3 imports, into OUT (default build-peers/libdv_torch_peer.so).
# Prints the library's path; exits non-zero (printing why) where PyTorch,
# its headers or a C++ compiler are missing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-build-peers/libdv_torch_peer.so}
py=${PYTHON:-python3}
torch=$("$py" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) || {
    echo "build-torch-peer: $py cannot import torch" >&2; exit 1; }
version=$("$py" -c 'import torch; print(torch.__version__)')
abi=$("$py" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))')
cuda_home=${CUDA_HOME:-/usr/local/cuda}
cxx=${CXX:-g++}
command -v "$cxx" >/dev/null || { echo "build-torch-peer: no $cxx" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
# libcudart: PyTorch's own (the nvidia-cuda-runtime wheel) when there is one.
rt_dir=$("$py" -c 'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null || true)
[ -n "$rt_dir" ] && [ -d "$rt_dir" ] || rt_dir=$cuda_home/lib64
rt=$(ls "$rt_dir"/libcudart.so* 2>/dev/null | head -1)
[ -n "$rt" ] || { echo "build-torch-peer: no libcudart in $rt_dir" >&2; exit 1; }
"$cxx" -O2 -std=c++17 -shared -fPIC -fvisibility=hidden \
    -D_GLIBCXX_USE_CXX11_ABI="$abi" -DTORCH_VERSION_STRING_FALLBACK="\"$version\"" \
    -I"$torch/include" -I"$torch/include/torch/csrc/api/include" -I"$cuda_home/include" \
    "$here/torch_peer.cpp" -o "$out" \
    -L"$torch/lib" -lc10_cuda -lc10 "$rt" \
    -Wl,-rpath,"$torch/lib" -Wl,-rpath,"$rt_dir"
echo "$out"
