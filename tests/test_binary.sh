#!/bin/sh
# test_binary.sh GPUSIM SRCDIR - the binary trace format end to end: gpusim convert's round trip
# text -> binary -> text is byte-identical on every bundled trace (--no-bound; without it the
# header gains the offline bound, and nothing else changes), replays of the two forms give the
# same report (the stored bound is the one a replay computes), the converter's writer
# (traces/gsbin.py) writes the bytes gpusim writes, and a damaged binary file is one line
# "FILE: byte N: message", exit 2, nothing written.
set -u
gpusim=$1
src=$2
. "$src/tests/clitest.sh"

"$gpusim" convert --help >"$tmp/h" || fail "convert --help exits non-zero"
for word in .gsbin --lenient Examples "Exit status"; do
    grep -q -- "$word" "$tmp/h" || fail "convert --help lacks '$word'"
done
"$gpusim" help | grep -q "convert TRACE" || fail "help lacks the convert command"

for f in "$src"/traces/data/*.gstrace.gz; do
    n=$(basename "$f" .gstrace.gz)
    gzip -dc "$f" >"$tmp/$n.gstrace"
    "$gpusim" convert --no-bound "$f" -o "$tmp/$n.plain.gsbin" || fail "$n: convert to binary"
    "$gpusim" convert --no-bound "$tmp/$n.plain.gsbin" -o "$tmp/$n.back.gstrace" || fail "$n: convert to text"
    cmp -s "$tmp/$n.gstrace" "$tmp/$n.back.gstrace" || fail "$n: text -> binary -> text differs"
    "$gpusim" convert --no-bound "$tmp/$n.plain.gsbin" -o "$tmp/$n.back.gstrace.gz" || fail "$n: convert to gzip"
    gzip -dc "$tmp/$n.back.gstrace.gz" | cmp -s "$tmp/$n.gstrace" - || fail "$n: binary -> gzip differs"
    # with the bound: the header gains exactly its three entries, before the column line (or
    # keeps the figure, planned again, where the bundled trace has it already without the
    # count of events: gpt2, resnet50)
    "$gpusim" convert "$f" -o "$tmp/$n.gsbin" || fail "$n: convert to binary with the bound"
    "$gpusim" convert --no-bound "$tmp/$n.gsbin" -o "$tmp/$n.bound.gstrace" || fail "$n: bound to text"
    grep -v '^# offline_' "$tmp/$n.gstrace" >"$tmp/$n.nobound"
    grep -v '^# offline_' "$tmp/$n.bound.gstrace" |
        cmp -s "$tmp/$n.nobound" - || fail "$n: convert changed more than the bound's entries"
    if grep -q '^# offline_' "$tmp/$n.gstrace"; then
        [ "$(grep '^# offline_bytes' "$tmp/$n.gstrace")" = \
          "$(grep '^# offline_bytes' "$tmp/$n.bound.gstrace")" ] || fail "$n: its stored bound changed"
    fi
    [ "$(grep -c '^# offline_' "$tmp/$n.bound.gstrace")" = 3 ] || fail "$n: the bound's entries missing"
    python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import gsbin
sys.stdout.buffer.write(gsbin.encode_text(open(sys.argv[2], 'rb').read()))" \
        "$src/traces" "$tmp/$n.gstrace" >"$tmp/$n.py.gsbin" || fail "$n: gsbin.py"
    cmp -s "$tmp/$n.plain.gsbin" "$tmp/$n.py.gsbin" || fail "$n: gsbin.py writes other bytes than gpusim"
    for form in gstrace gsbin; do
        "$gpusim" replay "$tmp/$n.$form" -p pytorch -p pytorch:expandable_segments:True \
            --continue-on-oom --format json -o "$tmp/$n.$form.json" || fail "$n: replay $form"
        sed -e 's/"replay_events_per_s": [0-9]*//' -e "s|$tmp/$n.$form||" \
            "$tmp/$n.$form.json" >"$tmp/$n.$form.cmp"
    done
    cmp -s "$tmp/$n.gstrace.cmp" "$tmp/$n.gsbin.cmp" || fail "$n: reports of text and binary differ"
done

# Damaged binary files: one line naming the file and the byte, exit 2.
b=$tmp/resnet50.gsbin
size=$(wc -c <"$b")
head -c $((size - 5)) "$b" >"$tmp/cut.gsbin"
expect_error "truncated binary" "cut.gsbin: byte" "$gpusim" replay "$tmp/cut.gsbin"
{ cat "$b"; printf 'x'; } >"$tmp/long.gsbin"
expect_error "bytes after the events" "long.gsbin: byte" "$gpusim" replay "$tmp/long.gsbin"
{ head -c 8 "$b"; printf '\002\000\000\000'; tail -c +13 "$b"; } >"$tmp/v2.gsbin"
expect_error "unknown version" "unsupported binary trace version 2" "$gpusim" replay "$tmp/v2.gsbin"
# An event's op byte (the first event's: offset 26 of its record) set to 9.
python3 - "$b" "$tmp/op.gsbin" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack_from("<Q", d, 16)
d[len(d) - 32 * n + 26] = 9
open(sys.argv[2], "wb").write(d)
PY
expect_error "bad op" "event 0: unknown op 9" "$gpusim" replay "$tmp/op.gsbin"
# A free's size changed: the text reader refuses it too.
python3 - "$b" "$tmp/size.gsbin" <<'PY'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
(n,) = struct.unpack_from("<Q", d, 16)
base = len(d) - 32 * n
for i in range(n):
    if d[base + 32 * i + 26] == 1:  # the first free
        struct.pack_into("<Q", d, base + 32 * i + 8, 12345)
        break
