#!/bin/sh
# bound_cost.sh OLD NEW [RUNS] - what `gpusim replay` of a bundled trace costs, with its offline
# bound planned at the replay and with the bound stored in the trace, for two gpusim binaries.
#
#   OLD, NEW  gpusim binaries (say, one built from main's HEAD in /tmp, and this tree's)
#   RUNS      CPU-time runs of each command (default 20)
#
# For gpt2 and resnet50 of traces/data: "planned" is the trace as traces/convert.py writes it
# (the bundled file less its offline_planner and offline_bytes_by_device lines), "stored" the
# bundled file. Prints, per binary, trace and form: the instructions of the whole process and
# of gs_bound_compute (callgrind, load-independent), and the CPU time (perf stat's task-clock,
# mean of RUNS; /usr/bin/time's user+sys where perf cannot count it), with the CPU time of
# `gpusim --version` (the process's start, paid by every command) beside it. Needs valgrind.
#
#   bench/bound_cost.sh /tmp/gs-main/build/gpusim build/gpusim
set -eu
[ $# -ge 2 ] || { echo "usage: bound_cost.sh OLD NEW [RUNS]" >&2; exit 2; }
old=$1 new=$2 runs=${3:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { # FUNC|- CMD...: instructions, in FUNC (inclusive) or in all
    f=$1
    shift
    if [ "$f" = - ]; then set -- valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@"
    else set -- valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" --toggle-collect="$f" "$@"; fi
    "$@" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$tmp/cg"
}
cpu_ms() { # CMD...: mean CPU ms over $runs runs
    if perf stat -x, -e task-clock true >/dev/null 2>&1; then
        perf stat -x, -e task-clock -r "$runs" "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { printf "%.2f", $1 }'
    else
        i=0 sum=0
        while [ $i -lt "$runs" ]; do
            t=$(/usr/bin/time -f "%U %S" "$@" 2>&1 >/dev/null | tail -1)
            sum=$(echo "$sum $t" | awk '{ print $1 + ($2 + $3) * 1000 }')
            i=$((i + 1))
        done
        echo "$sum $runs" | awk '{ printf "%.2f", $1 / $2 }'
    fi
}
for t in gpt2 resnet50; do
    cp "$root/traces/data/$t.gstrace.gz" "$tmp/$t.stored.gstrace.gz"
    gzip -dc "$root/traces/data/$t.gstrace.gz" | grep -v '^# offline_planner: \|^# offline_bytes_by_device: ' |
        gzip -n >"$tmp/$t.planned.gstrace.gz"
done
printf '%-8s %-9s %-8s %14s %14s %10s %12s\n' binary trace form instructions in_bound cpu_ms start_cpu_ms
for which in old new; do
    [ $which = old ] && bin=$old || bin=$new
    start=$(cpu_ms "$bin" --version)
    for t in gpt2 resnet50; do
        for form in planned stored; do
            f=$tmp/$t.$form.gstrace.gz
            printf '%-8s %-9s %-8s %14s %14s %10s %12s\n' $which $t $form "$(ir - "$bin" replay "$f")" \
                "$(ir gs_bound_compute "$bin" replay "$f")" "$(cpu_ms "$bin" replay "$f")" "$start"
        done
    done
done
