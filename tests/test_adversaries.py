#!/usr/bin/env python3
"""stitch against expandable segments on the synthetic adversaries (bench/adversaries.py: a
training run of varying shapes, a KV cache growing under continuous batching, a side stream
whose frees complete late, CUDA graphs' private pools): its minimum capacity at most theirs and
its modelled device time uncapped at most 1.1 x the default's, on each program of two seeds
(docs/stitch.md, "Synthetic adversaries"); and the generator deterministic.

    python3 tests/test_adversaries.py GPUSIM
"""

import csv
import filecmp
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "bench", "adversaries.py")
GPUSIM = None       # set from argv
ES = "pytorch:expandable_segments:True"


class Adversaries(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="adversaries-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def generate(self, out, *seeds):
        argv = [sys.executable, GEN, out] + [a for s in seeds for a in ("--seed", str(s))]
        p = subprocess.run(argv, capture_output=True, text=True, check=True)
        return p.stdout.split()

    def test_deterministic(self):
        a = self.generate(os.path.join(self.tmp, "a"), 3)
        b = self.generate(os.path.join(self.tmp, "b"), 3)
        self.assertEqual(len(a), 4)
        for x, y in zip(a, b):
            self.assertTrue(filecmp.cmp(x, y, shallow=False), x)

    def test_stitch_beats_expandable_segments(self):
        traces = self.generate(self.tmp, 1, 2)
        self.assertEqual(len(traces), 8)
        csv_path = os.path.join(self.tmp, "f.csv")
        subprocess.run([GPUSIM, "frontier", *traces, "-p", "stitch", "-p", ES, "-q", "-f", "csv",
                        "-o", csv_path], check=True)
        rows = list(csv.DictReader(open(csv_path)))
        for t in traces:
            with self.subTest(trace=os.path.basename(t)):
                by = {r["policy"]: r for r in rows if r["trace"] == t}
                st, es = by["stitch"], by[ES]
                self.assertEqual(st["uncapped_outcome"], "ok")
                self.assertLessEqual(int(st["min_capacity_bytes"]), int(es["min_capacity_bytes"]))
                self.assertLessEqual(float(st["time_over_default"]), 1.1)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_adversaries.py GPUSIM")
    GPUSIM = os.path.abspath(sys.argv.pop(1))
    unittest.main()
