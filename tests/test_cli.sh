#!/bin/sh
# test_cli.sh GPUSIM SRCDIR - end-to-end tests of the gpusim command line: help, errors (one
# line on stderr, exit 2), every output format, --output, OOM outcomes and --continue-on-oom,
# and traces with several clients (--clients, NAME=SPEC policies, per-client reports).
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac   # some runs cd
src=$2
. "$src/tests/clitest.sh"

trace=$src/traces/data/resnet50.gstrace.gz

# --- help teaches ---
"$gpusim" help >"$tmp/h" || fail "help exits non-zero"
grep -q "replay" "$tmp/h" || fail "help lacks the replay command"
# "gpusim help COMMAND" is the command's own help (it printed the general text)
for cmd in replay whatif sweep convert; do
    "$gpusim" help $cmd >"$tmp/h1" 2>&1 || fail "help $cmd exits non-zero"
    "$gpusim" $cmd --help >"$tmp/h2" 2>&1
    cmp -s "$tmp/h1" "$tmp/h2" || fail "help $cmd is not $cmd --help: $(head -2 "$tmp/h1")"
done
expect_error "help of no such command" "unknown command 'replya'" "$gpusim" help replya
for opt in --help -h; do
    "$gpusim" help $opt 2>&1 | grep -q "^usage: gpusim COMMAND" || fail "help $opt: not the general help"
done
"$gpusim" replay --help >"$tmp/h" || fail "replay --help exits non-zero"
for word in --policy --capacity --format --continue-on-oom --reference max_split_size_mb Examples "Exit status"; do
    grep -q -- "$word" "$tmp/h" || fail "replay --help lacks '$word'"
done
"$gpusim" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no command: want exit 2"
# every command that reads a trace or a report takes -q, so a script can pass it to each (convert,
# plot and validate refused it: "Unknown option -q")
for cmd in replay validate sweep plot whatif frontier convert; do
    "$gpusim" $cmd --help | grep -q -- "-q, --quiet" || fail "$cmd --help: no -q"
done
"$gpusim" whatif --help | grep -q "^  gpusim whatif \[OPTION" || fail "whatif --help: the usage line does not name gpusim"
expect_error "sweep --merge of nothing" "no SHARD.csv given" "$gpusim" sweep --merge

# --- a trace no replay takes (several devices and several clients) is refused by every command
# that replays, before any verdict: whatif and frontier used to print one made of refused replays
# (a bound of 0 B, every setting "ok" with no minimum) and exit 0 ---
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,1000\n1,0,alloc,torch,1,0,2,5000000\n2,0,alloc,cupy,1,0,3,5000000\n' \
    >"$tmp/devcli.gstrace"
for cmd in replay whatif frontier sweep validate; do
    expect_error "$cmd: two devices and two clients" "devcli.gstrace: a trace with several devices (2) and several clients (2) is not supported" \
        "$gpusim" "$cmd" "$tmp/devcli.gstrace"
done

# --- without --format, -o's name says the format (-o out.json wrote the table); --format wins ---
"$gpusim" replay -q "$trace" -p cupy -o "$tmp/by-name.json" || fail "replay -o .json: exit $?"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/by-name.json" || fail "replay -o .json: not JSON: $(head -c 80 "$tmp/by-name.json")"
"$gpusim" replay -q "$trace" -p cupy -o "$tmp/by-name.CSV" && head -1 "$tmp/by-name.CSV" | grep -q '^trace,policy,' ||
    fail "replay -o .CSV: not CSV: $(head -1 "$tmp/by-name.CSV")"
"$gpusim" replay -q "$trace" -p cupy -f table -o "$tmp/forced.json" && grep -q '^policy ' "$tmp/forced.json" ||
    fail "replay -f table -o .json: $(head -2 "$tmp/forced.json")"

# --- "--" ends the options: a trace whose name starts with '-' ---
cp "$trace" "$tmp/-dash.gstrace.gz"
(cd "$tmp" && "$gpusim" replay -q -p cupy -- -dash.gstrace.gz) >"$tmp/dash" 2>"$tmp/err" ||
    fail "replay -- -dash.gstrace.gz: exit $?: $(cat "$tmp/err")"
grep -q "^trace -dash.gstrace.gz: 8533 events" "$tmp/dash" && grep -q "^cupy " "$tmp/dash" ||
    fail "replay -- -dash.gstrace.gz: $(head -3 "$tmp/dash")"
(cd "$tmp" && "$gpusim" convert -o dash.gsbin -- -dash.gstrace.gz) 2>"$tmp/err" && [ -s "$tmp/dash.gsbin" ] ||
    fail "convert -o OUT -- -dash.gstrace.gz: $(cat "$tmp/err")"

# --- a name with a line break: the error is one line, the table's header one line ---
nl='
'
"$gpusim" replay "$tmp/nosuch${nl}x" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q 'nosuch\\x0ax' "$tmp/err" ||
    fail "a missing trace named with a line break: rc $rc, stderr: $(cat "$tmp/err")"
cp "$trace" "$tmp/nl${nl}name.gstrace.gz"
"$gpusim" replay -q "$tmp/nl${nl}name.gstrace.gz" >"$tmp/out" 2>"$tmp/err" || fail "replay a name with a line break: exit $?"
grep -q '^trace .*nl\\x0aname.gstrace.gz: 8533 events' "$tmp/out" || fail "table header split: $(head -2 "$tmp/out")"
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,512\n1,1,free,torch,0,0,99,0\n' \
    >"$tmp/len${nl}ient.gstrace"
"$gpusim" replay -q --lenient "$tmp/len${nl}ient.gstrace" >/dev/null 2>"$tmp/err" || fail "lenient, a line break in the name: exit $?"
[ "$(wc -l <"$tmp/err")" -eq 2 ] && grep -q 'len\\x0aient.gstrace: 1 problems skipped' "$tmp/err" ||
    fail "lenient, a line break in the name: not one line a message: $(cat "$tmp/err")"

# --- a progress line (stderr a terminal: run under script(1)'s pseudo-terminal) names its trace
# through gs_printable: an escape sequence in the name is shown, not sent to the terminal ---
esc=$(printf 'esc\033]0;pwned\007x.gstrace.gz')
cp "$trace" "$tmp/$esc"
# (the name is made inside prog.sh: script(1) writes its command line into the typescript)
cat >"$tmp/prog.sh" <<'SH'
cd "$2" && exec "$1" sweep -p pytorch -p cupy -o sweep.csv "$(printf 'esc\033]0;pwned\007x.gstrace.gz')"
SH
if command -v script >/dev/null 2>&1 &&
    script -qec "sh '$tmp/prog.sh' '$gpusim' '$tmp'" "$tmp/typescript" >/dev/null 2>&1 </dev/null; then
    grep -q 'esc\\x1b\]0;pwned\\x07x.gstrace.gz: 2/2 cells' "$tmp/typescript" ||
        fail "progress line: the name not shown escaped: $(od -c "$tmp/typescript" | head -5)"
    ! grep -q "$(printf '\033]0;')" "$tmp/typescript" || fail "progress line: the name's escape sequence reached the terminal"
else
    echo "test_cli: no pseudo-terminal (script(1)): the progress line's check skipped"
fi

# --- C1 controls (CSI, U+009B, as UTF-8 and as a raw byte), a right-to-left override and a stray
# byte after a character: escaped in the table and on stderr, never raw; JSON escapes what a
# terminal acts on and keeps the character before a stray byte; no plot file name holds them ---
mkdir -p "$tmp/c1"
for n in "$(printf 'x\302\2332Jy')" "$(printf 'x\2332Jz')" "$(printf 'r\342\200\256tl')" "$(printf 'e\342\202\254\200s')"; do
    cp "$src/traces/data/resnet50.gstrace.gz" "$tmp/c1/$n.gstrace.gz"
done
(cd "$tmp/c1" && for f in x*y.gstrace.gz x*z.gstrace.gz r*tl.gstrace.gz e*s.gstrace.gz; do
    "$gpusim" replay -q -p cupy "$f" --plot plots; done) >"$tmp/c1.out" 2>"$tmp/err" || fail "C1 names: exit: $(cat "$tmp/err")"
grep -q '^trace x\\x9b2Jy.gstrace.gz: ' "$tmp/c1.out" && grep -q '^trace x\\x9b2Jz.gstrace.gz: ' "$tmp/c1.out" &&
    grep -q '^trace r\\u202etl.gstrace.gz: ' "$tmp/c1.out" || fail "C1 names: the table: $(grep '^trace' "$tmp/c1.out")"
python3 - "$tmp/c1.out" "$tmp/err" <<'PY' || fail "C1 names: a raw control byte in the output"
import sys
for p in sys.argv[1:]:
    raw = open(p, "rb").read()
    assert b"\x9b" not in raw and b"\xe2\x80\xae" not in raw, (p, raw[:300])
    assert b"e\xe2\x82\xac\\x80s" in raw or p.endswith("err"), raw[:300]  # the stray byte alone escaped
PY
ls "$tmp/c1/plots" | LC_ALL=C grep -q "$(printf '[\233]\|\342\200\256')" && fail "C1 names: in a plot's file name: $(ls "$tmp/c1/plots")"
(cd "$tmp/c1" && "$gpusim" replay -q -p cupy x*y.gstrace.gz e*s.gstrace.gz --format json) >"$tmp/c1.json" ||
    fail "C1 names: json: exit"
python3 - "$tmp/c1.json" <<'PY' || fail "C1 names: JSON"
import json, sys
raw = open(sys.argv[1], "rb").read()
assert b"\\u009b" in raw and b"\xc2\x9b" not in raw, raw[:200]
names = [t["trace"] for t in json.loads(raw)]
assert names == ["x\u009b2Jy.gstrace.gz", "e\u20ac\ufffds.gstrace.gz"], names
PY

# --- a request past every device (2^64 - 616 bytes): its report gives it unrounded under every
# rounding (roundup_power2_divisions overflowed to 0) ---
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,18446744073709551000\n' \
    >"$tmp/huge.gstrace"
"$gpusim" replay "$tmp/huge.gstrace" -p pytorch -p pytorch:roundup_power2_divisions:4 -p cupy \
    --format json >"$tmp/huge.json" || fail "replay huge: exit $?"
python3 - "$tmp/huge.json" <<'PY' || fail "replay huge: rounded_size"
import json, sys
for r in json.load(open(sys.argv[1]))[0]["results"]:
    assert r["outcome"] == "oom" and r["first_oom"]["rounded_size"] == 18446744073709551000, r["policy"]
PY

# --- errors ---
expect_error "unknown command" "unknown command 'replya'" "$gpusim" replya
# ... with every command named, from the table the dispatch reads
for cmd in frontier read-snapshot convert whatif; do
    expect_error "unknown command lists $cmd" "commands: .*$cmd, " "$gpusim" replya
done
expect_error "a value glued to a short option" "value goes after a space" "$gpusim" replay "$trace" -c5GiB
expect_error "pytorch's backend:cudaMallocAsync" "its own policy, -p cuda-async" \
    "$gpusim" replay "$trace" -p pytorch:backend:cudaMallocAsync
expect_error "whatif with a program but no --verify" "needs --verify" \
    "$gpusim" whatif "$trace" -- python3 prog.py
expect_error "sweep with sizes per device" "sizes per device (DEV=SIZE) apply to gpusim replay only" \
    "$gpusim" sweep -q -j 1 "$trace" -c '0=2.5GiB,1=2GiB'
"$gpusim" replay -q "$trace" --capacity 4GiB --device-total 2GiB >/dev/null 2>"$tmp/err" &&
    grep -q "the cap of 4 GiB is more than device 0's 2 GiB" "$tmp/err" ||
    fail "replay of a cap above the device: $(cat "$tmp/err")"
expect_error "missing trace" "no TRACE" "$gpusim" replay
expect_error "unreadable trace" "$tmp/nope.gstrace" "$gpusim" replay "$tmp/nope.gstrace"
expect_error "bad flag" "--bogus" "$gpusim" replay --bogus "$trace"
expect_error "bad size" "bad size '12 parsecs'" "$gpusim" replay "$trace" --capacity "12 parsecs"
expect_error "bad format" "--format" "$gpusim" replay "$trace" --format xml
expect_error "bad policy key" "unknown key 'max_split_sise_mb'" "$gpusim" replay "$trace" --policy pytorch:max_split_sise_mb:128
expect_error "unknown policy" "unknown policy 'tcmalloc'" "$gpusim" replay "$trace" --policy tcmalloc
# white space in a setting (a line break, a tab) is a space, as good as none to PyTorch: the
# table's row stays one line (it split in two, the CSV field held the break raw); another control
# byte is refused
"$gpusim" replay -q "$trace" --policy "pytorch:max_split_size_mb:128$nl" -f csv >"$tmp/out" 2>"$tmp/err" ||
    fail "a line break in a setting: exit $?: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/out")" -eq 2 ] && grep -q ",pytorch:max_split_size_mb:128 ,0," "$tmp/out" ||
    fail "a line break in a setting: $(cat "$tmp/out")"
expect_error "a control byte in a setting" "policy 'pytorch:\\\\x01max_split_size_mb:256': a control character (byte 0x01)" \
    "$gpusim" sweep "$trace" --policy "$(printf 'pytorch:\001max_split_size_mb:256')"
expect_error "bad backend" "--backend" "$gpusim" replay "$trace" --backend tpu
printf 'op,size_bytes,median_us\ncudaMalloc,1024,nan\n' >"$tmp/nan.csv"
# a client's own policy under --clients shared alone was ignored: the shared allocator ran the
# default, and the report said nothing
expect_error "a client's policy with --clients shared" "clients shared has one allocator for every client" \
    "$gpusim" replay "$src/traces/data/producer-consumer.gstrace.gz" --clients shared -p torch=cupy -q
"$gpusim" replay "$src/traces/data/producer-consumer.gstrace.gz" --clients shared,separate -p torch=cupy -q \
    >/dev/null 2>"$tmp/err" || fail "a client's policy with shared and separate: $(cat "$tmp/err")"
# the words under a first OOM are the failing allocator's: PyTorch's and CuPy's own (golden
# files), and for another family PyTorch's figures, labelled as such (it read "PyTorch would
# say" under every family, CuPy's client included)
"$gpusim" replay "$trace" -q -p tlsf -c 5.5GiB >"$tmp/t.txt" 2>"$tmp/err" || fail "tlsf at 5.5GiB: $(cat "$tmp/err")"
grep -q "^    in PyTorch's terms: Tried to allocate" "$tmp/t.txt" && ! grep -q "PyTorch would say" "$tmp/t.txt" ||
    fail "tlsf's OOM words: $(grep -i pytorch "$tmp/t.txt")"
