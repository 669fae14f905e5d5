#!/bin/sh
# lab/device_stitch.sh OUTDIR - the policy-family work on a machine with an NVIDIA GPU and PyTorch
# (the
# project's `device` tool): ResNet-50 training, GPT-2 small training and an LLM generation loop
# (lab/device_stitch.py), each run three ways in turn, ROUNDS times (so drift in the machine hits
# all three alike):
#   native      PyTorch's own caching allocator (PYTORCH_CUDA_ALLOC_CONF unset)
#   expandable  PyTorch's own, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   stitch      gpusim's stitch policy through build/libgpusim_torch.so (GPUSIM_POLICY, default
#               stitch; GPUSIM_STATS gives its peak reserved)
# then each workload under a cap, CAPS times expandable segments' peak reserved of round 1
# (default "1.0": where expandable segments surely completes): native PyTorch (its memory
# fraction), expandable segments (the same) and gpusim through `gpusim run --capacity` (its OOM
# raised as PyTorch's, so the program records where it died); a cap expandable segments
# survives, stitch must survive too. Then, if time is left before DEADLINE (seconds since the start, default 300), each workload once
# more under gpusim with GPUSIM_TRACE, untimed: its requests as a gpusim trace, for replays here.
# lab/device_stitch_summary.py OUTDIR makes the table (and checks that the outputs are equal).
#
# Environment: ROUNDS (default 2), WORKLOADS (default "resnet50 gpt2 llmgen"), POLICY (gpusim's,
# default stitch), CAPS (default 1.0; "" for none), DEADLINE. Needs a built tree (build/libgpusim_torch.so, with the CUDA Toolkit
# found). On the device machine, which has no GLib, the build made here is carried with its shared
# libraries (DEVLIB, default ./.devlib; BENCHMARKS.md "Simulator against the real device").
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: device_stitch.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -d "${DEVLIB:-$root/.devlib}" ] && export LD_LIBRARY_PATH="${DEVLIB:-$root/.devlib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cd "$root"
rounds=${ROUNDS:-2}
workloads=${WORKLOADS:-resnet50 gpt2 llmgen}
policy=${POLICY:-stitch}
deadline=${DEADLINE:-300}
start=$(date +%s)
export PYTHONUNBUFFERED=1
{
    head -2 /etc/os-release
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
    echo "rounds $rounds, workloads $workloads, gpusim policy $policy"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

run() { # NAME ENV... -- ARGS...: one process, its log appended to OUTDIR/run.log
    name=$1
    shift
    echo "== $name" >>"$out/run.log"
    env "$@" >>"$out/run.log" 2>&1
    echo "$name exit status: $?" | tee -a "$out/run.log"
}

r=1
while [ "$r" -le "$rounds" ]; do
    for w in $workloads; do
        py="python3 lab/device_stitch.py --workload $w"
        # shellcheck disable=SC2086
        run "$w-native-$r" PYTORCH_CUDA_ALLOC_CONF= $py --allocator native -o "$out/$w-native-$r.json"
        # shellcheck disable=SC2086
        run "$w-expandable-$r" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
            $py --allocator native -o "$out/$w-expandable-$r.json"
        # shellcheck disable=SC2086
        run "$w-stitch-$r" PYTORCH_CUDA_ALLOC_CONF= GPUSIM_POLICY="$policy" \
            GPUSIM_STATS="$out/$w-stitch-stats-$r.json" \
            $py --allocator gpusim -o "$out/$w-stitch-$r.json"
    done
    r=$((r + 1))
done

# the capped runs: gpusim run raises gpusim's OOM as torch.OutOfMemoryError through the shim
# built here against this machine's PyTorch
[ -n "${CAPS-1.0}" ] && { sh torch/build-oom.sh build/libgpusim_torch_oom.so >"$out/build-oom.log" 2>&1 ||
    echo "build-oom: failed (gpusim's OOM will abort the process)" | tee -a "$out/run.log"; }
for f in ${CAPS-1.0}; do
    for w in $workloads; do
        cap=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["max_memory_reserved"] * float(sys.argv[2])))' \
            "$out/$w-expandable-1.json" "$f") || continue
        py="python3 lab/device_stitch.py --workload $w --cap-bytes $cap"
        # shellcheck disable=SC2086
        run "$w-native-cap$f" PYTORCH_CUDA_ALLOC_CONF= $py --allocator native -o "$out/$w-native-cap$f.json"
        # shellcheck disable=SC2086
        run "$w-expandable-cap$f" PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
            $py --allocator native -o "$out/$w-expandable-cap$f.json"
        # shellcheck disable=SC2086
        run "$w-stitch-cap$f" PYTORCH_CUDA_ALLOC_CONF= build/gpusim run -p "$policy" --capacity "$cap" \
            --stats "$out/$w-stitch-stats-cap$f.json" -- $py --allocator hooked -o "$out/$w-stitch-cap$f.json"
    done
done

for w in $workloads; do
    if [ $(($(date +%s) - start)) -ge "$deadline" ]; then
        echo "no time left for the trace of $w" | tee -a "$out/run.log"
        continue
    fi
    # shellcheck disable=SC2086
    run "$w-trace" PYTORCH_CUDA_ALLOC_CONF= GPUSIM_POLICY="$policy" \
        GPUSIM_STATS="$out/$w-trace-stats.json" GPUSIM_TRACE="$out/$w-stitch.gstrace.gz" \
        python3 lab/device_stitch.py --workload "$w" --allocator gpusim -o "$out/$w-trace.json"
done
echo "elapsed $(($(date +%s) - start)) s" | tee -a "$out/run.log"
