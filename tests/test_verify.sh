#!/bin/sh
# test_verify.sh GPUSIM SRCDIR - gpusim verify's plumbing without a GPU: a stand-in `torch`
# package (tests/data/faketorch: the few calls the start-up hook makes, and an allocator that
# fails above the memory fraction) under an unmodified program of ours. Checked: the setting
# reaches the program as PYTORCH_CUDA_ALLOC_CONF and the cap as a memory fraction; its outcome
# and statistics come back; each verdict against a whatif prediction (agrees, differs, a dying
# trace's "survived"); the program's own children and sitecustomize; usage errors. The real
# check, on a GPU with real PyTorch, is lab/device_verify.sh (BENCHMARKS.md).
set -u
gpusim=$1
case $gpusim in /*) ;; *) gpusim=$PWD/$gpusim ;; esac
src=$2
. "$src/tests/clitest.sh"

fake=$src/tests/data/faketorch
# the program: asks for 10 GiB under the default, 8 GiB under expandable segments (as a run
# whose fragmentation expandable segments save); its child must not see the hook's variables
cat >"$tmp/prog.py" <<'PY'
import os, subprocess, sys
import torch
conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
need = 8 << 30 if "expandable_segments:True" in conf else 10 << 30
print("program: conf", repr(conf))
child = subprocess.run([sys.executable, "-c",
                        "import os; print(os.environ.get('GPUSIM_VERIFY_OUT'))"],
                       capture_output=True, text=True).stdout.strip()
assert child == "None", child
torch.cuda.fake_alloc(need)
PY
PY_PATH=$fake
export PYTHONPATH=$PY_PATH

# no prediction: the runs alone, the program's output on stderr
"$gpusim" verify --capacity 9GiB -p pytorch -p pytorch:expandable_segments:True -- \
    python3 "$tmp/prog.py" >"$tmp/out" 2>"$tmp/err" || fail "verify: exit $?: $(cat "$tmp/err")"
grep -q "^pytorch  *oom " "$tmp/out" || fail "verify: the default dies at 9 GiB: $(cat "$tmp/out")"
grep -q "^pytorch:expandable_segments:True  *ok " "$tmp/out" || fail "verify: expandable completes: $(cat "$tmp/out")"
grep -q "program: conf 'expandable_segments:True'" "$tmp/err" || fail "verify: the program's output: $(cat "$tmp/err")"
grep -q "died of OutOfMemoryError" "$tmp/out" || fail "verify: says what it died of: $(cat "$tmp/out")"
# a setting that names its release: the run gets its keys alone
"$gpusim" verify --capacity 9GiB -p pytorch@2.11:expandable_segments:True -- \
    python3 "$tmp/prog.py" >"$tmp/out" 2>"$tmp/err" || fail "verify @2.11: exit $?: $(cat "$tmp/err")"
grep -q "^pytorch@2.11:expandable_segments:True  *ok " "$tmp/out" && grep -q "program: conf 'expandable_segments:True'" "$tmp/err" ||
    fail "verify @2.11: $(cat "$tmp/out" "$tmp/err")"

# a prediction that holds (exit 0) and one that does not (exit 3), as JSON
cat >"$tmp/pred.json" <<'JSON'
{"trace": "t", "capacity_bytes": 9663676416, "results": [
 {"policy": "pytorch:expandable_segments:True", "outcome": "ok", "retries": 0, "peak_reserved_bytes": 8589934592, "min_capacity_is_lower_bound": false},
 {"policy": "pytorch", "outcome": "oom", "retries": 2, "peak_reserved_bytes": 9000000000, "min_capacity_is_lower_bound": false},
 {"policy": "cupy", "outcome": "ok", "retries": 0, "peak_reserved_bytes": 1, "min_capacity_is_lower_bound": false}]}
JSON
"$gpusim" verify --prediction "$tmp/pred.json" --format json -o "$tmp/v.json" -- python3 "$tmp/prog.py" 2>/dev/null ||
    fail "verify --prediction: exit $?"
python3 - "$tmp/v.json" <<'PY' || fail "verify --prediction: the verdicts"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["capacity_bytes"] == 9663676416, v            # the prediction's cap
runs = {r["policy"]: r for r in v["runs"]}
assert set(runs) == {"pytorch", "pytorch:expandable_segments:True"}, runs   # cupy is no PyTorch
e = runs["pytorch:expandable_segments:True"]
assert e["outcome"] == "ok" and e["verdict"] == "agrees" and e["peak_reserved_bytes"] == 8 << 30, e
assert e["limit_bytes"] == 9663676416, e          # the fraction PyTorch enforces: the cap itself
d = runs["pytorch"]
assert d["outcome"] == "oom" and d["verdict"] == "agrees" and d["num_ooms"] == 1, d
PY
sed 's/"pytorch", "outcome": "oom"/"pytorch", "outcome": "ok"/' "$tmp/pred.json" >"$tmp/wrong.json"
"$gpusim" verify --prediction "$tmp/wrong.json" -p pytorch -- python3 "$tmp/prog.py" >"$tmp/out" 2>/dev/null
[ $? -eq 3 ] || fail "verify: a wrong prediction is exit 3"
grep -q "differs: died" "$tmp/out" || fail "verify: says how it differs: $(cat "$tmp/out")"
# a dying trace's prediction: survived, then the program dies later (more memory after the
# recorded death): shown as such
sed 's/"pytorch", "outcome": "oom", "retries": 2, "peak_reserved_bytes": 9000000000, "min_capacity_is_lower_bound": false/"pytorch", "outcome": "survived", "retries": 2, "peak_reserved_bytes": 9000000000, "min_capacity_is_lower_bound": true/' \
    "$tmp/pred.json" >"$tmp/dying.json"
"$gpusim" verify --prediction "$tmp/dying.json" -- python3 "$tmp/prog.py" >"$tmp/out" 2>/dev/null
[ $? -eq 3 ] || fail "verify: a dying prediction that the program outlives is exit 3"
grep -q "^pytorch .*differs: died after the recorded death" "$tmp/out" || fail "verify, dying: $(cat "$tmp/out")"
grep -q "^pytorch:expandable_segments:True .*| agrees$" "$tmp/out" || fail "verify, dying: $(cat "$tmp/out")"

# a run that measured nothing is no agreement: a Python without torch (the hook cannot set the
# cap: the program is not run at all), and a program that never used CUDA (no statistics);
# both printed "ok ... agrees" before
printf 'print("program ran")\n' >"$tmp/nocuda.py"
PYTHONPATH= "$gpusim" verify --prediction "$tmp/pred.json" -p pytorch -- python3 "$tmp/nocuda.py" \
    >"$tmp/out" 2>"$tmp/err"
[ $? -eq 3 ] || fail "verify without torch: exit 3 (unmeasured)"
grep -q "^pytorch  *error .*| unmeasured: the cap was not set$" "$tmp/out" &&
    grep -q "pytorch: cannot set the cap: ModuleNotFoundError: No module named 'torch' (the program was not run)" "$tmp/out" ||
    fail "verify without torch: $(cat "$tmp/out")"
! grep -q "program ran" "$tmp/err" || fail "verify without torch: the program ran without its cap"
sed 's/"capacity_bytes": 9663676416/"capacity_bytes": null/' "$tmp/pred.json" >"$tmp/nocap.json"
"$gpusim" verify --prediction "$tmp/nocap.json" -p pytorch:expandable_segments:True -f json \
    -o "$tmp/nc.json" -- python3 "$tmp/nocuda.py" 2>/dev/null
[ $? -eq 3 ] || fail "verify of a program that used no CUDA: exit 3 (unmeasured)"
python3 - "$tmp/nc.json" <<'PY' || fail "verify of a program that used no CUDA: $(cat "$tmp/nc.json")"
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
assert r["outcome"] == "ok" and r["peak_reserved_bytes"] is None and r["hook_error"] is None, r
assert r["verdict"] == "unmeasured: PyTorch used no CUDA memory", r
PY

# whatif --verify: the verdict, then the recorded setting and the two best others run for real
# at its cap (here the program needs more than the verdict's trace: every verdict differs)
"$gpusim" whatif "$src/traces/data/resnet50.gstrace.gz" --capacity 5.75GiB --verify -- \
    python3 "$tmp/prog.py" >"$tmp/out" 2>/dev/null
[ $? -eq 3 ] || fail "whatif --verify: exit 3 when a run differs"
grep -q "^The recorded setting (pytorch) completes" "$tmp/out" || fail "whatif --verify: the verdict first: $(cat "$tmp/out")"
grep -q "^verify python3 .*: 3 settings, at the cap of 5.75 GiB (the verdict's)" "$tmp/out" ||
    fail "whatif --verify: the runs: $(cat "$tmp/out")"
grep -q "^pytorch  *oom .*| ok  .*| differs: died" "$tmp/out" || fail "whatif --verify: $(cat "$tmp/out")"
grep -q "^pytorch:expandable_segments:True  *oom " "$tmp/out" || fail "whatif --verify: the best other: $(cat "$tmp/out")"
expect_error "whatif --verify without a program" "--verify runs your program" \
    "$gpusim" whatif "$src/traces/data/resnet50.gstrace.gz" --verify

# a sitecustomize of the program's own still runs
mkdir -p "$tmp/own"
echo 'import os; os.environ["OWN_SITE"] = "1"' >"$tmp/own/sitecustomize.py"
cat >"$tmp/own.py" <<'PY'
import os
assert os.environ.get("OWN_SITE") == "1", "the user's sitecustomize did not run"
PY
PYTHONPATH=$fake:$tmp/own "$gpusim" verify -- python3 "$tmp/own.py" >"$tmp/out" 2>"$tmp/err" ||
    fail "verify: the user's sitecustomize: $(cat "$tmp/err")"
grep -q "^pytorch  *ok " "$tmp/out" || fail "verify: the user's sitecustomize: $(cat "$tmp/out")"

# a program that fails is no success, whatever it reported: sys.exit(3), a script that is not
# there (Python's own exit 2), a signal (the out-of-memory killer's SIGKILL among them)
printf 'import sys, torch\ntorch.cuda.fake_alloc(1 << 20)\nsys.exit(3)\n' >"$tmp/exit3.py"
printf 'import os, signal, torch\ntorch.cuda.fake_alloc(1 << 20)\nos.kill(os.getpid(), signal.SIGKILL)\n' >"$tmp/killed.py"
for prog in exit3.py not-there.py killed.py; do
    "$gpusim" verify -q -- python3 "$tmp/$prog" >"$tmp/out" 2>/dev/null || fail "verify $prog: exit $?"
    grep -q "^pytorch  *error " "$tmp/out" || fail "verify $prog: not an error: $(cat "$tmp/out")"
done
"$gpusim" verify -q -- python3 "$tmp/killed.py" 2>/dev/null | grep -q "killed by signal 9" ||
    fail "verify: the signal is not named"
"$gpusim" verify -q --prediction "$tmp/pred.json" -p pytorch -- python3 "$tmp/exit3.py" >"$tmp/out" 2>/dev/null
[ $? -eq 3 ] && grep -q "differs (the run failed otherwise)" "$tmp/out" || fail "verify: a failed run agrees: $(cat "$tmp/out")"
# what verify is given is checked before anything runs
echo '{"results": []}' >"$tmp/empty.json"
expect_error "verify, a verdict of nothing" "not a gpusim whatif verdict" \
    "$gpusim" verify --prediction "$tmp/empty.json" -- true
echo garbage >"$tmp/garbage.txt"
expect_error "verify, a prediction that is neither" "neither a whatif verdict (JSON) nor a gpusim trace" \
    "$gpusim" verify --prediction "$tmp/garbage.txt" -- true
expect_error "verify, an unknown key" "unknown key 'bogus'" "$gpusim" verify -p pytorch:bogus:1 -- true
expect_error "verify, --format csv" "csv" "$gpusim" verify -f csv -- true

# a program that is no Python program: no report, said so
"$gpusim" verify -- true >"$tmp/out" 2>&1 || fail "verify true: exit $?"
grep -q "no report from the program (exit 0)" "$tmp/out" || fail "verify true: $(cat "$tmp/out")"

# a Ctrl-C while the program runs (SIGINT to the process group): the program ends, then
# gpusim by the signal, with its report folder removed
mkdir "$tmp/scratch"
printf 'import time\ntime.sleep(60)\n' >"$tmp/slow.py"
TMPDIR="$tmp/scratch" python3 "$src/tests/interrupt.py" "$gpusim" verify -- python3 "$tmp/slow.py" ||
    fail "verify, interrupted"
TMPDIR="$tmp/scratch" python3 "$src/tests/interrupt.py" "$gpusim" whatif "$src/traces/data/gpt2.gstrace.gz" \
    --capacity 20GiB -p pytorch --verify -- python3 "$tmp/slow.py" || fail "whatif --verify, interrupted"
[ -z "$(ls "$tmp/scratch")" ] || fail "verify: left behind by a Ctrl-C: $(ls "$tmp/scratch")"

expect_error "verify, no command" "no -- CMD given" "$gpusim" verify
expect_error "verify, no PyTorch setting" "verify runs PyTorch's own allocator" \
    "$gpusim" verify -p cupy -- true
expect_error "verify, a missing program" "cannot run" "$gpusim" verify -- "$tmp/not-there"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "verify: all passed"
