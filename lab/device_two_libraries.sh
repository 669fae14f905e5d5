#!/bin/sh
# lab/device_two_libraries.sh - on the GPU machine: lab/two_libraries.py (CuPy's ETL, then
# PyTorch's training) natively and under gpusim run's three arrangements, on a device filled
# until the allocators have a budget (BENCHMARKS.md, "Two libraries on one real GPU").
#
# 1. native, the whole GPU: each phase's peak (CuPy's pool, PyTorch's reserved) and the result;
# 2. the budget: the larger peak plus 40% of the smaller (both cannot be cached at once, one
#    can, with room to spare);
# 3. native at the budget (CuPy's own pool and PyTorch's own allocator), then gpusim run
#    --clients separate, shared, cooperative at the budget (-p pytorch -p cupy=cupy), each
#    recording its trace and statistics.
# Everything lands in $OUT/two.tgz; lab/two_libraries_table.py, run here with gpusim built,
# replays the traces and makes the table. Carry build/gpusim, build/libgpusim_torch.so and
# .devlib (GLib).
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp}/two; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
[ -d .devlib ] && export LD_LIBRARY_PATH=$PWD/.devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sh torch/build-oom.sh build/libgpusim_torch_oom.so >"$R/build-oom.log" 2>&1 || echo "build-oom: failed"
run() { # NAME [gpusim run options]: one run of the program
  name=$1; shift
  t0=$(date +%s)
  if [ $# -gt 0 ]; then
    LAB_OUT=$R/$name.json timeout 300 build/gpusim run "$@" --trace "$R/$name.gstrace.gz" \
      --stats "$R/$name.stats.json" -- python3 lab/two_libraries.py >"$R/$name.log" 2>&1
  else
    LAB_OUT=$R/$name.json timeout 300 python3 lab/two_libraries.py >"$R/$name.log" 2>&1
  fi
  echo "$name: exit $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$R/$name.log")"
}
run native
B=$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
c, t = r['etl_pool_bytes'], r['train_peak_reserved']
print(int(max(c, t) + 0.4 * min(c, t)))" "$R/native.json") || { cat "$R/native.log"; exit 1; }
echo "budget: $B bytes"
echo "$B" >"$R/budget.txt"
export LAB_BUDGET=$B
run native-budget
for m in separate shared cooperative; do
  run "$m" --clients "$m" -p pytorch -p cupy=cupy
done
{ python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >"$R/machine.txt" 2>&1
cat "$R/machine.txt"
tar -czf "${OUT:-/tmp}/two.tgz" -C "$(dirname "$R")" two && rm -rf "$R"
