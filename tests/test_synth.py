#!/usr/bin/env python3
"""Tests for traces/synth.py (standard library unittest; run from any directory).

    python3 tests/test_synth.py

The generator runs as a subprocess, the way users run it. The bundled
traces/data/batch-alternate.gstrace.gz must be exactly what the generator writes with its
defaults, so the trace the tests replay is the one the README tells users to regenerate.
"""

import gzip
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SYNTH = os.path.join(ROOT, "traces", "synth.py")
BUNDLED = os.path.join(ROOT, "traces", "data", "batch-alternate.gstrace.gz")
HEADER_COLS = "seq,time_us,op,client,device,stream,id,size"


def run(*args):
    return subprocess.run([sys.executable, SYNTH, *args], capture_output=True)


class TestBatchAlternate(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def lines(self, *args):
        r = run("batch-alternate", *args, "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode().splitlines()

    def test_bundled_trace_is_the_default_output(self):
        out = self.path("alt.gstrace.gz")
        r = run("batch-alternate", "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        with open(out, "rb") as a, open(BUNDLED, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_deterministic_and_seeded(self):
        self.assertEqual(self.lines("--seed", "7"), self.lines("--seed", "7"))
        self.assertNotEqual(self.lines("--seed", "7"), self.lines("--seed", "8"))

    def test_shape(self):
        lines = self.lines("--layers", "3", "--batch", "4", "--iterations", "2",
                           "--min-kib", "64", "--max-kib", "64")
        self.assertEqual(lines[0], "# gpusim-trace 1")
        self.assertIn("# device_total_bytes: 85899345920", lines)
        self.assertIn(HEADER_COLS, lines)
        body = [l.split(",") for l in lines[lines.index(HEADER_COLS) + 1:]]
        ops = [f[2] for f in body]
        # per iteration: a mark, 3 layers x 2 allocations, then 6 frees
        self.assertEqual(ops, (["mark"] + ["alloc"] * 6 + ["free"] * 6) * 2)
        allocs = [int(f[7]) for f in body if f[2] == "alloc"]
        # narrow = batch x 64 KiB; wide = narrow x k with 2 <= k <= 6; batch 4 then 5
        for i, b in enumerate((4, 5)):
            it = allocs[6 * i:6 * i + 6]
            for narrow, wide in zip(it[0::2], it[1::2]):
                self.assertEqual(narrow, b * 64 * 1024)
                self.assertEqual(wide % narrow, 0)
                self.assertTrue(2 <= wide // narrow <= 6)
        # frees come last layer first, each with its allocation's size
        ids = [(f[6], f[7]) for f in body[1:7]]
        frees = [(f[6], f[7]) for f in body[7:13]]
        self.assertEqual(frees, list(reversed(ids)))
        self.assertEqual([int(f[0]) for f in body], list(range(len(body))))

    def test_gzip_has_zero_timestamp(self):
        out = self.path("a.gstrace.gz")
        self.assertEqual(run("batch-alternate", "--layers", "2", "-o", out).returncode, 0)
        with open(out, "rb") as f:
            head = f.read(10)
        self.assertEqual(head[4:8], b"\0\0\0\0")
        with gzip.open(out, "rt") as f:
            self.assertEqual(f.readline().strip(), "# gpusim-trace 1")

    def test_bad_arguments_exit_2_with_a_message(self):
        for args in (["--layers", "0"], ["--batch", "x"], ["--min-kib", "9", "--max-kib", "8"]):
            r = run("batch-alternate", *args, "-o", self.path("x"))
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(b"synth.py", r.stderr)
            self.assertFalse(os.path.exists(self.path("x")))
        r = run("no-such-scenario", "-o", self.path("x"))
        self.assertEqual(r.returncode, 2)

    def test_unwritable_output_is_reported(self):
        r = run("batch-alternate", "-o", os.path.join(self.tmp.name, "missing", "x.gstrace"))
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"cannot write", r.stderr)

    def test_help_names_the_scenarios(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"batch-alternate", r.stdout)
        self.assertIn(b"Expandable Segments", r.stdout)


if __name__ == "__main__":
    unittest.main()
