#!/bin/sh
# test_outputs.sh GPUSIM SRCDIR [--update] - every report is byte-identical to the recorded one
# (tests/golden/), on every bundled trace under every policy, in table, CSV and JSON, with
# several clients, in a sweep and in validate's simulated stand-in. The only masked figures are
# host timings, not results: the replay rate (Mev/s, replay_events_per_s) and validate's "host us
# per alloc/free" row.
#
# The golden files were written by the binary before the restructure and must only
# change in a commit that says why a report changed. --update rewrites them.
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac   # the runs cd to SRCDIR
src=$2
update=${3:-}
. "$src/tests/clitest.sh"
golden=$src/tests/golden
data=traces/data   # relative: the reports name the trace as given

# Mask the host-timed rate: the table's Mev/s column (last field of the policy rows), JSON's
# replay_events_per_s, and the CSV column of that name.
mask() {
    awk '
        # split a CSV line into f[1..n], keeping quoted fields (with their commas) whole
        function csvsplit(line,   n, q, c, i, cur) {
            n = 0; q = 0; cur = ""
            for (i = 1; i <= length(line); i++) {
                c = substr(line, i, 1)
                if (c == "\"") q = !q
                if (c == "," && !q) { f[++n] = cur; cur = "" } else cur = cur c
            }
            f[++n] = cur
            return n
        }
        /^(cell,|trace,).*replay_events_per_s/ {
            n = csvsplit($0); col = 0
            for (i = 1; i <= n; i++) if (f[i] == "replay_events_per_s") col = i
            print; next
        }
        col && /,/ {
            n = csvsplit($0); f[col] = "X"; out = f[1]
            for (i = 2; i <= n; i++) out = out "," f[i]
            print out; next
        }
        { print }' |
    sed -E -e 's/"replay_events_per_s": [0-9.e+]+/"replay_events_per_s": X/g' \
        -e '/host us per alloc\/free/ s/ *[-+]?[0-9]+\.[0-9]+%?/ X/g' |
    awk '/Mev\/s *$/ { rows = 1; print; next }
         rows && NF == 0 { rows = 0 }
         rows { sub(/ +[0-9.]+ *$/, " X") }
         { print }'
}

policies="-p pytorch -p pytorch:max_split_size_mb:128 -p pytorch:expandable_segments:True
 -p pytorch:roundup_power2_divisions:4 -p pytorch:garbage_collection_threshold:0.6 -p cupy -q"

# run NAME ARGS...: the report of gpusim ARGS, masked, into $tmp/NAME
run() {
    name=$1; shift
    (cd "$src" && "$gpusim" "$@" >"$tmp/raw" 2>"$tmp/err")
    echo "exit $?" >"$tmp/$name"
    mask <"$tmp/raw" >>"$tmp/$name"
}

cases=""
for t in resnet50 gpt2 batch-alternate; do
    for cap in none 5.75GiB; do
        for fmt in table csv json; do
            name="replay-$t-$cap-$fmt"
            capflag=""; [ "$cap" = none ] || capflag="--capacity $cap"
            # shellcheck disable=SC2086
            run "$name" replay "$data/$t.gstrace.gz" $policies $capflag --format "$fmt"
            cases="$cases $name"
        done
    done
done
for t in dataframe-then-torch producer-consumer; do
    for fmt in table csv json; do
        name="clients-$t-$fmt"
        run "$name" replay "$data/$t.gstrace.gz" --clients separate,shared,cooperative \
            -p pytorch -p cupy=cupy --format "$fmt" -q
        cases="$cases $name"
    done
done
# A trace with two private pools (tests/pools.gstrace): the per-pool rows, and an OOM in a
# private pool that names it.
for fmt in table csv json; do
    run "pools-$fmt" replay tests/pools.gstrace -p pytorch -p pytorch:expandable_segments:True \
        --format "$fmt" -q
    cases="$cases pools-$fmt"
done
for fmt in table json; do
    run "pools-oom-$fmt" replay tests/pools.gstrace -p pytorch --capacity 40MiB --format "$fmt" -q
    cases="$cases pools-oom-$fmt"
