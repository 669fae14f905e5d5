#!/bin/sh
# bench/policies.sh [OUTDIR] - every policy family on every trace, in one table and one chart.
#
# For each trace (the bundled single-client traces, traces/data/; the default-setting runs of
# ../shared/traces/pytorch-2.11-h100 and of traces/references/pytorch-2.11-h100, converted with
# traces/convert.py) and each policy of POLICIES below:
#   - a replay with no cap: peak reserved, fragmentation at peak reserved (frag_peak: the share
#     of reserved bytes not allocated when reserved peaked, docs/metrics.md), retries, modelled
#     device time, and the trace's bound (lower_bound_bytes, offline_bytes);
#   - gpusim whatif: the minimum capacity the policy needs to finish (bisection to 2 MiB);
#   - a replay at that minimum: retries, modelled device time and fragmentation at peak when
#     run as tight as it goes (a preallocating policy's uncapped peak is its arena: a fraction
#     of the whole device, so its fragmentation is read at the minimum).
# Writes OUTDIR/policies.csv (one row per trace and policy), OUTDIR/policies.txt (the table),
# and OUTDIR/policies-mincap.{dat,gp,png,svg} (the minimum capacity over the lower bound, a bar
# per policy per trace, the offline planner's beside them) when gnuplot is there. Default
# OUTDIR: bench/results/policies. ONLY=REGEX keeps the traces whose name matches; JOBS=N runs
# whatif's replays N at once (default 2). Needs a built tree (meson setup build && meson compile -C build).
#
# The policies, in one place: adding one is one word (no spaces, commas or quotes: they go
# into CSV fields and command lines). 'stitch' joins when this build has it.
POLICIES="pytorch pytorch:expandable_segments:True cupy preallocate preallocate:fit:first tlsf bfc
bfc:XLA_PYTHON_CLIENT_PREALLOCATE:false rmm-pool rmm-pool:initial_pool_size:0 rmm-arena
cuda-async:cudaMemPoolAttrReleaseThreshold:max"
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
gpusim=$root/build/gpusim
[ -x "$gpusim" ] || { echo "policies.sh: build first: meson setup build && meson compile -C build" >&2; exit 2; }
out=${1:-$root/bench/results/policies}
shared=${GPUSIM_SHARED:-$root/../shared}
jobs=${JOBS:-2}
"$gpusim" replay --help | grep -q '^  stitch ' && POLICIES="$POLICIES stitch"
for p in $POLICIES; do
    case $p in
        *[!A-Za-z0-9:._=-]*) echo "policies.sh: policy '$p': only letters, digits and :._=- please" >&2; exit 2 ;;
    esac
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

