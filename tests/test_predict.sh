#!/bin/sh
# test_predict.sh GPUSIM SRCDIR - gpusim predict's plumbing without PyTorch: a stand-in capture
# hook (GPUSIM_CAPTURE_HOOK) that writes, with the capture's own trace writer
# (torch/capture/gpusim_capture/events.py), the requests an unmodified program of ours names.
# Checked: the program runs with the GPUs visible as they were and the device's size it was
# given; the verdict
# is whatif's on the captured trace, marked as a prediction in every format; --trace keeps the
# trace, else nothing is left behind; a program that fails or writes no capture is no
# prediction. The capture itself (fake tensors, real PyTorch) is tests/test_capture.py's, run
# where PyTorch is installed, and lab/device_predict.sh measures it against real runs.
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac
src=$2
. "$src/tests/clitest.sh"

mkdir "$tmp/hook" "$tmp/scratch"
cat >"$tmp/hook/sitecustomize.py" <<'PY'
import atexit, os, sys
out = os.environ.pop("GPUSIM_CAPTURE_OUT", None)
if out:
    sys.path.insert(0, os.path.join(os.environ["SRC"], "torch", "capture"))
    from gpusim_capture import events as ev
    seen = {"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "total": os.environ.get("GPUSIM_CAPTURE_DEVICE_TOTAL")}
    rec = ev.Events()
    sys.modules["capture_events"] = rec   # the program asks through it, as tensors would

    def finish():
        head = [("source", "stand-in capture"), ("allocator_conf", ""),
                ("captured", "gpusim-capture 1; stand-in; no GPU memory used"),
                ("capture_unknown", "values read back (stand-in 0): 2"),
                ("seen", f"{seen['cuda']!r} {seen['total']}")]
        ev.write_trace(out, rec, head)
    atexit.register(finish)
PY
# the program: a model of 1 GiB kept, then steps of 3 x 1 GiB of activations freed in turn, one
# of them from a side stream whose free waits (record_stream); an exit status of its own
cat >"$tmp/prog.py" <<'PY'
import sys
rec = sys.modules["capture_events"]
G = 1 << 30
model = rec.alloc(0, 0, G)
for step in range(3):
    acts = [rec.alloc(0, 0, G) for _ in range(3)]
    side = rec.alloc(0, 7, G // 2)
    for a in reversed(acts):
        rec.free(a)
    rec.free(side, deferred=True)
rec.empty_cache(0)
print("program ran")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
PY
export SRC="$src" GPUSIM_CAPTURE_HOOK="$tmp/hook" TMPDIR="$tmp/scratch" CUDA_VISIBLE_DEVICES=3

# the verdict, with the trace kept; the program's output on stderr
"$gpusim" predict --capacity 6GiB --device-total 16GiB --trace "$tmp/cap.gstrace" -- \
    python3 "$tmp/prog.py" >"$tmp/out" 2>"$tmp/err" || fail "predict: exit $?: $(cat "$tmp/err")"
grep -q "^Predicted from a CPU capture: " "$tmp/out" || fail "predict: the verdict is marked: $(cat "$tmp/out")"
grep -q "a prediction: the requests were captured on the CPU (gpusim-capture 1; stand-in" "$tmp/out" ||
    fail "predict: the caveat line: $(cat "$tmp/out")"
grep -q "not known to the capture: values read back (stand-in 0): 2" "$tmp/out" || fail "predict: the unknowns: $(cat "$tmp/out")"
grep -q "program ran" "$tmp/err" || fail "predict: the program's output goes to stderr: $(cat "$tmp/err")"
grep -q "program ran" "$tmp/out" && fail "predict: the program's output is not the report"
grep -q "^# seen: '3' 17179869184$" "$tmp/cap.gstrace" || fail "predict: the program sees the GPUs as they are, told of 16 GiB: $(grep seen "$tmp/cap.gstrace")"
# the kept trace is a trace: 4 GiB live at the peak, the deferred frees completed
"$gpusim" replay "$tmp/cap.gstrace" --format json -o "$tmp/r.json" 2>"$tmp/err" || fail "replay of the capture: $(cat "$tmp/err")"
python3 - "$tmp/r.json" <<'PY' || fail "replay of the capture: its numbers"
import json, sys
r = json.load(open(sys.argv[1]))[0]["results"][0]
assert r["outcome"] == "ok", r
assert r["peak_allocated_bytes"] == 4 * 2**30 + 2**29, r
PY
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind: $(ls "$tmp/scratch")"

# JSON: the verdict says where it comes from; without --trace nothing is left behind
"$gpusim" predict -q --capacity 6GiB --format json -o "$tmp/v.json" -- python3 "$tmp/prog.py" \
    2>"$tmp/err" || fail "predict --format json: exit $?: $(cat "$tmp/err")"
python3 - "$tmp/v.json" <<'PY' || fail "predict --format json: the verdict"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["captured"].startswith("gpusim-capture 1"), v
assert v["capture_unknown"] == "values read back (stand-in 0): 2", v
assert v["recommendation"].startswith("Predicted from a CPU capture: "), v
assert {r["policy"] for r in v["results"]} >= {"pytorch", "pytorch:expandable_segments:True"}, v
PY
grep -q "capturing" "$tmp/err" && fail "predict -q: still says what it does: $(cat "$tmp/err")"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind: $(ls "$tmp/scratch")"

# a program that fails under the capture is no prediction: exit 2, its status named
"$gpusim" predict -- python3 "$tmp/prog.py" 5 >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "predict of a failing program: exit $rc, want 2"
grep -q "failed under the capture (exit status 5" "$tmp/err" || fail "predict of a failing program: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "predict of a failing program: wrote a verdict"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind after a failure: $(ls "$tmp/scratch")"
# one that is no Python program under the hook writes no capture
"$gpusim" predict -- true >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] || fail "predict of a program that writes no capture: exit 2 wanted"
grep -q "wrote no capture" "$tmp/err" || fail "predict of a program with no capture: $(cat "$tmp/err")"
# A probe that kills the program (probe.py names the operator in the mark file while it runs
# it): the capture runs again without probing that operator, at most 4 times; a name that is no
# operator's is not trusted. The stand-in dies probing "aten.opN.default" while fewer than
# $CRASHES operators are skipped.
mkdir "$tmp/crashhook"
cat >"$tmp/crashhook/sitecustomize.py" <<'PY'
import os, signal, sys
out = os.environ.pop("GPUSIM_CAPTURE_OUT", None)
if out:
    sys.path.insert(0, os.path.join(os.environ["SRC"], "torch", "capture"))
    from gpusim_capture import events as ev
    mark = os.environ.get("GPUSIM_CAPTURE_PROBE_MARK")
    skip = [s for s in os.environ.get("GPUSIM_CAPTURE_PROBE_SKIP", "").split(",") if s]
    if mark and len(skip) < int(os.environ["CRASHES"]):
        with open(mark, "w") as f:
            f.write(os.environ.get("OPNAME", "aten.op%d.default") % len(skip) + "\n")
        os.kill(os.getpid(), signal.SIGSEGV)
    rec = ev.Events()
    rec.alloc(0, 0, 1 << 20)
    ev.write_trace(out, rec, [("source", "stand-in"), ("allocator_conf", ""),
                              ("captured", "gpusim-capture 1; stand-in"),
                              ("skipped", ",".join(skip) or "none"),
                              ("probe", os.environ.get("GPUSIM_CAPTURE_PROBE", "on"))])
PY
cat >"$tmp/small.py" <<'PY'
print("small program ran")
PY
crash() { # CRASHES [OPTIONS]: predict with the crashing stand-in; output in $tmp/out, $tmp/err
    n=$1; shift
    CRASHES=$n GPUSIM_CAPTURE_HOOK="$tmp/crashhook" "$gpusim" predict --capacity 1GiB \
        --trace "$tmp/crash.gstrace" "$@" -- python3 "$tmp/small.py" >"$tmp/out" 2>"$tmp/err"
}
crash 2 || fail "predict, two probes that kill the program: exit $?: $(cat "$tmp/err")"
[ "$(grep -c "while aten.op[01].default was probed on the device: capturing again without probing it" "$tmp/err")" -eq 2 ] ||
    fail "predict, probes that kill: each rerun said: $(cat "$tmp/err")"
grep -q "died (signal 11)" "$tmp/err" || fail "predict, probes that kill: the signal named: $(cat "$tmp/err")"
grep -q "^# skipped: aten.op0.default,aten.op1.default$" "$tmp/crash.gstrace" ||
    fail "predict, probes that kill: both operators skipped in the last run: $(grep skipped "$tmp/crash.gstrace")"
grep -q "^Predicted from a CPU capture: " "$tmp/out" || fail "predict after reruns: a verdict: $(cat "$tmp/out")"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: the probe's mark left behind: $(ls "$tmp/scratch")"
# at most 4 reruns: the fifth death is the program's
crash 9
[ $? -eq 2 ] || fail "predict, a probe that always kills: exit 2 wanted"
[ "$(grep -c "capturing again" "$tmp/err")" -eq 4 ] || fail "predict: 4 reruns at most: $(cat "$tmp/err")"
grep -q "was killed by signal 11" "$tmp/err" || fail "predict: the last death reported: $(cat "$tmp/err")"
# a mark that is no operator's name is not put back into the environment
OPNAME='aten.x;rm -rf ~ %d' crash 1
[ $? -eq 2 ] || fail "predict, a mark that is no operator's: no rerun, exit 2"
grep -q "capturing again" "$tmp/err" && fail "predict: a rerun on a mark that is no operator's: $(cat "$tmp/err")"
# --no-probe: the capture is told, and has no mark to write
crash 1 --no-probe || fail "predict --no-probe: exit $?: $(cat "$tmp/err")"
grep -q "^# probe: 0$" "$tmp/crash.gstrace" || fail "predict --no-probe: the capture told: $(grep probe "$tmp/crash.gstrace")"
grep -q "no GPU memory used" "$tmp/err" || fail "predict --no-probe: says none of the device is used: $(cat "$tmp/err")"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind: $(ls "$tmp/scratch")"

# --trace FILE is written only from a capture that succeeded, by the rule of every output: a
# failed capture leaves FILE as it was (it was unlinked before, link, FIFO and device alike), and
# a link is written through
printf 'precious\n' >"$tmp/keep.gstrace"
ln -s keep.gstrace "$tmp/link.gstrace"
mkfifo "$tmp/fifo.gstrace"
for f in keep.gstrace link.gstrace fifo.gstrace; do
    "$gpusim" predict --trace "$tmp/$f" -- true >/dev/null 2>&1
    [ $? -eq 2 ] || fail "predict --trace $f, a capture that fails: exit 2 wanted"
done
[ "$(cat "$tmp/keep.gstrace")" = precious ] || fail "predict --trace: a failed capture changed FILE"
[ -L "$tmp/link.gstrace" ] || fail "predict --trace: a failed capture removed the link"
[ -p "$tmp/fifo.gstrace" ] || fail "predict --trace: a failed capture removed the FIFO"
"$gpusim" predict -q --capacity 6GiB --trace "$tmp/link.gstrace" -- python3 "$tmp/prog.py" \
    >/dev/null 2>"$tmp/err" || fail "predict --trace LINK: exit $?: $(cat "$tmp/err")"
[ -L "$tmp/link.gstrace" ] && grep -q "^# seen: " "$tmp/keep.gstrace" ||
    fail "predict --trace LINK: the trace written through the link"
"$gpusim" predict -q --capacity 6GiB --trace "$tmp/cap.gstrace.gz" -- python3 "$tmp/prog.py" \
    >/dev/null 2>"$tmp/err" || fail "predict --trace F.gz: exit $?: $(cat "$tmp/err")"
gzip -dc "$tmp/cap.gstrace.gz" | grep -q "^# seen: " || fail "predict --trace F.gz: a compressed trace"
# A Ctrl-C (SIGINT to the process group, as a terminal sends it) while the program runs ends
# the program, then gpusim, by the signal, with nothing left in TMPDIR
printf 'import time\ntime.sleep(60)\n' >"$tmp/slow.py"
python3 "$src/tests/interrupt.py" "$gpusim" predict -- python3 "$tmp/slow.py" ||
    fail "predict, interrupted"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind by a Ctrl-C: $(ls "$tmp/scratch")"
# ... and one that comes while --trace's FIFO waits for a reader, predict's stop signals held
# (it waited for ever: only SIGKILL ended it, its temporary folder left)
mkfifo "$tmp/noreader.gstrace"
python3 "$src/tests/interrupt.py" "$gpusim" predict -q --capacity 6GiB --trace "$tmp/noreader.gstrace" -- \
    python3 "$tmp/prog.py" || fail "predict --trace FIFO with no reader, interrupted"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind by a Ctrl-C at the FIFO: $(ls "$tmp/scratch")"
# ... and a program that catches it and exits 0: no verdict is drawn after the interrupt (it was
# drawn whole, and with --verify would have run the program on the GPU again)
printf 'import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    pass\n' >"$tmp/catches.py"
python3 "$src/tests/interrupt.py" --no-output "$gpusim" predict --capacity 6GiB -- python3 "$tmp/catches.py" ||
    fail "predict, a Ctrl-C the program caught"
[ -z "$(ls "$tmp/scratch")" ] || fail "predict: left behind by a caught Ctrl-C: $(ls "$tmp/scratch")"
# the verdict names the trace kept, not the capture's temporary file; and -o is not that file
"$gpusim" predict -q --capacity 6GiB --trace "$tmp/named.gstrace" -- python3 "$tmp/prog.py" >"$tmp/out" 2>/dev/null ||
    fail "predict --trace: exit $?"
grep -q "^whatif $tmp/named.gstrace: " "$tmp/out" || fail "predict --trace: the verdict names $(head -1 "$tmp/out")"
expect_error "predict --trace F -o F" "predict: --trace $tmp/same.gstrace and -o $tmp/same.gstrace are one file" \
    "$gpusim" predict --trace "$tmp/same.gstrace" -o "$tmp/same.gstrace" -- sh -c "touch $tmp/ran"
[ ! -e "$tmp/ran" ] && [ ! -e "$tmp/same.gstrace" ] || fail "predict --trace F -o F: the program ran"

# usage
expect_error "predict with no program" "give the program after --" "$gpusim" predict --capacity 1GiB
expect_error "predict with -- and nothing after" "give the program after --" "$gpusim" predict --
expect_error "predict --device-total junk" "predict: --device-total" "$gpusim" predict --device-total x -- true
expect_error "predict --trace with no value" "--trace needs a value" "$gpusim" predict --trace -- true
# whatif's options are checked before the program is captured (which takes minutes and the
# GPU): each a usage error at once, the program never started (no "capturing" line)
for bad in "--capacity banana" "-p pytorch:nonsense:1" "--format xml" "--bogus" \
           "-o $tmp/no/x.json" "--trace $tmp/no/x.gstrace"; do
    # shellcheck disable=SC2086
    expect_error "predict $bad" "" "$gpusim" predict $bad -- sh -c "touch $tmp/ran"
    [ ! -e "$tmp/ran" ] || fail "predict $bad: the program ran"
done
"$gpusim" predict --help | grep -q "^usage: gpusim predict" || fail "predict --help"
"$gpusim" help | grep -q "predict -- CMD" || fail "gpusim help names predict"
[ "$fails" -eq 0 ] || exit 1
echo "test_predict: ok"