done
run continue-on-oom replay "$data/resnet50.gstrace.gz" --capacity 5GiB --continue-on-oom \
    -p pytorch -p pytorch:expandable_segments:True --format json
run several-traces replay "$data/resnet50.gstrace.gz" "$data/gpt2.gstrace.gz" --format json
run sweep sweep "$data/resnet50.gstrace.gz" -j 2 \
    -p 'pytorch:max_split_size_mb:{64,256}' -p pytorch:expandable_segments:True \
    --capacity '{5.75,6.25}GiB'
for fmt in table json; do
    run "validate-$fmt" validate "$data/resnet50.gstrace.gz" --backend sim --runs 2 \
        -p pytorch -p pytorch:expandable_segments:True --format "$fmt"
done
# The plots' data and scripts (the images are gnuplot's; GPUSIM_GNUPLOT=true draws none, exit 3).
plots() {
    name=$1; shift
    rm -rf "$tmp/plotdir"
    (cd "$src" && GPUSIM_GNUPLOT=true "$gpusim" "$@" --plot "$tmp/plotdir" >"$tmp/raw" 2>"$tmp/err")
    echo "exit $?" >"$tmp/$name"
    for f in "$tmp/plotdir"/*; do
        echo "== ${f##*/}"
        sed "s|$tmp/plotdir|PLOTDIR|g" "$f"
    done >>"$tmp/$name"
}
plots plots-replay replay "$data/resnet50.gstrace.gz" --capacity 5.75GiB -q \
    -p pytorch -p pytorch:max_split_size_mb:128 -p pytorch:expandable_segments:True
# private pools apart in the address maps (a dashed line and a name per pool, rows 'pool N: size')
plots plots-pools replay tests/pools.gstrace --capacity 40MiB -q -p pytorch
plots plots-sweep sweep "$data/gpt2.gstrace.gz" -j 2 -p 'pytorch:max_split_size_mb:{64,256}'
cases="$cases continue-on-oom several-traces sweep validate-table validate-json plots-replay plots-pools plots-sweep"

# README's examples shown with what they print ("    $ build/gpusim ARGS", then its output, indented
# the same, up to the first line that is not): each prints that today, from the repository root.
# Words are split as the shell would, with no quoting (the examples need none) and no globbing.
mkdir "$tmp/readme"
awk -v dir="$tmp/readme" '
    function flush() { if (n) printf "%s", body > (dir "/out" n); body = ""; blanks = "" }
    /^    \$ build\/gpusim / { flush(); n++; print substr($0, 20) > (dir "/cmd" n); inb = 1; next }
    inb && /^$/ { blanks = blanks "\n"; next }
    inb && /^    / { body = body blanks substr($0, 5) "\n"; blanks = ""; next }
    { inb = 0 }
    END { flush() }' "$src/README.md"
for c in "$tmp"/readme/cmd*; do
    [ -e "$c" ] || fail "README.md: no example with its output found"
    [ -e "$c" ] || break
    k=${c##*/cmd}
    args=$(cat "$c")
    set -f
    # shellcheck disable=SC2086
    (cd "$src" && "$gpusim" $args) >"$tmp/readme/now$k" 2>&1
    set +f
    cmp -s "$tmp/readme/out$k" "$tmp/readme/now$k" || {
        fail "README.md: 'build/gpusim $args' prints otherwise now:"
        diff "$tmp/readme/out$k" "$tmp/readme/now$k" | head -20
    }
done

for name in $cases; do
    if [ "$update" = --update ]; then
        cp "$tmp/$name" "$golden/$name.out"
    elif ! cmp -s "$tmp/$name" "$golden/$name.out"; then
        fail "$name differs from tests/golden/$name.out:"
        diff "$golden/$name.out" "$tmp/$name" | head -20
    fi
done
[ "$update" = --update ] && echo "rewrote $(echo $cases | wc -w) golden files"
[ "$fails" -eq 0 ] || { echo "$fails failures (of $(echo $cases | wc -w) reports and README's examples)"; exit 1; }
echo "all $(echo $cases | wc -w) reports identical"
