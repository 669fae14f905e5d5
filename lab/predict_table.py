#!/usr/bin/env python3
"""predict_table.py DIR [GPUSIM] [--captures CAPDIR] - the table of BENCHMARKS.md "Predictions from a CPU capture".

DIR: what lab/device_predict.sh brought back (predict.tgz unpacked). For each program: the real
runs' peak reserved (torch.cuda.memory_stats, default and expandable segments), the replay of
its CPU capture under the same settings (gpusim replay), and the replay of the real run's own
recording (the simulator's share of any difference); the requests matched (the capture's
allocation sizes against the recording's, in order); and at caps 5% below and above each
setting's real peak, the real outcome beside the capture's predicted one. Prints a Markdown
table, then a CSV of the same rows (to DIR/predict.csv). --captures: the captures (and the CSV)
in CAPDIR, made by another run than DIR's real runs. Standard library only.
"""
import csv
import difflib
import json
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SETTINGS = {"default": "pytorch", "expandable": "pytorch:expandable_segments:True"}


def replay(gpusim, trace, policy, cap=None):
    cmd = [gpusim, "replay", trace, "-p", policy, "--format", "json", "-q"]
    if cap:
        cmd += ["--capacity", str(cap)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    res = json.loads(r.stdout)[0]["results"][0]
    return res["outcome"], res["peak_reserved_bytes"], res.get("peak_allocated_bytes")


def found(path):
    """path, or path.gz where only that is there (as in lab/results/)."""
    return path + ".gz" if not os.path.exists(path) and os.path.exists(path + ".gz") else path


def alloc_sizes(trace):
    import gzip
    opener = gzip.open if open(trace, "rb").read(2) == b"\x1f\x8b" else open
    sizes = []
    with opener(trace, "rt") as f:
        for line in f:
            if line[:1].isdigit():
                parts = line.split(",")
                if parts[2] == "alloc":
                    sizes.append(int(parts[7]))
    return sizes


def program_output(path):
    """What the program printed (its own lines: losses, shapes), not the hooks' lines; None
    where the log was not kept (lab/results keeps the traces and statistics only)."""
    if not os.path.exists(path):
        return None
    with open(path, errors="replace") as f:
        return [l for l in f if l.startswith(("step", "prompt", "eval"))]


def stats(path):
    with open(path) as f:
        doc = json.load(f)
    d = (doc.get("devices") or {}).get("0", {})
    return doc["outcome"], d.get("reserved_bytes.all.peak"), d.get("allocated_bytes.all.peak")


def main():
    args = sys.argv[1:]
    caps = None
    if "--captures" in args:  # the captures from another run than the real runs'
        k = args.index("--captures")
        caps = args[k + 1]
        del args[k:k + 2]
    d = args[0]
    caps = caps or d
    gpusim = args[1] if len(args) > 1 else os.path.join(SRC, "build", "gpusim")
    kind = "cap"
    progs = sorted({f.split(".")[0] for f in os.listdir(caps)
                    if f.endswith((f".{kind}.gstrace", f".{kind}.gstrace.gz"))})
    rows = []
    for p in progs:
        cap_trace = found(os.path.join(caps, f"{p}.{kind}.gstrace"))
        real_trace = found(os.path.join(d, f"{p}.default.gstrace"))
        snap = os.path.join(d, f"{p}.default.pickle.gz")
        if not os.path.exists(real_trace) and os.path.exists(snap):
            subprocess.run([sys.executable, os.path.join(SRC, "traces", "convert.py"), snap, "-o",
                            real_trace], check=True, capture_output=True)
        got, want = alloc_sizes(cap_trace), alloc_sizes(real_trace)
        sm = difflib.SequenceMatcher(None, want, got, autojunk=False)
        matched = sum(b.size for b in sm.get_matching_blocks())
        row = {"program": p, "real_allocs": len(want), "captured_allocs": len(got),
               "matched_allocs": matched,
               "matched_pct": round(100.0 * matched / max(1, len(want)), 1)}
        for s, pol in SETTINGS.items():
            outcome, real_peak, real_alloc = stats(os.path.join(d, f"{p}.{s}.json"))
            _, pred_peak, pred_alloc = replay(gpusim, cap_trace, pol)
            rec_trace = found(os.path.join(d, f"{p}.{s}.gstrace"))
            if not os.path.exists(rec_trace) and os.path.exists(os.path.join(d, f"{p}.{s}.pickle.gz")):
                subprocess.run([sys.executable, os.path.join(SRC, "traces", "convert.py"),
                                os.path.join(d, f"{p}.{s}.pickle.gz"), "-o", rec_trace],
                               check=True, capture_output=True)
            _, rec_peak, _ = replay(gpusim, real_trace, pol)
            row[f"{s}_real_peak"] = real_peak
            row[f"{s}_captured_peak"] = pred_peak
            row[f"{s}_err_pct"] = round(100.0 * (pred_peak - real_peak) / real_peak, 2)
            row[f"{s}_recording_replay_peak"] = rec_peak
            if s == "default":
                row["real_peak_allocated"], row["captured_peak_allocated"] = real_alloc, pred_alloc
            for f in ("0.95", "1.05"):
                path = os.path.join(d, f"{p}.{s}.cap{f}.json")
                if not os.path.exists(path):
                    continue
                with open(path) as fh:
                    doc = json.load(fh)
                cap = doc.get("limit_bytes")
                real_out = doc["outcome"]
                pred_out, _, _ = replay(gpusim, cap_trace, pol, cap)
                row[f"{s}_cap{f}"] = f"{real_out}/{pred_out}"
                row[f"{s}_cap{f}_agrees"] = real_out == pred_out
        run_json = os.path.join(d, f"{p}.run.json")
        if os.path.exists(run_json):  # the same program under gpusim run (-p pytorch)
            with open(run_json) as fh:
                res = json.load(fh)[0]["results"][0]
            row["gpusim_run_peak"] = res["peak_reserved_bytes"]
            row["gpusim_run_output_identical"] = program_output(
                os.path.join(d, f"{p}.run.log")) == program_output(os.path.join(d, f"{p}.default.log"))
        rows.append(row)
    gib = lambda b: f"{b / 2**30:.3f}" if b is not None else "-"
    print("| program | requests matched | peak alloc real / capture (GiB) | default: real / capture "
          "(GiB), error | expandable: real / capture (GiB), error | caps -5% / +5% real/predicted "
          "(default; expandable) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['program']} | {r['matched_pct']}% ({r['matched_allocs']} of {r['real_allocs']}; "
              f"{r['captured_allocs']} captured) "
              f"| {gib(r['real_peak_allocated'])} / {gib(r['captured_peak_allocated'])} "
              f"| {gib(r['default_real_peak'])} / {gib(r['default_captured_peak'])}, {r['default_err_pct']:+.2f}% "
              f"| {gib(r['expandable_real_peak'])} / {gib(r['expandable_captured_peak'])}, {r['expandable_err_pct']:+.2f}% "
              f"| {r.get('default_cap0.95', '-')}, {r.get('default_cap1.05', '-')}; "
              f"{r.get('expandable_cap0.95', '-')}, {r.get('expandable_cap1.05', '-')} |")
    keys = sorted({k for r in rows for k in r})
    with open(os.path.join(caps, "predict.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["program"] + [k for k in keys if k != "program"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
