#!/bin/sh
# test_plots.sh GPUSIM SRCDIR - end-to-end tests of the plots and the sweep: replay --plot,
# gpusim plot from saved JSON and CSV, gpusim sweep (one CSV row per cell, -j, its plot), and
# a missing or failing gnuplot (a clear message, exit 3, the reports and data written anyway).
# Every PNG is checked to be a PNG of the size its script asks for, and every script is run
# again by gnuplot itself, which must exit 0 and say nothing. Exits 77 (skipped) after the
# tests that need no gnuplot when gnuplot is not installed.
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac   # some runs cd
src=$2
. "$src/tests/clitest.sh"

# png_size FILE: "WIDTH HEIGHT" from the IHDR chunk, or nothing when FILE is not a PNG
png_size() {
    python3 - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read(33)
if len(d) == 33 and d[:8] == b"\x89PNG\r\n\x1a\n" and d[12:16] == b"IHDR":
    print("%d %d" % struct.unpack(">II", d[16:24]))
PY
}

# check_plot DIR STEM WIDTH HEIGHT: STEM.png (a PNG of that size), STEM.svg, STEM.gp and its
# data; no temporary file left; gnuplot STEM.gp, run again in DIR, exits 0 and prints nothing.
check_plot() {
    d=$1; stem=$2
    for ext in png svg gp dat; do
        [ -s "$d/$stem.$ext" ] || fail "$stem.$ext missing or empty"
    done
    size=$(png_size "$d/$stem.png")
    [ "$size" = "$3 $4" ] || fail "$stem.png: size '$size', want '$3 $4'"
    grep -q "</svg>" "$d/$stem.svg" || fail "$stem.svg: not a whole SVG"
    (cd "$d" && gnuplot -e "out='$tmp/replot'" "$stem.gp") >"$tmp/gp.out" 2>"$tmp/gp.err" ||
        fail "$stem.gp: gnuplot exits non-zero: $(cat "$tmp/gp.err")"
    [ ! -s "$tmp/gp.err" ] || fail "$stem.gp: gnuplot complains: $(cat "$tmp/gp.err")"
    [ "$(png_size "$tmp/replot.png")" = "$3 $4" ] || fail "$stem.gp: redrawn PNG differs in size"
}

alt=$src/traces/data/batch-alternate.gstrace.gz   # 1544 events; at 5.875 GiB pytorch OOMs
three="-p pytorch -p pytorch:max_split_size_mb:128 -p pytorch:expandable_segments:True"

# --- help teaches ---
"$gpusim" help | grep -q "sweep TRACE" || fail "help lacks sweep"
"$gpusim" help | grep -q "plot RESULT" || fail "help lacks plot"
"$gpusim" replay --help | grep -q -- "--plot" || fail "replay --help lacks --plot"
"$gpusim" sweep --help >"$tmp/h" || fail "sweep --help exits non-zero"
for word in --policy --capacity --jobs --plot Examples "Exit status" "{64,128,256,512}"; do
    grep -q -- "$word" "$tmp/h" || fail "sweep --help lacks '$word'"
done
"$gpusim" plot --help >"$tmp/h" || fail "plot --help exits non-zero"
for word in RESULT Examples "Exit status" GPUSIM_GNUPLOT; do
    grep -q -- "$word" "$tmp/h" || fail "plot --help lacks '$word'"
done

# --- errors ---
expect_error "sweep without trace" "no TRACE" "$gpusim" sweep
expect_error "sweep two traces" "one TRACE" "$gpusim" sweep "$alt" "$alt"
expect_error "sweep unclosed brace" "without its '}'" "$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128'
expect_error "sweep bad key" "unknown key 'max_split_sise_mb'" "$gpusim" sweep "$alt" -p 'pytorch:max_split_sise_mb:{64,128}'
expect_error "sweep bad capacity" "--capacity" "$gpusim" sweep "$alt" --capacity '{5.75,huge}GiB'
expect_error "sweep bad jobs" "--jobs" "$gpusim" sweep "$alt" -j -3
expect_error "plot nothing" "no RESULT" "$gpusim" plot
expect_error "plot a missing file" "nope.json" "$gpusim" plot "$tmp/nope.json"
printf 'not,a,report\n1,2,3\n' >"$tmp/junk.csv"
expect_error "plot a non-report" "no column 'trace'" "$gpusim" plot "$tmp/junk.csv"
# what a refusal quotes from the file is escaped: one line (a line break in a trace's name made
# two; the plot_saved fuzzer's input)
printf '{"trace": "a\\nb", "results": []}' >"$tmp/noresults.json"
expect_error "plot a report of no results" "x0ab' has no results to plot" "$gpusim" plot "$tmp/noresults.json"
# a quoted field that never ends: FILE:LINE of its opening quote (it swallowed the rest of the
# file, and leaked its record); a row of the wrong width: its FILE:LINE
printf 'trace,policy,capacity_bytes\nt,"p\nq",1\nt,"unterminated,2\nt,x,3\n' >"$tmp/open.csv"
expect_error "plot unterminated quote" "open.csv:4: a quoted field that never ends" "$gpusim" plot "$tmp/open.csv"
"$gpusim" replay "$alt" -p pytorch -p cupy --format csv | sed '3s/$/,extra/' >"$tmp/wide.csv"
expect_error "plot a row too wide" "wide.csv:3: " "$gpusim" plot "$tmp/wide.csv"
printf '{"trace": 1}' >"$tmp/junk.json"
expect_error "plot bad JSON report" "no \"trace\" and \"results\"" "$gpusim" plot "$tmp/junk.json"
printf '[{"trace": "x", "results": []}]' >"$tmp/noresults.json"
expect_error "plot a report of no results" "trace 'x' has no results to plot" "$gpusim" plot "$tmp/noresults.json"
expect_error "plot a trace" "gzip-compressed: not a text file (a trace?)" "$gpusim" plot "$alt"
# a report's trace named "", ".", ".." or ".x": no hidden plot file (".-bars.png")
"$gpusim" replay "$alt" -q -p cupy --format json -o "$tmp/named.json" || fail "replay json"
for n in "" . .. .x; do
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); d[0]['trace'] = sys.argv[2]
json.dump(d, open(sys.argv[3], 'w'))" "$tmp/named.json" "$n" "$tmp/dot.json"
    rm -rf "$tmp/dot"
    "$gpusim" plot "$tmp/dot.json" -o "$tmp/dot" 2>"$tmp/err" || fail "plot a trace named '$n': $(cat "$tmp/err")"
    [ -z "$(ls -A "$tmp/dot" | grep '^\.')" ] || fail "plot a trace named '$n': hidden files $(ls -A "$tmp/dot")"
