#!/bin/sh
# core_ratios.sh BENCH_REPLAY DIR - the replay's instructions an event (callgrind, as
# bench/ir_per_event.sh counts them: PASSES passes less one) with what a run adds (a cap,
# several clients or devices, another policy family) against the same events without it, and
# the same two counts with the simulated device's calls taken out of each (the inclusive cost of
# backends/backend.c's gs_dev_* functions: a capped or shared run makes device calls the other
# does not, which is work the run asks for, not the core's overhead).
#
#   DIR  a folder for the converted recordings (traces/references' oomcatch, oomdie, twogpu:
#        converted by traces/convert.py when missing) and the one-client copies
#
# Prints one row per comparison: NAME IR_WITH IR_WITHOUT RATIO DEV_WITH DEV_WITHOUT
# RATIO_WITHOUT_DEVICE_CALLS. Needs valgrind. About ten minutes on a 2-core VM.
#
#   bench/core_ratios.sh build/bench/bench_replay /tmp/ratios
set -eu
[ $# -eq 2 ] || { echo "usage: core_ratios.sh BENCH_REPLAY DIR" >&2; exit 2; }
bin=$1 dir=$2
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=10

# the total and the device calls' Ir of one run: "TOTAL DEVICE"
ir() { # TRACE POLICY REPEAT [ARGS...]
    t=$1 p=$2 r=$3
    shift 3
    valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$bin" "$t" --runs 1 \
        --repeat "$r" --policy "$p" --continue-on-oom "$@" >"$tmp/stdout" 2>"$tmp/err" ||
        { cat "$tmp/err" >&2; exit 1; }
    total=$(awk '/^summary:/ { print $2 }' "$tmp/out")
    dev=$(callgrind_annotate --inclusive=yes --threshold=100 "$tmp/out" 2>/dev/null |
        awk '/backends\/backend\.c:gs_dev_[a-z_]+ \[/ { gsub(",", "", $1); s += $1 }
             END { print s + 0 }')
    echo "$total $dev"
}
# Ir an event and the device calls' Ir an event: "IR DEV"
per() { # TRACE POLICY [ARGS...]
    t=$1 p=$2
    shift 2
    one=$(ir "$t" "$p" 1 "$@")
    many=$(ir "$t" "$p" $((passes + 1)) "$@")
    n=$(sed -n 's/^trace .*: \([0-9]*\) events;.*/\1/p' "$tmp/stdout")
    echo "$one $many" | awk -v n="$n" -v p="$passes" \
        '{ printf "%.1f %.1f", ($3 - $1) / (n * p), ($4 - $2) / (n * p) }'
}
row() { # NAME "WITH: TRACE POLICY ARGS" "WITHOUT: TRACE POLICY ARGS"
    # shellcheck disable=SC2086
    w=$(per $2)
    # shellcheck disable=SC2086
    o=$(per $3)
    echo "$w $o" | awk -v name="$1" '{ printf "%s %s %s %.2f %s %s %.2f\n", name, $1, $3,
        $1 / $3, $2, $4, ($1 - $2) / ($3 - $4) }'
}
conv() { # SUBDIR NAME: a recording of traces/references, converted
    t=$dir/$2.gstrace.gz
    [ -f "$t" ] || python3 "$here/traces/convert.py" -q "$here/traces/references/$1/$2.pickle.gz" \
        -o "$t" >&2
    echo "$t"
}
# the same events as one client (device 0): the client column, or the device column, made one
one() { # TRACE COLUMN VALUE OUT
    gzip -dc "$1" | awk -F, -v c="$2" -v v="$3" 'BEGIN { OFS = "," }
        /^#/ || /^seq/ { print; next } { $c = v; print }' | gzip >"$4"
    echo "$4"
}

d=$here/traces/data
G=1073741824
echo "name ir_with ir_without ratio dev_with dev_without ratio_without_device_calls"
for s in pytorch pytorch:expandable_segments:True pytorch:max_split_size_mb:128; do
    for mib in 5888 6400; do # 5.75 and 6.25 GiB, the reference runs' caps
        row "resnet50/$s@${mib}MiB" "$d/resnet50.gstrace.gz $s --capacity $((mib << 20))" \
            "$d/resnet50.gstrace.gz $s"
    done
done
oc=$(conv pytorch-2.11-h100 oomcatch__default__2)
oce=$(conv pytorch-2.11-h100 oomcatch__expandable_segments__2)
od=$(conv pytorch-2.11-h100 oomdie__default__1.5)
row "oomcatch/pytorch@2GiB" "$oc pytorch --capacity $((2 * G))" "$oc pytorch"
row "oomcatch-es/expandable@2GiB" "$oce pytorch:expandable_segments:True --capacity $((2 * G))" \
    "$oce pytorch:expandable_segments:True"
row "oomdie/pytorch@1.5GiB" "$od pytorch --capacity $((3 * G / 2))" "$od pytorch"
for t in producer-consumer dataframe-then-torch; do
    o=$(one "$d/$t.gstrace.gz" 4 torch "$dir/$t.one.gstrace.gz")
    row "$t/two-clients" "$d/$t.gstrace.gz pytorch" "$o pytorch"
done
tg=$(conv pytorch-2.11-2xh200 twogpu__default__2.5+2)
o=$(one "$tg" 5 0 "$dir/twogpu.one.gstrace.gz")
row "twogpu/two-devices" "$tg pytorch" "$o pytorch"
for t in gpt2 resnet50 batch-alternate; do
    row "$t/rmm-arena-vs-pytorch" "$d/$t.gstrace.gz rmm-arena" "$d/$t.gstrace.gz pytorch"
done
