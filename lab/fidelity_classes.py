#!/usr/bin/env python3
"""fidelity_classes.py [--markdown | --write] [DIR...] - the reference runs by program class.

lab/fidelity.sh holds every reference run (a real PyTorch snapshot with the allocator's own
events: ../shared/traces/pytorch-2.11-h100 beside a checkout, and traces/references/*/) to the
whole contract, once with the real run's segment addresses and once with the driver placement
model alone. This runs it and counts, by program class (the run's name before "__"), the runs
exact in each mode: a run of several devices is exact when each of its devices is.

  --markdown   print the table docs/fidelity.md holds between its "fidelity-refs-table" marks
  --write      write it there
DIR: as lab/fidelity.sh takes them (default: its own). lab/fidelity_recorded.py does the same
for the real runs without reference files. Standard library only.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CLASSES = {
    "resnet50": "CNN training",
    "gpt2": "transformer training",
    "sidestream": "side streams, record_stream, empty_cache",
    "oomdie": "a run that dies of an OOM",
    "oomcatch": "OOMs caught, the run goes on",
    "cut": "history cut by the ring buffer",
    "llmgen": "LLM generation, KV cache",
    "graph": "CUDA graph",
    "graphpool": "CUDA graphs sharing a pool",
    "mempool": "torch.cuda.MemPool",
    "twogpu": "two GPUs in one process",
    "sidecnn": "side stream, cuDNN catching OOMs",
    "compiled": "torch.compile, CUDA-graph trees",
}
LINE = re.compile(r"^(\S+)\s+(\S+)\s+(reference|model)\s+\S+\s.*\s(exact|DIFFERS.*)$")
BEGIN, END = "<!-- fidelity-refs-table: begin -->", "<!-- fidelity-refs-table: end -->"


def runs(dirs):
    """[(run, {"reference": exact, "model": exact})] from lab/fidelity.sh's lines, a run's lines
    together (two folders may hold recordings of one name: each is a run)."""
    out = subprocess.run(["sh", os.path.join(ROOT, "lab", "fidelity.sh"), *dirs],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"fidelity_classes.py: lab/fidelity.sh failed: {out.stderr.strip()}")
    got = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        run, mode, exact = m.group(1), m.group(3), m.group(4) == "exact"
        if not got or got[-1][0] != run or (mode == "reference" and "model" in got[-1][1]):
            got.append((run, {}))
        modes = got[-1][1]
        modes[mode] = modes.get(mode, True) and exact  # every device of the run
    return got


def markdown(got):
    by = {}
    for run, modes in got:
        c = by.setdefault(CLASSES.get(run.split("__")[0], run.split("__")[0]), [0, 0, 0])
        c[0] += 1
        c[1] += modes.get("reference", False)
        c[2] += modes.get("model", False)
    lines = ["| program class | real runs | exact, recorded addresses | exact, placement model |",
             "|---|---|---|---|"]
    for name, (n, ref, model) in by.items():
        lines.append(f"| {name} | {n} | {ref} | {model} |")
    total = [sum(c[i] for c in by.values()) for i in range(3)]
    lines.append("| all | %d | %d | %d |" % tuple(total))
    return "\n".join(lines) + "\n"


def write_doc(table):
    path = os.path.join(ROOT, "docs", "fidelity.md")
    with open(path) as f:
        text = f.read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit(f"fidelity_classes.py: docs/fidelity.md has no {BEGIN} ... {END}")
    with open(path, "w") as f:
        f.write(text[:a + len(BEGIN)] + "\n" + table + text[b:])
    return 0


def main(argv):
    p = argparse.ArgumentParser(prog="fidelity_classes.py", description=__doc__.split("\n")[0])
    p.add_argument("dirs", nargs="*", metavar="DIR")
    p.add_argument("--markdown", action="store_true", help="print only the table")
    p.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    a = p.parse_args(argv)
    got = runs(a.dirs)
    if not got:
        sys.exit("fidelity_classes.py: lab/fidelity.sh found no run")
    table = markdown(got)
    if a.write:
        return write_doc(table)
    print(table, end="")
    if not a.markdown:
        print(f"{len(got)} runs: {sum(m.get('reference', False) for _, m in got)} exact "
              f"with recorded addresses, {sum(m.get('model', False) for _, m in got)} "
              f"with the placement model alone")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
