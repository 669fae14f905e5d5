"""whatif_caps.py GPUSIM SNAPSHOT... - whatif's cap and verdict on real runs' own snapshots,
beside what each run's NAME.json says it had and did.

For each SNAPSHOT (NAME.pickle.gz) with a NAME.json beside it (lab/record_pytorch.py's, with
cap_gib, or gpusim verify's report, with limit_bytes), `gpusim whatif SNAPSHOT --format json`
is run and its recorded setting's row set against the run: the cap whatif took (and where it
came from), the outcome at that cap, and the retries (allocation retries, as
torch.cuda.memory_stats() counts them). One line a run, then the count that agree on all three:

    python3 lab/whatif_caps.py build/gpusim lab/results/h100-2026-12-07-capsnap/*.pickle.gz

A run is "ok" when it completed, "oom" when it died of an OOM; a row that gets past a recorded
death is "survived", which the run, having died there, did not.
"""
import json
import math
import os
import subprocess
import sys
import tempfile


def recorded(sib):
    """(cap in bytes or None, outcome, retries or None) from a run's NAME.json."""
    if sib.get("format") == "gpusim-verify 1":
        cap = sib.get("limit_bytes")
        stats = (sib.get("devices") or {}).get("0") or {}
    else:
        gib, total = sib.get("cap_gib"), sib.get("total_bytes")
        cap = None
        if isinstance(gib, (int, float)):
            # PyTorch's limit: (size_t)(fraction * total), the fraction cap / total
            cap = math.floor(gib * 2**30 / total * total) if total else int(gib * 2**30)
        stats = sib.get("memory_stats") or {}
    return cap, sib.get("outcome"), stats.get("num_alloc_retries")


def main():
    gpusim, snaps = sys.argv[1], sys.argv[2:]
    same = n = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "w.json")
        for snap in snaps:
            name = snap[:-len(".pickle.gz")] if snap.endswith(".pickle.gz") else snap
            if not os.path.exists(name + ".json"):
                continue
            with open(name + ".json") as f:
                cap, outcome, retries = recorded(json.load(f))
            p = subprocess.run([gpusim, "whatif", "-q", snap, "--format", "json", "-o", out],
                               capture_output=True, text=True)
            n += 1
            if p.returncode != 0:
                print(f"{os.path.basename(name)}: whatif refused: {p.stderr.strip()[-160:]}")
                continue
            with open(out) as f:
                v = json.load(f)
            row = next(r for r in v["results"] if r["recorded"])
            ok = (v["capacity_bytes"] == cap and row["outcome"] == outcome and
                  (retries is None or row["retries"] == retries))
            same += ok
            print(f"{os.path.basename(name)}: cap {v['capacity_bytes']} ({v['capacity_source']}) "
                  f"/ {cap}, outcome {row['outcome']} / {outcome}, retries {row['retries']} / "
                  f"{retries}{'' if ok else '  DIFFERS'}")
    print(f"{same} of {n} runs: whatif's cap, outcome and retries are the run's")
    return 0 if same == n else 1


if __name__ == "__main__":
    sys.exit(main())
