#!/bin/sh
# torch/build-oom.sh OUTPUT [SOURCE] - build libgpusim_torch_oom.so (torch/oom.cpp) against the
# PyTorch that python3 imports: its c10 headers and libc10, its C++ ABI. Put OUTPUT beside
# libgpusim_torch.so (or name it in GPUSIM_TORCH_OOM) and an OOM under the library raises
# torch.OutOfMemoryError. CXX (default c++) compiles it. Exit status 1 when python3 has no torch.
set -eu
out=${1:?usage: build-oom.sh OUTPUT [SOURCE]}
src=${2:-$(dirname "$0")/oom.cpp}
eval "$(python3 -c '
import os, sys
sys.path = [p for p in sys.path if p not in ("", ".")]  # not a torch/ folder where we stand
import torch
print("tdir=%s" % os.path.dirname(torch.__file__))
print("abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
')" || { echo "build-oom.sh: python3 cannot import torch" >&2; exit 1; }
exec "${CXX:-c++}" -std=c++17 -O2 -fPIC -shared -D_GLIBCXX_USE_CXX11_ABI="$abi" \
    -isystem "$tdir/include" "$src" -o "$out" -L"$tdir/lib" -lc10 -Wl,-rpath,"$tdir/lib"
