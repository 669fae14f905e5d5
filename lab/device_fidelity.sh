#!/bin/sh
# lab/device_fidelity.sh - on the GPU machine: new reference runs of the program classes that
# lab/fidelity.sh holds to the contract (lab/record_pytorch.py's sidecnn and compiled: side
# streams with cuDNN catching OOMs under a cap, CUDA-graph trees under expandable segments),
# each scenario's chain of runs beside the other's (a run's cap is its own process's memory
# fraction, so they do not meet), and the driver's cudaMallocAsync pool request by request
# (lab/async_probe.py, on the bundled traces and designed sequences). Everything lands in $OUT/refs.tgz; unpack it under
# traces/references/ (a folder per scenario) and run lab/fidelity.sh on them.
# Usage: sh lab/device_fidelity.sh   (SCENARIOS="sidecnn compiled" by default; DEADLINE=S
# stops the recorders after S seconds, default 400, and keeps what they finished)
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp}/refs; rm -rf "$R"; mkdir -p "$R"
for s in ${SCENARIOS:-sidecnn compiled}; do
  timeout "${DEADLINE:-400}" python3 lab/record_pytorch.py --scenario "$s" --out "$R/$s" >"$R/$s.parent.log" 2>&1 &
done
# beside them, the driver's cudaMallocAsync pool request by request (lab/async_probe.py)
(
  mkdir -p "$R/async"
  for r in llmgen cut; do
    python3 traces/convert.py -q -o "$R/async/ref-$r.gstrace.gz" \
      "traces/references/pytorch-2.11-h100/${r}__default__nocap.pickle.gz"
  done
  timeout "${DEADLINE:-400}" python3 lab/async_probe.py device "$R/async" traces/data/resnet50.gstrace.gz \
    traces/data/gpt2.gstrace.gz traces/data/batch-alternate.gstrace.gz "$R"/async/ref-*.gstrace.gz
  rm -f "$R"/async/ref-*.gstrace.gz
) >"$R/async.parent.log" 2>&1 &
wait
cat "$R"/*.parent.log
python3 -c "import torch, sys; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), 'python', sys.version.split()[0])" >"$R/env.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$R/env.txt" 2>&1
tar -C "${OUT:-/tmp}" -czf "${OUT:-/tmp}/refs.tgz" refs
ls -la "${OUT:-/tmp}/refs.tgz"
