#!/usr/bin/env python3
"""The converter's snapshot reader in C (gpusim read-snapshot, traces/snapshot.c) against the
converter's own (traces/gsconvert/walker.py): the same trace, reference, messages and exit
status whichever reads a snapshot, and the C reader taking what PyTorch writes. (The cases of
test_private_pools_and_frames_outside_entries and the memo's second references came from a
review of the reader: each was a difference before.)

    python3 tests/test_fastread.py GPUSIM

GPUSIM is the gpusim to test (meson passes the build's, so the ASan build's runs under the
sanitizers). Each conversion runs twice, once with $GPUSIM_SNAPSHOT_READER=GPUSIM and once with
=none; the C reader must either give the walker's result or decline (then the converter reads
the snapshot itself), and where a case says it takes the snapshot, it must take it.
"""

import contextlib
import glob
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONVERT = os.path.join(ROOT, "traces", "convert.py")
GPUSIM = None       # set from argv
SNAPSHOTS = sorted(glob.glob(os.path.join(ROOT, "traces", "references", "*", "*.pickle*")) +
                   glob.glob(os.path.join(ROOT, "..", "shared", "traces", "pytorch-2.11-h100",
                                          "*.pickle.gz")))
H100 = 85017493504


def frame(filename, line=1, name="f"):
    return {"filename": filename, "line": line, "name": name}


def ev(action, addr, size, t, stream=0, frames=None, **more):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t,
         "frames": frames if frames is not None else [], "compile_context": "N/A",
         "user_metadata": ""}
    if action == "oom":
        e["device_free"] = e.pop("addr")
    e.update(more)
    return e


def snapshot(*devices, segments=None, conf=""):
    return {"segments": segments or [], "device_traces": [list(d) for d in devices],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1}}


