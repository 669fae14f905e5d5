#!/usr/bin/env python3
"""Tests for traces/synth.py (standard library unittest; run from any directory).

    python3 tests/test_synth.py

The generator runs as a subprocess, the way users run it. The bundled traces
(traces/data/batch-alternate, dataframe-then-torch and producer-consumer .gstrace.gz) must be
exactly what the generator writes with its defaults, so the traces the tests replay are the
ones the docs (docs/expandable.md, docs/clients.md) tell users to regenerate.
"""

import gzip
import os
import resource
import signal
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
        # one line each; a device past 2^44 bytes or sizes past 2^64 - 1 are refused, not written
        # into a trace gpusim refuses (both were exit 0)
        for args in (["--layers", "0"], ["--batch", "x"], ["--min-kib", "9", "--max-kib", "8"],
                     ["--device-total", "99999999999999999999"],
                     ["--min-kib", "99999999999999990", "--max-kib", "99999999999999999"]):
            r = run("batch-alternate", *args, "-o", self.path("x"))
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(b"synth.py", r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertFalse(os.path.exists(self.path("x")))
        r = run("no-such-scenario", "-o", self.path("x"))
        self.assertEqual(r.returncode, 2)

    def test_unwritable_output_is_reported(self):
        r = run("batch-alternate", "-o", os.path.join(self.tmp.name, "missing", "x.gstrace"))
        self.assertEqual(r.returncode, 2)  # as every error of synth.py and convert.py
        self.assertIn(b"cannot write", r.stderr)

    def test_special_outputs_are_written_in_place(self):
        # a link is written through, in place, and stays a link (as gpusim's -o): the writer
        # renamed a temporary file over it, which as root made /dev/full a regular file
        real, link = self.path("real.gstrace"), self.path("out.gstrace")
        open(real, "wb").close()
        os.symlink(real, link)
        r = run("batch-alternate", "-o", link)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(link), "the link was replaced")
        with open(real, "rb") as f:
            self.assertTrue(f.read().startswith(b"# gpusim-trace 1"))
        if os.access("/dev/full", os.W_OK):
            r = run("batch-alternate", "-o", "/dev/full")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(b"No space left on device", r.stderr)

    def test_short_write_to_stdout_is_an_error(self):
        # stdout at a file-size limit: the write was cut at the limit and exit 0 said nothing
        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (10000, 10000))
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        with open(self.path("cut.gstrace"), "wb") as out:
            r = subprocess.run([sys.executable, SYNTH, "batch-alternate", "-o", "-"], stdout=out,
                               stderr=subprocess.PIPE, preexec_fn=limit)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"cannot write standard output", r.stderr)

    def test_help_names_the_scenarios(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn(b"batch-alternate", r.stdout)
        self.assertIn(b"Expandable Segments", r.stdout)


def body(lines):
    return [l.split(",") for l in lines[lines.index(HEADER_COLS) + 1:]]


def live_peaks(rows):
    """Peak of live requested bytes per client, and overall, walking the events."""
    live, size_of, peak, total, peak_total = {}, {}, {}, 0, 0
    for f in rows:
        op, client, ident, size = f[2], f[3], f[6], int(f[7])
        if op == "alloc":
            size_of[ident] = (client, size)
            live[client] = live.get(client, 0) + size
            total += size
        elif op == "free":
            c, sz = size_of.pop(ident)
            live[c] -= sz
            total -= sz
        for c, v in live.items():
            peak[c] = max(peak.get(c, 0), v)
        peak_total = max(peak_total, total)
    return peak, peak_total, live


class TestClients(unittest.TestCase):
    """The scenarios of several libraries on one GPU."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def lines(self, scenario, *args):
        r = run(scenario, *args, "-o", "-")
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode().splitlines()

    def test_bundled_traces_are_the_default_output(self):
        for scenario in ("dataframe-then-torch", "producer-consumer"):
            out = os.path.join(self.tmp.name, scenario + ".gstrace.gz")
            r = run(scenario, "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr.decode())
            bundled = os.path.join(ROOT, "traces", "data", scenario + ".gstrace.gz")
            with open(out, "rb") as a, open(bundled, "rb") as b:
                self.assertEqual(a.read(), b.read(), scenario)

    def test_deterministic_and_seeded(self):
        for scenario in ("dataframe-then-torch", "producer-consumer"):
            self.assertEqual(self.lines(scenario, "--seed", "3"), self.lines(scenario, "--seed", "3"))
            self.assertNotEqual(self.lines(scenario, "--seed", "3"), self.lines(scenario, "--seed", "4"))

    def test_story_shape(self):
        lines = self.lines("dataframe-then-torch")
        self.assertIn("# device_total_bytes: 85899345920", lines)
        rows = body(lines)
        clients = [f[3] for f in rows if f[2] in ("alloc", "free")]
        # the data frame first, all of it, then PyTorch alone
        first_torch = clients.index("torch")
        self.assertEqual(set(clients[:first_torch]), {"cupy"})
        self.assertEqual(set(clients[first_torch:]), {"torch"})
        peak, _, live = live_peaks(rows)
        # about 55 GiB: every allocation of the frame, less what a group-by step gives back
        self.assertTrue(0.95 * 55 * GIB < peak["cupy"] < 1.01 * 55 * GIB, peak["cupy"])
        self.assertEqual(live, {"cupy": 0, "torch": 0})  # everything freed in the end
        self.assertIn(str(40 * GIB), [f[7] for f in rows if f[2] == "alloc"])
        small = self.lines("dataframe-then-torch", "--frame-gib", "10", "--torch-gib", "5",
                           "--columns", "4")
        peak, _, _ = live_peaks(body(small))
        self.assertTrue(0.9 * 10 * GIB < peak["cupy"] < 1.01 * 10 * GIB, peak["cupy"])

    def test_producer_consumer_shape(self):
        lines = self.lines("producer-consumer", "--steps", "5")
        self.assertIn("# device_total_bytes: 16106127360", lines)
        rows = body(lines)
        # the two clients take turns within every step
        marks = [i for i, f in enumerate(rows) if f[2] == "mark"]
        self.assertEqual(len(marks), 5)
        for a, b in zip(marks, marks[1:] + [len(rows)]):
            self.assertEqual({f[3] for f in rows[a + 1:b] if f[2] == "alloc"}, {"cupy", "torch"})
        peak, total, live = live_peaks(rows)
        self.assertEqual(live, {"cupy": 0, "torch": 0})
        self.assertLess(total, 15 * GIB)
        # each free is on its allocation's client
        owner = {f[6]: f[3] for f in rows if f[2] == "alloc"}
        self.assertTrue(all(owner[f[6]] == f[3] for f in rows if f[2] == "free"))

    def test_bad_arguments_exit_2(self):
        for args in (["dataframe-then-torch", "--frame-gib", "0"],
                     ["producer-consumer", "--min-batch-mib", "9", "--max-batch-mib", "8"],
                     ["producer-consumer", "--steps", "x"]):
            r = run(*args, "-o", os.path.join(self.tmp.name, "x"))
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(b"synth.py", r.stderr)

    def test_help_names_the_scenarios(self):
        r = run("--help")
        for word in (b"dataframe-then-torch", b"producer-consumer", b"cupy"):
            self.assertIn(word, r.stdout)
        r = run("dataframe-then-torch", "--help")
        self.assertIn(b"--torch-gib", r.stdout)


GIB = 1 << 30


if __name__ == "__main__":
    unittest.main()
