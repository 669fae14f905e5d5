#!/bin/sh
# bench/faults.sh [BUILD] - the whole fault-injection sweep (docs/robustness.md): every device
# call of the replays of the five bundled traces, under the six standard policies, failed in
# turn, once with a device error and once with an OOM, each run checked (tests/faultsweep.h:
# the heap, the report, the device ledger). Prints a line per trace and policy and the totals;
# exit status 1 when any promise broke. About 15 minutes on this 2-core machine.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/bench/bench_faults" ] || meson compile -C "$build" bench/bench_faults
exec "$build/bench/bench_faults" --every 1