# an empty file name (an unset shell variable) is refused by its option's name (it read
# "gpusim: : cannot write")
expect_error "an empty -o" "--output: an empty name" "$gpusim" replay "$trace" -q -o ''
expect_error "an empty --plot" "--plot: an empty name" "$gpusim" replay "$trace" -q --plot ''
# stitch past half the device creates rather than moving free handles, while that fits the
# limit: where another library holds the rest of the device, the device refuses, and the growth
# must then move its free handles (3 GiB freed by torch) before the ladder releases the cache
# (it retried, releasing 77 handles)
printf '# gpusim-trace 1\n# device_total_bytes: 10737418240\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,3221225472\n1,1,alloc,torch,0,0,2,1073741824\n2,2,free,torch,0,0,1,0\n3,3,alloc,cupy,0,0,3,5368709120\n4,4,alloc,torch,0,0,4,4294967296\n' >"$tmp/fulldev.gstrace"
"$gpusim" replay "$tmp/fulldev.gstrace" -q -p stitch -f csv >"$tmp/fd.csv" 2>"$tmp/err" || fail "stitch on a shared device: $(cat "$tmp/err")"
python3 - "$tmp/fd.csv" <<'PY' || fail "stitch on a shared device: $(cat "$tmp/fd.csv")"
import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[0]
assert (r["outcome"], r["num_alloc_retries"], r["num_device_free"]) == ("ok", "0", "0"), r
PY
expect_error "calibration with nan" "nan.csv:2: expected" "$gpusim" replay "$trace" --calibration "$tmp/nan.csv"
# a NUL byte cut the table short without a word (the rows after it were dropped)
printf 'op,size_bytes,median_us\ncudaMalloc,512,48\n\000cudaMalloc,512,99\ngarbage line\n' >"$tmp/nul.csv"
expect_error "calibration with a NUL byte" "nul.csv: byte 42: a NUL byte" "$gpusim" replay "$trace" --calibration "$tmp/nul.csv"
expect_error "calibration missing" "nothere.csv: No such file or directory" "$gpusim" replay "$trace" --calibration "$tmp/nothere.csv"
# the table --help names as an example exists and loads (it named bench/results/*/, where none is)
cal=$("$gpusim" replay --help | sed -n 's/.*e\.g\. \([^;]*calibration[^;]*\.csv\);.*/\1/p')
[ -n "$cal" ] && [ -f "$src/$cal" ] || fail "--calibration's example in --help: '$cal' is not in the tree"
"$gpusim" replay "$trace" -q --calibration "$src/$cal" >/dev/null 2>"$tmp/err" || fail "--calibration $cal: $(cat "$tmp/err")"
expect_error "touch on sim" "--touch needs --backend cuda" "$gpusim" replay "$trace" --touch
# --backend cuda where there is no GPU (CI): one line saying so, non-zero, nothing on stdout.
# (Skipped where a GPU is present: tests/test_cuda.c covers that.)
if ! command -v nvidia-smi >/dev/null 2>&1; then
    "$gpusim" replay "$trace" --backend cuda >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -ne 0 ] || fail "cuda without a GPU: exit 0"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "cuda without a GPU: stderr: $(cat "$tmp/err")"
    grep -q -- "--backend cuda" "$tmp/err" || fail "cuda without a GPU: message: $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "cuda without a GPU: wrote to stdout"
fi
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,4096\n1,1,free,torch,0,0,2,0\n' >"$tmp/bad.gstrace"
expect_error "bad trace" "bad.gstrace:4:" "$gpusim" replay "$tmp/bad.gstrace"
# --lenient turns it into a warning and replays
"$gpusim" replay "$tmp/bad.gstrace" --lenient --format csv >"$tmp/out" 2>"$tmp/err" || fail "--lenient: non-zero exit"
grep -q "1 problems skipped" "$tmp/err" || fail "--lenient: no summary of skipped problems"

# --- formats ---
"$gpusim" replay "$trace" -p pytorch -p pytorch:max_split_size_mb:128 --format json >"$tmp/r.json" || fail "json: exit"
python3 - "$tmp/r.json" <<'PY' || fail "json: content"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and len(d) == 1, "one trace: want an array of one"
rs = d[0]["results"]
assert [r["policy"] for r in rs] == ["pytorch", "pytorch:max_split_size_mb:128"], rs
for r in rs:
    for k in ("outcome", "peak_allocated_bytes", "peak_reserved_bytes", "peak_requested_bytes",
              "frag_peak", "num_alloc_retries", "num_ooms", "num_device_alloc",
              "num_device_free", "device_time_us", "replay_events_per_s", "memory_stats"):
        assert k in r, k
    assert r["outcome"] == "ok"
    assert r["memory_stats"]["reserved_bytes.all.peak"] == r["peak_reserved_bytes"]
assert rs[0]["peak_reserved_bytes"] == 7029653504, rs[0]["peak_reserved_bytes"]
assert rs[0]["num_device_alloc"] == 110
PY
"$gpusim" replay "$trace" -p pytorch -p pytorch:max_split_size_mb:128 --format csv >"$tmp/r.csv" || fail "csv: exit"
[ "$(wc -l <"$tmp/r.csv")" -eq 3 ] || fail "csv: want header + 2 rows"
awk -F, 'NR==1{n=NF} NF!=n{exit 1}' "$tmp/r.csv" || fail "csv: ragged rows"
head -1 "$tmp/r.csv" | grep -q "^trace,policy,capacity_bytes,outcome," || fail "csv: header"
"$gpusim" replay "$trace" "$src/traces/data/gpt2.gstrace.gz" --format json >"$tmp/two.json" || fail "two traces: exit"
python3 - "$tmp/two.json" "$trace" "$src/traces/data/gpt2.gstrace.gz" <<'PY' || fail "two traces: want a JSON array of 2, in the order given"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d, list) and [t["trace"] for t in d] == sys.argv[2:], d
assert all(len(t["results"]) == 1 for t in d)
PY

# --- --output writes the whole file ---
"$gpusim" replay "$trace" --format csv -o "$tmp/o.csv" >"$tmp/out" || fail "--output: exit"
[ ! -s "$tmp/out" ] || fail "--output: also wrote stdout"
[ "$(wc -l <"$tmp/o.csv")" -eq 2 ] || fail "--output: file content"
ls -A "$tmp" | grep -q '^\.gpusim-' && fail "--output: left a temporary file"
# a name of 250 bytes is a valid -o: its temporary file's name is short (it was the name plus 7)
long=$(printf 'r%.0s' $(seq 250)).csv
"$gpusim" replay "$trace" --format csv -o "$tmp/$long" || fail "-o of a 254-byte name: exit $?"
[ -s "$tmp/$long" ] || fail "-o of a 254-byte name: not written"

# --- -o never replaces what is not a regular file; "-" is stdout ---
"$gpusim" replay "$trace" --format csv -o - >"$tmp/dash.csv" || fail "-o -: exit"
[ "$(wc -l <"$tmp/dash.csv")" -eq 2 ] && [ ! -e ./- ] || fail "-o -: want stdout"
ln -s "$tmp/target.csv" "$tmp/link.csv"
"$gpusim" replay "$trace" --format csv -o "$tmp/link.csv" || fail "-o symlink: exit"
[ -L "$tmp/link.csv" ] && [ "$(wc -l <"$tmp/target.csv")" -eq 2 ] || fail "-o symlink: link replaced"

# --- a bad second trace: nothing written at all ---
head -c 1000 "$trace" >"$tmp/trunc.gstrace.gz"
expect_error "bad second trace" "trunc.gstrace.gz" "$gpusim" replay "$trace" "$tmp/trunc.gstrace.gz"

# --- CSV fields with commas are quoted ---
"$gpusim" replay "$trace" -p pytorch:max_split_size_mb:128,garbage_collection_threshold:0.6 --format csv >"$tmp/q.csv" || fail "csv quoting: exit"
python3 -c "
import csv,sys
rows=list(csv.reader(open(sys.argv[1])))
assert len(rows)==2 and len(rows[0])==len(rows[1]), rows
assert rows[1][1]=='pytorch:max_split_size_mb:128,garbage_collection_threshold:0.6', rows[1][1]" "$tmp/q.csv" || fail "csv quoting: content"

# --- a fractional size needs a unit; an absurd request is an OOM, not a wrap-around ---
expect_error "bare fraction" "needs a unit" "$gpusim" replay "$trace" --capacity 5.75
expect_error "no-ref-addrs alone" "needs --reference" "$gpusim" replay "$trace" --no-reference-addresses
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,18446744073709551615\n' >"$tmp/huge.gstrace"
"$gpusim" replay "$tmp/huge.gstrace" --format json >"$tmp/huge.json" || fail "huge: exit"
python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))[0]['results'][0]
assert r['outcome']=='oom' and r['peak_reserved_bytes']==0, r" "$tmp/huge.json" || fail "huge request: want an OOM"

# --- OOM outcome: stop at first, or continue ---
"$gpusim" replay "$trace" --capacity 4GiB --format json >"$tmp/oom.json" || fail "oom: exit"
python3 - "$tmp/oom.json" <<'PY' || fail "oom: content"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["outcome"] == "oom" and r["num_ooms"] == 1, r
assert r["first_oom"]["event"] > 0 and r["first_oom"]["size"] > 0
assert r["events"] == r["first_oom"]["event"] + 1
PY
"$gpusim" replay "$trace" --capacity 4GiB --continue-on-oom --format json >"$tmp/oom2.json" || fail "continue: exit"
python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))[0]['results'][0]
assert r['outcome']=='oom' and r['num_ooms']>1 and r['events']==8533, r" "$tmp/oom2.json" || fail "continue-on-oom: content"
"$gpusim" replay "$trace" --capacity 4GiB >"$tmp/t.txt" || fail "table: exit"
grep -q "first OOM at event" "$tmp/t.txt" || fail "table: no first-OOM line"

# --- expandable segments: device calls by kind, in every format ---
alt=$src/traces/data/batch-alternate.gstrace.gz
"$gpusim" replay "$alt" -p pytorch -p pytorch:expandable_segments:True >"$tmp/e.txt" || fail "expandable: exit"
for kind in "device calls" cudaMalloc cuMemAddressReserve cuMemCreate cuMemMap cuMemSetAccess; do
    grep -q -- "$kind" "$tmp/e.txt" || fail "expandable table lacks '$kind'"
done
"$gpusim" replay "$alt" -p pytorch:expandable_segments:True --format csv >"$tmp/e.csv" || fail "expandable csv: exit"
python3 - "$tmp/e.csv" "$tmp/e.txt" <<'PY' || fail "expandable csv: content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
r = rows[0]
assert r["segments_allocated"] == "0", r
assert int(r["n_cuMemMap"]) > 0 and float(r["us_cuMemMap"]) > 0, r
assert r["n_cudaMalloc"] == "0", r
# one cuMemSetAccess per mapping, and each mapping is a device allocation, as PyTorch counts it
assert r["n_cuMemSetAccess"] == r["num_device_alloc"], r
total = sum(float(v) for k, v in r.items() if k.startswith("us_"))
assert abs(total - float(r["device_time_us"])) < 1, (total, r["device_time_us"])
PY
"$gpusim" replay "$alt" -p pytorch:expandable_segments:True --format json >"$tmp/e.json" || fail "expandable json: exit"
python3 -c "
import json,sys
r=json.load(open(sys.argv[1]))[0]['results'][0]
assert r['device_calls']['cuMemCreate']['n'] > 0, r['device_calls']" "$tmp/e.json" || fail "expandable json: device_calls"

# --- several clients: the story, its errors, every format ---
story=$src/traces/data/dataframe-then-torch.gstrace.gz
"$gpusim" replay --help | grep -q -- "--clients" || fail "replay --help lacks --clients"
"$gpusim" replay --help | grep -q "cupy" || fail "replay --help lacks the cupy policy"
expect_error "bad --clients" "'together' is not one of separate, shared, cooperative" "$gpusim" replay "$story" --clients together
expect_error "unknown client" "has no client 'cudf' (its clients: cupy, torch)" "$gpusim" replay "$story" --policy cudf=cupy
expect_error "client not in a one-client trace" "has no client 'cupy'" "$gpusim" replay "$trace" --policy cupy=cupy
expect_error "client given twice" "client 'cupy' has a policy already" "$gpusim" replay "$story" -p cupy=cupy -p cupy=pytorch
expect_error "bad client policy" "unknown policy 'rmm'" "$gpusim" replay "$story" -p cupy=rmm
expect_error "no client name" "no client NAME" "$gpusim" replay "$story" -p =cupy
"$gpusim" replay "$story" --clients separate,shared --clients cooperative -p pytorch -p cupy=cupy >"$tmp/s.txt" || fail "story table: exit"
grep -q "^separate cupy=cupy torch=pytorch  *oom" "$tmp/s.txt" || fail "story: separate should end in OOM: $(cat "$tmp/s.txt")"
grep -q "^shared pytorch  *ok" "$tmp/s.txt" || fail "story: shared should complete"
grep -q "^cooperative cupy=cupy torch=pytorch  *ok" "$tmp/s.txt" || fail "story: cooperative should complete"
grep -q "first OOM at event 170, torch's request of 40.000 GiB" "$tmp/s.txt" || fail "story: the OOM line should name torch's request"
grep -q "held then: cupy 55.007 GiB reserved, 55.007 GiB of it cached" "$tmp/s.txt" || fail "story: the OOM line should say what cupy held cached"
"$gpusim" replay "$story" --clients separate,shared,cooperative -p pytorch -p cupy=cupy --format json >"$tmp/s.json" || fail "story json: exit"
python3 - "$tmp/s.json" <<'PY' || fail "story json: content"
import json, sys
rs = json.load(open(sys.argv[1]))[0]["results"]
assert [r["arrangement"] for r in rs] == ["separate", "shared", "cooperative"], rs
assert [r["outcome"] for r in rs] == ["oom", "ok", "ok"]
sep, shared, coop = rs
assert sep["first_oom"]["client"] == "torch" and sep["first_oom"]["size"] == 40 << 30
assert sep["clients"]["cupy"]["at_first_oom"]["cached_bytes"] > 54 << 30
assert sep["clients"]["torch"]["outcome"] == "oom" and sep["clients"]["cupy"]["outcome"] == "ok"
assert coop["num_reclaim_retries"] == 1 and coop["clients"]["torch"]["num_reclaim_retries"] == 1
assert coop["clients"]["cupy"]["released_for_others_bytes"] > 54 << 30
for r in rs:
    cs = r["clients"].values()
    for k in ("num_alloc_retries", "num_reclaim_retries", "num_ooms", "num_device_alloc",
              "num_device_free", "segments_allocated"):
        assert sum(c[k] for c in cs) == r[k], (r["arrangement"], k)
    assert abs(sum(c["device_time_us"] for c in cs) - r["device_time_us"]) < 1
    assert sum(c["reserved_bytes"] for c in cs) == r["memory_stats"]["reserved_bytes.all.current"]
    assert max(c["peak_reserved_bytes"] for c in cs) <= r["peak_reserved_bytes"] <= sum(c["peak_reserved_bytes"] for c in cs)
assert shared["clients"]["cupy"]["policy"] == "pytorch" and sep["clients"]["cupy"]["policy"] == "cupy"
PY
"$gpusim" replay "$trace" "$story" --clients shared,cooperative --format csv >"$tmp/s.csv" || fail "story csv: exit"
python3 - "$tmp/s.csv" <<'PY' || fail "story csv: content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
# resnet50 (one client): one row; the story: a device row and two client rows per arrangement
assert len(rows) == 1 + 2 * 3, len(rows)
assert rows[0]["arrangement"] == "" and rows[0]["client"] == ""
story = [r for r in rows if r["trace"].endswith("dataframe-then-torch.gstrace.gz")]
assert [(r["arrangement"], r["client"]) for r in story] == [
    ("shared", ""), ("shared", "cupy"), ("shared", "torch"),
    ("cooperative", ""), ("cooperative", "cupy"), ("cooperative", "torch")], story
dev, cupy, torch = story[3:]
assert int(dev["num_reclaim_retries"]) == int(torch["num_reclaim_retries"]) == 1
for k in ("num_device_alloc", "num_device_free", "num_alloc_retries"):
    assert int(dev[k]) == int(cupy[k]) + int(torch[k]), k
PY
# a one-client trace prints as before: no client columns, no clients part
"$gpusim" replay "$trace" --clients shared --format csv >"$tmp/one.csv" || fail "one client csv: exit"
head -1 "$tmp/one.csv" | grep -q "arrangement" && fail "one client: CSV gained client columns"
"$gpusim" replay "$trace" --clients cooperative >"$tmp/one.txt" || fail "one client table: exit"
grep -q "^clients" "$tmp/one.txt" && fail "one client: table gained a clients part"

# --- gpusim validate: usage, no GPU, and a simulated stand-in device ---
"$gpusim" validate --help >"$tmp/h" || fail "validate --help exits non-zero"
grep -q "within 25%" "$tmp/h" && grep -q "Examples" "$tmp/h" && grep -q "Exit status" "$tmp/h" ||
    fail "validate --help does not state its tolerances, examples and exit status"
