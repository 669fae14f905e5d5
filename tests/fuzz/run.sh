#!/bin/sh
# tests/fuzz/run.sh BUILD SECONDS [OUT [HARNESS...]] - run each libFuzzer harness of a fuzz build
# for SECONDS, one process at a time (-jobs=1 -workers=1), and say what they did.
#
#   CC=clang meson setup build-fuzz -Dfuzz=enabled && meson compile -C build-fuzz
#   tests/fuzz/run.sh build-fuzz 20                 # what .ci/fuzz runs: 20 s each
#   nice tests/fuzz/run.sh build-fuzz 600 /tmp/fz   # a longer run, its work kept in /tmp/fz
#
# Each harness starts from its corpus in tests/fuzz/corpus/NAME, which it only reads: what it
# finds goes to OUT/NAME/corpus (default: a temporary directory, removed at the end), a crash,
# a hang (an input running past 10 s) or a memory blow-up (2 GiB) to OUT/NAME/ as
# crash-*/timeout-*/oom-*. Prints a line per harness (executions, seconds, executions per
# second, failures) and a total; exit status 1 when any harness failed.
#
# The harness 'convert' is the converter's Python fuzz loop (fuzz_convert.py, no build needed):
#   tests/fuzz/run.sh build-fuzz 60 /tmp/fz convert   # 60 s of mutated snapshots; failing inputs
#                                                     # are kept in /tmp/fz/convert/crash-*
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD SECONDS [OUT [HARNESS...]]" >&2; exit 2; }
src=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
secs=$2
shift 2
if [ $# -ge 1 ]; then
    out=$1
    shift
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    keep=1
else
    out=$(mktemp -d "${TMPDIR:-/tmp}/gs-fuzz-run-XXXXXX")
    keep=0
fi
harnesses=${*:-trace binary json calibration reference plot_saved replay snapshot rows library}
# Sanitizer reports are crashes; a leak at the end of a run too.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

failed=0 total=0 total_s=0
printf '%-12s %12s %8s %10s %s\n' harness executions seconds exec/s result
for h in $harnesses; do
    if [ "$h" = convert ]; then
        mkdir -p "$out/$h"
        t0=$(date +%s)
        rc=0
        python3 "$src/fuzz_convert.py" --seconds "$secs" --timeout 10 --crashes "$out/$h" \
            >"$out/$h/run.log" 2>&1 || rc=$?
        t1=$(date +%s)
        runs=$(sed -n 's/^fuzz_convert: \([0-9]*\) inputs.*/\1/p' "$out/$h/run.log")
        runs=${runs:-0}
        if [ "$rc" -ne 0 ]; then
            result="FAILED (exit $rc, inputs kept in $out/$h)"
            failed=1
            keep=1
            grep '^FAIL' "$out/$h/run.log" | head -5 >&2 || true
        else
            result=ok
        fi
        s=$((t1 - t0))
        printf '%-12s %12s %8s %10s %s\n' "$h" "$runs" "$s" "$((runs / (s > 0 ? s : 1)))" "$result"
        total=$((total + runs))
        total_s=$((total_s + s))
        continue
    fi
    exe=$build/tests/fuzz/fuzz_$h
    [ -x "$exe" ] || { echo "$0: $exe missing (a build with -Dfuzz=enabled?)" >&2; exit 2; }
    mkdir -p "$out/$h/corpus"
    t0=$(date +%s)
    rc=0
    (cd "$out/$h" && "$exe" -jobs=1 -workers=1 -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/$h/" \
        "$out/$h/corpus" "$src/corpus/$h" >run.log 2>&1) || rc=$?
    t1=$(date +%s)
    log=$out/$h/fuzz-0.log
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null | tail -1)
    runs=${runs:-0}
    found=$(ls "$out/$h" | grep -c -E '^(crash|timeout|oom|leak|slow-unit)-' || true)
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        result="FAILED (exit $rc, $found inputs kept in $out/$h)"
        failed=1
        keep=1
        grep -E 'ERROR|runtime error|broken promise|SUMMARY' "$log" | head -5 >&2 || true
    else
        result=ok
    fi
    s=$((t1 - t0))
    printf '%-12s %12s %8s %10s %s\n' "$h" "$runs" "$s" "$((runs / (s > 0 ? s : 1)))" "$result"
    total=$((total + runs))
    total_s=$((total_s + s))
done
printf '%-12s %12s %8s\n' total "$total" "$total_s"
[ "$keep" -eq 1 ] || rm -rf "$out"
exit $failed