# The traces: bundled ones with one client, then converted real runs (one per program: the
# default setting's run, uncapped where there is one).
n=0
add() { [ -z "${ONLY:-}" ] || echo "$1" | grep -Eq "$ONLY" || return 0; n=$((n + 1)); printf '%s\t%s\n' "$1" "$2" >>"$work/traces"; }
: >"$work/traces"
for t in resnet50 gpt2 batch-alternate; do add "$t" "$root/traces/data/$t.gstrace.gz"; done
# (../shared's resnet50 and gpt2 default runs are the bundled traces, converted: same answers,
# so they are not repeated; SHARED=1 adds them.)
set -- "$root"/traces/references/pytorch-2.11-h100/*__default__*.pickle.gz
[ -z "${SHARED:-}" ] || set -- "$shared"/traces/pytorch-2.11-h100/*__default__nocap.pickle.gz "$@"
for f in "$@"; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .pickle.gz | sed 's/__default__.*//; s/[^A-Za-z0-9._-]/_/g')
    case $f in "$shared"/*) name=h100-$name ;; esac
    [ -z "${ONLY:-}" ] || echo "$name" | grep -Eq "$ONLY" || continue
    python3 "$root/traces/convert.py" -q "$f" -o "$work/$name.gstrace.gz"
    add "$name" "$work/$name.gstrace.gz"
done

pargs=""
for p in $POLICIES; do pargs="$pargs --policy $p"; done
echo "trace,policy,outcome,min_capacity_bytes,peak_reserved_bytes,frag_peak,retries,device_time_us,retries_at_min,device_time_us_at_min,frag_peak_at_min,lower_bound_bytes,offline_bytes" >"$work/all.csv"
while IFS="$(printf '\t')" read -r name t; do
    echo "policies.sh: $name" >&2
    # shellcheck disable=SC2086 # pargs: words without spaces, checked above
    "$gpusim" replay "$t" $pargs --continue-on-oom --format csv -q >"$work/r.csv"
    # shellcheck disable=SC2086
    "$gpusim" whatif "$t" $pargs --format csv -q -j "$jobs" >"$work/w.csv"
    : >"$work/m.csv"
    for p in $POLICIES; do
        min=$(awk -F, -v p="$p" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                                 $c["policy"] == p { print $c["min_capacity_bytes"]; exit }' "$work/w.csv")
        if [ -n "$min" ]; then
            "$gpusim" replay "$t" --policy "$p" --capacity "$min" --format csv -q |
                awk -F, -v p="$p" 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
                    ("pool" in c) && $c["pool"] != "" { next }
                    { print p "," $c["num_alloc_retries"] "," $c["device_time_us"] "," $c["frag_peak"] }' >>"$work/m.csv"
        fi
    done
    # one row per policy: the uncapped replay's columns by name, whatif's minimum, the replay at it
    awk -F, -v name="$name" -v W="$work/w.csv" -v M="$work/m.csv" '
        BEGIN {
            for (k = 0; (getline l < W) > 0; k++) {
                n = split(l, f, ",")
                if (!k) { for (i = 1; i <= n; i++) wc[f[i]] = i; continue }
                if (!(f[wc["policy"]] in wmin)) wmin[f[wc["policy"]]] = f[wc["min_capacity_bytes"]]
            }
            while ((getline l < M) > 0) { split(l, f, ","); mr[f[1]] = f[2]; mt[f[1]] = f[3]; mf[f[1]] = f[4] }
        }
        NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
        ("pool" in c) && $c["pool"] != "" { next }  # rows of private pools (docs/cli.md)
        { p = $c["policy"]
          print name "," p "," $c["outcome"] "," wmin[p] "," $c["peak_reserved_bytes"] "," \
                $c["frag_peak"] "," $c["num_alloc_retries"] "," $c["device_time_us"] "," \
                mr[p] "," mt[p] "," mf[p] "," $c["lower_bound_bytes"] "," $c["offline_bytes"] }' \
        "$work/r.csv" >>"$work/all.csv"
done <"$work/traces"
cp "$work/all.csv" "$out/policies.csv"

# The table: sizes in GiB, the minimum capacity also over the lower bound.
awk -F, '
    function g(b) { return b == "" ? "-" : sprintf("%.3f", b / 2^30) }
    NR == 1 { printf "%-16s %-40s %9s %7s %9s %6s %7s %9s %8s %9s %8s %9s %9s\n", "trace", "policy",
              "min GiB", "/bound", "peak GiB", "frag", "retries", "dev ms", "retr@min",
              "ms@min", "frag@min", "bound", "offline"; next }
    { printf "%-16s %-40s %9s %7s %9s %5.1f%% %7s %9.2f %8s %9s %8s %9s %9s\n", $1, $2, g($4),
             $4 == "" ? "-" : sprintf("%.3f", $4 / $12), g($5), 100 * $6, $7, $8 / 1000,
             $9 == "" ? "-" : $9, $10 == "" ? "-" : sprintf("%.2f", $10 / 1000),
             $11 == "" ? "-" : sprintf("%.1f%%", 100 * $11), g($12), g($13) }
' "$out/policies.csv" | tee "$out/policies.txt"

# The chart: data only in the .dat (names as column headers, read by columnheader: never code).
awk -F, -v pols="$POLICIES" '
    BEGIN { np = split(pols, P, /[ \n]+/)
            printf "trace offline"; for (i = 1; i <= np; i++) printf " %s", P[i]; printf "\n" }
    NR > 1 { v[$1, $2] = $4 == "" ? "NaN" : $4 / $12; off[$1] = $13 / $12
             if (!($1 in seen)) { seen[$1] = 1; order[++nt] = $1 } }
    END { for (t = 1; t <= nt; t++) {
              printf "%s %.4f", order[t], off[order[t]]
              for (i = 1; i <= np; i++) printf " %s", ((order[t], P[i]) in v) ? v[order[t], P[i]] : "NaN"
              printf "\n" } }
' "$out/policies.csv" >"$out/policies-mincap.dat"
np=$(echo $POLICIES | wc -w)
cat >"$out/policies-mincap.gp" <<GP
# bench/policies.sh: minimum capacity to finish over the lower bound (peak live bytes in 2 MiB
# pages), per trace and policy; the offline planner's peak beside them. 1.0 is the bound.
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top noenhanced
set xtics rotate by -35 noenhanced
set ylabel "minimum capacity / lower bound"
set yrange [0.95:*]
set grid ytics
set datafile missing "NaN"
# more bars than gnuplot's 8 default colours: the offline planner grey, then distinct ones
set linetype 1 lc rgb "#7f7f7f"
set linetype 9 lc rgb "#8c564b"
set linetype 10 lc rgb "#17becf"
set linetype 11 lc rgb "#bcbd22"
set linetype 12 lc rgb "#e377c2"
set terminal pngcairo size 1400,560 font ",10"
set output "policies-mincap.png"
plot for [i=2:$((np + 2))] "policies-mincap.dat" using i:xtic(1) title columnheader(i)
set terminal svg size 1400,560 font ",10"
set output "policies-mincap.svg"
replot
GP
if command -v gnuplot >/dev/null 2>&1; then (cd "$out" && gnuplot policies-mincap.gp); fi
echo "policies.sh: wrote $out/policies.csv, policies.txt, policies-mincap.*" >&2