expect_error "validate without a trace" "no TRACE" "$gpusim" validate
expect_error "validate --runs 0" "--runs" "$gpusim" validate "$trace" --runs 0
expect_error "validate --backend gpu" "--backend" "$gpusim" validate "$trace" --backend gpu
expect_error "validate --format csv" "--format" "$gpusim" validate "$trace" --format csv
# nor a name that says CSV (it wrote a table there, exit 0); --format table may
expect_error "validate -o X.csv" "a name of csv, which validate does not write" \
    "$gpusim" validate "$trace" --backend sim --runs 1 -o "$tmp/v.csv"
[ ! -e "$tmp/v.csv" ] || fail "validate -o X.csv: written"
expect_error "verify -o X.CSV" "a name of csv, which verify does not write" "$gpusim" verify -o "$tmp/v.CSV" -- true
"$gpusim" validate -q "$trace" --backend sim --runs 1 -f table -o "$tmp/v.csv" && grep -q "^" "$tmp/v.csv" ||
    fail "validate -f table -o X.csv: exit $?"
if ! command -v nvidia-smi >/dev/null 2>&1; then
    "$gpusim" validate "$trace" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 1 ] || fail "validate without a GPU: exit $rc, want 1"
    [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "gpusim: validate:" "$tmp/err" ||
        fail "validate without a GPU: $(cat "$tmp/err")"
fi
"$gpusim" validate "$trace" --backend sim --runs 2 -p pytorch -p pytorch:expandable_segments:True \
    >"$tmp/v.txt" 2>"$tmp/err" || fail "validate --backend sim: exit $? $(cat "$tmp/err")"
[ "$(grep -c "^verdict: agrees within tolerance" "$tmp/v.txt")" -eq 2 ] || fail "validate: $(cat "$tmp/v.txt")"
grep -q "^peak reserved (driver)" "$tmp/v.txt" && grep -q "^cuMemSetAccess calls" "$tmp/v.txt" ||
    fail "validate table lacks rows: $(cat "$tmp/v.txt")"
# Regression: a trace with several clients aborted here (free(): invalid pointer: a
# result copied by value kept pointers it no longer owned), and the driver's view of peak
# reserved counted one client's allocator only.
for t2 in dataframe-then-torch producer-consumer; do
    "$gpusim" validate "$src/traces/data/$t2.gstrace.gz" --backend sim --runs 2 >"$tmp/v2.txt" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "validate $t2 (several clients): exit $rc $(cat "$tmp/err")"
    grep -q "^verdict: agrees within tolerance" "$tmp/v2.txt" || fail "validate $t2: $(cat "$tmp/v2.txt")"
done
"$gpusim" validate "$trace" --backend sim --runs 1 --format json -o "$tmp/v.json" \
    --save-calibration "$tmp/cal.csv" || fail "validate json: exit $?"
"$gpusim" replay "$trace" -f json -q -o "$tmp/vr.json" || fail "replay json for validate: exit $?"
python3 - "$tmp/v.json" "$tmp/vr.json" <<'PY' || fail "validate JSON"
import json, sys
v = json.load(open(sys.argv[1]))
assert len(v) == 1 and v[0]["ok"] and v[0]["policy"] == "pytorch", v
assert {c["what"] for c in v[0]["checks"]} >= {"outcome", "peak reserved (allocator)", "device time ms"}
# a row named in ms holds ms (it held microseconds), as gpusim replay's device_time_us says
ms = {c["what"]: c for c in v[0]["checks"]}["device time ms"]["sim"]
us = json.load(open(sys.argv[2]))[0]["results"][0]["device_time_us"]
assert abs(ms * 1000 - us) < 0.1, (ms, us)
PY
# several traces: the same shape, an element per (trace, policy) in the order given
"$gpusim" validate "$trace" "$src/traces/data/batch-alternate.gstrace.gz" --backend sim --runs 1 \
    --format json -o "$tmp/v2.json" || fail "validate json, two traces: exit $?"
python3 -c "
import json,sys
v=json.load(open(sys.argv[1]))
assert isinstance(v, list) and [x['trace'] for x in v] == sys.argv[2:], v" "$tmp/v2.json" "$trace" \
    "$src/traces/data/batch-alternate.gstrace.gz" || fail "validate JSON, two traces: want an array of 2"
head -1 "$tmp/cal.csv" | grep -q "^op,size_bytes,median_us" || fail "--save-calibration: $(head -2 "$tmp/cal.csv")"
"$gpusim" replay "$trace" --calibration "$tmp/cal.csv" >/dev/null || fail "the saved calibration does not load"

# --- a trace past the trace layer's limits (this trace parsed, then the core aborted
# on its 16-bit stream index): an alloc and a free on each of 70,000 streams, refused at the
# first event on a 65,537th stream (line 3 + 2 * 65536), lenient or not ---
awk 'BEGIN { print "# gpusim-trace 1"; print "seq,time_us,op,client,device,stream,id,size"
             for (i = 0; i < 70000; i++) {
                 printf "%d,%d,alloc,torch,0,%d,%d,512\n", 2 * i, 2 * i, i, i + 1
                 printf "%d,%d,free,torch,0,%d,%d,512\n", 2 * i + 1, 2 * i + 1, i, i + 1 } }' \
    >"$tmp/streams.gstrace"
expect_error "70000 streams" "streams.gstrace:131075: too many streams" \
    "$gpusim" replay "$tmp/streams.gstrace"
expect_error "70000 streams, lenient" "streams.gstrace:131075: too many streams" \
    "$gpusim" replay "$tmp/streams.gstrace" --lenient

# --- many devices, many clients: the cost of an event does not grow with them (20,000 one-event
# devices took 77-132 s of CPU, 8,000 clients 13.6 s: each change of heap summed every heap
# again), and 100,000 devices are refused at the 65,537th (line 2 + 65537), not after the whole
# file (11.7 s) ---
awk 'BEGIN { print "# gpusim-trace 1"; print "seq,time_us,op,client,device,stream,id,size"
             for (i = 0; i < 100000; i++) printf "%d,%d,alloc,torch,%d,0,%d,4096\n", i, i, i, i + 1 }' \
    >"$tmp/devices.gstrace"
expect_error "100000 devices" "devices.gstrace:65539: too many devices: a trace may have at most 65536" \
    "$gpusim" replay "$tmp/devices.gstrace"
head -n 20002 "$tmp/devices.gstrace" >"$tmp/devices20k.gstrace"
awk 'BEGIN { print "# gpusim-trace 1"; print "seq,time_us,op,client,device,stream,id,size"
             for (i = 0; i < 8000; i++) printf "%d,%d,alloc,c%d,0,0,%d,4096\n", i, i, i, i + 1 }' \
    >"$tmp/clients8k.gstrace"