done
# a replay CSV's rows of a client or a private pool are parts of a run, not runs: one bar a
# setting (each client drew a bar of its own, CuPy's a "pytorch" bar; a pool row's empty
# figures stopped the plot with "bad number")
for t in "$src/traces/data/dataframe-then-torch.gstrace.gz" "$src/tests/pools.gstrace"; do
    "$gpusim" replay "$t" -q -p pytorch -p tlsf -f csv -o "$tmp/parts.csv" || fail "replay csv of $t"
    rm -rf "$tmp/parts"
    "$gpusim" plot "$tmp/parts.csv" -o "$tmp/parts" 2>"$tmp/err" || fail "plot a CSV with part rows: $(cat "$tmp/err")"
    bars=$(grep -c "with boxes .* title '" "$tmp"/parts/*-bars.gp)
    [ "$bars" -eq 2 ] || fail "plot of $(basename "$t")'s CSV: $bars bars, want 2: $(grep title "$tmp"/parts/*-bars.gp)"
done
# a run that fails before its first plot leaves no directory behind
"$gpusim" replay "$alt" -q --format json -o "$tmp/good.json" || fail "replay json: exit"
# a RESULT on a pipe is read once, checked and drawn (it was read twice: "no header and rows")
cat "$tmp/good.json" | "$gpusim" plot /dev/stdin -o "$tmp/fromstdin" 2>"$tmp/err" || fail "plot from a pipe: $(cat "$tmp/err")"
ls "$tmp/fromstdin" | grep -q -- '-bars.png' || fail "plot from a pipe: no bars: $(ls "$tmp/fromstdin")"
expect_error "plot a good report, then a missing one" "nothere.json: No such file or directory" \
    "$gpusim" plot "$tmp/good.json" "$tmp/nothere.json" -o "$tmp/never"
printf 'trace,policy,capacity_bytes\nx\000,pytorch,0\n' >"$tmp/nul.csv"
expect_error "plot a report with a NUL byte" "nul.csv: byte 29: a NUL byte" \
    "$gpusim" plot "$tmp/good.json" "$tmp/nul.csv" -o "$tmp/never"
expect_error "plot a bad report into a new directory" "junk.json" "$gpusim" plot "$tmp/junk.json" -o "$tmp/never"
printf 'garbage\n' >"$tmp/garbage.gstrace"
expect_error "whatif --plot a bad trace" "garbage.gstrace:1" "$gpusim" whatif "$tmp/garbage.gstrace" --plot "$tmp/never"
expect_error "replay --plot -o an input" "an input of this run" "$gpusim" replay "$alt" --plot "$tmp/never" -o "$alt"
expect_error "sweep --plot -o an input" "an input of this run" "$gpusim" sweep "$alt" --plot "$tmp/never" -o "$alt"
expect_error "whatif --plot a bad policy" "unknown policy 'nosuch'" "$gpusim" whatif "$alt" --policy nosuch --plot "$tmp/never"
# -o in a directory that is missing (not --plot's): refused before either directory is made
for cmd in "replay --export-snapshot $tmp/never/snaps" sweep whatif; do
    expect_error "$cmd --plot -o in a missing directory" "missing/x.json: cannot write" \
        "$gpusim" $cmd "$alt" --plot "$tmp/never" -o "$tmp/missing/x.json"
done
[ -e "$tmp/never" ] && fail "a failed run left its plot directory behind"
# -o named as one of the plots' files: the plot is refused, the report never written over
for cmd in "replay:bars" "sweep:sweep" "whatif:whatif"; do
    expect_error "${cmd%%:*} --plot -o a plot's name" "that is the report (-o) of this run" \
        "$gpusim" "${cmd%%:*}" "$alt" -q --plot "$tmp/po" -o "$tmp/po/batch-alternate-${cmd#*:}.dat"
    f=$tmp/po/batch-alternate-${cmd#*:}.dat # the report, or nothing: never a plot's data ("# ...")
    [ -e "$f" ] && head -1 "$f" | grep -q '^#' && fail "${cmd%%:*}: -o holds a plot's data"
done
: >"$tmp/afile"
expect_error "--plot under a file" "cannot create" "$gpusim" replay "$alt" --plot "$tmp/afile/sub"

# --- the sweep's CSV: one row per cell, in grid order, whatever -j ---
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB' \
    -j 1 -o "$tmp/s1.csv" 2>"$tmp/err" || fail "sweep -j 1: exit"
[ ! -s "$tmp/err" ] || fail "sweep: stderr not a terminal, yet: $(cat "$tmp/err")"
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB' \
    -j 3 >"$tmp/s3.csv" || fail "sweep -j 3: exit"
python3 - "$tmp/s1.csv" "$tmp/s3.csv" <<'PY' || fail "sweep csv: content"
import csv, sys
a = list(csv.DictReader(open(sys.argv[1])))
b = list(csv.DictReader(open(sys.argv[2])))
assert len(a) == 8 and len(b) == 8, (len(a), len(b))
head = open(sys.argv[1]).readline().strip().split(",")
assert head[:5] == ["cell", "max_split_size_mb", "capacity", "trace", "policy"], head
for k in ("capacity_bytes", "outcome", "peak_allocated_bytes", "peak_reserved_bytes", "frag_peak",
          "waste_bytes", "num_alloc_retries", "num_ooms", "device_time_us"):
    assert k in head, k
want = [(m, c) for m in ("64", "128", "256", "512") for c in ("5.75GiB", "6.25GiB")]
assert [(r["max_split_size_mb"], r["capacity"]) for r in a] == want
assert [r["cell"] for r in a] == [str(i) for i in range(8)]
for r in a:
    assert r["policy"] == "pytorch:max_split_size_mb:" + r["max_split_size_mb"], r
    assert int(r["capacity_bytes"]) == int(float(r["capacity"][:-3]) * 2**30), r
for x, y in zip(a, b):   # parallel cells: the same numbers, the same order
    x.pop("replay_events_per_s"); y.pop("replay_events_per_s")
    assert x == y, (x, y)
PY
# a trace of several clients: a row per cell, the whole run's, as replay gives it at that cell
# (the rows per client once shifted every later cell: cell 1 was cell 0's torch row)
mcdf=$src/traces/data/dataframe-then-torch.gstrace.gz
"$gpusim" sweep "$mcdf" -q -p 'pytorch:max_split_size_mb:{64,128}' --capacity '{60,80}GiB' -o "$tmp/mcs.csv" ||
    fail "sweep of several clients: exit"
for cell in "64 60GiB" "64 80GiB" "128 60GiB" "128 80GiB"; do
    set -- $cell
    "$gpusim" replay "$mcdf" -q -p "pytorch:max_split_size_mb:$1" --capacity "$2" --format csv >>"$tmp/mcr.csv" ||
        fail "replay at $cell: exit"
done
python3 - "$tmp/mcs.csv" "$tmp/mcr.csv" <<'PY' || fail "sweep of several clients: not a row per cell"
import csv, sys
cells = list(csv.DictReader(open(sys.argv[1], newline="")))
runs = [r for r in csv.DictReader(open(sys.argv[2], newline="")) if r["trace"] != "trace" and not r["client"]]
assert len(cells) == len(runs) == 4, (len(cells), len(runs))
for c, r in zip(cells, runs):
    for k in ("policy", "capacity_bytes", "outcome", "peak_reserved_bytes", "num_ooms", "client"):
        assert c[k] == r[k], (c["cell"], k, c[k], r[k])
PY
# a trace whose name holds a line break, a quote and a comma: one record per cell all the same
nlname="$tmp/we\"ird,na
me.gstrace.gz"
cp "$alt" "$nlname"
"$gpusim" sweep "$nlname" -q -p 'pytorch:max_split_size_mb:{64,128}' -o "$tmp/nls.csv" || fail "sweep of a name with a line break: exit"
python3 - "$tmp/nls.csv" "$nlname" <<'PY' || fail "sweep of a name with a line break: the records"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert [(r["cell"], r["max_split_size_mb"], r["trace"]) for r in rows] == [("0", "64", sys.argv[2]), ("1", "128", sys.argv[2])], rows
PY
"$gpusim" plot "$tmp/nls.csv" -o "$tmp/nlp" 2>"$tmp/err" || fail "plot of that sweep: $(cat "$tmp/err")"
# the sweep with a single cell and no lists is a replay's row with a cell number
"$gpusim" sweep "$alt" >"$tmp/one.csv" || fail "sweep one cell: exit"
[ "$(wc -l <"$tmp/one.csv")" -eq 2 ] || fail "sweep one cell: want header + 1 row"
head -1 "$tmp/one.csv" | grep -q "^cell,trace,policy," || fail "sweep one cell: header"

# --- no gnuplot: a clear message, exit 3, the CSV/JSON and the data still written ---
GPUSIM_GNUPLOT=gnuplot-that-is-not-there "$gpusim" replay "$alt" $three --capacity 5.875GiB \
    --format json -o "$tmp/ng.json" --plot "$tmp/ng" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "no gnuplot: exit $rc, want 3"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "no gnuplot: stderr: $(cat "$tmp/err")"
grep -q "gnuplot-that-is-not-there' not found" "$tmp/err" || fail "no gnuplot: message: $(cat "$tmp/err")"
grep -q "GPUSIM_GNUPLOT" "$tmp/err" || fail "no gnuplot: message does not say how to fix it"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d[0]['results'])==3" "$tmp/ng.json" ||
    fail "no gnuplot: JSON not written"
[ -s "$tmp/ng/batch-alternate-timeline.dat" ] && [ -s "$tmp/ng/batch-alternate-timeline.gp" ] ||
    fail "no gnuplot: data and script not written"
ls "$tmp/ng" | grep -q '\.png$' && fail "no gnuplot: a PNG appeared"
# ... and with a PATH that has no gnuplot (gpusim itself by its path)
PATH=/nonexistent "$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128}' -o "$tmp/ng.csv" \
    --plot "$tmp/ng2" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "PATH without gnuplot: exit $rc, want 3"
grep -q "'gnuplot' not found" "$tmp/err" || fail "PATH without gnuplot: message: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/ng.csv")" -eq 3 ] || fail "PATH without gnuplot: CSV not written"
# ... and whatif --plot: the verdict and the charts' data all the same
GPUSIM_GNUPLOT=gnuplot-that-is-not-there "$gpusim" whatif "$alt" --capacity 5.875GiB --format json \
    -o "$tmp/ngw.json" --plot "$tmp/ngw" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "whatif, no gnuplot: exit $rc, want 3"
grep -q "gnuplot-that-is-not-there' not found" "$tmp/err" || fail "whatif, no gnuplot: message: $(cat "$tmp/err")"
python3 -c "import json,sys; assert len(json.load(open(sys.argv[1]))['results']) == 8" "$tmp/ngw.json" ||
    fail "whatif, no gnuplot: verdict not written"
[ -s "$tmp/ngw/batch-alternate-whatif.dat" ] && [ -s "$tmp/ngw/batch-alternate-whatif.gp" ] ||
    fail "whatif, no gnuplot: the chart's data and script not written"
# a gnuplot that fails: exit 3, and no half-written image
# a sweep stopped before its cells are done leaves no plot directory (it was made at the start)
timeout -s INT 0.5 "$gpusim" sweep "$src/traces/data/resnet50.gstrace.gz" -q -j 1 \
    -p 'pytorch:max_split_size_mb:{20..9999}' --plot "$tmp/stopped-plots" -o "$tmp/stopped.csv" 2>/dev/null
[ $? -eq 124 ] || fail "the sweep to stop finished within 0.5 s: make it longer"
[ ! -e "$tmp/stopped-plots" ] || fail "a stopped sweep left its plot directory"
# and with -o inside it, it is made before -o is written
"$gpusim" sweep "$alt" -q -p 'pytorch:max_split_size_mb:{64,128}' --plot "$tmp/inplots" \
    -o "$tmp/inplots/s.csv" >/dev/null 2>&1
[ $? -ne 2 ] && [ -s "$tmp/inplots/s.csv" ] || fail "sweep -o inside --plot's directory"
# gnuplot draws into a folder of its own that gpusim makes (mode 0700, a name not known
# beforehand), never to a fixed name in the plot directory, where a planted link was followed
cat >"$tmp/spy-gnuplot" <<'SH'
#!/bin/sh
out=$(printf '%s' "$2" | sed "s/^out='//; s/'$//")
d=$(dirname "$out")
printf '%s %s\n' "$d" "$(stat -c %a "$d")" >>"$SPY_LOG"
[ ! -L "$d" ] && : >"$out.png" && : >"$out.svg"
SH
chmod +x "$tmp/spy-gnuplot"
mkdir -p "$tmp/spyplots"
ln -s "$tmp/victim" "$tmp/spyplots/.alt-bars.tmp$$.png"
SPY_LOG=$tmp/spy.log GPUSIM_GNUPLOT=$tmp/spy-gnuplot "$gpusim" replay "$alt" -q --plot "$tmp/spyplots" >/dev/null 2>&1 ||
    fail "the spying gnuplot: exit $?"
grep -qv '^\.gpusim-render-[A-Za-z0-9]\{6\} 700$' "$tmp/spy.log" && fail "gnuplot drew outside a private folder: $(cat "$tmp/spy.log")"
[ -s "$tmp/spy.log" ] || fail "the spying gnuplot was not run"
[ ! -e "$tmp/victim" ] || fail "a planted link was followed"
ls -a "$tmp/spyplots" | grep -q '^\.gpusim-render' && fail "the drawing folder was left behind"
# an interrupt while gnuplot draws: the run ends (130) once the drawing folder is gone, and the
# images already there stay (the folder was left behind, with a half-drawn PNG)
cat >"$tmp/int-gnuplot" <<'SH'
#!/bin/sh
for a; do case $a in out=*) out=${a#out=}; out=${out#\'}; out=${out%\'} ;; esac; done
: >"$out.png" && : >"$out.svg"
kill -INT $PPID
SH
chmod +x "$tmp/int-gnuplot"
mkdir -p "$tmp/intplots"
for f in timeline bars; do echo old >"$tmp/intplots/batch-alternate-$f.png"; done
GPUSIM_GNUPLOT=$tmp/int-gnuplot "$gpusim" replay "$alt" -q --plot "$tmp/intplots" >/dev/null 2>&1
rc=$?
[ "$rc" -eq 130 ] || fail "interrupted plot: exit $rc, want 130"
ls -a "$tmp/intplots" | grep -q '^\.gpusim-render' && fail "an interrupt left the drawing folder behind"
for f in timeline bars; do
    [ "$(cat "$tmp/intplots/batch-alternate-$f.png")" = old ] || fail "an interrupted plot replaced $f.png"
done
# the same in a sweep of two workers: GLib keeps idle worker threads after the pool, which took
# the interrupt while the main thread held it back, and the folder stayed
mkdir -p "$tmp/intsweep"
GPUSIM_GNUPLOT=$tmp/int-gnuplot "$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128}' -j 2 -q \
    --plot "$tmp/intsweep" -o "$tmp/intsweep/s.csv" >/dev/null 2>&1
rc=$?
[ "$rc" -eq 130 ] || fail "interrupted sweep plot: exit $rc, want 130"
ls -a "$tmp/intsweep" | grep -q '^\.gpusim-render' && fail "an interrupt of a sweep -j 2 left the drawing folder"
# ... and gnuplot itself runs with the signal mask the test runs with, so Ctrl-C or a scheduler's
# SIGTERM stops it too: gpusim's held-back stop signals must not reach it. Each mask is read by
# shell builtins alone: a shell blocks every signal while it forks, and a child reading its
# parent's status then (sed, in the first version of this check) saw them all blocked.
if [ -r /proc/self/status ]; then
    cat >"$tmp/blk-gnuplot" <<SH
#!/bin/sh
while read -r k v; do [ "\$k" = SigBlk: ] && printf '%s\n' "\$v" >"$tmp/sigblk"; done </proc/\$\$/status
SH
    chmod +x "$tmp/blk-gnuplot"
    mine=
    while read -r k v; do [ "$k" = SigBlk: ] && mine=$v; done </proc/$$/status
    mkdir -p "$tmp/blkplots"
    GPUSIM_GNUPLOT=$tmp/blk-gnuplot "$gpusim" replay "$alt" -q --plot "$tmp/blkplots" >/dev/null 2>&1
    [ "$(cat "$tmp/sigblk")" = "$mine" ] ||
        fail "gnuplot ran with signals blocked: $(cat "$tmp/sigblk"), the test's own $mine"
fi
GPUSIM_GNUPLOT=false "$gpusim" replay "$alt" --plot "$tmp/bad" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 3 ] || fail "failing gnuplot: exit $rc, want 3"
grep -q "gnuplot failed on" "$tmp/err" || fail "failing gnuplot: message: $(cat "$tmp/err")"
ls -A "$tmp/bad" | grep -q 'tmp' && fail "failing gnuplot: temporary files left"

if ! command -v gnuplot >/dev/null 2>&1; then
    echo "gnuplot not installed: drawing tests skipped"
    [ "$fails" -eq 0 ] || exit 1
    exit 77
fi

# --- replay --plot: every plot kind, for a small trace ---
"$gpusim" replay "$alt" $three --capacity 5.875GiB --format json -o "$tmp/run.json" \
    --plot "$tmp/p" >"$tmp/out" 2>"$tmp/err" || fail "replay --plot: exit $?: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "replay --plot -o: wrote to stdout"
check_plot "$tmp/p" batch-alternate-timeline 1280 640
check_plot "$tmp/p" batch-alternate-bars 1280 760
check_plot "$tmp/p" batch-alternate-map-1-pytorch 1280 800
check_plot "$tmp/p" batch-alternate-map-2-pytorch-max_split_size_mb-128 1280 800
check_plot "$tmp/p" batch-alternate-map-3-pytorch-expandable_segments-True 1280 800
# the map at the first OOM: only pytorch meets one; the request beside its pool's largest block
check_plot "$tmp/p" batch-alternate-oom-map-1-pytorch 1280 960
ls "$tmp/p" | grep -q 'oom-map-[23]' && fail "replay --plot: an OOM map for a run with no OOM"
om=$tmp/p/batch-alternate-oom-map-1-pytorch
grep -q "address space at the first OOM (event 675): a request of 120.45 MiB in the large pool" "$om.gp" ||
    fail "oom map: title does not name the event and the request"
grep -q "the failed request: 120.45 MiB" "$om.gp" || fail "oom map: no bar of the request"
grep -q "largest free block in the large pool: 70.25 MiB" "$om.gp" || fail "oom map: the largest free block not named"
grep -q "room under the cap: 56.00 MiB" "$om.gp" || fail "oom map: no room under the cap"
ls -A "$tmp/p" | grep -q 'tmp' && fail "replay --plot: temporary files left"
# what the plots say: the OOM and the retries are marked, the capacity is drawn and named
grep -q "pytorch: 1 OOM" "$tmp/p/batch-alternate-timeline.gp" || fail "timeline: no OOM marker"
grep -q "pytorch:max_split_size_mb:128: 4 retries" "$tmp/p/batch-alternate-timeline.gp" || fail "timeline: no retry markers"
grep -q "capacity 5.875 GiB" "$tmp/p/batch-alternate-timeline.gp" || fail "timeline: capacity not named"
grep -q "memory (GiB)" "$tmp/p/batch-alternate-timeline.gp" || fail "timeline: y axis has no unit"
grep -q "unmapped" "$tmp/p/batch-alternate-map-3-pytorch-expandable_segments-True.gp" ||
    grep -q "free (cached)" "$tmp/p/batch-alternate-map-3-pytorch-expandable_segments-True.gp" || fail "map: no states"
grep -q "modelled device time (ms)" "$tmp/p/batch-alternate-bars.gp" || fail "bars: no device time"
python3 - "$tmp/run.json" <<'PY' || fail "replay --plot: JSON series"
import json, sys
rs = json.load(open(sys.argv[1]))[0]["results"]
for r in rs:
    tl, m = r["timeline"], r["address_map"]
    assert max(p[3] for p in tl["points"]) == r["peak_reserved_bytes"], r["policy"]
    assert len(tl["retries"]) == r["num_alloc_retries"] and len(tl["ooms"]) == r["num_ooms"]
    assert m["reserved_bytes"] == r["peak_reserved_bytes"]
assert rs[0]["outcome"] == "oom" and len(rs[0]["timeline"]["ooms"]) == 1
# the map at the first OOM: the first OOM's event, request and largest free block of its pool
om, fo = rs[0]["oom_map"], rs[0]["first_oom"]
assert om["event"] == fo["event"] and om["request_bytes"] == fo["size"], (om["event"], fo)
assert om["largest_free_in_pool_bytes"] == fo["largest_free_in_pool_bytes"]
assert om["reserved_bytes"] == fo["reserved_bytes"] and om["allocated_bytes"] == fo["allocated_bytes"]
assert all("oom_map" not in r for r in rs[1:])
PY
# without --plot, JSON stays as it was
"$gpusim" replay "$alt" --format json | grep -q '"timeline"' && fail "JSON without --plot carries a timeline"

# --- gpusim plot: from the saved JSON, the same plots and the same data ---
"$gpusim" plot "$tmp/run.json" -o "$tmp/again" || fail "plot run.json: exit"
for f in "$tmp"/p/*.dat "$tmp"/p/*.gp; do
    cmp -s "$f" "$tmp/again/$(basename "$f")" || fail "plot run.json: $(basename "$f") differs"
done
check_plot "$tmp/again" batch-alternate-map-1-pytorch 1280 800
# from a replay's CSV: the bars
"$gpusim" replay "$alt" $three --capacity 5.875GiB --format csv -o "$tmp/run.csv" || fail "csv: exit"
"$gpusim" plot "$tmp/run.csv" || fail "plot run.csv: exit"
check_plot "$tmp" batch-alternate-bars 1280 760
cmp -s "$tmp/p/batch-alternate-bars.dat" "$tmp/batch-alternate-bars.dat" || fail "plot run.csv: bars data differ"

# --- the sweep's plot, and again from its CSV ---
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128,256,512}' --capacity '{5.75,6.25}GiB' \
    -o "$tmp/sw/s.csv" --plot "$tmp/sw" 2>"$tmp/err" || fail "sweep --plot: exit: $(cat "$tmp/err")"
check_plot "$tmp/sw" batch-alternate-sweep 1280 800
cp "$tmp/sw/s.csv" "$tmp/s.csv"
"$gpusim" plot "$tmp/s.csv" -o "$tmp/sw2" || fail "plot sweep csv: exit"
cmp -s "$tmp/sw/batch-alternate-sweep.dat" "$tmp/sw2/batch-alternate-sweep.dat" || fail "plot sweep csv: data differ"
check_plot "$tmp/sw2" batch-alternate-sweep 1280 800

# --- several clients: the OOM map is the failing allocator's, and says whose request failed ---
df=$src/traces/data/dataframe-then-torch.gstrace.gz
"$gpusim" replay "$df" --clients separate,shared -p pytorch -p cupy=cupy --format json -o "$tmp/mc.json" \
    --plot "$tmp/mc" 2>"$tmp/err" || fail "clients --plot: exit $?: $(cat "$tmp/err")"
check_plot "$tmp/mc" dataframe-then-torch-oom-map-1-cupy-cupy-torch-pytorch 1280 960
grep -q "the failing allocator'.\"'\".'s address space at the first OOM (event 170): torch'.\"'\".'s request of 40.000 GiB" \
    "$tmp/mc/dataframe-then-torch-oom-map-1-cupy-cupy-torch-pytorch.gp" || fail "clients oom map: whose request is not said"
"$gpusim" plot "$tmp/mc.json" -o "$tmp/mc2" || fail "plot clients json: exit"
for f in "$tmp"/mc/*.dat "$tmp"/mc/*.gp; do
    cmp -s "$f" "$tmp/mc2/$(basename "$f")" || fail "plot clients json: $(basename "$f") differs"
done

# --- the matrix: a row per setting, a column per capacity; from the sweep and from its CSV ---
# (the sweep above: 4 settings x 2 capacities; 96 + 4 rows of 44 + 64 pixels high)
check_plot "$tmp/sw" batch-alternate-matrix 1280 336
check_plot "$tmp/sw2" batch-alternate-matrix 1280 336
cmp -s "$tmp/sw/batch-alternate-matrix.dat" "$tmp/sw2/batch-alternate-matrix.dat" || fail "plot sweep csv: matrix data differ"
python3 - "$tmp/sw/s.csv" "$tmp/sw/batch-alternate-matrix.dat" <<'PY' || fail "matrix: cells"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
cells = [l.split() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
assert len(cells) == len(rows) == 8, (len(cells), len(rows))
policies = list(dict.fromkeys(r["policy"] for r in rows))
caps = sorted({int(r["capacity_bytes"]) for r in rows})
for r, c in zip(rows, cells):
    col, row, cap, retries, ooms, colour, word, cell, policy = c
    assert int(col) == caps.index(int(r["capacity_bytes"])) + 1 and int(cap) == int(r["capacity_bytes"])
    assert int(row) == policies.index(r["policy"]) + 1 and policy == r["policy"]
    assert int(retries) == int(r["num_alloc_retries"]) and cell == r["cell"]
    assert word == {"ok": "ok", "oom": "OOM"}[r["outcome"]], (word, r["outcome"])
# every setting fails at 5.75 GiB here (whatif: the least any needs is 5.834 GiB) and completes at 6.25
assert [c[6] for c in cells] == ["OOM", "ok"] * 4, [c[6] for c in cells]
PY
grep -q "'6.25GiB' 2" "$tmp/sw/batch-alternate-matrix.gp" || fail "matrix: capacities not the columns"
# a sweep without a capacity list has no matrix
[ -e "$tmp/ng2/batch-alternate-matrix.gp" ] && fail "a sweep without capacities drew a matrix"
# a matrix of more settings than GS_PLOT_MATRIX_MAX_ROWS (300) is not drawn (Cairo refused the
# picture, 13,000+ pixels high, and the command exited 3): a warning says so, the rest is drawn
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{20..620..2}' -c '{5.75,6}GiB' -q -j 2 \
    --plot "$tmp/big" -o "$tmp/big.csv" 2>"$tmp/err" || fail "sweep of 301 settings --plot: exit $?: $(cat "$tmp/err")"
grep -q "warning: --plot: batch-alternate-matrix not drawn: 301 settings, more than 300 rows" "$tmp/err" ||
    fail "sweep of 301 settings: no note of the matrix: $(cat "$tmp/err")"
[ -e "$tmp/big/batch-alternate-matrix.gp" ] && fail "sweep of 301 settings: a matrix drawn"
check_plot "$tmp/big" batch-alternate-sweep 1280 800

# --- the matrix of a grid of two keys: its long settings whole, left of the cells (a fixed
# margin cut them at the picture's edge) ---
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128},roundup_power2_divisions:{1,4}' \
    -c '{5.75,6}GiB' -q -j 2 -o "$tmp/mk.csv" --plot "$tmp/mk" 2>"$tmp/err" || fail "sweep of two keys: $(cat "$tmp/err")"
g=$tmp/mk/batch-alternate-matrix.gp
grep -q "'pytorch:max_split_size_mb:128,roundup_power2_divisions:4' 4" "$g" &&
    awk '/^set lmargin at screen/ { exit !($5 * 1280 >= 7.6 * 56 + 40) }' "$g" ||
    fail "matrix of two keys: a setting cut: $(grep -e lmargin -e ytics "$g")"

# --- the sweep plot of a mixed grid: several templates, a capacity list ---
# x is the capacity (every cell has it), to scale; a line per setting, in a legend panel of its
# own; y fits the values
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128}' -p 'pytorch:garbage_collection_threshold:{0.6,0.8}' \
    -p pytorch:expandable_segments:True --capacity '{5.75,5.875,6.25}GiB' -o "$tmp/mx/s.csv" --plot "$tmp/mx" 2>"$tmp/err" ||
    fail "mixed sweep: exit: $(cat "$tmp/err")"
check_plot "$tmp/mx" batch-alternate-sweep 1280 800
check_plot "$tmp/mx" batch-alternate-matrix 1280 380
g=$tmp/mx/batch-alternate-sweep.gp
grep -q "set xtics ('5.75GiB' 5.75, '5.875GiB' 5.875, '6.25GiB' 6.25) nomirror" "$g" || fail "mixed sweep: x is not the capacity to scale"
grep -q "set xlabel 'capacity (GiB)'" "$g" || fail "mixed sweep: x not named with its unit"
[ "$(grep -c "^plot NaN \|^     NaN " "$g")" -eq 6 ] || fail "mixed sweep: want a legend entry per setting and one for the OOMs"
grep -q "title 'pytorch: garbage_collection_threshold 0.8'" "$g" &&
    grep -q "title 'pytorch:expandable_segments:True'" "$g" ||
    fail "mixed sweep: the legend does not name the settings (a grid's by its keys' values)"
# the first panel, peak reserved: its y axis starts near its values, not at 0
awk '/^set yrange/ { split($3, r, /[\[:\]]/); exit !(r[2] > 5) }' "$g" || fail "mixed sweep: peak reserved forced to start at 0"
grep -q "^set key at screen" "$g" || fail "mixed sweep: the legend is not a panel of its own"
# a template without the x parameter: a line across (its cell at both ends of the axis)
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128,256,512}' -p pytorch:expandable_segments:True \
    --capacity 5.875GiB -o "$tmp/fl/s.csv" --plot "$tmp/fl" 2>"$tmp/err" || fail "flat sweep: exit: $(cat "$tmp/err")"
check_plot "$tmp/fl" batch-alternate-sweep 1280 800
g=$tmp/fl/batch-alternate-sweep.gp
grep -q "set logscale x 2" "$g" || fail "flat sweep: 64..512 not on a base-2 scale"
grep -q "dashed: settings without'" "$g" || fail "flat sweep: the legend does not say what dashed means"
python3 - "$tmp/fl/batch-alternate-sweep.dat" <<'PY' || fail "flat sweep: data"
import sys
blocks = [b for b in open(sys.argv[1]).read().split("\n\n\n") if b.strip()]
rows = lambda b: [l.split() for l in b.splitlines() if l and not l.startswith("#")]
xs = [float(r[0]) for r in rows(blocks[0])]
assert xs == [64, 128, 256, 512], xs
flat = rows(blocks[1])
assert "(without x: drawn across)" in blocks[1] and len(flat) == 2 and flat[0][1:] == flat[1][1:], flat
assert float(flat[0][0]) < 64 and float(flat[1][0]) > 512
PY
[ -e "$tmp/fl/batch-alternate-matrix.gp" ] && fail "a sweep with one capacity and no list drew a matrix"

# --- frontier --plot: the points, numbered and keyed, the front's staircase, stitch marked ---
"$gpusim" frontier "$alt" -q -f csv -o "$tmp/fr.csv" --plot "$tmp/fr" 2>"$tmp/err" ||
    fail "frontier --plot: exit $?: $(cat "$tmp/err")"
check_plot "$tmp/fr" batch-alternate-frontier 1280 620
python3 - "$tmp/fr.csv" "$tmp/fr/batch-alternate-frontier.dat" "$tmp/fr/batch-alternate-frontier.gp" <<'PY' || fail "frontier --plot: the chart is not the CSV's points"
import csv, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
blocks = open(sys.argv[2]).read().split("\n\n\n")
pts = [l.split(" ", 5) for l in blocks[0].splitlines() if not l.startswith("#")]
front = [l.split() for l in blocks[1].splitlines() if not l.startswith("#")]
drawn = [r for r in rows if r["min_capacity_bytes"] and r["uncapped_outcome"] == "ok"]
assert len(pts) == len(drawn), (len(pts), len(drawn))
for p in pts:
    r = rows[int(p[0]) - 1]
    assert p[5] == r["policy"] and p[3] == r["pareto"] and p[4] == r["ours"], (p, r)
    assert abs(float(p[1]) - float(r["time_over_default"])) < 1e-5, (p, r)
    assert abs(float(p[2]) - float(r["memory_over_bound"])) < 1e-5, (p, r)
xs = [float(f[0]) for f in front]
assert xs == sorted(xs) and len(front) == sum(r["pareto"] == "1" for r in rows), front
g = open(sys.argv[3]).read()
keys = re.findall(r"set label (\d+) '((?:[^']|'')*)' at screen", g)
assert len(keys) == len(rows), (len(keys), len(rows))
for n, text in keys:   # keyed in the CSV's order, each within the picture (Sans 10: 7 px a char)
    assert text.split("  ", 1)[1].startswith(rows[int(n) - 1]["policy"][:10]), text
    assert 0.60 * 1280 + 7 * len(text) <= 1280, text
assert "gpusim''s own policy" in g
PY

# --- whatif --plot: the survival chart, and the map at the recorded setting's first OOM ---
"$gpusim" whatif "$alt" --capacity 5.875GiB --format json -o "$tmp/wi.json" --plot "$tmp/wi" 2>"$tmp/err" ||
    fail "whatif --plot: exit $?: $(cat "$tmp/err")"
# 8 settings: 92 + 8 rows of 40 + 72 + 1 note of 20 pixels high
check_plot "$tmp/wi" batch-alternate-whatif 1280 504
# the recorded setting (pytorch) is 5th in the verdict and fails at the cap
check_plot "$tmp/wi" batch-alternate-oom-map-5-pytorch 1280 960
[ "$(ls "$tmp/wi"/*.png | wc -l)" -eq 2 ] || fail "whatif --plot: want two pictures: $(ls "$tmp/wi")"
python3 - "$tmp/wi.json" "$tmp/wi/batch-alternate-whatif.dat" <<'PY' || fail "whatif --plot: chart data"
import json, sys
rs = json.load(open(sys.argv[1]))["results"]
rows = [l.split() for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")]
assert len(rows) == len(rs) == 8
for i, (r, d) in enumerate(zip(rs, rows)):   # the verdict's order, its numbers
    assert int(d[0]) == i + 1 and d[7] == r["policy"], (d, r["policy"])
    assert abs(float(d[1]) - r["min_capacity_bytes"] / 2**30) < 1e-6
    assert abs(float(d[2]) - r["device_time_us"] / 1000) < 1e-3
    assert d[4] == r["outcome"] and int(d[5]) == r["recorded"]
    assert d[3] == ("0x0072B2" if r["outcome"] == "ok" else "0xD55E00")
PY
g=$tmp/wi/batch-alternate-whatif.gp
grep -q "'cap given 5.875 GiB'" "$g" || fail "whatif chart: the cap is not drawn and named (it was given: no recorded cap)"
grep -q "'pytorch (recorded)' 5" "$g" || fail "whatif chart: the recorded setting is not named"
# a snapshot's cap is the recorded one (its NAME.json: 1.5 GiB), and the chart says so
"$gpusim" whatif "$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz" -q \
    --plot "$tmp/wr" >/dev/null 2>"$tmp/err" || fail "whatif --plot of a snapshot: $(cat "$tmp/err")"
grep -q "'recorded cap 1.5 GiB'" "$tmp/wr/oomdie__default__1.5-whatif.gp" ||
    fail "whatif chart of a snapshot: the recorded cap is not named so"
grep -q "'7.42 ms (+0%), to its failure'" "$g" || fail "whatif chart: device time not beside the bars"
grep -q "a request of 120.45 MiB in the large pool failed" "$tmp/wi/batch-alternate-oom-map-5-pytorch.gp" ||
    fail "whatif oom map: not the recorded setting's first OOM"
# a recorded setting that completes at the cap: the chart alone
"$gpusim" whatif "$alt" --capacity 6GiB -q --plot "$tmp/wi2" >/dev/null 2>"$tmp/err" || fail "whatif --plot ok: $(cat "$tmp/err")"
check_plot "$tmp/wi2" batch-alternate-whatif 1280 504
ls "$tmp/wi2" | grep -q oom-map && fail "whatif --plot: an OOM map for a setting that completes"

# --- a recorded run that died of an OOM (a snapshot dumped at OOM: an oom event ends it) ---
# The map is of the OOM the run died of, not of the one the program caught before it.
printf '%s\n' '# gpusim-trace 2' 'seq,time_us,op,client,device,stream,id,size' \
    '0,0,alloc,torch,0,0,1,1048576000' '1,1,oom,torch,0,0,0,4294967296' \
    '2,2,alloc,torch,0,0,2,104857600' '3,3,oom,torch,0,0,0,2147483648' >"$tmp/died.gstrace"
"$gpusim" replay "$tmp/died.gstrace" --capacity 2GiB --format json -o "$tmp/died.json" \
    --plot "$tmp/dd" 2>"$tmp/err" || fail "replay --plot, a run that died: exit $?: $(cat "$tmp/err")"
check_plot "$tmp/dd" died-oom-map-1-pytorch 1280 960
grep -q "address space at the first OOM (event 3): a request of 2.000 GiB" "$tmp/dd/died-oom-map-1-pytorch.gp" ||
    fail "oom map of a run that died: not the OOM it died of"
python3 - "$tmp/died.json" <<'PY' || fail "oom map of a run that died: JSON"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["outcome"] == "oom" and r["caught_ooms"] == 1, (r["outcome"], r["caught_ooms"])
assert r["oom_map"]["event"] == r["first_oom"]["event"] == 3, (r["oom_map"]["event"], r["first_oom"])
PY
"$gpusim" whatif "$tmp/died.gstrace" --capacity 2GiB -q --plot "$tmp/dw" >/dev/null 2>"$tmp/err" ||
    fail "whatif --plot, a run that died: $(cat "$tmp/err")"
ls "$tmp/dw" | grep -q 'died-oom-map-.*-pytorch\.png' || fail "whatif --plot: no OOM map for a run that died: $(ls "$tmp/dw")"

# with a client per allocator, one heap's OOM count is not another's: a switch of client is no
# OOM (the map was taken at client b's first allocation, event 2, not at a's failure, event 4)
printf '%s\n' '# gpusim-trace 2' 'seq,time_us,op,client,device,stream,id,size' \
    '0,0,alloc,a,0,0,1,1048576000' '1,1,oom,a,0,0,0,4294967296' '2,2,alloc,b,0,0,2,104857600' \
    '3,3,alloc,b,0,0,3,104857600' '4,4,alloc,a,0,0,4,2147483648' '5,5,free,b,0,0,2,0' >"$tmp/mc.gstrace"
"$gpusim" replay "$tmp/mc.gstrace" --clients separate --capacity 2GiB --continue-on-oom --format json \
    -o "$tmp/mc.json" --plot "$tmp/mcp" 2>"$tmp/err" || fail "separate clients --plot: exit $?: $(cat "$tmp/err")"
python3 - "$tmp/mc.json" <<'PY' || fail "separate clients: the OOM map or markers"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["oom_map"]["event"] == r["first_oom"]["event"] == 4, (r["oom_map"]["event"], r["first_oom"]["event"])
assert [p[0] for p in r["timeline"]["ooms"]] == [1, 4] and r["num_ooms"] == 2, r["timeline"]["ooms"]
# the timeline and the maps are the device's: both heaps' bytes summed, both heaps' segments
# (a's 1000 MiB, b's two of 100 MiB; the old timeline showed b's 200 MiB at event 3)
a, b = 1048576000, 104857600
assert r["timeline"]["points"][3] == [3, 3, a + 2 * b, a + 2 * b], r["timeline"]["points"]
assert r["timeline"]["points"][5] == [5, 5, a + b, a + 2 * b], r["timeline"]["points"]
assert len(r["address_map"]["segments"]) == 3 and r["address_map"]["reserved_bytes"] == a + 2 * b, r["address_map"]
assert len(r["oom_map"]["segments"]) == 3, r["oom_map"]
PY

# --- two traces of one name in one command: plots and snapshots of their own, none written over ---
mkdir -p "$tmp/d1" "$tmp/d2"
cp "$alt" "$tmp/d1/run.gstrace.gz"
cp "$src/traces/data/resnet50.gstrace.gz" "$tmp/d2/run.gstrace.gz"
(cd "$tmp" && "$gpusim" replay -q d1/run.gstrace.gz d2/run.gstrace.gz --plot same --export-snapshot snaps \
    --format json -o same.json) 2>"$tmp/err" || fail "two traces of one name: exit $?: $(cat "$tmp/err")"
check_plot "$tmp/same" run-timeline 1280 640
check_plot "$tmp/same" run-2-timeline 1280 640
cmp -s "$tmp/same/run-timeline.dat" "$tmp/same/run-2-timeline.dat" &&
    fail "two traces of one name: the second's timeline is the first's"
[ -s "$tmp/snaps/run-snapshot-1-pytorch.pickle" ] && [ -s "$tmp/snaps/run-2-snapshot-1-pytorch.pickle" ] ||
    fail "two traces of one name: want a snapshot each: $(ls "$tmp/snaps")"
# a trace whose plot names would take another's ("run"'s OOM map is "run-oom"'s map): its stem
# is run_oom, taken when the names are given, before anything is replayed or written (it was
# refused as the plots were written: exit 2 after the reports, half the plots there); in either
# order
cp "$tmp/died.gstrace" "$tmp/run.gstrace"
head -n 5 "$tmp/died.gstrace" >"$tmp/run-oom.gstrace"
"$gpusim" replay -q "$tmp/run.gstrace" "$tmp/run-oom.gstrace" --capacity 2GiB --plot "$tmp/clash" \
    >/dev/null 2>"$tmp/err" || fail "plot names of two traces that would collide: exit $?: $(cat "$tmp/err")"
grep -q "(event 3)" "$tmp/clash/run-oom-map-1-pytorch.gp" && [ -s "$tmp/clash/run_oom-map-1-pytorch.gp" ] &&
    [ -s "$tmp/clash/run_oom-bars.png" ] || fail "plot names collide: $(ls "$tmp/clash" | grep '\.gp$')"
"$gpusim" replay -q "$tmp/run-oom.gstrace" "$tmp/run.gstrace" --capacity 2GiB --plot "$tmp/clash2" \
    >/dev/null 2>"$tmp/err" || fail "plot names of two traces that would collide, the other order: $(cat "$tmp/err")"
[ -s "$tmp/clash2/run-oom-map-1-pytorch.gp" ] && grep -q "(event 3)" "$tmp/clash2/run-2-oom-map-1-pytorch.gp" ||
    fail "plot names collide, the other order: $(ls "$tmp/clash2" | grep '\.gp$')"
# two saved reports of one trace, drawn into one directory: a set of plots each
"$gpusim" replay -q "$alt" -p pytorch --format json -o "$tmp/ra.json" && "$gpusim" replay -q "$alt" -p cupy \
    --format json -o "$tmp/rb.json" || fail "two reports of one trace: replay"
"$gpusim" plot "$tmp/ra.json" "$tmp/rb.json" -o "$tmp/twor" 2>"$tmp/err" || fail "plot two reports: $(cat "$tmp/err")"
grep -q "'pytorch'" "$tmp/twor/batch-alternate-bars.gp" && grep -q "'cupy'" "$tmp/twor/batch-alternate-2-bars.gp" ||
    fail "two reports of one trace: want batch-alternate-bars (pytorch) and -2-bars (cupy): $(ls "$tmp/twor")"
# and again from the saved report: the same names
"$gpusim" plot "$tmp/same.json" -o "$tmp/same-again" 2>"$tmp/err" || fail "plot same.json: $(cat "$tmp/err")"
for f in "$tmp"/same/*.dat "$tmp"/same/*.gp; do
    cmp -s "$f" "$tmp/same-again/$(basename "$f")" || fail "plot same.json: $(basename "$f") differs"
done

# --- nothing a name or a saved report holds runs a command, or escapes the directory ---
# gnuplot runs `backquoted` text in double-quoted strings as a shell command. A trace whose file
# name holds backquotes, $(...), both quotes and a line break; then saved JSON and CSV whose
# trace, policy, outcome and sweep parameters hold commands: gpusim draws every plot (gnuplot
# runs each script), each script is run again by hand, and no marker file may appear.
# check_all DIR N: at least N scripts in DIR, each with its PNG and SVG, each run again by gnuplot
check_all() {
    n=0
    for gp in "$1"/*.gp; do
        [ -e "$gp" ] || { fail "$1: no scripts"; return; }
        stem=$(basename "$gp" .gp)
        [ -s "$1/$stem.png" ] && [ -s "$1/$stem.svg" ] || fail "$1/$stem: images not drawn"
        # an SVG an XML reader opens (a name's bytes that are no UTF-8 went in raw)
        python3 -c 'import sys, xml.dom.minidom as m; m.parse(sys.argv[1])' "$1/$stem.svg" 2>"$tmp/xml.err" ||
            fail "$1/$stem.svg: not XML: $(tail -1 "$tmp/xml.err")"
        (cd "$1" && gnuplot -e "out='$tmp/replot'" "./$stem.gp") >"$tmp/gp.out" 2>"$tmp/gp.err" ||
            fail "$1/$stem.gp: gnuplot exits non-zero: $(cat "$tmp/gp.err")"
        # long labels may not fit: a layout warning is all gnuplot may say
        ! grep -v 'warning:' "$tmp/gp.err" | grep -q . || fail "$1/$stem.gp: gnuplot complains: $(cat "$tmp/gp.err")"
        n=$((n + 1))
    done
    [ "$n" -ge "$2" ] || fail "$1: $n scripts, want at least $2"
}
ev=$tmp/evil
mkdir -p "$ev"
evil_name=$(printf 'e`touch PWNED-1`$(touch PWNED-2)%sq"\nx;@y.gstrace.gz' "'")
cp "$alt" "$ev/$evil_name"
(cd "$ev" && "$gpusim" replay "$evil_name" -p pytorch -p pytorch:expandable_segments:True \
    --capacity 5.875GiB --format json -o run.json --plot p) >"$tmp/out" 2>"$tmp/err" ||
    fail "evil trace name: exit $?: $(cat "$tmp/err")"
check_all "$ev/p" 4
ls "$ev/p" | grep -q '^e-touch-PWNED-1---touch-PWNED-2--q--x--y-timeline.png$' ||
    fail "evil trace name: plot names: $(ls "$ev/p" | head -3)"
# a name that is no UTF-8 (Latin-1 'résumé'): every title written as UTF-8, U+FFFD for its bytes
latin=$(printf 'r\351sum\351.gstrace.gz')
cp "$alt" "$ev/$latin"
(cd "$ev" && "$gpusim" replay -q "$latin" --capacity 5.875GiB --plot latin >/dev/null &&
    "$gpusim" whatif -q "$latin" --capacity 5.875GiB --plot latin-w >/dev/null) 2>"$tmp/err" ||
    fail "a Latin-1 trace name: exit $?: $(cat "$tmp/err")"
check_all "$ev/latin" 3
check_all "$ev/latin-w" 2
"$gpusim" replay "$alt" -p pytorch -p 'pytorch:max_split_size_mb:128' --format csv -o "$ev/replay.csv" ||
    fail "evil: replay csv"
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128}' -o "$ev/sweep.csv" || fail "evil: sweep csv"
python3 - "$ev" "$tmp/PWNED" <<'PY' || fail "evil saved reports: could not write them"
import csv, json, sys
d, pwn = sys.argv[1], sys.argv[2]
cmd = lambda k: "`touch %s-%s` $(touch %s-%s) \\`touch %s-%s`" % (pwn, k, pwn, k, pwn, k)
j = json.load(open(d + "/run.json"))[0]
j["trace"] = "../../escape/" + cmd("j1") + "'\"\n" + cmd("j2")
j["results"][0]["policy"] = "pytorch" + cmd("j3") + "'"
j["results"][1]["outcome"] = "oom" + cmd("j4") + '"'
json.dump([j], open(d + "/evil.json", "w"))
rows = list(csv.reader(open(d + "/replay.csv")))
h = rows[0]
for r in rows[1:]:
    r[h.index("trace")] = "../" + cmd("c1")
    r[h.index("policy")] = cmd("c2") + "\n'x'"
csv.writer(open(d + "/evil.csv", "w")).writerows(rows)
rows = list(csv.reader(open(d + "/sweep.csv")))
h = rows[0]
h[1] = "msm" + cmd("s1")
for r in rows[1:]:
    r[1] = r[1] + cmd("s2")
    r[h.index("policy")] = cmd("s3")
csv.writer(open(d + "/evil-sweep.csv", "w")).writerows(rows)
PY
for f in evil.json evil.csv evil-sweep.csv; do
    "$gpusim" plot "$ev/$f" -o "$ev/out-$f" 2>"$tmp/err" || fail "plot $f: exit $?: $(cat "$tmp/err")"
done
check_all "$ev/out-evil.json" 4
check_all "$ev/out-evil.csv" 1
check_all "$ev/out-evil-sweep.csv" 1
# a saved trace name with '../' draws beside the other plots, never outside the directory
[ -e "$tmp/escape" ] || [ -e "$ev/escape" ] && fail "a saved trace name escaped the plot directory"
ls "$ev/out-evil.json" | grep -q -- '-bars.png$' || fail "evil JSON: no bars"
for m in 1 2 j1 j2 j3 j4 c1 c2 s1 s2 s3; do
    pwned=$(find "$tmp" "$PWD" -maxdepth 3 -name "PWNED-$m" 2>/dev/null)
    [ -z "$pwned" ] || fail "a name ran a command: $pwned"
done

# a saved report named like a plot it gives is never overwritten by it: exit 2, one line
mkdir -p "$tmp/keep"
python3 - "$ev/replay.csv" "$tmp/keep/t-bars.dat" <<'PY' || fail "keep: could not write the report"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
for r in rows[1:]:
    r[rows[0].index("trace")] = "t"
csv.writer(open(sys.argv[2], "w")).writerows(rows)
PY
cp "$tmp/keep/t-bars.dat" "$tmp/keep.csv"
expect_error "plot over its own input" "an input of this run has that name" "$gpusim" plot "$tmp/keep/t-bars.dat"
cmp -s "$tmp/keep/t-bars.dat" "$tmp/keep.csv" || fail "plot over its own input: the input changed"

# --- the pictures at the sizes they are drawn: tick labels apart, legend entries inside ---
# A sweep of twelve values, close on a log axis, with one long setting as its only line: each
# panel's labelled ticks must not overprint (8 px a character at Sans 11, 8 px apart, across
# the panel less its 11 characters of margins), and every legend entry must fit its panel (7.4
# px a character at Sans 10 beside an 80 px sample). The old script printed all twelve labels
# (256 and 300 overprinted) and a legend entry running off the picture.
"$gpusim" sweep "$alt" -o "$tmp/ticks.csv" --plot "$tmp/ticks" -q \
    --policy 'pytorch:max_split_size_mb:{64,128,200,256,300,384,512,640,768,1024,2048,4096}' \
    >/dev/null 2>"$tmp/err" || fail "sweep of twelve values: $(cat "$tmp/err")"
python3 - "$tmp/ticks/batch-alternate-sweep.gp" <<'PY' || fail "sweep: tick labels overprint or a legend entry is cut by the picture's edge"
import math, re, sys
text = open(sys.argv[1]).read()
panels = 0
for block in text.split("set origin ")[1:]:
    w = float(re.search(r"set size ([0-9.]+),", block).group(1)) * 1280
    tics = re.search(r"set xtics \((.*)\) nomirror", block)
    if tics:
        panels += 1
        lo, hi = map(float, re.search(r"set xrange \[([^:]+):([^\]]+)\]", block).groups())
        log = "set logscale x 2" in block
        pos = lambda x: (math.log2(x) - math.log2(lo)) / (math.log2(hi) - math.log2(lo)) if log else (x - lo) / (hi - lo)
        plot = w - 11 * 8
        right, shown = -1e9, 0
        for label, x in re.findall(r"'([^']*)' ([0-9.e+-]+)", tics.group(1)):
            if not label:
                continue
            at, half = plot * pos(float(x)), 4 * len(label)
            assert at - half >= right + 8, ("overprint", label, at, right)
            right, shown = at + half, shown + 1
        assert shown >= 4, ("too few labels left", tics.group(1))
    if "set key at screen" in block:
        fit = (w - 80) / 7.4
        for title in re.findall(r"title '([^']*)'", block):
            assert len(title) <= fit, ("legend entry wider than its panel", title, fit)
assert panels == 4, panels
PY

# Every value label of every picture drawn above (the whatif chart's bars and device times, the
# OOM maps' arrows and bars: 'set label ... at X,Y left'): its value on the axis, and its text
# inside its plot area (0.70 x the point size a character, 8 px from its point), so that no
# label is clipped by the picture's edge or runs into the next panel.
find "$tmp" -name '*.gp' >"$tmp/scripts"
python3 - $(cat "$tmp/scripts") <<'PY' || fail "a value label outside its axis or past its plot area"
import re, sys
bad = labels = 0
for path in sys.argv[1:]:
    text = open(path).read()
    size = re.search(r"pngcairo size (\d+),", text)
    if not size:
        continue
    W = int(size.group(1))
    L = R = lo = hi = None
    for line in text.splitlines():
        m = re.match(r"set [lr]margin at screen ([0-9.]+)", line)
        if m:
            if line[4] == "l":
                L = float(m.group(1))
            else:
                R = float(m.group(1))
        m = re.match(r"set xrange \[([-0-9.e+]+):([-0-9.e+]+)\]", line)
        if m:
            lo, hi = map(float, m.groups())
        m = re.match(r"set label \d+ '((?:[^']|'')*)' at ([-0-9.e+]+),[-0-9.e+]+ left offset 1,0.*font 'Sans,(\d+)'", line)
        if m and None not in (L, R, lo, hi):
            labels += 1
            t, x, pt = m.group(1).replace("''", "'"), float(m.group(2)), int(m.group(3))
            area = (R - L) * W
            end = (x - lo) / (hi - lo) * area + 8 + 0.70 * pt * len(t)
            if not lo <= x <= hi or end > area + 4:
                bad += 1
                print("%s: %r at %g: axis [%g:%g], ends %.0f px into a %.0f px plot area" % (path, t, x, lo, hi, end, area))
assert labels >= 20, ("too few labels checked", labels)
sys.exit(1 if bad else 0)
PY

[ "$fails" -eq 0 ] && echo "all plot tests passed"
[ "$fails" -eq 0 ]
