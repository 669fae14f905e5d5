#!/bin/sh
# replay_speed.sh OLD NEW OUT [ROUNDS] - the replay-speed figures of BENCHMARKS.md ("Replay
# throughput" and "Scaling"), an old bench_replay against a new one in the same run.
#
#   OLD, NEW  two bench_replay binaries (say, built from main's HEAD in /tmp, and this tree's)
#   OUT       a folder for the outputs (created): one file per part, as BENCHMARKS.md quotes them
#   ROUNDS    rounds of compare.sh (default 5; each round runs each binary 3 times)
#
# Parts:
#   bundled.txt          the single-client bundled traces under the six policies of
#                        tests/test_outputs.sh
#   bundled-clients.txt  the two with several clients, with --continue-on-oom (both meet an OOM
#                        under most policies and would stop there)
#   reference.txt        every reference run (${GPUSIM_SHARED:-../shared}/traces/pytorch-2.11-h100
#                        and traces/references/*/, converted with traces/convert.py into
#                        OUT/traces) under its run's setting and cap, with --continue-on-oom
#                        (a run that meets an OOM goes on; one whose last event is the OOM it
#                        died of ends each pass there; a binary from before 2026-11-23's fifth
#                        session stopped in its first pass, and a replay that stops early is
#                        marked on its line); a trace of over 13,000
#                        events is replayed fewer times per run (about 2.6 M events a run)
#   scaling-new.txt, scaling-old.txt   bench_replay --scaling (10^3 to 10^6 live), 5 runs each
#   machine.txt          uname, CPU, cores, load, and the clock (bench_clock_probe beside NEW)
# REPLAY_SPEED_PARTS (default "bundled reference scaling") picks the parts to run: bundled makes
# both bundled files; machine.txt is always written.
# Run from the repository root, with nothing else of yours running: the figures are CPU time,
# but a loaded machine still slows them (caches are shared).
set -eu
[ $# -ge 3 ] || { echo "usage: replay_speed.sh OLD NEW OUT [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 out=$3 rounds=${4:-5}
here=$(dirname "$0")
shared=${GPUSIM_SHARED:-../shared}/traces/pytorch-2.11-h100
mkdir -p "$out/traces"
policies="--policy pytorch --policy pytorch:max_split_size_mb:128
    --policy pytorch:expandable_segments:True --policy pytorch:roundup_power2_divisions:4
    --policy pytorch:garbage_collection_threshold:0.6 --policy cupy"

parts=${REPLAY_SPEED_PARTS:-bundled reference scaling}
part() { case " $parts " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

probe=$(dirname "$new")/bench_clock_probe # the clock this process gets now (clock_probe.c)
{ uname -a; grep -m1 'model name' /proc/cpuinfo; nproc; uptime
  if [ -x "$probe" ]; then "$probe" 9; fi; } >"$out/machine.txt"

if part bundled; then
# shellcheck disable=SC2086
"$here/compare.sh" "$old" "$new" "$rounds" traces/data/gpt2.gstrace.gz \
    traces/data/resnet50.gstrace.gz traces/data/batch-alternate.gstrace.gz -- --runs 3 \
    $policies >"$out/bundled.txt"
# shellcheck disable=SC2086
"$here/compare.sh" "$old" "$new" "$rounds" traces/data/dataframe-then-torch.gstrace.gz \
    traces/data/producer-consumer.gstrace.gz -- --runs 3 --continue-on-oom \
    $policies >"$out/bundled-clients.txt"
fi

if part reference; then
echo "# trace: policy, cap; then old and new M events/s of CPU time: median (min-max, n), new/old" \
    >"$out/reference.txt"
for p in "$shared"/*.pickle.gz traces/references/*/*.pickle.gz; do
    [ -e "$p" ] || continue
    n=$(basename "$p" .pickle.gz)
    t=$out/traces/$n.gstrace.gz
    [ -e "$t" ] || python3 traces/convert.py "$p" -o "$t" --reference "$out/traces/$n.ref.json" 2>/dev/null
    # shellcheck disable=SC2046
    set -- $("$here/ref_setting.sh" "$out/traces/$n.ref.json")
    pol=$1 cap=$2
    events=$(gzip -dc "$t" | grep -vc '^#')
    repeat=$((2600000 / events))
    [ "$repeat" -gt 200 ] && repeat=200
    [ "$repeat" -lt 1 ] && repeat=1
    args="--runs 3 --repeat $repeat --continue-on-oom --policy $pol"
    [ "$cap" = 0 ] || args="$args --capacity $cap"
    stops=""
    # shellcheck disable=SC2086
    "$new" "$t" --runs 1 --repeat 2 --continue-on-oom --policy "$pol" \
        $([ "$cap" = 0 ] || echo --capacity "$cap") | grep -q 'stopped after' &&
        stops=" (NEW stops in its first pass: the rates measure mostly setup)"
    echo "# $n ($events events): $args$stops" >>"$out/reference.txt"
    # shellcheck disable=SC2086
    "$here/compare.sh" "$old" "$new" "$rounds" "$t" -- $args | tail -n +2 >>"$out/reference.txt"
done
fi

if part scaling; then
    "$new" --scaling --runs 5 >"$out/scaling-new.txt"
    "$old" --scaling --runs 5 >"$out/scaling-old.txt"
fi
