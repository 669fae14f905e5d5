#!/bin/sh
# lab/device_pools.sh device OUTDIR | compare OUTDIR - the real pools behind the cupy and
# cuda-async policies, driven with the requests of real traces.
#
#   device   on the GPU machine (the project's `device` tool; CuPy 14 there, no build needed):
#            every trace below through cupy.cuda.MemoryPool and through the driver's
#            cudaMallocAsync pool (release threshold UINT64_MAX as PyTorch sets it, and 0),
#            into OUTDIR/pools-device.csv, plus env.txt (GPU, driver, CuPy);
#   compare  here, with a built tree: the same traces through `gpusim replay` under cupy and
#            the cuda-async model, measured vs modelled, into OUTDIR/pools-compare.txt.
# The traces: the bundled single-client ones (traces/data; the two-client ones need two pools
# on one device and are left out) and two reference recordings of traces/references
# (llmgen, cut; default settings) converted with traces/convert.py into OUTDIR/ref-*.gstrace.gz,
# where compare finds them. lab/device_pools.py does the work.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: device_pools.sh device|compare OUTDIR}
out=${2:?usage: device_pools.sh device|compare OUTDIR}
case $mode in
device)
    mkdir -p "$out"
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
        python3 -c 'import cupy; print("cupy", cupy.__version__, "runtime", cupy.cuda.runtime.runtimeGetVersion(), "driver", cupy.cuda.runtime.driverGetVersion())'
    } >"$out/env.txt" 2>&1 || true
    for r in llmgen cut; do
        python3 "$root/traces/convert.py" -q -o "$out/ref-$r.gstrace.gz" \
            "$root/traces/references/pytorch-2.11-h100/${r}__default__nocap.pickle.gz"
    done
    python3 "$root/lab/device_pools.py" device "$out" \
        "$root/traces/data/resnet50.gstrace.gz" "$root/traces/data/gpt2.gstrace.gz" \
        "$root/traces/data/batch-alternate.gstrace.gz" "$out"/ref-*.gstrace.gz
    ;;
compare)
    gpusim=$root/build/gpusim
    [ -x "$gpusim" ] || { echo "device_pools.sh: build first: meson setup build && meson compile -C build" >&2; exit 2; }
    python3 "$root/lab/device_pools.py" compare "$out" "$gpusim"
    ;;
*) echo "device_pools.sh: mode '$mode': device or compare" >&2; exit 2 ;;
esac
