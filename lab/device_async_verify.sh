#!/bin/sh
# lab/device_async_verify.sh GPUSIM OUTDIR - on a GPU machine (the project's `device` tool): the
# cuda-async model's verdicts held against PyTorch's own backend:cudaMallocAsync, with programs
# of ours (lab/predict/) run unmodified under gpusim verify. The prediction of each is its
# recording under the native allocator (lab/results/h100-2026-12-05-predict/NAME.default.
# gstrace.gz) replayed under each setting: cuda-async (the driver's pool, PYTORCH_CUDA_ALLOC_CONF=
# backend:cudaMallocAsync) and pytorch (the native default, the control). gpusim verify reports
# each run's peak reserved (for cudaMallocAsync PyTorch reads the pool's ReservedMemHigh) beside
# the replay's; OUTDIR/NAME.json holds them (lab/async_verify_table.py reads them).
#
# PROGRAMS (default "cnn_train encoder_finetune generate_kv gpt_varlen mlp_streams"). GPUSIM:
# a gpusim built here (with its GLib beside it: LD_LIBRARY_PATH).
usage="usage: device_async_verify.sh GPUSIM OUTDIR"
. "$(dirname "$0")/verify_setup.sh"
for p in ${PROGRAMS:-cnn_train encoder_finetune generate_kv gpt_varlen mlp_streams}; do
    t0=$(date +%s)
    "$G" verify -q --prediction "$root/lab/results/h100-2026-12-05-predict/$p.default.gstrace.gz" \
        -p cuda-async -p pytorch -f json -o "$out/$p.json" -- python3 "$root/lab/predict/$p.py" \
        >"$out/$p.log" 2>&1
    echo "$p: exit $? in $(($(date +%s) - t0)) s" >>"$out/results.txt"
done