# (within 60 s of CPU each, a few as built; the peaks are the sums over the heaps: a 2 MiB
# segment and 4096 bytes each)
for t in devices20k:20000 clients8k:8000; do
    (ulimit -t 60; exec "$gpusim" replay -q "$tmp/${t%:*}.gstrace" --format csv) >"$tmp/out" 2>"$tmp/err" ||
        fail "${t%:*}: exit $?: $(head -c 300 "$tmp/err")"
    n=${t#*:}
    grep -q "^$tmp/${t%:*}.gstrace,pytorch,0,ok,,,,,,,,$((n * 4096)),$((n * 2097152)),$((n * 4096))," "$tmp/out" ||
        fail "${t%:*}: $(sed -n 2p "$tmp/out" | cut -c1-200)"
done

# --- device sizes past what gpusim simulates (16 TiB; a fuzzed trace of 2^64 - 1 bytes made the
# expandable segment's page table 8 TB and its address reservation wrap) ---
printf '# gpusim-trace 1\n# device_total_bytes: 18446744073709551615\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,512\n' \
    >"$tmp/huge.gstrace"
expect_error "huge device header" "huge.gstrace:2: header 'device_total_bytes'" \
    "$gpusim" replay "$tmp/huge.gstrace" --policy pytorch:expandable_segments:True
expect_error "huge --device-total" "more than gpusim simulates" \
    "$gpusim" replay "$trace" --device-total 17TiB
"$gpusim" replay "$trace" --device-total 16TiB --policy pytorch:expandable_segments:True >/dev/null \
    || fail "a 16 TiB device with expandable segments: exit $?"

# --- --reference compares only the reference run's own setting and cap ---
cat >"$tmp/ref.json" <<'JSON'
{"format": "gpusim-reference 1", "allocator_conf": "", "device_total_bytes": 85017493504,
 "cap_bytes": 0, "outcome": "ok",
 "memory_stats": {"num_alloc_retries": 0, "num_ooms": 0, "reserved_bytes.all.peak": 7029653504,
                  "allocated_bytes.all.peak": 5854787584, "num_device_alloc": 110},
 "device_events": []}
JSON
"$gpusim" replay "$trace" -q --reference "$tmp/ref.json" --no-reference-addresses -p pytorch \
    -p pytorch:expandable_segments:True --format json >"$tmp/r.json" || fail "replay --reference: exit $?"
python3 - "$tmp/r.json" <<'PY' || fail "--reference JSON: only the reference run's setting is compared"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"]
assert r[0]["reference"]["compared"] is True and r[0]["reference"]["match"] is False, r[0]["reference"]
assert r[1]["reference"]["compared"] is False and r[1]["reference"]["match"] is None, r[1]["reference"]
PY
"$gpusim" replay "$trace" -q --reference "$tmp/ref.json" --no-reference-addresses \
    -p pytorch:expandable_segments:True | grep -q "no real run$" || fail "--reference table: no 'no real run'"

# --- gpusim whatif ---
"$gpusim" whatif --help >"$tmp/h" || fail "whatif --help exits non-zero"
for word in --capacity --policy --format "minimum capacity" Examples "Exit status"; do
    grep -q -- "$word" "$tmp/h" || fail "whatif --help lacks '$word'"
done
expect_error "whatif without input" "no INPUT" "$gpusim" whatif
expect_error "whatif two inputs" "one INPUT" "$gpusim" whatif "$trace" "$trace"
expect_error "whatif bad policy" "max_split_sise_mb" "$gpusim" whatif "$trace" -p pytorch:max_split_sise_mb:1
expect_error "whatif missing snapshot" "no such file" "$gpusim" whatif "$tmp/none.pickle.gz"
# a snapshot the converter refuses leaves no temporary directory behind
mkdir -p "$tmp/tt"
printf 'junk' >"$tmp/junk.pickle"
TMPDIR=$tmp/tt "$gpusim" whatif "$tmp/junk.pickle" >/dev/null 2>&1 && fail "whatif of a junk snapshot: exit 0"
[ -z "$(ls -A "$tmp/tt")" ] || fail "whatif of a junk snapshot left $(ls "$tmp/tt")"
"$gpusim" whatif "$trace" --capacity 5.75GiB -p cupy >"$tmp/w.txt" 2>"$tmp/err" || fail "whatif table: $(cat "$tmp/err")"
grep -q "^pytorch (recorded) " "$tmp/w.txt" || fail "whatif: no recorded row: $(cat "$tmp/w.txt")"
grep -q "^cupy " "$tmp/w.txt" || fail "whatif: the --policy row is missing"
grep -q "completes at the cap of 5.75 GiB" "$tmp/w.txt" || fail "whatif: no recommendation: $(tail -2 "$tmp/w.txt")"
# the one it recommends fails two steps above its minimum (5,640 MiB): the words say so too
grep -q "needs least, 5.508 GiB (106.00 MiB less). It fails at 5.518 GiB, though" "$tmp/w.txt" ||
    fail "whatif: the recommendation hides a failure above its minimum: $(tail -1 "$tmp/w.txt")"
"$gpusim" whatif "$trace" --capacity 5.75GiB -p cupy --format json -o "$tmp/w.json" || fail "whatif json: exit $?"
python3 - "$tmp/w.json" <<'PY' || fail "whatif JSON"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["capacity_bytes"] == 6174015488 and v["trace"].endswith("resnet50.gstrace.gz"), v
specs = [r["policy"] for r in v["results"]]
assert "pytorch" in specs and "cupy" in specs and "pytorch:expandable_segments:True" in specs, specs
mins = [r["min_capacity_bytes"] for r in v["results"]]
assert mins == sorted(mins), mins              # most memory saved first
for r in v["results"]:
    assert r["outcome"] in ("ok", "oom") and isinstance(r["retries"], int), r
    assert r["min_capacity_bytes"] % (2 << 20) == 0
    assert (r["outcome"] == "ok") == (r["min_capacity_bytes"] <= v["capacity_bytes"]), r
    # the time of a run to its OOM is no cost to set against the default's (roundup_power2_divisions:4
    # died at this cap, 0.32 x the default's time, and read as the cheapest)
    assert (r["device_time_vs_default"] is None) == (r["outcome"] != "ok"), r
assert sum(r["recorded"] for r in v["results"]) == 1
PY
grep -q "^pytorch:roundup_power2_divisions:4  *OOM .* -$" "$tmp/w.txt" ||
    fail "whatif: a setting that dies at the cap has no time against the default's: $(grep roundup "$tmp/w.txt")"
# a cap above the device's memory is the device's memory, said in one warning (the verdict gave
# 102,393 GiB of headroom on an 80 GiB device)
"$gpusim" whatif "$trace" -q -c 100TiB >"$tmp/wb.txt" 2>"$tmp/err" || fail "whatif -c 100TiB: exit"
grep -q "warning: --capacity 102400 GiB is more than the device's 81079 MiB" "$tmp/err" &&
    grep -q "at the cap of 79.179 GiB (81079 MiB, device memory)" "$tmp/wb.txt" || fail "whatif -c 100TiB: $(cat "$tmp/err"; head -1 "$tmp/wb.txt")"
# a run recorded under backend:cudaMallocAsync: its recorded setting is the cuda-async policy,
# beside the others (the whole run was refused: "backend: 'cudaMallocAsync' is not simulated")
{ echo '# gpusim-trace 1'; echo '# allocator_conf: backend:cudaMallocAsync'; gzip -dc "$trace" | grep -v '^# gpusim-trace\|^# allocator_conf'; } >"$tmp/async.gstrace"
"$gpusim" whatif "$tmp/async.gstrace" -q -c 6GiB >"$tmp/wa.txt" 2>"$tmp/err" || fail "whatif of a cudaMallocAsync run: $(cat "$tmp/err")"
grep -q '^cuda-async (recorded) ' "$tmp/wa.txt" && grep -q '^pytorch ' "$tmp/wa.txt" ||
    fail "whatif of a cudaMallocAsync run: rows $(cut -c1-40 "$tmp/wa.txt")"
# a recorded setting written with spaces is the candidate of the same setting: one row, replayed
# once (it was listed twice, as "max_split_size_mb: 128 (recorded)" and "max_split_size_mb:128")
{ echo '# gpusim-trace 1'; echo '# allocator_conf: max_split_size_mb: 128'; gzip -dc "$trace" | grep -v '^# gpusim-trace\|^# allocator_conf'; } >"$tmp/spaced.gstrace"
"$gpusim" whatif "$tmp/spaced.gstrace" -q -c 6GiB >"$tmp/ws.txt" 2>"$tmp/err" || fail "whatif of a spaced setting: $(cat "$tmp/err")"
[ "$(grep -c '^pytorch:max_split_size_mb: *128 ' "$tmp/ws.txt")" -eq 1 ] ||
    fail "whatif of a spaced setting: rows $(grep '^pytorch:max_split' "$tmp/ws.txt")"
# a recorded setting gpusim cannot run names the trace and the setting it read there (the message
# named neither: a user could not tell their trace's header from their -p)
{ echo '# gpusim-trace 1'; echo '# allocator_conf: max_split_size_mb:5'; gzip -dc "$trace" | grep -v '^# gpusim-trace\|^# allocator_conf'; } >"$tmp/badconf.gstrace"
expect_error "whatif of an unrunnable recorded setting" \
    "badconf.gstrace: the recorded setting (allocator_conf 'max_split_size_mb:5'): " \
    "$gpusim" whatif "$tmp/badconf.gstrace" -q -c 6GiB
# a snapshot converted on the fly: the recorded cap comes from its sibling JSON (1.5 GiB)
snap=$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz
"$gpusim" whatif "$snap" --format csv >"$tmp/w.csv" 2>"$tmp/err" || fail "whatif snapshot: $(cat "$tmp/err")"
head -1 "$tmp/w.csv" | grep -q "^trace,policy,recorded,capacity_bytes,outcome,min_capacity_bytes" ||
    fail "whatif csv header: $(head -1 "$tmp/w.csv")"
grep -Eq ",pytorch,1,161061273[56]," "$tmp/w.csv" || fail "whatif snapshot: recorded cap not taken: $(cat "$tmp/w.csv")"
# a regular file is what it holds, whatever its name: a gzip-compressed snapshot named
# run.snapshot.gz is converted (it was read as a trace: "not a gpusim trace"), a trace named
# t.pickle.gz is a trace (it was refused as a snapshot)
cp "$snap" "$tmp/run.snapshot.gz"
cp "${snap%.pickle.gz}.json" "$tmp/run.json" # its NAME.json comes with it: the cap of 1.5 GiB
"$gpusim" whatif "$tmp/run.snapshot.gz" -q >"$tmp/w3.txt" 2>"$tmp/err" || fail "whatif run.snapshot.gz: $(cat "$tmp/err")"
grep -q "^whatif .*run.snapshot.gz: 1277 events, at the cap of 1.5 GiB" "$tmp/w3.txt" ||
    fail "whatif run.snapshot.gz: $(head -1 "$tmp/w3.txt")"
# a FIFO: a trace read from one is the file's (nothing lost to a look at its first bytes, which
# took the writer's connection and could hang), a snapshot on one is refused in one line
mkfifo "$tmp/fifo.gstrace" "$tmp/fifo.pickle.gz"
gzip -dc "$trace" >"$tmp/fifo.gstrace" &
"$gpusim" replay -q "$tmp/fifo.gstrace" >"$tmp/out" 2>"$tmp/err" && grep -q "8533 events" "$tmp/out" ||
    fail "replay a FIFO: $(cat "$tmp/err")"
wait
expect_error "whatif a snapshot on a FIFO" "must be a file, not a pipe" "$gpusim" whatif "$tmp/fifo.pickle.gz"
cp "$trace" "$tmp/t.pickle.gz"
"$gpusim" replay -q "$tmp/t.pickle.gz" >"$tmp/out" 2>"$tmp/err" && grep -q "8533 events" "$tmp/out" ||
    fail "replay t.pickle.gz (a trace): $(cat "$tmp/err")"
# a snapshot named like an option goes to the converter as a name (it was read as -o); one named
# NAME.pkl.gz reads its NAME.json as NAME.pickle.gz does (the cap of 1.5 GiB)
cp "$snap" "$tmp/-o.pkl.gz"
cp "${snap%.pickle.gz}.json" "$tmp/-o.json"
(cd "$tmp" && "$gpusim" whatif --format csv -- -o.pkl.gz) >"$tmp/w2.csv" 2>"$tmp/err" ||
    fail "whatif -- -o.pkl.gz: $(cat "$tmp/err")"
grep -Eq ",pytorch,1,161061273[56]," "$tmp/w2.csv" || fail "whatif -o.pkl.gz: recorded cap not taken: $(cat "$tmp/w2.csv")"
# a converter that writes nothing, one stopped by a signal (SIGTERM to gpusim alone: it waits for
# the converter, removes its directory, then ends by the signal): no temporary directory left
GPUSIM_CONVERT=/bin/true TMPDIR=$tmp/tt "$gpusim" whatif "$snap" >/dev/null 2>"$tmp/err" && fail "whatif, no trace converted: exit 0"
grep -q "oomdie__default__1.5.pickle.gz: the converter wrote no trace" "$tmp/err" || fail "whatif, no trace converted: $(cat "$tmp/err")"
# (the signal is sent once the converter runs: it leaves a mark first)
printf '#!/bin/sh\n: >"%s"\nsleep 3\nexec true\n' "$tmp/conv-started" >"$tmp/slowconv.sh"
chmod +x "$tmp/slowconv.sh"
GPUSIM_CONVERT=$tmp/slowconv.sh TMPDIR=$tmp/tt "$gpusim" whatif "$snap" >/dev/null 2>&1 &
wpid=$!
for i in $(seq 100); do [ -e "$tmp/conv-started" ] && break; sleep 0.1; done
[ -e "$tmp/conv-started" ] || fail "whatif: the slow converter never started"
kill -TERM "$wpid"
wait "$wpid"
rc=$?
[ "$rc" -eq 143 ] || fail "whatif stopped by SIGTERM during conversion: exit $rc, want 143"
[ -z "$(ls -A "$tmp/tt")" ] || fail "whatif: a temporary directory left: $(ls "$tmp/tt")"
# a converter that crashes is named by its signal (it said only its last stderr line, here none:
# "whatif: "); one that runs past $GPUSIM_CONVERT_TIMEOUT is killed and whatif says so at once
# (it waited as long as the converter ran), its half-written file removed with the folder
printf '#!/bin/sh\nkill -SEGV $$\n' >"$tmp/segvconv.sh"
printf '#!/bin/sh\necho $$ >"%s"\n: >"$2.part"\nexec sleep 30\n' "$tmp/conv-pid" >"$tmp/hangconv.sh"
chmod +x "$tmp/segvconv.sh" "$tmp/hangconv.sh"
expect_error "whatif, the converter crashes" "oomdie__default__1.5.pickle.gz: the converter was killed by SIGSEGV" \
    env GPUSIM_CONVERT="$tmp/segvconv.sh" TMPDIR="$tmp/tt" "$gpusim" whatif "$snap"
t0=$(date +%s)
expect_error "whatif, the converter hangs" "the converter exceeded 1 s, and was stopped (\$GPUSIM_CONVERT_TIMEOUT" \
    env GPUSIM_CONVERT="$tmp/hangconv.sh" GPUSIM_CONVERT_TIMEOUT=1 TMPDIR="$tmp/tt" "$gpusim" whatif "$snap"
[ $(($(date +%s) - t0)) -lt 20 ] || fail "whatif, the converter hangs: waited $(($(date +%s) - t0)) s"
kill -0 "$(cat "$tmp/conv-pid")" 2>/dev/null && fail "whatif: the converter past its limit still runs"
[ -z "$(ls -A "$tmp/tt")" ] || fail "whatif, converter stopped: left $(ls -R "$tmp/tt")"
expect_error "whatif, a bad time limit" "GPUSIM_CONVERT_TIMEOUT: '1m' is not a number of seconds" \
    env GPUSIM_CONVERT_TIMEOUT=1m "$gpusim" whatif "$snap"
# --- whatif and frontier on a trace of two libraries: separate caches starve each other, and
# the verdict names the arrangements that complete instead of "more than the device has" ---
df=$src/traces/data/dataframe-then-torch.gstrace.gz
"$gpusim" whatif "$df" -q >"$tmp/df.txt" 2>"$tmp/err" || fail "whatif two clients: exit $?: $(cat "$tmp/err")"
grep -q "With --clients shared or cooperative the recorded setting completes" "$tmp/df.txt" &&
    ! grep -q "needs more than the device has" "$tmp/df.txt" ||
    fail "whatif two clients: the verdict does not name the arrangements: $(tail -2 "$tmp/df.txt")"
"$gpusim" whatif "$df" -q --clients cooperative -f csv >"$tmp/df.csv" 2>"$tmp/err" ||
    fail "whatif --clients cooperative: exit $?: $(cat "$tmp/err")"
grep -q "^[^,]*,pytorch,1,,ok,[0-9]" "$tmp/df.csv" || fail "whatif --clients cooperative: no minimum for the recorded setting: $(head -3 "$tmp/df.csv")"
"$gpusim" frontier "$df" -q --clients shared -f csv | grep -q "^[^,]*,stitch,stitch,1,ok,[0-9]" ||
    fail "frontier --clients shared: stitch has no minimum"
expect_error "whatif --clients nonsense" "is not one of separate, shared, cooperative" "$gpusim" whatif "$df" --clients together
expect_error "frontier --clients nonsense" "is not one of separate, shared, cooperative" "$gpusim" frontier "$df" --clients together

# --- gpusim frontier: a row per trace and setting, the front as its definition says, stitch
# marked, the table and the JSON saying the same ---
"$gpusim" frontier "$trace" "$src/traces/data/batch-alternate.gstrace.gz" -q -f csv -o "$tmp/fr.csv" 2>"$tmp/err" ||
    fail "frontier: exit $?: $(cat "$tmp/err")"
python3 - "$tmp/fr.csv" <<'PY' || fail "frontier: the CSV is not the front of its own figures"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
traces = sorted({r["trace"] for r in rows})
assert len(traces) == 2 and len(rows) == 30, (traces, len(rows))
for t in traces:
    pts = [r for r in rows if r["trace"] == t]
    assert [r["ours"] for r in pts].count("1") == 1 and pts[-1]["policy"] == "stitch", pts[-1]
    dflt = [r for r in pts if r["policy"] == "pytorch"][0]
    assert float(dflt["time_over_default"]) == 1.0, dflt
    ok = [r for r in pts if r["min_capacity_bytes"] and r["uncapped_outcome"] == "ok"]
    for r in pts:
        if r["min_capacity_bytes"]:
            m, b = int(r["min_capacity_bytes"]), int(r["lower_bound_bytes"])
            assert m >= b and abs(float(r["memory_over_bound"]) - m / b) < 1e-6, r
        a = (int(r["min_capacity_bytes"] or 0), float(r["device_time_us"]))
        dom = any((int(q["min_capacity_bytes"]), float(q["device_time_us"])) != a
                  and int(q["min_capacity_bytes"]) <= a[0] and float(q["device_time_us"]) <= a[1]
                  for q in ok)
        want = r in ok and not dom
        assert (r["pareto"] == "1") == want, (r["policy"], r["pareto"], want)
        if r["uncapped_outcome"] == "ok":
            assert int(r["uncapped_peak_reserved_bytes"]) >= int(r["lower_bound_bytes"]), r
PY
"$gpusim" frontier "$trace" -q >"$tmp/fr.txt" 2>"$tmp/err" || fail "frontier table: exit $?: $(cat "$tmp/err")"
grep -q "^stitch .*(gpusim's own)$" "$tmp/fr.txt" && grep -q "^stitch, gpusim's own policy, is " "$tmp/fr.txt" ||
    fail "frontier table: stitch not marked: $(cat "$tmp/fr.txt")"
[ "$(grep -c '[0-9] \*' "$tmp/fr.txt")" -eq "$(grep -c "^$trace,.*,1,[0-9]*,[0-9]*$" "$tmp/fr.csv")" ] ||
    fail "frontier: the table's front is not the CSV's"
"$gpusim" frontier "$trace" -q -f json | python3 -c "
import json, sys; d = json.load(sys.stdin); p = d[0]['points']
assert len(p) == 15 and d[0]['ours'].startswith('stitch, gpusim'), d[0]['ours']" ||
    fail "frontier: JSON"
expect_error "frontier of nothing" "TRACE" "$gpusim" frontier
expect_error "frontier, a bad policy" "unknown policy 'nosuch'" "$gpusim" frontier "$trace" -p nosuch
expect_error "frontier of a snapshot" "gpusim whatif" "$gpusim" frontier "$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz"
expect_error "frontier -o an input" "an input" "$gpusim" frontier "$tmp/fr.csv" -o "$tmp/fr.csv"

# --- -o never overwrites an input, stdout's write errors are errors, and a killed run leaves
# nothing beside -o ---
cp "$trace" "$tmp/in.gstrace.gz"
ln -s in.gstrace.gz "$tmp/in-link.gz"
ln "$tmp/in.gstrace.gz" "$tmp/in-hard.gz"
expect_error "-o is the input" "an input of this run; not overwritten" \
    "$gpusim" replay "$tmp/in.gstrace.gz" -o "$tmp/in.gstrace.gz"
expect_error "-o is the input, through a link" "in.gstrace.gz, an input" \
    "$gpusim" replay "$tmp/in.gstrace.gz" --format json -o "$tmp/in-link.gz"
expect_error "-o is the input, a hard link" "an input of this run" \
    "$gpusim" replay "$tmp/in.gstrace.gz" -o "$tmp/in-hard.gz"
expect_error "-o is the calibration" "cal.csv, an input" \
    "$gpusim" replay "$tmp/in.gstrace.gz" --calibration "$tmp/cal.csv" -o "$tmp/cal.csv"
expect_error "sweep -o is the input" "an input of this run" \
    "$gpusim" sweep "$tmp/in.gstrace.gz" -o "$tmp/in-hard.gz"
expect_error "validate -o is the input" "an input of this run" \
    "$gpusim" validate "$tmp/in.gstrace.gz" --backend sim -o "$tmp/in-link.gz"
expect_error "validate --save-calibration is the input" "--save-calibration" \
    "$gpusim" validate "$tmp/in.gstrace.gz" --backend sim --save-calibration "$tmp/in.gstrace.gz"
cmp -s "$trace" "$tmp/in.gstrace.gz" && [ -L "$tmp/in-link.gz" ] || fail "-o is the input: the input changed"
# validate's --save-calibration is checked before the run: its directory, and -o's name
expect_error "validate --save-calibration in a missing directory" "--save-calibration $tmp/sub/cal.csv: cannot write" \
    "$gpusim" validate "$tmp/in.gstrace.gz" --backend sim --runs 1 --save-calibration "$tmp/sub/cal.csv"
expect_error "validate --save-calibration is -o" "name one file" \
    "$gpusim" validate "$tmp/in.gstrace.gz" --backend sim --runs 1 --save-calibration "$tmp/same.txt" -o "$tmp/./same.txt"
[ -e "$tmp/same.txt" ] && fail "validate --save-calibration is -o: a file written"
# --save-calibration of a 254-byte name is written (its temporary file's name passed NAME_MAX),
# and through a link the link stays (it was replaced by a rename: as root, /dev/stdout too)
longcal=$(printf 'c%.0s' $(seq 250)).csv
"$gpusim" validate "$tmp/in.gstrace.gz" --backend sim --runs 1 --save-calibration "$tmp/$longcal" >/dev/null ||
    fail "validate --save-calibration a 254-byte name: exit $?"
[ -s "$tmp/$longcal" ] || fail "validate --save-calibration a 254-byte name: not written"
ln -s cal-target.csv "$tmp/cal-link.csv"
"$gpusim" validate "$tmp/in.gstrace.gz" --backend sim --runs 1 --save-calibration "$tmp/cal-link.csv" >/dev/null ||
    fail "validate --save-calibration through a link: exit $?"
[ -L "$tmp/cal-link.csv" ] && head -1 "$tmp/cal-target.csv" | grep -q '^op,size_bytes' ||
    fail "validate --save-calibration through a link: the link replaced"
# --export-snapshot never writes over an input (a calibration named like a snapshot) or -o
mkdir -p "$tmp/ex"
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,a,0,0,1,1048576\n1,1,free,a,0,0,1,0\n' >"$tmp/ex/b.gstrace"
printf 'op,size_bytes,median_us\ncudaMalloc,512,48\ncudaFree,512,20\n' >"$tmp/ex/b-snapshot-1-pytorch.pickle"
cp "$tmp/ex/b-snapshot-1-pytorch.pickle" "$tmp/ex/cal.keep"
expect_error "--export-snapshot over the calibration" "an input of this run; not overwritten" \
    "$gpusim" replay "$tmp/ex/b.gstrace" --calibration "$tmp/ex/b-snapshot-1-pytorch.pickle" --export-snapshot "$tmp/ex"
cmp -s "$tmp/ex/cal.keep" "$tmp/ex/b-snapshot-1-pytorch.pickle" || fail "--export-snapshot: the calibration changed"
expect_error "--export-snapshot over -o" "that is the report (-o)" \
    "$gpusim" replay "$tmp/ex/b.gstrace" --export-snapshot "$tmp/ex" -p cupy -o "$tmp/ex/b-snapshot-1-cupy.pickle"
if [ -w /dev/full ]; then
    for cmd in "replay $trace" "replay $trace --format json" "sweep $trace" help; do
        # shellcheck disable=SC2086
        "$gpusim" $cmd >/dev/full 2>"$tmp/err"
        rc=$?
        [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "standard output: cannot write" "$tmp/err" ||
            fail "$cmd >/dev/full: exit $rc: $(cat "$tmp/err")"
    done
    "$gpusim" replay "$trace" -o /dev/full 2>"$tmp/err"
    [ $? -eq 2 ] && grep -q "/dev/full: cannot write" "$tmp/err" || fail "-o /dev/full: $(cat "$tmp/err")"
fi
# SIGTERM in the middle of a long run (150 traces under 14 policies, seconds): no temporary file
# beside -o (the report, if the signal came as it was being written, is whole)
many=""
for i in $(seq 150); do many="$many $src/traces/data/gpt2.gstrace.gz"; done
for m in 64 128 256 512 1024; do many="$many -p pytorch:max_split_size_mb:$m"; done
for d in 1 2 4 8 16; do many="$many -p pytorch:roundup_power2_divisions:$d"; done
mkdir "$tmp/killed"
# shellcheck disable=SC2086
"$gpusim" replay $many -p pytorch -p cupy -p pytorch:expandable_segments:True \
    -p pytorch:garbage_collection_threshold:0.6 -q --format json -o "$tmp/killed/r.json" &
pid=$!
sleep 1.5
# (SIGTERM: a background job of a non-interactive shell ignores SIGINT)
if kill -TERM $pid 2>/dev/null; then
    wait $pid
    ls -A "$tmp/killed" | grep -q '^\.gpusim-' && fail "a killed replay left $(ls -A "$tmp/killed")"
    [ ! -e "$tmp/killed/r.json" ] || python3 -c "import json,sys; json.load(open(sys.argv[1]))" \
        "$tmp/killed/r.json" || fail "a killed replay left a partial report"
fi
wait $pid 2>/dev/null

# --- a file name that is not UTF-8 still gives valid JSON (util/jsonw.c: U+FFFD for the bad
# byte), in replay's and validate's reports and in a report carrying plot series ---
bad_name=$(printf 'not-utf8-\377\376.gstrace.gz')
cp "$src/traces/data/batch-alternate.gstrace.gz" "$tmp/$bad_name"
"$gpusim" replay "$tmp/$bad_name" --format json -o "$tmp/u1.json" || fail "non-UTF-8 name: replay"
"$gpusim" validate "$tmp/$bad_name" --backend sim --runs 1 --format json -o "$tmp/u2.json" ||
    fail "non-UTF-8 name: validate"
GPUSIM_GNUPLOT=true "$gpusim" replay "$tmp/$bad_name" --format json -o "$tmp/u3.json" \
    --plot "$tmp/u-plots" -q 2>/dev/null
python3 - "$tmp/u1.json" "$tmp/u2.json" "$tmp/u3.json" <<'PY' || fail "non-UTF-8 name: JSON"
import json, sys
for p in sys.argv[1:]:
    d = json.loads(open(p, "rb").read().decode("utf-8"))  # strict: every byte UTF-8
    d = d[0] if isinstance(d, list) else d
    assert d["trace"].endswith("not-utf8-\ufffd\ufffd.gstrace.gz"), d["trace"]
PY

# --- a trace with a header and no events (an empty recording) replays to a zero report, in
# every format and with plots (it crashed, indexing the policy of a client that is
# not there) ---
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n' >"$tmp/empty.gstrace"
for f in table csv json; do
    "$gpusim" replay "$tmp/empty.gstrace" -p pytorch -p cupy --format $f >"$tmp/out" 2>"$tmp/err" ||
        fail "empty trace, $f: exit $?: $(cat "$tmp/err")"
done
python3 -c "import json,sys; d=json.load(open(sys.argv[1]))[0]; assert d['events']==0 and len(d['results'])==2" \
    "$tmp/out" || fail "empty trace: JSON"
GPUSIM_GNUPLOT=true "$gpusim" replay "$tmp/empty.gstrace" --plot "$tmp/empty-plots" -q >"$tmp/out" 2>&1
[ $? -eq 3 ] && [ -s "$tmp/empty-plots/empty-bars.dat" ] || fail "empty trace, --plot: $(cat "$tmp/out")"
"$gpusim" sweep "$tmp/empty.gstrace" -p 'pytorch:max_split_size_mb:{64,128}' >"$tmp/out" ||
    fail "empty trace, sweep: exit"

# --- whatif on a run that died of OOM: the recorded setting fails at the recorded
# cap, the trace says where the run died, and every minimum capacity completes while 2 MiB less
# fails (replayed here, one by one) ---
python3 "$src/traces/convert.py" "$snap" -o "$tmp/oomdie.gstrace.gz" 2>/dev/null || fail "convert oomdie"
"$gpusim" whatif "$snap" --format json -o "$tmp/wd.json" 2>/dev/null || fail "whatif oomdie: exit $?"
python3 - "$tmp/wd.json" "$gpusim" "$tmp/oomdie.gstrace.gz" <<'PY' || fail "whatif on a dying snapshot"
import json, subprocess, sys
v = json.load(open(sys.argv[1]))
gpusim, trace = sys.argv[2], sys.argv[3]
rec = [r for r in v["results"] if r["recorded"]][0]
assert rec["outcome"] == "oom", rec                    # it died there, as the real run did
assert v["recorded_fatal_oom_event"] is not None, v
# the trace ends where the run died: a setting that gets past it "survived" (never "ok"), and
# every minimum is a lower bound, said so in the JSON and the sentence
assert any(r["outcome"] == "survived" for r in v["results"]), "no setting gets past the death"
assert not any(r["outcome"] == "ok" for r in v["results"]), v
assert all(r["min_capacity_is_lower_bound"] for r in v["results"] if r["min_capacity_bytes"]), v
assert v["capacity_source"] == "recorded cap", v
assert "complete" not in v["recommendation"] and "lower bound" in v["recommendation"], v
assert "gpusim verify" in v["recommendation"], v
def outcome(policy, cap):
    out = subprocess.run([gpusim, "replay", trace, "-q", "-p", policy, "--capacity", str(cap),
                          "--format", "json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["results"][0]["outcome"]
for r in v["results"]:
    m = r["min_capacity_bytes"]
    if m is None or r["policy"].startswith("cupy"):
        continue
    assert outcome(r["policy"], m) == "survived", (r["policy"], m)
    assert outcome(r["policy"], m - (2 << 20)) == "oom", (r["policy"], m)
PY

# --- the limit a dying run met, from the snapshot itself (docs/cli.md, "whatif") ---
# Without its NAME.json the oomdie run (a memory fraction: the device had 77 GiB free) gives
# no limit: whatif refuses and says what bounds it, never guessing a device.
cp "$snap" "$tmp/frac.pickle.gz"
expect_error "whatif, a death with no limit" "give it with --capacity (the snapshot puts it between 1.479 GiB and 1.576 GiB)" \
    "$gpusim" whatif "$tmp/frac.pickle.gz"
# The same run as if the GPU had been full (another library holding the rest): the oom entry's
# device_free, 48 MiB, cannot hold the 126 MiB segment the request needs, so the limit is what
# the allocator held then (1488 MiB) plus that: 1.5 GiB, and the death is the real one.
python3 - "$snap" "$tmp/full.pickle.gz" <<'PY' || fail "make the full-device snapshot"
import gzip, pickle, sys
s = pickle.loads(gzip.decompress(open(sys.argv[1], "rb").read()))
[e for e in s["device_traces"][0] if e["action"] == "oom"][-1]["device_free"] = 48 << 20
open(sys.argv[2], "wb").write(gzip.compress(pickle.dumps(s)))
PY
"$gpusim" whatif "$tmp/full.pickle.gz" --format json -o "$tmp/full.json" 2>/dev/null || fail "whatif, full device: exit $?"
python3 - "$tmp/full.json" "$tmp/wd.json" <<'PY' || fail "whatif, full device: the limit from the snapshot"
import json, sys
v, w = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert v["capacity_bytes"] == 1610612736 and v["capacity_source"] == "device full at the OOM", v
rec = [r for r in v["results"] if r["recorded"]][0]
assert rec["outcome"] == "oom" and rec["first_oom_event"] == v["recorded_fatal_oom_event"], rec
# the same verdict as from the run's own NAME.json (the same cap, another source; the device
# time aside: an expandable segment's address reservation is charged by the device's size,
# which the JSON gives and the snapshot alone does not)
strip = lambda d: [{k: x for k, x in r.items() if not k.startswith("device_time")}
                   for r in d["results"]]
assert strip(v) == strip(w), (strip(v), strip(w))
PY
# ... and with a NAME.json whose cap (2 GiB) is above it: the run met the lower, the full device,
# for the cap and for the converter's empty_cache rule (the JSON's cap won: the recorded setting
# got past its death, and its five flushes read as empty_cache() calls)
cp "$tmp/full.pickle.gz" "$tmp/full2.pickle.gz"
echo '{"cap_gib": 2, "total_bytes": 85017493504, "outcome": "oom"}' >"$tmp/full2.json"
"$gpusim" whatif "$tmp/full2.pickle.gz" --format json -o "$tmp/full2.out.json" 2>"$tmp/err" ||
    fail "whatif, full device under a larger cap: exit $?: $(cat "$tmp/err")"
! grep -q "empty_cache" "$tmp/err" || fail "whatif, full device under a larger cap: $(cat "$tmp/err")"
python3 - "$tmp/full2.out.json" "$tmp/full.json" <<'PY' || fail "whatif, full device under a larger cap: the lower limit"
import json, sys
v, w = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert v["capacity_bytes"] == 1610612736 and v["capacity_source"] == "device full at the OOM", v
rec = [r for r in v["results"] if r["recorded"]][0]
assert rec["outcome"] == "oom" and rec["retries"] == 6, rec
assert rec["first_oom_event"] == v["recorded_fatal_oom_event"] == w["recorded_fatal_oom_event"], rec
PY
# A run of two GPUs whose device 0 was full at its OOM: that limit is device 0's, the other's is
# not known: refused (it was every device's cap, and device 1, which never failed, died)
python3 - "$src/traces/references/pytorch-2.11-2xh200/twogpu__default__2.5+2.pickle.gz" "$tmp/twofull.pickle.gz" <<'PY' ||
import gzip, pickle, sys
s = pickle.loads(gzip.decompress(open(sys.argv[1], "rb").read()))
e = dict(s["device_traces"][0][-1])
e.update(action="oom", device_free=10 << 20, size=100 << 20, addr=0)
s["device_traces"][0].append(e)
open(sys.argv[2], "wb").write(gzip.compress(pickle.dumps(s)))
PY
    fail "make the two-GPU full-device snapshot"
"$gpusim" whatif "$tmp/twofull.pickle.gz" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && [ ! -s "$tmp/out" ] &&
    grep -q "the snapshot shows the limit one device met (device full at the OOM), not the other devices'" "$tmp/err" ||
    fail "whatif, one device full of two: $(cat "$tmp/err")"
"$gpusim" whatif -q "$tmp/twofull.pickle.gz" --capacity 3GiB >/dev/null 2>&1 || fail "whatif, one device full of two, --capacity: exit $?"
# A snapshot dumped before its run died (its NAME.json says oom; the log holds none): no setting
# "completes" it, each minimum is a lower bound (whatif said "completes at the cap of 1.5 GiB")
cp "$src/traces/references/pytorch-2.11-h100/sidestream__default__nocap.pickle.gz" "$tmp/early.pickle.gz"
echo '{"outcome": "oom", "cap_gib": 1.5, "total_bytes": 85017493504}' >"$tmp/early.json"
"$gpusim" whatif "$tmp/early.pickle.gz" >"$tmp/early.txt" 2>"$tmp/err" &&
    "$gpusim" whatif -q "$tmp/early.pickle.gz" -f json -o "$tmp/early.jsonout" ||
    fail "whatif, a snapshot dumped before the death: exit $?: $(cat "$tmp/err")"
grep -q "trace stops before the death" "$tmp/err" &&
    grep -q "^The recording stops before the recorded run died of an OOM" "$tmp/early.txt" &&
    ! grep -q "complete" "$tmp/early.txt" ||
    fail "whatif, a snapshot dumped before the death: $(tail -1 "$tmp/early.txt")"
python3 - "$tmp/early.jsonout" <<'PY' || fail "whatif, a snapshot dumped before the death: its JSON"
import json, sys
v = json.load(open(sys.argv[1]))
for r in v["results"]:
    assert r["outcome"] == "survived" and r["min_capacity_is_lower_bound"], r
PY
# a replay of it says so in its JSON, as of a trace that ends at its death
python3 "$src/traces/convert.py" -q "$tmp/early.pickle.gz" -o "$tmp/early.gstrace" 2>/dev/null &&
    "$gpusim" replay -q "$tmp/early.gstrace" -f json | grep -q '"recorded_death_note": "the recorded run died of an OOM after the trace ends' ||
    fail "replay of a snapshot dumped before the death: no note"
# its chart says so too (its labels were exact minima, its note "where the recorded run died")
"$gpusim" whatif -q "$tmp/early.pickle.gz" --plot "$tmp/earlyplot" >/dev/null 2>&1 ||
    fail "whatif --plot, a snapshot dumped before the death: exit $?"
[ "$(grep -c "'>= " "$tmp/earlyplot/early-whatif.gp")" -eq 8 ] && grep -q "died, or before: each minimum" "$tmp/earlyplot/early-whatif.gp" ||
    fail "whatif --plot, a snapshot dumped before the death: $(grep -c "'>= " "$tmp/earlyplot/early-whatif.gp") lower bounds"
# the chart's time against the default's is the table's: none for a setting that died at the cap
"$gpusim" whatif -q "$trace" --capacity 5.75GiB --plot "$tmp/r50plot" >/dev/null 2>&1 || fail "whatif --plot resnet50: exit $?"
grep -q "'4.83 ms, to its failure'" "$tmp/r50plot/resnet50-whatif.gp" ||
    fail "whatif --plot: a setting that died has a ratio: $(grep 4.83 "$tmp/r50plot/resnet50-whatif.gp")"
# A run that caught its OOMs (oomcatch, 5 at 2 GiB): the recorded setting at the recorded cap
# replays with the snapshot's own segment addresses, so its retries are the real run's 5 (the
# placement model alone serves 2 of the requests: 3); and the search of a trace with oom
# events starts from the bound (its uncapped peak allocated holds the failed requests, served)
cp "$src/traces/references/pytorch-2.11-h100/oomcatch__default__2.pickle.gz" \
    "$src/traces/references/pytorch-2.11-h100/oomcatch__default__2.json" "$tmp/"
"$gpusim" whatif "$tmp/oomcatch__default__2.pickle.gz" --format json -o "$tmp/catch.json" 2>/dev/null ||
    fail "whatif oomcatch: exit $?"
python3 - "$tmp/catch.json" <<'PY' || fail "whatif oomcatch: the recorded run, as it ran"
import json, sys
v = json.load(open(sys.argv[1]))
rec = [r for r in v["results"] if r["recorded"]][0]
assert rec["outcome"] == "ok" and rec["retries"] == 5 and rec["num_ooms"] == 5, rec
assert rec["min_capacity_bytes"] <= v["capacity_bytes"], rec
PY
# ... and the table says the cap in GiB, with PyTorch's exact limit beside it, and that its
# minimum capacities allow the requests the program caught failing
"$gpusim" whatif -q -j 1 -p pytorch "$tmp/oomcatch__default__2.pickle.gz" >"$tmp/catch.txt" &&
    grep -q "at the cap of 2.000 GiB (2147483647 B, recorded cap)$" "$tmp/catch.txt" &&
    grep -q "no OOM but at the 5 requests the recorded program caught failing and went past" \
        "$tmp/catch.txt" || fail "whatif oomcatch's table: $(cat "$tmp/catch.txt")"
# Two clients, each its own allocator under the cap (cooperative, separate): a minimum is one
# client's allocator's, not the two clients' peaks together (which set the search's floor: every
# setting ok at 10 GiB had a minimum of 12 GiB); and a setting that completes only in a window of
# capacities (max_split_size_mb:256 here: not at 4 GiB, not uncapped on the trace's 15 GiB
# device) is found from the others' minimums, its failure above said (!)
pc=$src/traces/data/producer-consumer.gstrace.gz
"$gpusim" whatif -q -j 1 "$pc" --clients cooperative --capacity 10GiB -f json -o "$tmp/pc.json" &&
    "$gpusim" whatif -q -j 1 "$pc" --capacity 4GiB -f json -o "$tmp/pc4.json" ||
    fail "whatif of two clients: exit $?"
python3 - "$tmp/pc.json" "$tmp/pc4.json" <<'PY' || fail "whatif of two clients"
import json, sys
v, w = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for r in v["results"]:
    assert r["outcome"] == "ok" and r["min_capacity_bytes"] <= 10 << 30, r
r = [r for r in w["results"] if r["policy"] == "pytorch:max_split_size_mb:256"][0]
assert r["min_capacity_bytes"] == 9051308032 and r["fails_above_bytes"], r
PY
for c in 8632MiB 8630MiB; do
    "$gpusim" replay -q "$pc" -p pytorch:max_split_size_mb:256 --capacity $c -f csv | sed -n 2p | cut -d, -f4
done | tr '\n' ' ' | grep -qx "ok oom " || fail "max_split_size_mb:256 at its minimum and a step below"
"$gpusim" whatif -q -j 1 "$pc" --capacity 10GiB -p pytorch | grep -q \
    "(its clients' allocators together: each client's, capped alone, may need less)$" ||
    fail "whatif of two clients: the bound's words"
# A recorded setting with per_process_memory_fraction: its limit is the run's cap (0.3 of 10 GiB),
# where every candidate fails, not "no cap", where all but it completed
printf '# gpusim-trace 1\n# device_total_bytes: 10737418240\n# allocator_conf: per_process_memory_fraction:0.3\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,3221225472\n1,1,free,torch,0,0,1,0\n2,2,alloc,torch,0,0,2,4294967296\n3,3,free,torch,0,0,2,0\n' \
    >"$tmp/f03.gstrace"
"$gpusim" whatif -q -j 1 "$tmp/f03.gstrace" >"$tmp/f03.txt" &&
    grep -q "at the cap of 3 GiB (the recorded setting's per_process_memory_fraction)$" "$tmp/f03.txt" &&
    grep -q "^No candidate completes at the cap of 3 GiB" "$tmp/f03.txt" ||
    fail "whatif of a recorded fraction: $(cat "$tmp/f03.txt")"
# ... of a device nothing names: refused, no device guessed (it was 0.3 of a guessed 80 GiB)
grep -v '^# device_total_bytes' "$tmp/f03.gstrace" >"$tmp/f03n.gstrace"
expect_error "whatif of a recorded fraction of an unknown device" \
    "per_process_memory_fraction is a fraction of the device's memory, which nothing here says: give --device-total" \
    "$gpusim" whatif -q -j 1 "$tmp/f03n.gstrace"
"$gpusim" whatif -q -j 1 "$tmp/f03n.gstrace" --device-total 10GiB | grep -q "at the cap of 3 GiB (the recorded setting's per_process_memory_fraction)$" ||
    fail "whatif of a recorded fraction, --device-total: the fraction of it"
# A complete run with no cap: no cap is guessed ("with no cap"), and no search goes above what
# a setting reserves uncapped (up to the device's 79 GiB, gpt2's rows took 43-44 replays).
"$gpusim" whatif "$src/traces/data/gpt2.gstrace.gz" --format json -o "$tmp/nocap.json" 2>/dev/null ||
    fail "whatif, no cap: exit $?"
"$gpusim" whatif "$src/traces/data/gpt2.gstrace.gz" >"$tmp/nocap.txt" 2>/dev/null
grep -q "13104 events, with no cap$" "$tmp/nocap.txt" || fail "whatif, no cap: $(head -1 "$tmp/nocap.txt")"
"$gpusim" replay "$src/traces/data/gpt2.gstrace.gz" -q -p pytorch:max_split_size_mb:64 --format json >"$tmp/r64.json" ||
    fail "replay gpt2"
python3 - "$tmp/nocap.json" "$tmp/r64.json" <<'PY' || fail "whatif, no cap"
import json, sys
v, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))[0]["results"][0]
assert v["capacity_bytes"] is None and v["capacity_source"] is None, v
assert v["device_total_bytes"] == 85017493504, v    # the trace's header says it
for x in v["results"]:
    assert x["outcome"] == "ok" and x["headroom_bytes"] is None, x
    assert x["min_capacity_bytes"] <= x["peak_reserved_bytes"] + (2 << 20), x
    assert x["replays"] <= 40, x
# whatif's device frees are replay's num_device_free for the same run
m = [x for x in v["results"] if x["policy"] == "pytorch:max_split_size_mb:64"][0]
assert m["device_frees"] == r["num_device_free"], (m["device_frees"], r["num_device_free"])
PY

# --assume-repeat: a loop that died at its 5th step (weights 1 GiB, then 100 and 300 MiB a
# step). The verdict names the period it could use; with the assumption it is drawn on the
# continued trace and labelled in every format; without a period, or a death, it is refused.
for kind in loop grow; do python3 - "$tmp/$kind.gstrace" $kind <<'PY'
import sys
MiB = 1 << 20
rows, nid = [], 1
rows.append(("alloc", 1, 1024 * MiB))
for step in range(4):
    a = 100 * MiB + (step * 4096 if sys.argv[2] == "grow" else 0)   # grow: no two steps alike
    rows += [("alloc", nid + 1, a), ("alloc", nid + 2, 300 * MiB),
             ("free", nid + 1, a), ("free", nid + 2, 300 * MiB)]
    nid += 2
rows += [("alloc", nid + 1, 100 * MiB), ("oom", 0, 300 * MiB)]
with open(sys.argv[1], "w") as f:
    f.write(f"# gpusim-trace 2\n# fatal_oom_event: {len(rows) - 1}\n"
            "seq,time_us,op,client,device,stream,id,size\n")
    for i, (op, ident, size) in enumerate(rows):
        f.write(f"{i},{i},{op},torch,0,0,{ident},{size}\n")
PY
done
"$gpusim" whatif "$tmp/loop.gstrace" --capacity 1.5GiB --format json -o "$tmp/loop.json" 2>/dev/null ||
    fail "whatif loop: exit $?"
"$gpusim" whatif "$tmp/loop.gstrace" --capacity 1.5GiB --assume-repeat 3 --format json -o "$tmp/rep.json" 2>/dev/null ||
    fail "whatif --assume-repeat: exit $?"
"$gpusim" whatif "$tmp/loop.gstrace" --capacity 1.5GiB --assume-repeat 3 --format csv -o "$tmp/rep.csv" 2>/dev/null ||
    fail "whatif --assume-repeat csv: exit $?"
"$gpusim" whatif "$tmp/loop.gstrace" --capacity 1.5GiB --assume-repeat 3 >"$tmp/rep.txt" 2>/dev/null
python3 - "$tmp/loop.json" "$tmp/rep.json" "$tmp/rep.csv" "$tmp/rep.txt" <<'PY' || fail "whatif --assume-repeat"
import csv, json, sys
v, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert v["period_events"] == 4 and "--assume-repeat" in v["recommendation"], v
assert v["assumption"] is None and all(x["outcome"] == "survived" for x in v["results"]), v
assert r["assumption"].startswith("the last complete period (4 events"), r
assert r["recommendation"].startswith("Assuming the last complete period"), r
assert r["recorded_fatal_oom_event"] is None, r
assert all(x["outcome"] == "ok" and not x["min_capacity_is_lower_bound"] for x in r["results"]), r
rows = list(csv.DictReader(open(sys.argv[3])))
assert rows and all(x["assumption"] == r["assumption"] for x in rows), rows[0]
assert "assumed, not recorded: the last complete period" in open(sys.argv[4]).read()
PY
expect_error "--assume-repeat, a run that did not die" "nothing to see past" \
    "$gpusim" whatif "$trace" --assume-repeat 2
expect_error "--assume-repeat, no period" "do not repeat" \
    "$gpusim" whatif "$tmp/grow.gstrace" --capacity 1.5GiB --assume-repeat 2
for n in 0 -1 100001; do
    expect_error "--assume-repeat $n" "is not a number of repetitions" \
        "$gpusim" whatif "$tmp/loop.gstrace" --capacity 1.5GiB --assume-repeat $n
done

# --- one writer for every output: a link stays a link and its target gets the file (convert -o
# replaced the link by a file, its target never written); a device is written in place ---
ln -s "$tmp/link-target.gstrace.gz" "$tmp/link.gstrace.gz"
"$gpusim" convert "$trace" -o "$tmp/link.gstrace.gz" || fail "convert -o LINK: exit $?"
[ -L "$tmp/link.gstrace.gz" ] && [ -s "$tmp/link-target.gstrace.gz" ] ||
    fail "convert -o LINK: the link was replaced, or its target not written"
"$gpusim" replay "$tmp/link-target.gstrace.gz" -q >/dev/null || fail "convert -o LINK: the target is no trace"
"$gpusim" convert "$trace" -o /dev/null || fail "convert -o /dev/null: exit $?"
[ -c /dev/null ] || fail "convert -o /dev/null: /dev/null is no longer a device"
# a FIFO is written in place when a reader comes (it is opened without waiting, again until one
# does: util/file.c's open_fifo)
mkfifo "$tmp/out.fifo"
{ sleep 1; cat "$tmp/out.fifo" >"$tmp/fifo.out"; } &
"$gpusim" replay -q "$trace" -f json -o "$tmp/out.fifo" || fail "replay -o FIFO: exit $?"
wait
grep -q '"events": 8533' "$tmp/fifo.out" || fail "replay -o FIFO: the reader got $(head -c 80 "$tmp/fifo.out")"

# --- standard output closed: with -o the report is written and the run is a success (it was
# exit 2 after writing the file); without, the lost report is exit 2 ---
rm -f "$tmp/closed.txt"
"$gpusim" replay "$trace" -q -o "$tmp/closed.txt" >&- 2>"$tmp/err"
[ $? -eq 0 ] && [ -s "$tmp/closed.txt" ] || fail "stdout closed, -o: exit, or no file: $(cat "$tmp/err")"
"$gpusim" replay "$trace" -q >&- 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "standard output: cannot write" "$tmp/err" || fail "stdout closed, no -o: $(cat "$tmp/err")"

# --- inputs without end: judged by their first bytes, never read whole (under a 1 GiB memory
# limit each is one line and exit 2 at once: it aborted in GLib, exit 133, reading /dev/zero).
# Under AddressSanitizer, whose shadow memory no such limit allows, the limit is left off. ---
mem_limit=1048576 gz_limit=131072
if ldd "$gpusim" 2>/dev/null | grep -q libasan; then mem_limit=unlimited gz_limit=unlimited; fi
for cmd in "replay /dev/zero" "plot /dev/zero" "replay $trace --calibration /dev/zero" "sweep /dev/zero"; do
    # shellcheck disable=SC2086
    (ulimit -v $mem_limit; exec timeout 60 "$gpusim" $cmd) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "NUL byte" "$tmp/err" ||
        fail "gpusim $cmd: exit $rc: $(head -c 300 "$tmp/err")"
done
# a line of 256 MiB in 1 MB of gzip: refused at its first MiB, within 128 MiB of memory
python3 -c "import gzip, sys; sys.stdout.buffer.write(gzip.compress(b'# gpusim-trace 1\\n# x: ' + b'a' * (1 << 28), 1))" >"$tmp/long.gstrace.gz"
(ulimit -v $gz_limit; exec "$gpusim" replay "$tmp/long.gstrace.gz") >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "long.gstrace.gz:2: a line of more than 1048576 bytes" "$tmp/err" ||
    fail "a 1 GiB line: $(head -c 300 "$tmp/err")"
# a NUL where a line should begin, and a first line that cannot be the magic, at once
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,10\n\0' >"$tmp/nul.gstrace"
expect_error "a NUL after the last line" "nul.gstrace:4: a NUL byte: not a text trace" "$gpusim" replay "$tmp/nul.gstrace"
printf 'no trace, and no newline' >"$tmp/prose.txt"
expect_error "prose" "prose.txt:1: not a gpusim trace" "$gpusim" replay "$tmp/prose.txt"

# --- the host out of memory: one line and exit 2 wherever an allocation fails, and a sweep
# writes the cells it finished (GLib aborted, exit 133, and the sweep lost every cell). Cell 0
# meets its 1 MiB capacity at the first request and needs little; cell 1 holds 600,000 blocks.
# The limits step up from where loading fails to where everything fits: each run must end in
# one of the two ways, and some limit must fall between the cells. Not under AddressSanitizer,
# whose shadow memory no such limit allows. ---
if [ "$mem_limit" != unlimited ]; then
    awk 'BEGIN { print "# gpusim-trace 1"; print "seq,time_us,op,client,device,stream,id,size"
                 n = 600000; for (i = 0; i < n; i++) printf "%d,%d,alloc,torch,0,0,%d,512\n", i, i, i + 1
                 for (i = 0; i < n; i++) printf "%d,%d,free,torch,0,0,%d,512\n", n + i, n + i, i + 1 }' \
        >"$tmp/many.gstrace"
    "$gpusim" sweep "$tmp/many.gstrace" -j 1 -c '{1,100000}MiB' -o "$tmp/many.csv" 2>"$tmp/err" ||
        fail "sweep of many blocks: exit $?: $(cat "$tmp/err")"
    between=0 lim=40000
    while [ $lim -le 400000 ]; do
        rm -f "$tmp/cut.csv"
        (ulimit -v $lim; exec "$gpusim" sweep "$tmp/many.gstrace" -j 1 -c '{1,100000}MiB' -o "$tmp/cut.csv") 2>"$tmp/err"
        rc=$?
        [ $rc -eq 0 ] && break
        [ $rc -eq 2 ] && head -n 1 "$tmp/err" | grep -q "^gpusim: out of memory: sweep\( of .*many.gstrace\)\?: failed to allocate [0-9]* bytes" ||
            fail "sweep under ulimit -v $lim: exit $rc: $(head -c 300 "$tmp/err")"
        if grep -q "^gpusim: 1 of 2 cells finished" "$tmp/err"; then
            cut -d, -f1-26 "$tmp/cut.csv" >"$tmp/cut.csv.26" # up to the replay's rate, which varies
            between=1
            head -n 2 "$tmp/many.csv" | cut -d, -f1-26 | cmp -s - "$tmp/cut.csv.26" ||
                fail "sweep under ulimit -v $lim: not the finished cell's row: $(cat "$tmp/cut.csv")"
        fi
        lim=$((lim + 4000))
    done
    [ $rc -eq 0 ] && [ "$(cut -d, -f1-26 "$tmp/many.csv")" = "$(cut -d, -f1-26 "$tmp/cut.csv")" ] || fail "sweep of many blocks: no limit up to $lim KiB let it finish"
    [ $between -eq 1 ] || fail "sweep of many blocks: no limit kept the first cell and lost the second"
    (ulimit -v $((lim / 2)); exec "$gpusim" replay "$tmp/many.gstrace") >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^gpusim: out of memory: replay: failed to allocate" "$tmp/err" ||
        fail "replay under ulimit -v $((lim / 2)): exit $rc: $(head -c 300 "$tmp/err")"
fi

# --- rough edges ---
# PYTORCH_CUDA_ALLOC_CONF pasted as it is: bare, or with the variable's name in front
for spec in expandable_segments:True PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; do
    "$gpusim" replay "$trace" -q -p "$spec" --format csv >"$tmp/bare.csv" 2>"$tmp/err" ||
        fail "--policy $spec: $(cat "$tmp/err")"
    grep -q "^[^,]*,pytorch:expandable_segments:True," "$tmp/bare.csv" || fail "--policy $spec: $(cat "$tmp/bare.csv")"
done
expect_error "bare conf typo" "unknown policy 'expandable_segment'" "$gpusim" replay "$trace" -p expandable_segment:True
# a snapshot given to replay points to the converter and to whatif
expect_error "snapshot to replay" "gpusim whatif" "$gpusim" replay "$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz"
# --fail-on-oom: 4 when a result met an OOM, 0 otherwise; the report is written either way
"$gpusim" replay "$trace" -q --capacity 5GiB --fail-on-oom >"$tmp/out" 2>/dev/null
[ $? -eq 4 ] && [ -s "$tmp/out" ] || fail "--fail-on-oom with an OOM: want exit 4 and a report"
"$gpusim" replay "$trace" -q --fail-on-oom >/dev/null 2>&1 || fail "--fail-on-oom without an OOM: exit $?"
"$gpusim" sweep "$trace" -q --capacity '{5,6.25}GiB' --fail-on-oom >/dev/null 2>&1
[ $? -eq 4 ] || fail "sweep --fail-on-oom: want exit 4"

# --- the cluster: --shard K/N and --merge give back the single-machine CSV ---
grid="-p pytorch:max_split_size_mb:{64,128,256} --capacity {5.75,6.25}GiB"
# shellcheck disable=SC2086
"$gpusim" sweep "$alt" $grid -j 2 -o "$tmp/whole.csv" || fail "shard: the whole sweep"
for k in 0 1 2 3; do
    # shellcheck disable=SC2086
    "$gpusim" sweep "$alt" $grid -j 1 --shard $k/4 -o "$tmp/shard-$k.csv" || fail "--shard $k/4: exit"
    [ "$(head -1 "$tmp/shard-$k.csv")" = "$(head -1 "$tmp/whole.csv")" ] || fail "--shard $k/4: header"
done
# cell i in shard i mod 4, with the whole grid's cell number
[ "$(tail -n +2 "$tmp/shard-1.csv" | cut -d, -f1 | tr '\n' ' ')" = "1 5 " ] ||
    fail "--shard 1/4: cells $(tail -n +2 "$tmp/shard-1.csv" | cut -d, -f1 | tr '\n' ' ')"
# given in any order, with the grid (its size checked)
# shellcheck disable=SC2086
"$gpusim" sweep --merge "$tmp/shard-3.csv" "$tmp/shard-1.csv" "$tmp/shard-0.csv" "$tmp/shard-2.csv" \
    $grid -o "$tmp/merged.csv" || fail "--merge: exit"
mask_host_time "$tmp/whole.csv" >"$tmp/whole.m"
mask_host_time "$tmp/merged.csv" >"$tmp/merged.m"
cmp -s "$tmp/whole.m" "$tmp/merged.m" || fail "--merge: differs from the single-machine CSV: $(diff "$tmp/whole.m" "$tmp/merged.m" | head -5)"
# --shard auto: a Kubernetes Indexed Job's JOB_COMPLETION_INDEX (auto/N), a Slurm job array's
# variables (auto; an --array=1-4 counts from SLURM_ARRAY_TASK_MIN), as the cluster sets them
for k in 0 1 2 3; do
    # shellcheck disable=SC2086
    JOB_COMPLETION_INDEX=$k "$gpusim" sweep "$alt" $grid -j 1 --shard auto/4 -o "$tmp/k8s-$k.csv" ||
        fail "--shard auto/4, JOB_COMPLETION_INDEX=$k: exit"
    cmp -s "$tmp/k8s-$k.csv" "$tmp/shard-$k.csv" 2>/dev/null ||
        [ "$(mask_host_time "$tmp/k8s-$k.csv")" = "$(mask_host_time "$tmp/shard-$k.csv")" ] ||
        fail "--shard auto/4, JOB_COMPLETION_INDEX=$k: not shard $k/4"
    # shellcheck disable=SC2086
    env -u JOB_COMPLETION_INDEX SLURM_ARRAY_TASK_ID=$((k + 1)) SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_COUNT=4 \
        "$gpusim" sweep "$alt" $grid -j 1 --shard auto -o "$tmp/slurm-$k.csv" || fail "--shard auto, Slurm task $((k + 1)): exit"
    [ "$(mask_host_time "$tmp/slurm-$k.csv")" = "$(mask_host_time "$tmp/shard-$k.csv")" ] ||
        fail "--shard auto, Slurm task $((k + 1)) of 1-4: not shard $k/4"
done
expect_error "--shard auto, no scheduler" "neither Slurm's SLURM_ARRAY_TASK_ID nor Kubernetes' JOB_COMPLETION_INDEX" \
    env -u SLURM_ARRAY_TASK_ID -u JOB_COMPLETION_INDEX "$gpusim" sweep "$alt" --shard auto
expect_error "--shard auto, Kubernetes without N" "give --shard auto/N" \
    env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=1 "$gpusim" sweep "$alt" --shard auto
expect_error "--shard auto, a bad index" "JOB_COMPLETION_INDEX is 'one'" \
    env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=one "$gpusim" sweep "$alt" --shard auto/4
expect_error "--shard auto/4, index 4" "K runs from 0 to N-1" \
    env -u SLURM_ARRAY_TASK_ID JOB_COMPLETION_INDEX=4 "$gpusim" sweep "$alt" --shard auto/4
# more shards than cells: the empty ones have the header alone, and merge all the same
for k in 6 7; do
    # shellcheck disable=SC2086
    "$gpusim" sweep "$alt" $grid --shard $k/8 -o "$tmp/e-$k.csv" || fail "--shard $k/8: exit"
done
[ "$(wc -l <"$tmp/e-6.csv")" -eq 1 ] && [ "$(wc -l <"$tmp/e-7.csv")" -eq 1 ] || fail "empty shard: $(cat "$tmp/e-6.csv")"
"$gpusim" sweep --merge "$tmp"/shard-*.csv "$tmp/e-6.csv" "$tmp/e-7.csv" >"$tmp/merged2.csv" ||
    fail "--merge with empty shards: exit"
mask_host_time "$tmp/merged2.csv" | cmp -s - "$tmp/whole.m" || fail "--merge with empty shards: differs"
# what a merge refuses: one line, exit 2, nothing written
expect_error "--shard K = N" "K runs from 0 to N-1" "$gpusim" sweep "$alt" --shard 4/4
expect_error "--shard not K/N" "is not K/N" "$gpusim" sweep "$alt" --shard 1
expect_error "--shard N = 0" "is not K/N" "$gpusim" sweep "$alt" --shard 0/0
expect_error "--shard -1/2" "is not K/N" "$gpusim" sweep "$alt" --shard -1/2
expect_error "--shard with --plot" "gpusim plot" "$gpusim" sweep "$alt" --shard 0/2 --plot "$tmp/sp"
expect_error "--merge a missing shard" "1 of 6 cells are in none of the files, the first cell 2" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/shard-1.csv" "$tmp/shard-3.csv"
expect_error "--merge a shard twice" "shard-1.csv is given twice" \
    "$gpusim" sweep --merge "$tmp"/shard-*.csv "$tmp/shard-1.csv"
cp "$tmp/shard-1.csv" "$tmp/shard-1-copy.csv"
expect_error "--merge two copies of a shard" "shard-1-copy.csv:2: cell 1 again (it is also at $tmp/shard-1.csv:2)" \
    "$gpusim" sweep --merge "$tmp"/shard-[0-3].csv "$tmp/shard-1-copy.csv"
rm "$tmp/shard-1-copy.csv"
# the last cells missing are seen only against the grid: 6 shards of one cell, the last left out
for k in 0 1 2 3 4; do
    # shellcheck disable=SC2086
    "$gpusim" sweep "$alt" $grid --shard $k/6 -o "$tmp/six-$k.csv" || fail "--shard $k/6: exit"
done
"$gpusim" sweep --merge "$tmp"/six-*.csv >/dev/null || fail "--merge without the grid: cells 0..4 are a whole sweep"
# shellcheck disable=SC2086
expect_error "--merge, the last cell missing" "1 of 6 cells are in none of the files, the first cell 5" \
    "$gpusim" sweep --merge "$tmp"/six-*.csv $grid
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,128}' --shard 1/4 -o "$tmp/other.csv" || fail "other grid"
expect_error "--merge two grids" "other.csv:1: its columns differ from $tmp/shard-0.csv's" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/other.csv"
head -c $(($(head -1 "$tmp/shard-1.csv" | wc -c) + 100)) "$tmp/shard-1.csv" >"$tmp/cut.csv"
expect_error "--merge a cut file" "cut.csv:2: the last row has no line end" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/cut.csv"
"$gpusim" replay "$alt" --format csv -o "$tmp/replay.csv" || fail "replay csv"
expect_error "--merge a replay's CSV" "replay.csv:1: not a sweep's CSV" "$gpusim" sweep --merge "$tmp/replay.csv"
printf 'cell,x\nfive,1\n' >"$tmp/bad-cell.csv"
expect_error "--merge a bad cell" "bad-cell.csv:2: 'five,1' does not start with a cell number" \
    "$gpusim" sweep --merge "$tmp/bad-cell.csv"
expect_error "--merge -o an input" "an input of this run" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/merged.csv" -o "$tmp/merged.csv"
expect_error "--merge a missing file" "nope.csv" "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/nope.csv"
expect_error "--merge with --plot" "--merge takes" "$gpusim" sweep --merge "$tmp/shard-0.csv" --plot "$tmp/mp"
# rows checked, not only cell numbers (each of these merged with exit 0): a shard of another grid
# of the same columns, against the grid given; a shard of another trace; a row cut short; CRLF
# line ends said as such; options that act on replays; and --fail-on-oom is the merged CSV's
"$gpusim" sweep "$alt" -p 'pytorch:max_split_size_mb:{64,512,256}' --capacity '{5.75,6.25}GiB' --shard 2/4 \
    -o "$tmp/grid2.csv" || fail "another grid's shard"
# shellcheck disable=SC2086
expect_error "--merge another grid's shard" "grid2.csv:2: cell 2 has max_split_size_mb '512', where the grid given has '128'" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/shard-1.csv" "$tmp/grid2.csv" "$tmp/shard-3.csv" $grid
# a shard run without the -c the other had (one capacity: no capacity column): merged with exit
# 0 before, its capacity_bytes 0 beside the other's 6 GiB
"$gpusim" sweep "$alt" -q -j 1 -p 'pytorch:max_split_size_mb:{64,128,256}' --shard 0/2 -o "$tmp/nocap0.csv" &&
    "$gpusim" sweep "$alt" -q -j 1 -p 'pytorch:max_split_size_mb:{64,128,256}' -c 6GiB --shard 1/2 \
        -o "$tmp/cap1.csv" || fail "shards with and without -c"
expect_error "--merge a shard without the -c" "nocap0.csv:2: cell 0 has capacity_bytes '0', where the grid given has 6442450944" \
    "$gpusim" sweep --merge "$tmp/nocap0.csv" "$tmp/cap1.csv" -p 'pytorch:max_split_size_mb:{64,128,256}' -c 6GiB
# shellcheck disable=SC2086
"$gpusim" sweep "$trace" $grid --shard 1/4 -o "$tmp/r50.csv" || fail "another trace's shard"
expect_error "--merge another trace's shard" "trace 'resnet50.gstrace.gz', where the first row's is 'batch-alternate.gstrace.gz'" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/r50.csv" "$tmp/shard-2.csv" "$tmp/shard-3.csv"
{ head -1 "$tmp/shard-1.csv"; echo "1,128"; } >"$tmp/short.csv"
expect_error "--merge a row cut short" "short.csv:2: 2 fields, where the header has" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/short.csv"
sed 's/$/\r/' "$tmp/shard-1.csv" >"$tmp/crlf.csv"
expect_error "--merge CRLF" "crlf.csv:1: CRLF line ends" "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/crlf.csv"
{ head -1 "$tmp/shard-1.csv"; tail -n +2 "$tmp/shard-1.csv" | sed 's/$/\r/'; } >"$tmp/crlf-rows.csv"
expect_error "--merge CRLF rows under an LF header" "crlf-rows.csv:2: a CRLF line end" \
    "$gpusim" sweep --merge "$tmp/shard-0.csv" "$tmp/crlf-rows.csv"
expect_error "--merge -j" "--jobs belongs to each" "$gpusim" sweep --merge "$tmp"/shard-*.csv -j 3
expect_error "--merge --continue-on-oom" "--continue-on-oom belongs" "$gpusim" sweep --merge "$tmp"/shard-*.csv --continue-on-oom
"$gpusim" sweep --merge "$tmp"/shard-*.csv --fail-on-oom -o "$tmp/m4.csv"
[ $? -eq 4 ] && [ -s "$tmp/m4.csv" ] || fail "--merge --fail-on-oom: want exit 4 (5.75 GiB cells meet OOMs), the CSV written"
# settings that do nothing, or misbehave together, are said (and the replay goes on)
"$gpusim" replay "$trace" -q -p pytorch:garbage_collection_threshold:0.6 >/dev/null 2>"$tmp/err" ||
    fail "gc without a cap: exit $?"
grep -q "warning: .*garbage_collection_threshold does nothing without a limit" "$tmp/err" || fail "no gc warning: $(cat "$tmp/err")"
"$gpusim" replay "$trace" -q --capacity 6GiB -p pytorch:garbage_collection_threshold:0.6 >/dev/null 2>"$tmp/err"
[ ! -s "$tmp/err" ] || fail "gc with a cap warned: $(cat "$tmp/err")"
"$gpusim" replay "$trace" -q -p expandable_segments:True,max_split_size_mb:128 >/dev/null 2>"$tmp/err"
grep -q "warning: .*max_split_size_mb with expandable_segments" "$tmp/err" || fail "no mss+expandable warning: $(cat "$tmp/err")"
# --- a request that failed, what a trace can tell, several devices, on real runs ---
refs=$src/traces/references
expect_error "bad per-device size" "--capacity: bad size" "$gpusim" replay "$trace" --capacity 0=lots
expect_error "bad device number" "DEVICE a number" "$gpusim" replay "$trace" --capacity x=1GiB
expect_error "device twice" "device 0 named twice" "$gpusim" replay "$trace" --capacity 0=1GiB,0=2GiB
expect_error "a device no trace has" "--capacity: device 1 is in no trace given" "$gpusim" replay "$trace" --capacity 1=1GiB
expect_error "a device total for no trace's device" "--device-total: device 3 is in no trace given" \
    "$gpusim" replay "$trace" --device-total 0=80GiB,3=80GiB
expect_error "per-device elsewhere" "apply to gpusim replay only" \
    "$gpusim" validate "$trace" --backend sim --capacity 0=1GiB
if command -v python3 >/dev/null 2>&1 && [ -d "$refs" ]; then
    # A run that died of an OOM under a 1.5 GiB cap (limit 1610612736 bytes): its snapshot,
    # converted, ends with the request that failed.
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz" \
        -o "$tmp/die.gstrace.gz" --reference "$tmp/die.ref.json" 2>/dev/null || fail "convert oomdie"
    # under its own setting and cap: the OOM at the recorded request, as the real run
    "$gpusim" replay "$tmp/die.gstrace.gz" --capacity 1610612736 -q >"$tmp/die.txt" || fail "oomdie: exit"
    grep -q 'the recorded run died at event 1276 (an OOM); "survived" means a run gets that far' \
        "$tmp/die.txt" || fail "oomdie: the table does not say where the run died: $(cat "$tmp/die.txt")"
    grep -q "^pytorch @1610612736 .* oom " "$tmp/die.txt" || grep -q "oom " "$tmp/die.txt" ||
        fail "oomdie: not an oom: $(cat "$tmp/die.txt")"
    grep -q "first OOM at event 1276, a request of 124.50 MiB" "$tmp/die.txt" ||
        fail "oomdie: not at the recorded request: $(cat "$tmp/die.txt")"
    "$gpusim" replay "$tmp/die.gstrace.gz" --reference "$tmp/die.ref.json" --format csv -q >"$tmp/die.csv"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
             { exit !($c["ref_match"] == "true" && $c["first_oom_event"] == 1276 &&
                      $c["ref_outcome_event"] == 1276 && $c["recorded_fatal_oom_event"] == 1276) }' \
        "$tmp/die.csv" || fail "oomdie vs its reference: $(cat "$tmp/die.csv")"
    # under another setting: whether it gets past that point, and that the trace ends there
    "$gpusim" replay "$tmp/die.gstrace.gz" --capacity 1610612736 -p pytorch:expandable_segments:True \
        --format json -q >"$tmp/die.json" || fail "oomdie expandable: exit"
    python3 - "$tmp/die.json" <<'PY' || fail "oomdie expandable: $(cat "$tmp/die.json")"
import json, sys
d = json.load(open(sys.argv[1]))[0]
assert d["recorded_fatal_oom_event"] == 1276 and "gets that far" in d["recorded_fatal_oom_note"]
r = d["results"][0]
assert r["outcome"] == "survived" and r["caught_ooms"] == 0 and r["events"] == 1277, r
PY
    # a run that caught its OOMs: each failed request is met and gone past (with the real
    # run's segment addresses, all 5 fail here too; tests/data/fidelity-known.tsv says why the
    # placement model alone serves 2 of them)
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-h100/oomcatch__default__2.pickle.gz" \
        -o "$tmp/catch.gstrace.gz" --reference "$tmp/catch.ref.json" 2>/dev/null ||
        fail "convert oomcatch"
    "$gpusim" replay "$tmp/catch.gstrace.gz" --reference "$tmp/catch.ref.json" -q >"$tmp/catch.txt"
    grep -q "^pytorch @2147483647B *ok .* 5 *5 " "$tmp/catch.txt" &&
        grep -q "5 OOMs caught and gone past" "$tmp/catch.txt" &&
        grep -q "exact$" "$tmp/catch.txt" || fail "oomcatch: $(cat "$tmp/catch.txt")"
    # a recording cut by max_entries says so
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-h100/cut__default__nocap.pickle.gz" \
        -o "$tmp/cut.gstrace.gz" 2>/dev/null || fail "convert cut"
    "$gpusim" replay "$tmp/cut.gstrace.gz" -q | grep -q \
        "recording started mid-run: 37 allocations synthesized, results below that point are approximate" ||
        fail "cut: no caveat"
    # two GPUs: a row per device, each under its own limit; JSON devices with a result's keys
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-2xh200/twogpu__default__2.5+2.pickle.gz" \
        -o "$tmp/two.gstrace.gz" 2>/dev/null || fail "convert twogpu"
    "$gpusim" replay "$tmp/two.gstrace.gz" --capacity 0=2.5GiB,1=2GiB -q >"$tmp/two.txt"
    grep -q "^pytorch @0=2.5GiB,1=2GiB " "$tmp/two.txt" && grep -q "^  device 0 @2.5GiB " "$tmp/two.txt" &&
        grep -q "^  device 1 @2GiB " "$tmp/two.txt" || fail "twogpu table: $(cat "$tmp/two.txt")"
    "$gpusim" replay "$tmp/two.gstrace.gz" --capacity 3GiB,1=2GiB --format json -q >"$tmp/two.json"
    python3 - "$tmp/two.json" <<'PY' || fail "twogpu JSON"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
devs = r["devices"]
assert sorted(devs) == ["0", "1"], devs
for d in devs.values():
    missing = [k for k in r if k != "devices" and k not in d]
    assert not missing, missing
assert devs["0"]["capacity_bytes"] == 3 << 30 and devs["1"]["capacity_bytes"] == 2 << 30
assert r["outcome"] == "ok" and devs["1"]["outcome"] == "ok"
assert devs["1"]["peak_reserved_bytes"] == 1335885824, devs["1"]["peak_reserved_bytes"]
assert r["num_device_alloc"] == devs["0"]["num_device_alloc"] + devs["1"]["num_device_alloc"]
PY
    "$gpusim" replay "$tmp/two.gstrace.gz" --format csv -q >"$tmp/two.csv"
    [ "$(tail -n 2 "$tmp/two.csv" | cut -d, -f2 | sort -u)" = pytorch ] &&
        [ "$(awk -F, 'NR > 1 { print $NF }' "$tmp/two.csv" | tr '\n' ' ')" = " 0 1 " ] ||
        fail "twogpu CSV: $(cat "$tmp/two.csv")"
    expect_error "two devices, plots" "has 2 devices" "$gpusim" replay "$tmp/two.gstrace.gz" --plot "$tmp/p2"
    # a sweep of it: a row per cell (the totals), each with its own policy
    "$gpusim" sweep "$tmp/two.gstrace.gz" -p 'pytorch:max_split_size_mb:{64,128}' -j 1 >"$tmp/two-sweep.csv"
    [ "$(wc -l <"$tmp/two-sweep.csv")" -eq 3 ] &&
        [ "$(cut -d, -f4 "$tmp/two-sweep.csv" | tail -n 2 | tr '\n' ' ')" = \
          "pytorch:max_split_size_mb:64 pytorch:max_split_size_mb:128 " ] ||
        fail "sweep of two devices: $(cat "$tmp/two-sweep.csv")"
    # private pools: the rows by pool sum to the result's device calls, stitch's too (its moves
    # unmap a handle to map it elsewhere: no release, so no device free of a row either)
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-h100/graph__default__nocap.pickle.gz" \
        -o "$tmp/graph.gstrace" 2>/dev/null || fail "convert graph"
    # (and a family without private pools, bfc, has no rows: its pool events do nothing)
    "$gpusim" replay -q "$tmp/graph.gstrace" -c 150MiB --continue-on-oom -p pytorch -p stitch \
        -p pytorch:expandable_segments:True -p cupy -p bfc -f json -o "$tmp/graph.json" ||
        fail "replay graph"
    python3 - "$tmp/graph.json" <<'PY' || fail "graph: the rows by pool"
import json, sys
for r in json.load(open(sys.argv[1]))[0]["results"]:
    if r["policy"] == "bfc":
        assert "pools" not in r, r["pools"]
        continue
    for k in ("num_device_alloc", "num_device_free"):
        assert sum(p[k] for p in r["pools"]) == r[k], (r["policy"], k, r[k], r["pools"])
PY
    # a reference is checked against the trace: another set of devices is refused, another
    # recording's name warned of (its cap is applied all the same)
    python3 "$src/traces/convert.py" "$refs/pytorch-2.11-2xh200/twogpu__default__2.5+2.pickle.gz" \
        -o "$tmp/two2.gstrace" --reference "$tmp/two.ref.json" 2>/dev/null || fail "convert twogpu -r"
    expect_error "a two-GPU reference for one GPU's trace" "two.ref.json is of a run of 2 devices, the trace names device 0" \
        "$gpusim" replay -q "$src/traces/data/resnet50.gstrace.gz" -r "$tmp/two.ref.json"
    "$gpusim" replay -q "$src/traces/data/resnet50.gstrace.gz" -r "$tmp/catch.ref.json" \
        >/dev/null 2>"$tmp/err" &&
        grep -q "catch.ref.json is of 'pytorch-snapshot oomcatch__default__2.pickle.gz', the trace of 'pytorch-snapshot resnet50__default__nocap.pickle.gz'" \
            "$tmp/err" || fail "another recording's reference: $(cat "$tmp/err")"
    "$gpusim" replay -q "$tmp/two2.gstrace" -r "$tmp/two.ref.json" >/dev/null 2>"$tmp/err" &&
        [ ! -s "$tmp/err" ] || fail "the two-GPU run's own reference: $(cat "$tmp/err")"
    # whatif: one cap for every device, so devices recorded under different caps are refused
    # unless --capacity names one; a figure a capacity is compared with is the largest device's
    expect_error "whatif, devices' caps differ" "different limits (device 0: 2.5 GiB, 1: 2 GiB)" \
        "$gpusim" whatif -q -j 1 "$refs/pytorch-2.11-2xh200/twogpu__default__2.5+2.pickle.gz"
    "$gpusim" whatif -q -j 1 "$tmp/two.gstrace.gz" --capacity 2GiB -p pytorch >"$tmp/two-w.txt" &&
        grep -q "^  bound, per device (the largest device's): no allocator needs less than 1.127 GiB" \
            "$tmp/two-w.txt" || fail "whatif of two devices: $(cat "$tmp/two-w.txt")"
    "$gpusim" whatif -q -j 1 "$tmp/two.gstrace.gz" --capacity 2GiB -f json >"$tmp/two-w.json"
    python3 - "$tmp/two-w.json" <<'PY' || fail "whatif JSON of two devices"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    # device 1's bound (the larger), not the two devices' sum
    assert r["lower_bound_bytes"] == 1210056704, r
    assert r["lower_bound_bytes"] <= r["min_capacity_bytes"] <= r["peak_reserved_bytes"], r
PY
fi

# --- top user frames: the OOM line names the failed request's frame ---
fr=$src/tests/fuzz/corpus/trace/seed-frames.gstrace
# the oom event that ends the trace (its own frame) at a cap that fits everything else
"$gpusim" replay "$fr" --capacity 1GiB >"$tmp/fr.txt"
grep -q "first OOM at event 4, a request of 8.000 GiB (8589934592 bytes) at train.py:42:forward$" "$tmp/fr.txt" ||
    fail "frames: the oom event's line: $(cat "$tmp/fr.txt")"
# a failing alloc: its frame, in the table and in the JSON
"$gpusim" replay "$fr" --capacity 10MiB >"$tmp/fr.txt"
grep -q "first OOM at event 1, a request of 20.00 MiB (20971520 bytes) at model.py:7:attention$" "$tmp/fr.txt" ||
    fail "frames: the failing alloc's line: $(cat "$tmp/fr.txt")"
"$gpusim" replay "$fr" --capacity 10MiB --format json >"$tmp/fr.json"
python3 - "$tmp/fr.json" "$tmp/r.json" <<'PY' || fail "frames: json"
import json, sys
o = json.load(open(sys.argv[1]))[0]["results"][0]["first_oom"]
assert o["frame"] == "model.py:7:attention", o
# a trace without frames has no frame field
for r in json.load(open(sys.argv[2]))[0]["results"]:
    assert "frame" not in r.get("first_oom", {}), r
PY
# an OOM with no frame (alloc 3 has none) says no 'at'
printf '# gpusim-trace 1\n# frame 1: a.py:1:f\nseq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,512,1\n1,0,alloc,torch,0,0,2,40000000,\n' >"$tmp/fr2.gstrace"
"$gpusim" replay "$tmp/fr2.gstrace" --capacity 10MiB >"$tmp/fr.txt"
grep -q "first OOM at event 1, a request of 38.15 MiB (40000000 bytes)$" "$tmp/fr.txt" ||
    fail "frames: an alloc without a frame: $(cat "$tmp/fr.txt")"
# strict: a frame the header does not declare, a frame on a free, a frame line out of order
printf '# gpusim-trace 1\n# frame 1: a.py:1:f\nseq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,10,2\n' >"$tmp/fb.gstrace"
expect_error "undeclared frame" "fb.gstrace:4: bad frame in column 'frame': 2" "$gpusim" replay "$tmp/fb.gstrace"
printf '# gpusim-trace 1\n# frame 1: a.py:1:f\nseq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,10,1\n1,0,free,torch,0,0,1,10,1\n' >"$tmp/fb.gstrace"
expect_error "frame on a free" "fb.gstrace:5: frame 1 on a 'free' line" "$gpusim" replay "$tmp/fb.gstrace"
printf '# gpusim-trace 1\n# frame 2: a.py:1:f\nseq,time_us,op,client,device,stream,id,size,frame\n' >"$tmp/fb.gstrace"
expect_error "frame out of order" "fb.gstrace:2: bad frame line: expected frame 1, got 2" "$gpusim" replay "$tmp/fb.gstrace"
printf '# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size,frame\n' >"$tmp/fb.gstrace"
expect_error "frame column, no frames" "fb.gstrace:2: column 'frame' without" "$gpusim" replay "$tmp/fb.gstrace"
printf '# gpusim-trace 1\n# frame 1: a.py:1:f\nseq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,10\n' >"$tmp/fb.gstrace"
expect_error "frames, 8 columns" "fb.gstrace:4: expected 9 columns, got 8" "$gpusim" replay "$tmp/fb.gstrace"

# --- PyTorch releases: plain pytorch follows the trace's pytorch_version, else 2.11; a key of a
# newer release is refused before any replay, naming the release that has it ---
rel_trace() { # VERSION: 60 MiB cached, then 80 MiB under a 100 MiB fraction of 1000 MiB
    printf '# gpusim-trace 1\n# device_total_bytes: 1048576000\n%bseq,time_us,op,client,device,stream,id,size\n0,0,alloc,torch,0,0,1,62914560\n1,1,free,torch,0,0,1,0\n2,2,alloc,torch,0,0,2,83886080\n' \
        "${1:+# pytorch_version: $1\n}"
}
rel_trace "2.12.0+cu130" >"$tmp/r12.gstrace"
rel_trace "" >"$tmp/r00.gstrace"
spec=pytorch:per_process_memory_fraction:0.1,throw_on_cudamalloc_oom:True
"$gpusim" replay -q -p "$spec" -p pytorch@2.11:per_process_memory_fraction:0.1 --format csv "$tmp/r12.gstrace" \
    >"$tmp/rel.csv" 2>"$tmp/err" || fail "replay of a 2.12 trace: exit $?: $(cat "$tmp/err")"
grep -q "^[^,]*,\"\?$spec\"\?,.*,oom," "$tmp/rel.csv" && grep -q "pytorch@2.11:per_process_memory_fraction:0.1,.*,ok," "$tmp/rel.csv" ||
    fail "a 2.12 trace: plain pytorch not 2.12, or @2.11 not 2.11: $(cat "$tmp/rel.csv")"
expect_error "a 2.12 key, a trace that names no release" "pytorch@2.12:per_process_memory_fraction" \
    "$gpusim" replay -p "$spec" "$tmp/r00.gstrace"
# (refused alone: its warning about the bound it would set is not said first)
expect_error "a 2.12 key alone, a trace that names no release" "pytorch@2.12:throw_on_cudamalloc_oom:True" \
    "$gpusim" replay -p pytorch:throw_on_cudamalloc_oom:True "$tmp/r00.gstrace"
expect_error "a 2.12 key given to 2.11" "PyTorch 2.12 and later" \
    "$gpusim" replay -p pytorch@2.11:throw_on_cudamalloc_oom:True "$tmp/r00.gstrace"
# the table says which release plain pytorch followed, where it is not 2.11's
"$gpusim" replay -q "$tmp/r12.gstrace" | grep -q "^  recorded with PyTorch 2.12.0+cu130: plain pytorch replays it as 2.12 " &&
    ! "$gpusim" replay -q "$tmp/r00.gstrace" | grep -q "recorded with PyTorch" ||
    fail "the release a 2.12 trace is replayed as: $("$gpusim" replay -q "$tmp/r12.gstrace")"
rel_trace "2.17.0" >"$tmp/r17.gstrace"
"$gpusim" replay -q "$tmp/r17.gstrace" >/dev/null 2>"$tmp/err" || fail "a 2.17 trace: exit $?"
grep -q "recorded with PyTorch 2.17.0; gpusim emulates 2.11 to 2.14, and plain pytorch replays it as 2.14" "$tmp/err" ||
    fail "a 2.17 trace: no warning: $(cat "$tmp/err")"

[ "$fails" -eq 0 ] && echo "all CLI tests passed"
[ "$fails" -eq 0 ]