open(sys.argv[2], "wb").write(d)
PY
expect_error "free with another size" "with size 12345, allocated with size" "$gpusim" replay "$tmp/size.gsbin"

# -o NAME.gsbin.gz is refused by both writers (it was gzip-compressed text under a binary name);
# a valid name of 251 bytes is written (its temporary file's name is short)
expect_error "convert to .gsbin.gz" "never compressed" "$gpusim" convert "$b" -o "$tmp/x.gsbin.gz"
expect_error "convert.py to .gsbin.gz" "never compressed" python3 "$src/traces/convert.py" \
    "$src/traces/references/pytorch-2.11-h100/oomdie__default__1.5.pickle.gz" -o "$tmp/x.gsbin.gz"
[ -e "$tmp/x.gsbin.gz" ] && fail ".gsbin.gz written"
long=$(printf 'c%.0s' $(seq 245)).gsbin
"$gpusim" convert "$b" -o "$tmp/$long" && cmp -s "$b" "$tmp/$long" || fail "convert -o a 251-byte name"

# Traces read from a pipe (/dev/stdin): nothing lost to the snapshot check's look at the first
# bytes, the same report as from the file; and a header whose counts no file size checks asks
# for memory only as the bytes arrive (it asked GLib for 2 TiB and aborted): exit 2, truncated.
for form in gstrace gsbin; do
    sed -e 's/"replay_events_per_s": [0-9]*//' "$tmp/resnet50.$form.json" >"$tmp/file.cmp"
    cat "$tmp/resnet50.$form" | "$gpusim" replay /dev/stdin -p pytorch -p pytorch:expandable_segments:True \
        --continue-on-oom --format json 2>"$tmp/err" |
        sed -e 's/"replay_events_per_s": [0-9]*//' -e "s|/dev/stdin|$tmp/resnet50.$form|" >"$tmp/pipe.cmp"
    cmp -s "$tmp/file.cmp" "$tmp/pipe.cmp" || fail "$form from a pipe: another report: $(cat "$tmp/err")"
done
python3 -c "import struct, sys
sys.stdout.buffer.write(b'\x89GSBIN\r\n' + struct.pack('<IIQQIIIIQQ', 1, 64, 1 << 36, 0, 0, 0, 0, 32, 0, 0))" >"$tmp/huge.gsbin"
expect_error "2^36 events, from a pipe" "byte 64: truncated binary trace: the file ends in the events" \
    sh -c 'cat "$1" | "$2" replay /dev/stdin' sh "$tmp/huge.gsbin" "$gpusim"
python3 -c "import struct, sys
sys.stdout.buffer.write(b'\x89GSBIN\r\n' + struct.pack('<IIQQIIIIQQ', 1, 64, 0, 0, 1, 0, 0, 32, 1 << 40, 0)
    + struct.pack('<I', 1 << 31))" >"$tmp/hugestr.gsbin"
expect_error "a 2 GiB string, from a pipe" "byte 68: truncated binary trace: the file ends in the strings section" \
    sh -c 'cat "$1" | "$2" replay /dev/stdin' sh "$tmp/hugestr.gsbin" "$gpusim"
expect_error "the same from the file" "the header's counts make" "$gpusim" replay "$tmp/hugestr.gsbin"

