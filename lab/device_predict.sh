#!/bin/sh
# lab/device_predict.sh - on the GPU machine: gpusim's CPU capture beside real runs, for every
# program of lab/predict (BENCHMARKS.md, "Predictions from a CPU capture").
#
# Phase 1, for each program: the real run under the default and under expandable segments, no
# cap (torch/verify's hook: outcome and memory_stats; lab/predict/hook: the snapshot), and the
# capture, as gpusim predict runs it.
# Phase 2: each setting run for real again at a cap 5% below and 5% above its own real peak
# reserved (a memory fraction, as gpusim verify applies it); with CAPSNAP=1 each of these runs
# leaves its own snapshot too (a memory fraction's run, recorded as a user records it).
# Then tests/test_capture.py. Everything lands in $OUT/predict.tgz; lab/predict_table.py, run
# here with gpusim built, replays the captures and makes the table.
# Usage: sh lab/device_predict.sh   (PROGS="a b" for some; JOBS=N runs at once, default 4;
# PHASES="capture test" for some of real, capture, caps, run, test; NOTAR=1 below)
set -u
cd "$(dirname "$0")/.."
R=${OUT:-/tmp}/predict; rm -rf "$R"; mkdir -p "$R"
export PYTHONUNBUFFERED=1
PROGS=${PROGS:-gpt_varlen generate_kv cnn_train graph_train mlp_streams encoder_finetune}
JOBS=${JOBS:-4}
PHASES=" ${PHASES:-real capture caps run test} "
has() { case $PHASES in *" $1 "*) return 0 ;; esac; return 1; }
conf() { case $1 in default) echo "" ;; expandable) echo "expandable_segments:True" ;; esac; }

real() { # PROGRAM SETTING NAME [CAP]: one real run
  PYTORCH_CUDA_ALLOC_CONF=$(conf "$2") GPUSIM_VERIFY_OUT=$R/$3.json GPUSIM_VERIFY_CAP=${4:-} \
    LAB_SNAPSHOT=${SNAP:+$R/$3.pickle.gz} PYTHONPATH=lab/predict/hook:torch/verify \
    timeout 300 python3 lab/predict/$1.py >$R/$3.log 2>&1
  echo "$3: exit $?"
}
capture() { # PROGRAM: as gpusim predict runs it (the GPU visible; the probes use one
  # operation's memory at a time: torch/capture/gpusim_capture/probe.py)
  t0=$(date +%s.%N)
  GPUSIM_CAPTURE_OUT=$R/$1.cap.gstrace PYTHONPATH=torch/capture \
    timeout "${CAPTURE_TIMEOUT:-300}" python3 lab/predict/$1.py >$R/$1.cap.log 2>&1
  rc=$?
  echo "$1 capture: exit $rc in $(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)") s; $(tail -1 $R/$1.cap.log)"
}
# the capture's own tests, beside the programs (they use little of the device)
has test && { python3 tests/test_capture.py . >$R/test_capture.log 2>&1; echo "test_capture: exit $?" >>$R/test_capture.log; } &
n=0
for p in $PROGS; do
  if has real; then
    for s in default expandable; do SNAP=1 real $p $s "$p.$s" & n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait; done
  fi
  if has capture; then capture $p & n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait; fi
done
wait
has caps && for p in $PROGS; do
  for s in default expandable; do
    peak=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1]))['devices']['0']; print(d['reserved_bytes.all.peak'])" $R/$p.$s.json 2>/dev/null) || continue
    for f in 0.95 1.05; do
      cap=$(python3 -c "print(int($peak * $f))")
      SNAP=${CAPSNAP:-} real $p $s "$p.$s.cap$f" $cap & n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait
    done
  done
done
wait
# Phase 3: gpusim run, where the build was carried (build/gpusim, build/libgpusim_torch.so and
# GLib in .devlib): each program unmodified on gpusim's allocator (its OOM shim built here).
if has run && [ -x build/gpusim ] && [ -f build/libgpusim_torch.so ]; then
  [ -d .devlib ] && export LD_LIBRARY_PATH=$PWD/.devlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  sh torch/build-oom.sh build/libgpusim_torch_oom.so >$R/build-oom.log 2>&1 || echo "build-oom: failed"
  for p in $PROGS; do
    ( build/gpusim run -p pytorch --stats $R/$p.run.json -- python3 lab/predict/$p.py >$R/$p.run.log 2>&1
      echo "$p under gpusim run: exit $?" ) & n=$((n + 1)); [ $((n % JOBS)) -eq 0 ] && wait
  done
  wait
fi
wait
has test && cat $R/test_capture.log
{ python3 -c "import torch; print('torch', torch.__version__)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; } >$R/machine.txt 2>&1
cat $R/machine.txt
# NOTAR=1: the files left as they are under $OUT/predict (what a call cut short still returns)
[ -n "${NOTAR:-}" ] || { tar -czf "${OUT:-/tmp}/predict.tgz" -C "$(dirname "$R")" predict && rm -rf "$R"; }
