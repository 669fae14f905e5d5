#!/bin/sh
# stitch_target.sh [GPUSIM [SPEC]] - does the stitch policy meet its target on every real trace?
#
# The stitch target for gpusim's own policy (policies/stitch.c): at a capacity of 1.02 x the
# trace's peak allocated bytes (the default pytorch policy's, with no limit; rounded up to
# 2 MiB; per device on a trace of several GPUs) the replay completes with no OOM and no retry,
# its fragmentation at peak reserved (frag_peak, docs/metrics.md) is at most 1%, and its modelled
# device time is at most 1.1 x the default pytorch policy's (with no limit). One row per trace,
# each criterion with its measured number and, last, whether all hold. A replay of a trace that
# ends where the recorded run died (oomdie) can at best be "survived": it got past the death, but
# the rest of the program is not in the trace, so it is not judged met.
#
# The real traces: the bundled ones (traces/data/resnet50 and gpt2), the shared PyTorch 2.11
# recordings ($GPUSIM_SHARED/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz; the other
# settings' recordings hold the same requests) and traces/references/*/ (each workload's
# default-setting recording), converted with traces/convert.py. The three synthetic bundled
# traces are left out (the target is about real programs).
#
#   bench/stitch_target.sh                      # build/gpusim, policy "stitch"
#   bench/stitch_target.sh build/gpusim stitch:max_handle_mb:20
#   bench/stitch_target.sh build/gpusim stitch:headroom:0,grow:0,ahead:0,fine:0,max_handle_frac:0
set -eu
gpusim=${1:-build/gpusim}
spec=${2:-stitch}
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${GPUSIM_SHARED:-$here/../shared}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The trace list is the positional parameters (GPUSIM and SPEC are read above), so that a path
# with a space or a glob character stays one word.
set -- "$here/traces/data/resnet50.gstrace.gz" "$here/traces/data/gpt2.gstrace.gz"
for p in "$shared"/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz \
         "$here"/traces/references/*/*__default__*.pickle.gz; do
    [ -f "$p" ] || continue
    out="$tmp/$(basename "$p" .pickle.gz).gstrace.gz"
    python3 "$here/traces/convert.py" -q "$p" -o "$out"
    set -- "$@" "$out"
done

# gpusim's CSV quotes a field with a comma in it (a policy spec such as
# "stitch:headroom:0,grow:0"), so the columns are split as CSV, not at every comma, and found by
# their names in the header. The fields come back as strings: compare them as numbers with +0.
csv='function csvsplit(s, a,    n, i, c, q, f) {
        n = 0; f = ""; q = 0
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (q) {
                if (c != "\"") f = f c
                else if (substr(s, i + 1, 1) == "\"") { f = f c; i++ }
                else q = 0
            } else if (c == "\"") q = 1
            else if (c == ",") { a[++n] = f; f = "" }
            else f = f c
        }
        a[++n] = f
        return n
    }
    FNR == 1 { f++; nc = csvsplit($0, h); for (i = 1; i <= nc; i++) col[h[i]] = i; next }
    { csvsplit($0, r) }'

printf '%-34s %12s %12s %-8s %7s %5s %7s %9s %9s %6s %s\n' trace peak_alloc capacity \
    outcome retries ooms frag dev_ms dflt_ms ratio target
for t do
    # the default policy with no limit: the peak allocated per device, and the device time
    "$gpusim" replay "$t" --policy pytorch --format csv >"$tmp/d.csv"
    # (rows with no peak_allocated_bytes are a private pool's: docs/cli.md, the CSV pool rows)
    cap=$(awk "$csv"'
        r[col["peak_allocated_bytes"]] != "" { rows[++n] = r[col["peak_allocated_bytes"]] + 0 }
        END {
            page = 2097152
            if (n == 1) { c = int((rows[1] * 1.02 + page - 1) / page) * page; printf "%.0f", c; exit }
            for (i = 2; i <= n; i++) {
                c = int((rows[i] * 1.02 + page - 1) / page) * page
                printf "%s%d=%.0f", (i > 2 ? "," : ""), i - 2, c
            }
        }' "$tmp/d.csv")
    # an OOM is a result (exit 0) and a device error is the outcome "error" (exit 1); anything
    # else (a SPEC gpusim refuses: exit 2) stops the script
    rc=0
    "$gpusim" replay "$t" --policy "$spec" --capacity "$cap" --format csv >"$tmp/s.csv" || rc=$?
    [ "$rc" -le 1 ] || exit "$rc"
    # the first row is the whole run (the sum over devices): its outcome, retries, OOMs and time;
    # fragmentation and the capacity are judged per device where the trace has several.
    # "survived": the replay got past the OOM the recorded run died of, where the trace ends
    # (docs/trace-format.md); the rest of the program is not in the trace, so it is no
    # completion and the target is not met, whatever the other criteria say.
    name=$(basename "$t" .gstrace.gz) cap=$cap awk "$csv"'
        r[col["peak_allocated_bytes"]] == "" { next }
        f == 1 && !seen1++ { dpa = r[col["peak_allocated_bytes"]] + 0; dus = r[col["device_time_us"]] + 0 }
        f == 2 && !seen2++ {
            outc = r[col["outcome"]]; ret = r[col["num_alloc_retries"]] + 0
            oom = r[col["num_ooms"]] + 0; us = r[col["device_time_us"]] + 0
            frag = r[col["frag_peak"]] + 0
            next
        }
        f == 2 { if (r[col["frag_peak"]] + 0 > frag) frag = r[col["frag_peak"]] + 0 }
        END {
            name = ENVIRON["name"]; cap = ENVIRON["cap"]
            if (outc == "") outc = "none"
            ratio = dus > 0 ? us / dus : 0
            why = ""
            if (outc == "oom" || oom > 0) why = why " oom"
            if (outc != "ok" && outc != "oom" && outc != "survived") why = why " " outc
            if (ret > 0) why = why " retry"
            if (frag > 0.01) why = why " frag"
            if (ratio > 1.1) why = why " time"
            if (outc == "survived")
                target = "survived (trace ends at a death)" (why != "" ? "; missed:" why : "")
            else
                target = outc == "ok" && why == "" ? "met" : "missed:" why
            printf "%-34s %12.0f %12s %-8s %7d %5d %6.2f%% %9.2f %9.2f %6.2f %s\n", name, dpa, \
                (length(cap) > 12 ? "per-device" : cap), outc, ret, oom, 100 * frag, us / 1000, \
                dus / 1000, ratio, target
        }' "$tmp/d.csv" "$tmp/s.csv"
done