# The stored bound is taken only where it is this planner's and possible: a figure below the
# lower bound, or another planner's, is planned again (the same report as the plain text); a
# malformed list is an error naming the header.
r=$src/traces/data/resnet50.gstrace.gz
"$gpusim" replay "$r" --format csv -o "$tmp/r.csv" || fail "replay resnet50"
col() { awk -F, -v k="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == k) c = i }
                         NR == 2 && c { print $c }' "$2"; }
lb=$(col lower_bound_bytes "$tmp/r.csv")
off=$(col offline_bytes "$tmp/r.csv")
[ -n "$lb" ] && [ "$off" != "$lb" ] || fail "resnet50: no lower_bound_bytes, or offline = lower"
for bad in "0=2097152" "0=$lb,gpusim-old"; do
    gzip -dc "$r" | awk -v v="${bad%%,*}" -v p="${bad#*,}" '
        /^seq,/ && !done { if (p == v) p = "gpusim-auto-3"; print "# offline_planner: " p;
                           print "# offline_bytes_by_device: " v; done = 1 } { print }' \
        >"$tmp/lie.gstrace"
    "$gpusim" replay "$tmp/lie.gstrace" --format csv -o "$tmp/lie.csv" || fail "replay of a stored $bad"
    [ "$(col offline_bytes "$tmp/lie.csv")" = "$off" ] || fail "a stored $bad was believed"
done
# ... and one that is possible (here the lower bound itself) is taken as it is.
gzip -dc "$r" | sed "s/^seq,/# offline_planner: gpusim-auto-3\\n# offline_bytes_by_device: 0=$lb\\nseq,/" \
    >"$tmp/kept.gstrace"
"$gpusim" replay "$tmp/kept.gstrace" --format csv -o "$tmp/kept.csv" || fail "replay of a stored bound"
[ "$(col offline_bytes "$tmp/kept.csv")" = "$lb" ] || fail "a possible stored bound was not taken"
gzip -dc "$r" | sed 's/^seq,/# offline_bytes_by_device: zero\nseq,/' >"$tmp/bad.gstrace"
expect_error "malformed stored bound" "offline_bytes_by_device" "$gpusim" replay "$tmp/bad.gstrace"
gzip -dc "$r" | sed 's/^seq,/# offline_events: many\nseq,/' >"$tmp/bad.gstrace"
expect_error "malformed count of the bound's events" "offline_events" "$gpusim" replay "$tmp/bad.gstrace"
# A trace cut from a longer one (head) plans again: the bundled trace's figure, stored before
# offline_events was written, is above every request of the cut side by side; gpusim convert
# writes the count, and a cut of its output plans again too.
head300() { gzip -dcf "$1" | head -n 300; }
for from in "$r" "$tmp/counted.gstrace"; do
    [ "$from" = "$r" ] || "$gpusim" convert "$r" -o "$from" || fail "convert resnet50"
    head300 "$from" >"$tmp/h300.gstrace"
    grep -v '^# offline_' "$tmp/h300.gstrace" >"$tmp/h300-plain.gstrace"
    "$gpusim" replay "$tmp/h300.gstrace" --format csv -o "$tmp/h300.csv" &&
        "$gpusim" replay "$tmp/h300-plain.gstrace" --format csv -o "$tmp/h300-plain.csv" ||
        fail "replay of a cut trace"
    [ "$(col offline_bytes "$tmp/h300.csv")" = "$(col offline_bytes "$tmp/h300-plain.csv")" ] &&
        [ "$(col offline_bytes "$tmp/h300.csv")" != "$off" ] ||
        fail "a cut of $from kept the whole trace's bound: $(col offline_bytes "$tmp/h300.csv")"
done
grep -q "^# offline_events: $(gzip -dc "$r" | grep -c '^[0-9]')$" "$tmp/counted.gstrace" ||
    fail "gpusim convert wrote no count of events: $(head -n 9 "$tmp/counted.gstrace")"
"$gpusim" replay "$tmp/counted.gstrace" --format csv -o "$tmp/counted.csv" &&
    [ "$(col offline_bytes "$tmp/counted.csv")" = "$off" ] || fail "the counted bound was not taken"

expect_error "convert without -o" "convert needs -o" "$gpusim" convert "$b"
cp "$b" "$tmp/same.gsbin"
expect_error "convert onto its input" "an input of this run" "$gpusim" convert "$tmp/same.gsbin" -o "$tmp/same.gsbin"
cmp -s "$b" "$tmp/same.gsbin" || fail "convert onto its input changed it"
expect_error "convert of a damaged file" "cut.gsbin: byte" "$gpusim" convert "$tmp/cut.gsbin" -o "$tmp/cut.gstrace"
[ ! -e "$tmp/cut.gstrace" ] || fail "convert of a damaged file wrote its output"

# Top user frames: text round trips byte for byte (plain and gzip); the binary format does
# not carry them, so convert to binary refuses with one line, writing nothing.
fr=$src/tests/fuzz/corpus/trace/seed-frames.gstrace
"$gpusim" convert --no-bound "$fr" -o "$tmp/fr.gstrace" || fail "frames: convert to text"
cmp -s "$fr" "$tmp/fr.gstrace" || fail "frames: text -> text differs"
"$gpusim" convert --no-bound "$fr" -o "$tmp/fr.gstrace.gz" || fail "frames: convert to gzip"
"$gpusim" convert --no-bound "$tmp/fr.gstrace.gz" -o "$tmp/fr2.gstrace" || fail "frames: gzip to text"
cmp -s "$fr" "$tmp/fr2.gstrace" || fail "frames: text -> gzip -> text differs"
expect_error "frames to binary" "does not carry" "$gpusim" convert "$fr" -o "$tmp/fr.gsbin"
[ ! -e "$tmp/fr.gsbin" ] || fail "frames to binary: a file was written"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
