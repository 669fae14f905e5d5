#!/bin/sh
# lab/device_stitch_streams.sh OUTDIR - stitch taking other streams' free handles, on the GPU.
#
# At the limit stitch moves free handles of other streams to a growth (docs/stitch.md, "Free
# handles of other streams at the limit"); on the real driver a move's unmap first waits for the
# whole device (backends/cuda.c), which is what makes memory another stream freed safe to use.
# This runs lab/predict/mlp_streams.py (each batch made on a side stream and used on the main
# one, record_stream) natively and under `gpusim run -p stitch` at caps just above its bound
# (CAPS, bytes; default those of the recording of 2026-12-07, 1.01-1.05 x its 2803892224-byte
# bound), each run's printed losses, statistics (--stats) and requests (--trace) kept as
# OUTDIR/NAME.{log,json,gstrace.gz}. Here, with the same build:
#   diff of each log's "step" lines against native's: the outputs;
#   gpusim replay OUTDIR/stitch-CAP.gstrace.gz -p stitch --capacity CAP: the retries and moves
#   the model gives the run's own requests, beside what the run's statistics say.
# PROG names another program of lab/predict (graph_train: a capture into CUDA graphs, where no
# handle may move), POLICIES other settings run at the same caps (default stitch; files are
# named by the setting with every character but letters, digits, '.', '_' and '-' made '_').
# Needs a built tree carried with its GLib (DEVLIB, default ./.devlib), as the other scripts.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_stitch_streams.sh OUTDIR}
mkdir -p "$out"
[ -d "${DEVLIB:-$root/.devlib}" ] &&
    export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
name=${PROG:-mlp_streams}
case $name in *[!A-Za-z0-9_]* | "") echo "PROG: not a program of lab/predict: $name" >&2; exit 2 ;; esac
prog="$root/lab/predict/$name.py"
[ -f "$prog" ] || { echo "PROG: no $prog" >&2; exit 2; }
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c "import torch; print('torch', torch.__version__)"
    git -C "$root" rev-parse HEAD 2>/dev/null
} >"$out/env.txt" 2>&1
sh "$root/torch/build-oom.sh" "$root/build/libgpusim_torch_oom.so" >"$out/build-oom.log" 2>&1 ||
    echo "build-oom: failed (an OOM is then no torch.OutOfMemoryError)" >&2
timeout 300 python3 "$prog" >"$out/native.log" 2>&1
echo "native: exit $?" >&2
for pol in ${POLICIES:-stitch}; do
    tag=$(printf '%s' "$pol" | tr -c 'A-Za-z0-9._-' '_')
    for cap in ${CAPS:-2833252352 2860515328 2887778304 2944401408}; do
        case $cap in *[!0-9]* | "") echo "skipped (not a byte count): $cap" >&2; continue ;; esac
        f="$out/$tag-$cap"
        timeout 300 "$root/build/gpusim" run -p "$pol" --capacity "$cap" --stats "$f.json" \
            --trace "$f.gstrace.gz" -- python3 "$prog" >"$f.log" 2>&1
        rc=$?
        if [ "$(grep -E '^(step|eval) ' "$out/native.log")" = "$(grep -E '^(step|eval) ' "$f.log")" ]; then
            same="losses identical to native's"
        else
            same="losses DIFFER from native's"
        fi
        echo "$pol at $cap: exit $rc, $same" >&2
    done
done