class FastReader(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fastread-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def convert(self, src, reader, out="o.gstrace"):
        """(exit status, stderr, trace, reference) of the converter on src."""
        # (the same names both times: messages and the reference may name them)
        o, r = os.path.join(self.tmp, out), os.path.join(self.tmp, "r.json")
        env = dict(os.environ, GPUSIM_SNAPSHOT_READER=reader)
        p = subprocess.run([sys.executable, CONVERT, src, "-o", o, "--no-bound", "--reference", r,
                            "--device-total", str(H100), "--quiet"], env=env,
                           capture_output=True, text=True)
        got = [p.returncode, p.stderr]
        for path in (o, r):
            try:
                with open(path, "rb") as f:
                    got.append(f.read())
                os.unlink(path)
            except OSError:
                got.append(None)
        return got

    def taken(self, src):
        """Whether the C reader takes src, and its message when it does not."""
        p = subprocess.run([GPUSIM, "read-snapshot", src], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        return p.returncode == 0, p.stderr

    def same(self, src, take, out="o.gstrace"):
        """src converts alike either way; take: whether the C reader must take it (None: may)."""
        fast, slow = self.convert(src, GPUSIM, out), self.convert(src, "none", out)
        self.assertEqual(fast, slow, src)
        ok, why = self.taken(src)
        if take is not None:
            self.assertEqual(ok, take, f"{src}: {why}")
        return fast

    def write(self, snap, protocol=4, name="s.pickle"):
        p = os.path.join(self.tmp, name)
        with open(p, "wb") as f:
            pickle.dump(snap, f, protocol=protocol)
        return p

    def test_recorded_snapshots(self):
        """Every recording the repository holds (and the shared ones, where they are): taken,
        and converted to the same trace and reference."""
        self.assertTrue(SNAPSHOTS)
        for src in SNAPSHOTS:
            with self.subTest(src=os.path.basename(src)):
                got = self.same(src, True)
                self.assertEqual(got[0], 0, got[1])

    def test_outputs_of_every_form(self):
        src = SNAPSHOTS[0]
        for out in ("o.gstrace.gz", "o.gsbin"):
            self.same(src, True, out)

    def test_entries_as_pytorch_writes_them(self):
        """Frames of a library and a user's, a frames list written once and named again by a
        later entry, immediate and deferred frees, the allocator's actions, an oom, a snapshot
        marker, two devices, negative streams, every protocol the pickler has."""
        user = frame("/home/me/train.py", 12, "step")
        lib = [frame("/usr/lib/python3.11/site-packages/torch/nn/x.py"),
               frame("<frozen importlib>"), frame("C:\\lib\\python3\\y.py")]
        shared = lib + [user]
        dev0 = [ev("segment_alloc", 1 << 30, 2 << 20, 1),
                ev("alloc", 1 << 30, 512, 2, frames=shared),
                ev("alloc", (1 << 30) + 512, 1024, 3, frames=shared),
                ev("free_requested", 1 << 30, 512, 4, frames=shared),
                ev("free_completed", 1 << 30, 512, 5),
                ev("free_requested", (1 << 30) + 512, 1024, 6, stream=-7),
                ev("snapshot", 0, 0, 7),
                ev("free_completed", (1 << 30) + 512, 1024, 8, stream=-7),
                ev("alloc", 1 << 30, 4096, 9, frames=lib, pool_id=(0, 0)),
                ev("oom", 123, 1 << 40, 10, frames=[user]),
                ev("free_requested", 1 << 30, 4096, 11),
                ev("free_completed", 1 << 30, 4096, 11),
                ev("segment_free", 1 << 30, 2 << 20, 12)]
        dev1 = [ev("alloc", 5 << 30, 1 << 20, 1, stream=3, frames=[frame("t.py", True, 5)]),
                ev("free_requested", 5 << 30, 1 << 20, 2, stream=3)]
        for protocol in (2, 3, 4, 5):
            with self.subTest(protocol=protocol):
                got = self.same(self.write(snapshot(dev0, dev1), protocol), True)
                self.assertEqual(got[0], 0, got[1])
                self.assertIn(b"train.py:12:step", got[2])

    def test_declined_where_the_walker_judges(self):
        """What the C reader leaves to the walker: still converted (or refused) alike."""
        ok = [ev("alloc", 1 << 30, 512, 1), ev("free_requested", 1 << 30, 512, 2)]
        cases = {
            "pool_id not a pair": [ev("alloc", 1 << 30, 512, 1, pool_id=(1, 2, 3))],
            "float time": [ev("alloc", 1 << 30, 512, 1.5)],
            "address past 2^63": [ev("alloc", 1 << 63, 512, 1)],
            "bool size": [ev("alloc", 1 << 30, True, 1)],
            "unknown action": [ev("resize", 1 << 30, 512, 1)],
            "unicode digit": [ev("alloc", 1 << 30, 512, 1,
                                 frames=[frame("/lib/python\u0663/x.py")])],
            "not a dict": [[1, 2]],
        }
        for what, entries in cases.items():
            with self.subTest(what=what):
                self.same(self.write(snapshot(entries + ok)), False)
        # no entries at all, and no segments key: refused alike
        self.same(self.write(snapshot([])), False)
        self.same(self.write({"device_traces": [ok]}), None)

    def test_private_pools_and_frames_outside_entries(self):
        """2.12's pool_id on allocations (counted, (0, 0) the ordinary pools); frames lists
        outside the entries (a segment's blocks, allocator_settings), which the walker reads as
        their top frame wherever the key "frames" precedes them; and the cases its reading of
        them refuses (a list of more than 1,000 frames, written in two batches) or that make
        device_traces appear twice."""
        user, lib = frame("/home/me/train.py", 12, "step"), frame("/usr/lib/python3.11/x.py")
        entries = [ev("alloc", 1 << 30, 512, 1, pool_id=(1, 2), frames=[lib, user]),
                   ev("alloc", 2 << 30, 512, 2, pool_id=(0, 0)),
                   ev("alloc", 3 << 30, 512, 3, pool_id=(1, 2)),
                   ev("free_requested", 1 << 30, 512, 4, pool_id=(7, 8))]
        segs = [{"device": 0, "address": 1 << 30, "total_size": 2 << 20, "stream": 0,
                 "segment_pool_id": (1, 2), "blocks": [
                     {"address": 1 << 30, "size": 512, "requested_size": 512,
                      "state": "active_allocated", "frames": [lib, user]}]}]
        snap = snapshot(entries, segments=segs)
        snap["allocator_settings"]["frames"] = [lib, user]
        for protocol in (2, 4, 5):
            got = self.same(self.write(snap, protocol), True)
            self.assertEqual(got[0], 0, got[1])
        # (the frame dicts written once before, so that the long list is all references)
        deep = snapshot([ev("alloc", 1 << 30, 512, 1, frames=[lib, user]),
                         ev("alloc", 2 << 30, 512, 2, frames=[lib] * 1000 + [user])])
        self.same(self.write(deep), False)
        dt = [[ev("alloc", 1 << 30, 512, 1)]]
        twice = {"segments": [], "device_traces": dt, "allocator_settings": {"x": dt}}
        self.same(self.write(twice), False)

    def test_shared_references_refused_alike(self):
        """An entry named twice (the memo) is the walker's to refuse."""
        e = ev("alloc", 1 << 30, 512, 1)
        for snap in (snapshot([e, e]), snapshot([e], [e])):
            got = self.same(self.write(snap), False)
            self.assertEqual(got[0], 2)

    def scan_of(self, src, convert=True):
        """(the Scan the C reader made of src's one device with events, None where it made
        none; whether the conversion ran build_trace's pass in Python all the same, None when
        not converted)."""
        sys.path.insert(0, os.path.join(ROOT, "traces"))
        try:
            from gsconvert import build, cli, fastread, inputs, limits
        finally:
            sys.path.pop(0)
        old, orig, ran = os.environ.get(fastread.ENV), build._scan, []
        os.environ[fastread.ENV] = GPUSIM
        build._scan = lambda events: ran.append(1) or orig(events)
        inp = inputs.Input(src)
        try:
            rec = fastread.read_snapshot_fast(src, inp, limits.MemoryBudget(None))
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                if convert:
                    cli.main([src, "-o", os.path.join(self.tmp, "x.gstrace"), "--no-bound", "-q"])
        except SystemExit:
            pass
        finally:
            inp.close()
            build._scan = orig
            if old is None:
                os.environ.pop(fastread.ENV)
            else:
                os.environ[fastread.ENV] = old
        self.assertIsNotNone(rec, src)
        used = [evs for evs in rec.per_device if len(evs)]
        self.assertEqual(len(used), 1)
        return used[0].scan, bool(ran) if convert else None

    def test_rows_made_in_c(self):
        """build_trace's pass, made by the C reader beside the columns (traces/snaprows.c) and
        taken by the converter where no inference added an event: the same trace whichever
        makes it, on a log that starts and ends mid-run (frees of blocks allocated before it,
        immediate and deferred, a completion of a free before it, a free's size unlike its
        alloc's, a clock that goes back, frees still pending at its end, blocks held
        throughout), on one that dies of an OOM with frees pending, on a device used among idle
        ones, with a segment freed that the log never saw made (an inferred empty_cache: the
        converter's own pass); and no rows where the pass raises, which the converter then
        reports as its own pass does."""
        a, b, c = 1 << 30, 2 << 30, 3 << 30
        mid = [ev("free_requested", c, 256, 5),                  # synthesized, immediate
               ev("free_completed", c, 256, 5),
               ev("free_requested", c + 512, 512, 6, stream=9),  # synthesized, deferred
               ev("free_completed", b + 4096, 64, 7),            # its free before the log
               ev("alloc", a, 1024, 10, frames=[frame("/home/me/t.py", 3, "g")]),
               ev("alloc", b, 2048, 9),                          # the clock went back
               ev("free_requested", a, 1000, 11),                # a size unlike its alloc's
               ev("free_completed", a, 1000, 11),
               ev("segment_alloc", 8 << 30, 2 << 20, 12),
               ev("alloc", a, 4096, 13),
               ev("free_requested", b, 2048, 14, stream=4)]      # pending at the end
        held = [{"device": 0, "address": 9 << 30, "total_size": 2 << 20, "stream": 0,
                 "blocks": [{"address": 9 << 30, "size": 512, "requested_size": 512,
                             "state": "active_allocated"}]}]
        unseen = mid[:4] + [ev("segment_free", 7 << 30, 2 << 20, 8)] + mid[4:]
        cases = {"mid-run": (snapshot(mid, segments=held), False),
                 "died": (snapshot(mid + [ev("oom", 0, 1 << 40, 15)]), False),
                 "one device of three": (snapshot([], mid, []), False),
                 "segment never seen made": (snapshot(unseen), True)}
        for what, (snap, python) in cases.items():
            with self.subTest(what=what):
                src = self.write(snap)
                got = self.same(src, True)
                self.assertEqual(got[0], 0, got[1])
                sc, ran = self.scan_of(src)
                self.assertIsNotNone(sc)
                self.assertEqual(ran, python)
                self.assertEqual((sc.nalloc, sc.dropped_done, sc.size_mismatch, sc.clamped,
                                  len(sc.synthesized), len(sc.pending), sc.unseen_segment),
                                 (3, 1, 1, 1, 2, 2, python))
        raising = {
            "alloc at a live address": [ev("alloc", a, 512, 1), ev("alloc", a, 512, 2)],
            "freed twice": [ev("alloc", a, 512, 1), ev("free_requested", a, 512, 2),
                            ev("free_requested", a, 512, 3)],
            "completed, never freed": [ev("alloc", a, 512, 1), ev("free_completed", a, 512, 2)],
        }
        for what, entries in raising.items():
            with self.subTest(what=what):
                src = self.write(snapshot(entries))
                got = self.same(src, True)
                self.assertEqual(got[0], 2, got[1])
                self.assertEqual(self.scan_of(src), (None, True))

    def test_rows_of_far_apart_addresses(self):
        """Allocations 1 TiB apart: the C pass's table of open blocks once put them all on one
        slot (the product's middle bits were the hash), and its work went quadratic: 55 s for
        200,000 of them, where 0.3 s is the linear pass's. 300,000 (about 125 s so) must be
        read within 60 s, a hang guard far above the need, not a speed figure, each block
        left open."""
        n = 300000
        src = self.write(snapshot([ev("alloc", (k + 1) << 40, 512, k) for k in range(n)]))
        p = subprocess.run([GPUSIM, "read-snapshot", src], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        sc, _ = self.scan_of(src, convert=False)
        self.assertEqual((sc.nalloc, len(sc.live)), (n, n))

    def test_memory_limit(self):
        """Past half the conversion's limit, the C reader declines."""
        src = self.write(snapshot([ev("alloc", 1 << 30, 512, 1)]))
        p = subprocess.run([GPUSIM, "read-snapshot", "--max-memory=1000", src],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 3)
        self.assertIn("declined", p.stderr)
        self.assertEqual(p.stdout, "")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_fastread.py GPUSIM")
    GPUSIM = os.path.abspath(sys.argv.pop(1))
    unittest.main()
