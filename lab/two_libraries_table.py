#!/usr/bin/env python3
"""two_libraries_table.py - the table of BENCHMARKS.md, "Two libraries on one real GPU", from
what lab/device_two_libraries.sh brought back.

  python3 lab/two_libraries_table.py DIR [GPUSIM]

DIR holds native.json, native-budget.json and, for each arrangement, MODE.json (the program's
own report), MODE.stats.json (gpusim's statistics of the real run) and MODE.gstrace.gz (its
trace). Each trace is replayed by GPUSIM (default build/gpusim) under its own arrangement on a
simulated device of the run's budget (the device's free bytes after the ballast plus what the
allocators held then), and the shared run's trace, the whole program, under all three: what
gpusim predicts from one complete recording. Prints markdown; exits 1 when a replay disagrees
with its real run on an outcome, a peak or a count of device calls. Standard library only.
"""
import json
import os
import subprocess
import sys
import tempfile

MODES = ("separate", "shared", "cooperative")
POLICIES = ["-p", "pytorch", "-p", "cupy=cupy"]
KEYS = ("peak_reserved_bytes", "peak_allocated_bytes", "num_device_alloc", "num_device_free",
        "num_ooms", "released_for_others_bytes")


def load(path):
    with open(path) as f:
        return json.load(f)


def replay(gpusim, trace, mode, budget):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([gpusim, "replay", trace, "--clients", mode, *POLICIES,
                        "--device-total", str(budget), "--format", "json", "-o", out.name],
                       check=True, stdout=subprocess.DEVNULL)
        return load(out.name)[0]["results"][0]


def outcome_of(res):
    """ok, or oom and the clients that met one (a program that catches the OOM goes on: its
    replay then counts the recorded OOM as caught, and the run as ok)."""
    hit = [c for c, v in sorted(res["clients"].items()) if v["num_ooms"]]
    return "oom (%s)" % ", ".join(hit) if hit else res["outcome"]


def gib(b):
    return "%.3f" % (b / 2**30)


def main():
    d = sys.argv[1]
    gpusim = sys.argv[2] if len(sys.argv) > 2 else "build/gpusim"
    native = load(os.path.join(d, "native.json"))
    nb = load(os.path.join(d, "native-budget.json"))
    print("Budget: %s GiB for the allocators (native peaks: CuPy's pool %s GiB, PyTorch's "
          "reserved %s GiB)\n" % (gib(nb["device_budget"]), gib(native["etl_pool_bytes"]),
                                  gib(native["train_peak_reserved"])))
    print("| run | outcome | CuPy peak reserved | PyTorch peak reserved | device peak reserved "
          "| device allocs / frees | CuPy released for PyTorch | output vs native |")
    print("|---|---|---|---|---|---|---|---|")
    print("| native, whole GPU | %s | %s | %s | | | | (reference) |" % (
        native["outcome"], gib(native["etl_pool_bytes"]), gib(native["train_peak_reserved"])))
    print("| native, at the budget | %s in %s | | | | | | |" % (nb["outcome"], nb["phase"]))
    bad = 0
    rows = {}
    for m in MODES:
        prog = load(os.path.join(d, m + ".json"))
        real = load(os.path.join(d, m + ".stats.json"))[0]["results"][0]
        sim = replay(gpusim, os.path.join(d, m + ".gstrace.gz"), m, prog["device_budget"])
        rows[m] = prog
        same_out = (prog["outcome"] == "ok" and prog["etl_values"] == native["etl_values"]
                    and prog.get("weights_sum") == native.get("weights_sum"))
        out = "identical" if same_out else ("differs" if prog["outcome"] == "ok" else "-")
        for label, r in (("real", real), ("replay", sim)):
            c, t = r["clients"]["cupy"], r["clients"]["torch"]
            print("| gpusim %s, %s | %s | %s | %s | %s | %d / %d | %s | %s |" % (
                m, label, outcome_of(r), gib(c["peak_reserved_bytes"]),
                gib(t["peak_reserved_bytes"]), gib(r["peak_reserved_bytes"]),
                r["num_device_alloc"], r["num_device_free"], gib(c["released_for_others_bytes"]),
                out if label == "real" else ""))
        if (prog["outcome"] == "oom") != outcome_of(sim).startswith("oom"):
            bad += 1
            print("\nDISAGREES: %s: the program met %s, the replay %s" % (
                m, prog["outcome"], outcome_of(sim)))
        for k in ("peak_reserved_bytes", "num_device_alloc", "num_device_free"):
            if real[k] != sim[k]:
                bad += 1
                print("\nDISAGREES: %s %s: real %s, replay %s" % (m, k, real[k], sim[k]))
        for c in ("cupy", "torch"):
            for k in KEYS:
                if real["clients"][c][k] != sim["clients"][c][k]:
                    bad += 1
                    print("\nDISAGREES: %s %s %s: real %s, replay %s" % (
                        m, c, k, real["clients"][c][k], sim["clients"][c][k]))
    print("\nThe whole program (the shared run's trace) replayed under each arrangement, at the "
          "budget:\n")
    print("| arrangement | predicted | real run | device peak reserved (predicted) |")
    print("|---|---|---|---|")
    trace = os.path.join(d, "shared.gstrace.gz")
    for m in MODES:
        sim = replay(gpusim, trace, m, rows["shared"]["device_budget"])
        real = rows[m]["outcome"]
        pred = "oom" if outcome_of(sim).startswith("oom") else "ok"
        if pred != real:
            bad += 1
        print("| %s | %s | %s | %s GiB |" % (m, outcome_of(sim), real,
                                             gib(sim["peak_reserved_bytes"])))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
