#!/bin/sh
# lab/device_verify.sh GPUSIM OUTDIR - on a GPU machine (the project's `device` tool): whatif's
# verdicts from recordings made as users make them, each checked with gpusim verify against the
# real program (lab/verify_prog.py: training with varying shapes whose batches grow).
#
#   D  the whole program recorded uncapped; whatif at a cap C between the least minimum of the
#      settings verified and the default's (a run a setting saves); verify at C under five
#   A  the run dies under a memory fraction at a cap F below the default's minimum, its
#      snapshot dumped by the README's OOM observer, no NAME.json: whatif must refuse without
#      --capacity (it cannot know the fraction) and, given F, say the recorded setting fails;
#      verify at F shows which "survived" settings die after the recorded death
#   B  the same death dumped after `except torch.OutOfMemoryError` (the unwinding follows)
#   E  the device full: CuPy holds all but H GiB, no cap; whatif takes the limit from the
#      snapshot alone; verify of the same program (CuPy holding the same) under three settings
#
# GPUSIM: a gpusim built here (with its GLib beside it: LD_LIBRARY_PATH). Everything goes to
# OUTDIR (logs, verdicts, verifications, tables); results.txt sums it up. The caps come from the
# uncapped run's minima, so the script picks them on any GPU.
usage="usage: device_verify.sh GPUSIM OUTDIR"
. "$(dirname "$0")/verify_setup.sh"
prog="$root/lab/verify_prog.py"
settings="-p pytorch -p pytorch:expandable_segments:True -p pytorch:max_split_size_mb:64 -p pytorch:max_split_size_mb:128 -p pytorch:garbage_collection_threshold:0.8"
res=$out/results.txt
total=$(python3 -c 'import torch; print(torch.cuda.get_device_properties(0).total_memory)')

# D: the whole program, uncapped
python3 "$prog" --record whole --snapshot "$out/whole.pickle" >"$out/D-record.log" 2>&1
"$G" whatif "$out/whole.pickle" -q --format json -o "$out/D-nocap.json" 2>>"$out/errors.log"
"$G" whatif "$out/whole.pickle" -q >"$out/D-nocap.txt" 2>>"$out/errors.log"
# C: midway between expandable's minimum and the default's; F: 5% below the default's
eval "$(python3 - "$out/D-nocap.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
m = {r["policy"]: r["min_capacity_bytes"] for r in v["results"]}
d, e = m["pytorch"], m["pytorch:expandable_segments:True"]
mib = 1 << 20
# C: midway between the least minimum of the settings verified and the default's, where one
# saves the run; else just below the default's
mine = ("pytorch:expandable_segments:True", "pytorch:max_split_size_mb:64",
        "pytorch:max_split_size_mb:128", "pytorch:garbage_collection_threshold:0.8")
best = min(m[p] for p in mine)
c = (best + d) // 2 // mib * mib if best < d - 8 * mib else d - 64 * mib
print(f"C={c} F={int(d * 0.95) // mib * mib} DMIN={d} EMIN={e} BEST={best}")
PY
)"
echo "uncapped minima: default $DMIN, expandable $EMIN, least $BEST; C=$C F=$F total=$total" >>"$res"
"$G" whatif "$out/whole.pickle" -q --capacity "$C" --format json -o "$out/D-verdict.json" 2>>"$out/errors.log"
"$G" whatif "$out/whole.pickle" -q --capacity "$C" >"$out/D-verdict.txt" 2>>"$out/errors.log"
# shellcheck disable=SC2086
"$G" verify -q --prediction "$out/D-verdict.json" $settings -- python3 "$prog" \
    >"$out/D-verify.txt" 2>"$out/D-verify.log"
echo "D verify exit $?" >>"$res"
# shellcheck disable=SC2086
"$G" verify -q --prediction "$out/D-verdict.json" $settings --format json -o "$out/D-verify.json" \
    -- python3 "$prog" 2>>"$out/D-verify.log"

# A: dies under a memory fraction, the README's OOM observer
fgib=$(python3 -c "print($F / 2**30)")
python3 "$prog" --fraction-gib "$fgib" --record observer --snapshot "$out/A.pickle" >"$out/A-record.log" 2>&1
echo "A record exit $? (1: died)" >>"$res"
L=$(python3 -c "print(int($fgib * 2**30 / $total * $total))")
"$G" whatif "$out/A.pickle" -q >"$out/A-nocap.txt" 2>"$out/A-nocap.err"
echo "A whatif without --capacity: exit $? $(cat "$out/A-nocap.err")" >>"$res"
"$G" whatif "$out/A.pickle" -q --capacity "$L" --format json -o "$out/A-verdict.json" 2>>"$out/errors.log"
"$G" whatif "$out/A.pickle" -q --capacity "$L" >"$out/A-verdict.txt" 2>>"$out/errors.log"
# shellcheck disable=SC2086
"$G" verify -q --prediction "$out/A-verdict.json" $settings --format json -o "$out/A-verify.json" \
    -- python3 "$prog" 2>"$out/A-verify.log"
echo "A verify exit $?" >>"$res"

# B: the same death, dumped after `except`
python3 "$prog" --fraction-gib "$fgib" --record except --snapshot "$out/B.pickle" >"$out/B-record.log" 2>&1
echo "B record exit $?" >>"$res"
"$G" whatif "$out/B.pickle" -q --capacity "$L" --format json -o "$out/B-verdict.json" 2>>"$out/errors.log"
"$G" whatif "$out/B.pickle" -q --capacity "$L" >"$out/B-verdict.txt" 2>"$out/B-whatif.err"

# E: the device full, another library (CuPy) holding all but F of it
hgib=$fgib
python3 "$prog" --hold-free-gib "$hgib" --record observer --snapshot "$out/E.pickle" >"$out/E-record.log" 2>&1
echo "E record exit $?" >>"$res"
"$G" whatif "$out/E.pickle" -q --format json -o "$out/E-verdict.json" 2>>"$out/errors.log"
"$G" whatif "$out/E.pickle" -q >"$out/E-verdict.txt" 2>>"$out/errors.log"
"$G" verify -q --prediction "$out/E-verdict.json" -p pytorch -p pytorch:expandable_segments:True \
    -p pytorch:max_split_size_mb:128 --format json -o "$out/E-verify.json" \
    -- python3 "$prog" --hold-free-gib "$hgib" 2>"$out/E-verify.log"
echo "E verify exit $?" >>"$res"

# the table: each case's verdict for the recorded setting, and verify's agreement
python3 - "$out" >>"$res" <<'PY'
import json, os, sys
o = sys.argv[1]
def load(n):
    p = os.path.join(o, n)
    return json.load(open(p)) if os.path.exists(p) else None
for case in "DABE":
    v = load(f"{case}-verdict.json")
    if not v:
        print(case, "no verdict"); continue
    rec = [r for r in v["results"] if r["recorded"]][0]
    print(f"{case}: cap {v['capacity_bytes']} ({v['capacity_source']}), recorded {rec['policy']}: "
          f"{rec['outcome']} at event {rec.get('first_oom_event')}; fatal event "
          f"{v['recorded_fatal_oom_event']}")
    f = load(f"{case}-verify.json")
    for r in (f or {}).get("runs", []):
        print(f"   {r['policy']:42s} real {r['outcome']:4s} peak {r['peak_reserved_bytes']} "
              f"retries {r['num_alloc_retries']} wall {r['wall_s']}s | predicted "
              f"{r['predicted_outcome']} peak {r['predicted_peak_reserved_bytes']} retries "
              f"{r['predicted_retries']} | {r['verdict']}")
PY
cat "$res"
