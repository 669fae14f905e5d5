#!/bin/sh
# ir_reference.sh BENCH_REPLAY TRACES_DIR - instructions an event (bench/ir_per_event.sh) of
# the pytorch policy on every converted reference run in TRACES_DIR (NAME.gstrace.gz with
# NAME.ref.json beside it, as traces/convert.py --reference writes them), each under its run's
# own setting and cap, with --continue-on-oom. Passes: 400000 / events, between 2 and 20.
# Prints "TRACE POLICY IR_PER_EVENT EVENTS" per trace. Run from the repository root.
#
#   bench/results/replay-speed-2026-11-23c/ir_reference.sh build/bench/bench_replay /tmp/ref
set -eu
bin=$1 dir=$2
for t in "$dir"/*.gstrace.gz; do
    n=$(basename "$t" .gstrace.gz)
    # shellcheck disable=SC2046
    set -- $(bench/ref_setting.sh "$dir/$n.ref.json")
    pol=$1 cap=$2
    ev=$(gzip -dc "$t" | grep -vc '^#')
    passes=$((400000 / ev))
    [ "$passes" -lt 2 ] && passes=2
    [ "$passes" -gt 20 ] && passes=20
    if [ "$cap" = 0 ]; then
        r=$(bench/ir_per_event.sh "$bin" "$t" "$pol" "$passes")
    else
        r=$(bench/ir_per_event.sh "$bin" "$t" "$pol" "$passes" --capacity "$cap")
    fi
    echo "$r $ev"
done
