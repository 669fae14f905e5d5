#!/usr/bin/env python3
"""fidelity_recorded.py [--gpusim BIN] [--csv FILE] [DIR...] - real runs without reference files.

lab/fidelity.sh holds reference runs (a snapshot and the allocator's own events) to the whole
contract, addresses included. The device scripts also leave real runs of another kind: a
program's snapshot converted to a trace (NAME.SETTING.gstrace.gz), beside what the run reported
through torch/verify (NAME.SETTING.json: outcome, memory_stats), and the same program run again
under caps near its peak (NAME.SETTING.capF.json: the program's requests are taken to be the
uncapped run's up to where it stops). This replays each trace under its setting, with no cap and
at each cap's limit_bytes, with the driver's placement model (no addresses are recorded), and
compares: outcome, peak reserved, device allocations and frees, retries, OOMs. A capped run that
left its own snapshot (NAME.SETTING.capF.gstrace.gz, converted from its pickle) is replayed from
that too, at its cap, as a user's snapshot of a memory fraction's run would be: those rows are
the table's "capped, from the run's own snapshot" class, the same real runs a second time.

--markdown prints instead the table by program class that README.md holds between its
"fidelity-table" marks; --readme writes it there.

DIR: folders of such runs (default: every lab/results/*/ that has them). Prints one line per
run, real/simulated pairs (a run that differs with its reason from tests/data/fidelity-known.tsv,
where its name is PROGRAM.SETTING.CAP), then a line per program class. Standard library only.
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SETTINGS = {"default": "pytorch", "expandable": "pytorch:expandable_segments:True"}
# The program classes of lab/predict's programs (docs/fidelity.md)
CLASSES = {
    "cnn_train": "CNN training (cuDNN)",
    "encoder_finetune": "fine-tuning, frozen layers",
    "generate_kv": "LLM generation, KV cache",
    "gpt_varlen": "training, varying shapes",
    "graph_train": "CUDA graph",
    "mlp_streams": "side streams, empty_cache",
    "mempool_train": "torch.cuda.MemPool",
}
# the runs under a cap replayed from their own snapshot (a row of their own in the table: the
# same real runs are counted in their program's class, replayed from the uncapped snapshot)
OWN = "capped, from the run's own snapshot"
KEYS = [("peak reserved", "reserved_bytes.all.peak", "peak_reserved_bytes"),
        ("dev allocs", "num_device_alloc", "num_device_alloc"),
        ("dev frees", "num_device_free", "num_device_free"),
        ("retries", "num_alloc_retries", "num_alloc_retries"),
        ("OOMs", "num_ooms", "num_ooms")]


def known_reasons():
    """(pattern, why) from tests/data/fidelity-known.tsv; a pattern ending in * is a prefix."""
    out = []
    with open(os.path.join(ROOT, "tests", "data", "fidelity-known.tsv")) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if not line.startswith("#") and len(cols) >= 3:
                out.append((cols[0], cols[2]))
    return out


def why(known, name):
    for pat, reason in known:
        if name == pat or (pat.endswith("*") and name.startswith(pat[:-1])):
            return reason
    return None


def runs_in(d):
    """(program, setting, cap label or None, trace, report) for every run in folder d."""
    out = []
    for trace in sorted(glob.glob(os.path.join(d, "*.*.gstrace.gz"))):
        m = re.match(r"(.+)\.(default|expandable)\.gstrace\.gz$", os.path.basename(trace))
        if not m:
            continue
        prog, setting = m.groups()
        base = os.path.join(d, f"{prog}.{setting}")
        if os.path.exists(base + ".json"):
            out.append((prog, setting, None, trace, base + ".json"))
        for cap in sorted(glob.glob(base + ".cap*.json")):
            label = cap[len(base) + 1:-len(".json")]
            out.append((prog, setting, label, trace, cap))
            # the capped run's own snapshot, where it left one (lab/device_predict.sh CAPSNAP=1):
            # replayed too, as a user's snapshot of a memory fraction's run is
            own = f"{base}.{label}.gstrace.gz"
            if os.path.exists(own):
                out.append((prog, setting, label + ".own", own, cap))
    return out


def replay(gpusim, trace, policy, capacity):
    cmd = [gpusim, "replay", trace, "-p", policy, "-f", "json", "-q"]
    if capacity:
        cmd += ["--capacity", str(capacity)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"fidelity_recorded.py: {' '.join(cmd)}: {r.stderr.strip()}")
    return json.loads(r.stdout)[0]["results"][0]


def markdown(by):
    lines = ["| program class | real runs | exact | outcome | peak reserved |", "|---|---|---|---|---|"]
    tot = [0, 0, 0, 0]
    for k, c in by.items():
        if k != OWN:
            lines.append("| %s | %d | %d | %d | %d |" % (k, *c))
            tot = [t + v for t, v in zip(tot, c)]
    lines.append("| all | %d | %d | %d | %d |" % tuple(tot))
    if OWN in by:  # the same real runs again: after the total, not in it
        lines.append("| %s | %d | %d | %d | %d |" % (OWN, *by[OWN]))
    return "\n".join(lines) + "\n"


def write_readme(table):
    """README.md with table between its marks (through a temporary file); 2 without them."""
    path = os.path.join(ROOT, "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin, end = "<!-- fidelity-table: begin -->\n", "<!-- fidelity-table: end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        print("fidelity_recorded.py: README.md has no fidelity-table marks", file=sys.stderr)
        return 2
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text[:i + len(begin)] + table + text[j:])
    os.replace(path + ".tmp", path)
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="*")
    p.add_argument("--gpusim", default=os.path.join(ROOT, "build", "gpusim"))
    p.add_argument("--csv", help="also write the rows as CSV to this file")
    p.add_argument("--markdown", action="store_true",
                   help="print only the table by program class (README.md's)")
    p.add_argument("--readme", action="store_true",
                   help="write that table into README.md, between its fidelity-table marks")
    a = p.parse_args(argv)
    dirs = a.dirs or sorted(d for d in glob.glob(os.path.join(ROOT, "lab", "results", "*"))
                            if runs_in(d))
    if not os.access(a.gpusim, os.X_OK):
        print(f"fidelity_recorded.py: {a.gpusim}: build first (meson setup build && "
              "meson compile -C build)", file=sys.stderr)
        return 2
    rows, known = [], known_reasons()
    quiet = a.markdown or a.readme
    say = (lambda *x: None) if quiet else print
    say("%-18s %-10s %-7s %-9s %-25s %-9s %-9s %-7s %-5s %s" % (
        "program", "setting", "cap", "outcome", "peak reserved (bytes)", "dev allocs",
        "dev frees", "retries", "OOMs", "match"))
    for d in dirs:
        for prog, setting, cap, trace, report in runs_in(d):
            with open(report) as f:
                real = json.load(f)
            st = real["devices"]["0"]
            limit = real.get("limit_bytes") or 0
            sim = replay(a.gpusim, trace, SETTINGS[setting], limit)
            pairs = [(real.get("outcome"), sim["outcome"])]
            pairs += [(st.get(k_real), sim.get(k_sim)) for _, k_real, k_sim in KEYS]
            exact = all(r == s for r, s in pairs)
            cls = OWN if cap and cap.endswith(".own") else CLASSES.get(prog, prog)
            row = {"dir": os.path.relpath(d, ROOT), "program": prog,
                   "class": cls, "setting": setting, "cap": cap or "nocap",
                   "limit_bytes": limit, "exact": exact}
            for (name, _, _), (r, s) in zip([("outcome", 0, 0)] + KEYS, pairs):
                row["real " + name], row["sim " + name] = r, s
            rows.append(row)
            say("%-18s %-10s %-7s %-9s %-25s %-9s %-9s %-7s %-5s %s" % (
                prog[:18], setting, cap or "nocap", "%s/%s" % pairs[0],
                "%s/%s" % pairs[1], "%s/%s" % pairs[2], "%s/%s" % pairs[3],
                "%s/%s" % pairs[4], "%s/%s" % pairs[5],
                "exact" if exact else "DIFFERS" + (
                    f" ({w})" if (w := why(known, f"{prog}.{setting}.{cap or 'nocap'}")) else "")))
    say("(pairs are real/simulated, with the driver's placement model: no addresses recorded)")
    by = {}
    for r in rows:
        c = by.setdefault(r["class"], [0, 0, 0, 0])
        c[0] += 1
        c[1] += r["exact"]
        c[2] += r["real outcome"] == r["sim outcome"]
        c[3] += r["real peak reserved"] == r["sim peak reserved"]
    if a.readme:
        return write_readme(markdown(by))
    if a.markdown:
        print(markdown(by), end="")
    else:
        for k, (n, ex, oc, pk) in by.items():
            print(f"class {k}: {n} runs, {ex} exact, outcome {oc}/{n}, peak reserved {pk}/{n}")
        n = len(rows)
        print(f"{n} runs: {sum(r['exact'] for r in rows)} exact, outcome "
              f"{sum(r['real outcome'] == r['sim outcome'] for r in rows)}/{n}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["program"])
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
