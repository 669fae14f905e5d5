#!/bin/sh
# test_binary.sh GPUSIM SRCDIR - the binary trace format end to end: gpusim convert's round trip
# text -> binary -> text is byte-identical on every bundled trace, replays of the two forms give
# the same report, the converter's writer (traces/gsbin.py) writes the bytes gpusim writes, and
# a damaged binary file is one line "FILE: byte N: message", exit 2, nothing written.
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
    "$gpusim" convert "$f" -o "$tmp/$n.gsbin" || fail "$n: convert to binary"
    "$gpusim" convert "$tmp/$n.gsbin" -o "$tmp/$n.back.gstrace" || fail "$n: convert to text"
    cmp -s "$tmp/$n.gstrace" "$tmp/$n.back.gstrace" || fail "$n: text -> binary -> text differs"
    "$gpusim" convert "$tmp/$n.gsbin" -o "$tmp/$n.back.gstrace.gz" || fail "$n: convert to gzip"
    gzip -dc "$tmp/$n.back.gstrace.gz" | cmp -s "$tmp/$n.gstrace" - || fail "$n: binary -> gzip differs"
    python3 -c "import sys; sys.path.insert(0, sys.argv[1]); import gsbin
sys.stdout.buffer.write(gsbin.encode_text(open(sys.argv[2], 'rb').read()))" \
        "$src/traces" "$tmp/$n.gstrace" >"$tmp/$n.py.gsbin" || fail "$n: gsbin.py"
    cmp -s "$tmp/$n.gsbin" "$tmp/$n.py.gsbin" || fail "$n: gsbin.py writes other bytes than gpusim"
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

expect_error "convert without -o" "convert needs -o" "$gpusim" convert "$b"
cp "$b" "$tmp/same.gsbin"
expect_error "convert onto its input" "an input of this run" "$gpusim" convert "$tmp/same.gsbin" -o "$tmp/same.gsbin"
cmp -s "$b" "$tmp/same.gsbin" || fail "convert onto its input changed it"
expect_error "convert of a damaged file" "cut.gsbin: byte" "$gpusim" convert "$tmp/cut.gsbin" -o "$tmp/cut.gstrace"
[ ! -e "$tmp/cut.gstrace" ] || fail "convert of a damaged file wrote its output"

# Top user frames: text round trips byte for byte (plain and gzip); the binary format does
# not carry them, so convert to binary refuses with one line, writing nothing.
fr=$src/tests/fuzz/corpus/trace/seed-frames.gstrace
"$gpusim" convert "$fr" -o "$tmp/fr.gstrace" || fail "frames: convert to text"
cmp -s "$fr" "$tmp/fr.gstrace" || fail "frames: text -> text differs"
"$gpusim" convert "$fr" -o "$tmp/fr.gstrace.gz" || fail "frames: convert to gzip"
"$gpusim" convert "$tmp/fr.gstrace.gz" -o "$tmp/fr2.gstrace" || fail "frames: gzip to text"
cmp -s "$fr" "$tmp/fr2.gstrace" || fail "frames: text -> gzip -> text differs"
expect_error "frames to binary" "does not carry" "$gpusim" convert "$fr" -o "$tmp/fr.gsbin"
[ ! -e "$tmp/fr.gsbin" ] || fail "frames to binary: a file was written"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "ok"
