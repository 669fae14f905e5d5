#!/bin/sh
# whatif_spans.sh OLD NEW TRACE [WHATIF OPTIONS] - gpusim whatif's JSON from two builds on one
# trace: whether it is the same but for the replay counts, and the replays and
# trace-equivalents (events replayed over the trace's) of each (BENCHMARKS.md, "whatif: a replay
# answers for the caps that decide alike"). NEW may be the same build as OLD with
# --full-replays among the options given to OLD alone: set OLD_OPTS.
#
#   sh bench/whatif_spans.sh /tmp/base/build/gpusim build/gpusim traces/data/gpt2.gstrace.gz -j 2
set -eu
old=$1 new=$2 t=$3
shift 3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
"$old" whatif "$t" --format json -q ${OLD_OPTS:-} "$@" > "$tmp/a.json"
"$new" whatif "$t" --format json -q "$@" > "$tmp/b.json"
python3 - "$t" "$tmp/a.json" "$tmp/b.json" <<'PY'
import json,sys
a=json.load(open(sys.argv[2])); b=json.load(open(sys.argv[3]))
def strip(d):
    for r in d['results']:
        r.pop('replays')
        r.pop('replayed_events')
    return d
ra=sum(r['replayed_events'] for r in a['results']); rb=sum(r['replayed_events'] for r in b['results'])
pa=sum(r['replays'] for r in a['results']); pb=sum(r['replays'] for r in b['results'])
n=a['trace_events']
same = strip(a)==strip(b)
print("%s: same=%s replays %d -> %d, trace-equivalents %.1f -> %.1f" % (sys.argv[1], same, pa, pb, ra/n, rb/n))
sys.exit(0 if same else 1)
PY
