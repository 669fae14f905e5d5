#!/usr/bin/env python3
"""make_corpus.py - write the seed corpora of tests/fuzz/corpus/ (the files named seed-*).

    python3 tests/fuzz/make_corpus.py [--gpusim build/gpusim] [--shared ../shared]

Run from the repository root (`--only convert` or `--only rows` rewrites one corpus). Seeds are small (a few KiB; none above 64 KiB) and come from:
the bundled traces (heads and windows, plain and gzip), the cases the Check suites feed the
readers (tests/test_trace.c, test_json.c, test_replay.c, test_cli.sh), reports gpusim writes
(replay CSV and JSON with --plot, a sweep's CSV), the calibration tables (the built-in one,
and the measured H100 table of the --shared checkout when it has one), references converted
from the PyTorch runs there, and hand-made malformed cases. Inputs a fuzzer found a bug with are kept beside them under other names (crash-*,
slow-*: see the README, "Robustness") and are never rewritten here. The output is
deterministic (gzip without a timestamp), so rerunning it changes nothing.
"""
import argparse
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
MAGIC = "# gpusim-trace 1\n"
COLS = "seq,time_us,op,client,device,stream,id,size\n"
HDR = MAGIC + COLS


def gz(data):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as f:
        f.write(data)
    return buf.getvalue()


def put(corpus, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    assert len(data) <= 65536, (corpus, name, len(data))
    d = os.path.join(CORPUS, corpus)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def bundled(name):
    with gzip.open(os.path.join(ROOT, "traces", "data", name + ".gstrace.gz"), "rt") as f:
        return f.read().splitlines(keepends=True)


def header_and_events(lines):
    for i, l in enumerate(lines):
        if l == COLS:
            return lines[: i + 1], lines[i + 1 :]
    raise SystemExit("no column line")


def renumber(events):
    out = []
    for k, l in enumerate(events):
        out.append(str(k) + l[l.index(","):])
    return out


def traces():
    names = ["resnet50", "gpt2", "batch-alternate", "producer-consumer", "dataframe-then-torch"]
    for n in names:
        head, ev = header_and_events(bundled(n))
        put("trace", n + "-head.gstrace", "".join(head + ev[:60]))
        put("replay", n + "-head.gstrace", "".join(head + ev[:300]))
        # a window from the middle: frees of allocations before it are dropped (lenient)
        mid = len(ev) // 2
        put("replay", n + "-window.gstrace", "".join(head + renumber(ev[mid : mid + 300])))
    head, ev = header_and_events(bundled("resnet50"))
    put("trace", "resnet50-head.gstrace.gz", gz("".join(head + ev[:120]).encode()))
    head, ev = header_and_events(bundled("producer-consumer"))
    put("trace", "producer-consumer-head.gstrace.gz", gz("".join(head + ev[:120]).encode()))
    # two gzip members are one file (cat a.gz b.gz); a member then garbage is not
    half = HDR + "0,0,alloc,torch,0,0,1,10\n"
    put("trace", "two-members.gstrace.gz", gz(half.encode()) + gz(b"1,0,free,torch,0,0,1,10\n"))
    put("trace", "member-then-junk.gstrace.gz", gz(half.encode()) + b"junk")
    put("trace", "truncated.gstrace.gz", gz((HDR + "0,0,mark,torch,0,0,0,1\n" * 1).encode())[:-9])
    put("trace", "corrupt.gstrace.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03garbage")
    put("trace", "gzip-empty.gstrace.gz", gz(b""))
    put("trace", "gzip-magic-only", b"\x1f\x8b")

    ok = {
        "alloc-free": HDR + "0,0,alloc,torch,0,0,1,0\n1,1,free,torch,0,0,1,0\n",
        "mark-empty-cache": HDR + "0,0,mark,torch,0,0,0,3\n1,5,empty_cache,torch,0,0,9,0\n",
        "max-values": HDR + "0,18446744073709551615,alloc,a.b-c_9,4294967295,"
                            "18446744073709551615,18446744073709551615,18446744073709551615\n",
        "deferred": HDR + "0,0,alloc,torch,0,0,1,10\n1,0,alloc,torch,0,3,2,20\n"
                          "2,0,free,torch,0,3,1,10\n3,0,free_done,torch,0,3,1,0\n"
                          "4,0,free,torch,0,0,2,20\n",
        "id-reuse": HDR + "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,10\n"
                          "2,0,alloc,torch,0,0,1,30\n3,0,free,torch,0,0,1,0\n",
        "crlf": (HDR + "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,10\n").replace("\n", "\r\n"),
        "header-meta": MAGIC + "# a: b\n\n# c\n# device_total_bytes: 4194304\n# allocator_conf: \n"
                       + COLS + "\n# x\n0,0,alloc,torch,0,0,1,10\n",
        "two-clients": HDR + "0,0,alloc,torch,0,0,1,10\n1,0,alloc,cupy,0,1,2,20\n"
                             "2,0,free,cupy,0,1,2,20\n3,0,free,torch,0,0,1,10\n",
        "empty-events": HDR,
    }
    for k, v in ok.items():
        put("trace", k + ".gstrace", v)
    # Top user frames: the fixture of test_cli.sh, test_binary.sh and test_export.py too.
    put("trace", "frames.gstrace",
        "# gpusim-trace 2\n"
        "# source: hand-written: top user frames (tests/test_cli.sh, test_binary.sh, test_export.py)\n"
        "# frame 1: train.py:42:forward\n# frame 2: model.py:7:attention\n"
        "seq,time_us,op,client,device,stream,id,size,frame\n"
        "0,0,alloc,torch,0,0,1,1048576,1\n1,10,alloc,torch,0,0,2,20971520,2\n"
        "2,20,free,torch,0,0,1,1048576,\n3,30,alloc,torch,0,0,3,512,\n"
        "4,40,oom,torch,0,0,0,8589934592,1\n")
    put("trace", "bad-frame-undeclared.gstrace", "# gpusim-trace 1\n# frame 1: a.py:1:f\n"
        "seq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,10,2\n")
    put("trace", "bad-frame-on-free.gstrace", "# gpusim-trace 1\n# frame 1: a.py:1:f\n"
        "seq,time_us,op,client,device,stream,id,size,frame\n0,0,alloc,torch,0,0,1,10,1\n"
        "1,0,free,torch,0,0,1,10,1\n")
    lenient = {
        "free-unknown": HDR + "0,0,free,torch,0,0,7,5\n",
        "double-free": HDR + "0,0,alloc,torch,0,0,1,5\n1,0,free,torch,0,0,1,5\n2,0,free,torch,0,0,1,5\n",
        "done-without-free": HDR + "0,0,alloc,torch,0,0,1,5\n1,0,free_done,torch,0,0,1,5\n",
        "alloc-live": HDR + "0,0,alloc,torch,0,0,1,5\n1,0,alloc,torch,0,0,1,6\n",
        "wrong-size": HDR + "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,5\n",
        "dropped-client": HDR + "0,0,free,other,0,9,7,5\n1,0,alloc,torch,0,0,1,5\n",
    }
    for k, v in lenient.items():
        put("trace", "lenient-" + k + ".gstrace", v)
    bad = {
        "empty": "",
        "version-2": "# gpusim-trace 2\n" + COLS,
        "no-magic": "hello\n",
        "magic-space": "# gpusim-trace 1 \n" + COLS,
        "no-columns": MAGIC + "# a: b\n",
        "short-columns": MAGIC + "seq,time_us,op\n",
        "truncated-line": HDR + "0,0,alloc,torch,0,0,1,10\n1,0,fr",
        "bad-total": MAGIC + "# device_total_bytes: 18446744073709551616\n" + COLS,
        "unknown-op": HDR + "0,0,Alloc,torch,0,0,1,10\n",
        "bad-number": HDR + "0,0,alloc,torch,0,0x1,1,5\n",
        "overflow": HDR + "0,0,alloc,torch,0,0,99999999999999999999999,1\n",
        "device-2e32": HDR + "0,0,alloc,torch,4294967296,0,1,1\n",
        "nine-columns": HDR + "0,0,alloc,torch,0,0,1,5,\n",
        "bad-client": HDR + "0,0,alloc,to rch,0,0,1,5\n",
        "bad-seq": HDR + "0,0,alloc,torch,0,0,1,5\n2,0,free,torch,0,0,1,5\n",
        "nul-bytes": HDR + "0,0,alloc,tor\0ch,0,0,1,5\n1,\x01\xff,x\n",
        "header-cr": MAGIC + "# a: b\rc\n" + COLS,
    }
    for k, v in bad.items():
        put("trace", "bad-" + k + ".gstrace", v)

    # replays: what makes the core work hard on few events
    big = 18446744073709551615
    rp = {
        "huge-sizes": HDR + "".join(
            "%d,0,alloc,torch,0,0,%d,%d\n" % (i, i + 1, s)
            for i, s in enumerate([big, big - 1, 2**63, 2**62 + 1, 2**40, 0, 1]))
            + "7,0,empty_cache,torch,0,0,0,0\n",
        "tiny-device": MAGIC + "# device_total_bytes: 4194304\n" + COLS
            + "0,0,alloc,torch,0,0,1,1048576\n1,0,alloc,torch,0,0,2,3145728\n"
              "2,0,alloc,torch,0,0,3,512\n3,0,free,torch,0,0,1,0\n"
              "4,0,alloc,torch,0,0,4,2097152\n5,0,empty_cache,torch,0,0,0,0\n",
        "huge-device": MAGIC + "# device_total_bytes: 18446744073709551615\n" + COLS
            + "0,0,alloc,torch,0,0,1,1048576\n1,0,alloc,torch,0,0,2,31457280\n"
              "2,0,free,torch,0,0,1,0\n3,0,empty_cache,torch,0,0,0,0\n",
        "zero-device": MAGIC + "# device_total_bytes: 0\n" + COLS
            + "0,0,alloc,torch,0,0,1,1048576\n",
        "streams": HDR + "".join(
            "%d,0,alloc,torch,0,%d,%d,%d\n" % (i, i % 5, i + 1, (i + 1) * 700000) for i in range(20))
            + "".join("%d,0,free,torch,0,%d,%d,0\n" % (20 + i, i % 5, i + 1) for i in range(0, 20, 2))
            + "30,0,empty_cache,torch,0,0,0,0\n",
        "deferred-mix": HDR + "0,0,alloc,torch,0,0,1,25000000\n1,0,alloc,torch,0,1,2,700\n"
            "2,0,free,torch,0,1,1,0\n3,0,alloc,torch,0,0,3,25000000\n4,0,empty_cache,torch,0,0,0,0\n"
            "5,0,free_done,torch,0,1,1,0\n6,0,free,torch,0,0,2,0\n7,0,alloc,torch,0,1,4,24000000\n",
        "two-clients": HDR + "0,0,alloc,torch,0,0,1,40000000\n1,0,alloc,cupy,0,0,2,40000000\n"
            "2,0,free,torch,0,0,1,0\n3,0,alloc,cupy,0,0,3,60000000\n4,0,free,cupy,0,0,2,0\n"
            "5,0,alloc,torch,0,0,4,70000000\n6,0,empty_cache,torch,0,0,0,0\n",
        "cap-pressure": HDR + "".join(
            "%d,0,alloc,torch,0,0,%d,%d\n" % (i, i + 1, 9000000 + i * 1000) for i in range(8))
            + "".join("%d,0,free,torch,0,0,%d,0\n" % (8 + i, 2 * i + 1) for i in range(4))
            + "".join("%d,0,alloc,torch,0,0,%d,%d\n" % (12 + i, 100 + i, 17000000) for i in range(4)),
    }
    for k, v in rp.items():
        put("replay", k + ".gstrace", v)


def binary_seeds():
    """The binary reader's seeds: every valid trace seed in its binary form (traces/gsbin.py,
    as gpusim writes it), and a few damaged ones."""
    sys.path.insert(0, os.path.join(ROOT, "traces"))
    import gsbin
    d = os.path.join(CORPUS, "trace")
    good = []
    for f in sorted(os.listdir(d)):
        if not f.startswith("seed-"):
            continue
        with open(os.path.join(d, f), "rb") as fh:
            data = fh.read()
        try:
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            b = gsbin.encode_text(data)
        except (ValueError, UnicodeError, OSError, EOFError, zlib.error):
            continue
        if len(b) <= 65536:
            name = f[len("seed-"):].replace(".gstrace.gz", "").replace(".gstrace", "")
            put("binary", name + ".gsbin", b)
            good.append(b)
    small = min(good, key=len)
    put("binary", "bad-truncated.gsbin", small[:-3])
    put("binary", "bad-trailing.gsbin", small + b"\0")
    put("binary", "bad-header-only.gsbin", small[:64])
    put("binary", "bad-magic-only.gsbin", small[:8])


def json_seeds(gpusim):
    docs = {
        "empty-object": "{}",
        "empty-array": "[]",
        "scalars": '[null, true, false, 0, -0, 1.5e3, -2E-2, "s"]',
        "numbers": '[18446744073709551615, 18446744073709551616, -9223372036854775808, '
                   '-9223372036854775809, 1e400, 1e-400, 0.1, 123456789012345678901234567890]',
        "escapes": r'["\"\\\/\b\f\n\r\t", "\u00e9\u4e2d\ud83d\ude00", "caf\u00e9"]',
        "dup-keys": '{"a": 1, "b": 2, "a": 3}',
        "nested": '{"a": [{"b": {"c": [1, [2, [3, {"d": null}]]]}}]}',
        "deep-255": "[" * 255 + "]" * 255,
        "deep-256": "[" * 256 + "]" * 256,
        "deep-63-objects": '{"k":' * 63 + "1" + "}" * 63,
        "lines": '{\n  "a": 1,\n\n  "b": [\n 2,\n 3\n ]\n}\n',
        "utf8": '{"k\u00e9y": "v\u00e4lue \u4e2d"}',
    }
    for k, v in docs.items():
        put("json", k + ".json", v)
    bad = {
        "trailing-comma": "[1, 2,]",
        "comment": "// c\n{}",
        "nan": "[NaN]",
        "leading-zero": "[01]",
        "bad-escape": r'["\x"]',
        "lone-surrogate": r'["\ud800"]',
        "low-surrogate": r'["\udc00x"]',
        "nul-escape": r'["a\u0000b"]',
        "control": '["a\tb"]',
        "unterminated": '{"a": "b',
        "after-value": "{} x",
        "invalid-utf8": b'["\xff\xfe"]',
        "overlong-utf8": b'["\xc0\xaf"]',
        "bom": b"\xef\xbb\xbf{}",
        "deep-257": "[" * 257 + "]" * 257,
        "missing-colon": '{"a" 1}',
        "number-dot": "[1.]",
        "number-exp": "[1e]",
        "raw-nul": b'{"a":\x00}',
    }
    for k, v in bad.items():
        put("json", "bad-" + k + ".json", v)


def calibration_seeds(shared):
    src = open(os.path.join(ROOT, "backends", "calibration.c")).read()
    # the rows of H100_ROWS, R(op, size, median, p10, p90, n), as the CSV text they give
    rows = re.findall(r"^\s*R\(([^)]*)\)", src, re.M)
    put("calibration", "builtin.csv", "op,size_bytes,median_us,p10_us,p90_us,n\n"
        + "".join(r.replace(", ", ",") + "\n" for r in rows))
    if shared and os.path.exists(os.path.join(shared, "calibration", "h100-latency.csv")):
        put("calibration", "shared-h100.csv",
            open(os.path.join(shared, "calibration", "h100-latency.csv"), "rb").read())
    H = "op,size_bytes,median_us,p10_us,p90_us,n\n"
    ok = {
        "one-row": H + "cudaMalloc,512,48.87,48.30,63.66,41\n",
        "touched": H + "cudaMalloc,512,1,,,1\ncudaFree,512,2,,,1\ncudaFree_touched,512,3,,,1\n",
        "vmm": H + "cudaMalloc,2097152,50,,,1\ncuMemCreate,2097152,16.3,,,1\n"
                   "cuMemMap,2097152,1.37,,,1\ncuMemUnmap,20971520,20.8,,,1\n",
        "falling": H + "cudaMalloc,512,100,,,1\ncudaMalloc,4096,10,,,1\n",
        "comments-crlf": ("# a table\n" + H + "\n cudaMalloc,512,1.5,,,1 \n").replace("\n", "\r\n"),
        "dup-size": H + "cudaMalloc,512,1,,,1\ncudaMalloc,512,2,,,1\n",
        "zero": H + "cudaMalloc,0,0,,,1\ncudaFree,0,0,,,1\n",
        "big": H + "cudaMalloc,1,0,,,1\ncudaMalloc,2,1e300,,,1\n",
        "unknown-ops": H + "cudaMalloc,512,1,,,1\ngrow_2MiB_page,2097152,52,,,1\nwhatever,1,1\n",
    }
    for k, v in ok.items():
        put("calibration", k + ".csv", v)
    bad = {
        "nan": H + "cudaMalloc,512,nan,,,1\n",
        "inf": H + "cudaMalloc,512,inf,,,1\n",
        "negative": H + "cudaMalloc,512,-1,,,1\n",
        "two-fields": H + "cudaMalloc,512\n",
        "size-text": H + "cudaMalloc,5x,1,,,1\n",
        "no-malloc": H + "cudaFree,512,1,,,1\n",
        "empty": "",
        "control": H + "cudaMalloc,512,1\x1b[31m,,,1\n",
        "nul": H + "cudaMalloc,512,1,,,1\n\0cudaMalloc,x\n",
    }
    for k, v in bad.items():
        put("calibration", "bad-" + k + ".csv", v)


def reference_seeds(shared, tmp):
    base = os.path.join(shared or "", "traces", "pytorch-2.11-h100")
    for run in ["resnet50__default__5.75", "resnet50__expandable_segments__nocap",
                "gpt2__max_split_size_mb__nocap"]:
        pk = os.path.join(base, run + ".pickle.gz")
        if not os.path.exists(pk):
            continue
        out = os.path.join(tmp, run + ".ref.json")
        for f in [".pickle.gz", ".json"]:
            os.symlink(os.path.join(base, run + f), os.path.join(tmp, run + f))
        subprocess.run([sys.executable, os.path.join(ROOT, "traces", "convert.py"),
                        os.path.join(tmp, run + ".pickle.gz"), "-o", os.path.join(tmp, run + ".gstrace"),
                        "--reference", out], check=True)
        put("reference", run + ".ref.json", open(out, "rb").read())

    def ref(conf="", total=85017493504, cap=0, events=(), stats=None, outcome="ok"):
        d = {"format": "gpusim-reference 1", "allocator_conf": conf, "device_total_bytes": total,
             "cap_bytes": cap, "outcome": outcome, "device_events": [list(e) for e in events]}
        if stats is not None:
            d["memory_stats"] = stats
        return json.dumps(d, indent=1)

    A = 0x7F0000000000
    segs = [("segment_alloc", A, 2097152), ("segment_alloc", A + 2097152, 20971520),
            ("segment_free", A, 2097152), ("segment_alloc", A + 0x10000000, 2097152),
            ("segment_alloc", A + 0x20000000, 20971520)]
    put("reference", "small.ref.json", ref(events=segs, stats={"num_alloc_retries": 0,
        "num_ooms": 0, "allocated_bytes.all.peak": 1000, "reserved_bytes.all.peak": 2097152,
        "num_device_alloc": 4}))
    put("reference", "expandable.ref.json",
        ref(conf="expandable_segments:True", events=[("segment_map", A, 20971520),
            ("segment_unmap", A, 20971520)]))
    put("reference", "capped.ref.json", ref(conf="max_split_size_mb:128,garbage_collection_threshold:0.6",
                                            cap=134217728, total=268435456, events=segs))
    put("reference", "roundup.ref.json", ref(conf="roundup_power2_divisions:[256:1,512:2,>:8]",
                                             events=segs[:2]))
    put("reference", "overlapping.ref.json",
        ref(events=[("segment_alloc", A, 20971520), ("segment_alloc", A + 4096, 2097152),
                    ("segment_alloc", 0, 2097152), ("segment_alloc", 2**64 - 2097152, 20971520)]))
    put("reference", "huge-device.ref.json",
        ref(conf="expandable_segments:True", total=2**64 - 1, events=[]))
    put("reference", "tiny-device.ref.json", ref(total=2097152, cap=1, events=segs))
    put("reference", "free-first.ref.json", ref(events=[("segment_free", A, 2097152)]))
    put("reference", "bad-conf.ref.json", ref(conf="max_split_size_mb:\x1b[31mred"))
    put("reference", "bad-format.ref.json", '{"format": "gpusim-reference 2", "device_events": []}')
    put("reference", "bad-events.ref.json",
        '{"format": "gpusim-reference 1", "device_events": [["segment_alloc", -1, 2]]}')
    put("reference", "bad-no-events.ref.json", '{"format": "gpusim-reference 1"}')
    put("reference", "bad-not-json.ref.json", "format: gpusim-reference 1\n")


def plot_seeds(gpusim, tmp):
    if not gpusim:
        return
    head, ev = header_and_events(bundled("batch-alternate"))
    small = "small.gstrace"
    with open(os.path.join(tmp, small), "w") as f:
        f.write("".join(head + ev[:120]))
    two = "two.gstrace"
    head, ev = header_and_events(bundled("producer-consumer"))
    with open(os.path.join(tmp, two), "w") as f:
        f.write("".join(head + ev[:80]))

    def steady(data):
        # replay speed is host time: a fixed figure keeps the seeds the same from run to run
        text = data.decode()
        text = re.sub(r'("replay_events_per_s": )[0-9.e+]+', r"\g<1>1000000", text)
        lines = text.split("\n")
        if lines and "replay_events_per_s" in lines[0].split(","):
            col = lines[0].split(",").index("replay_events_per_s")
            for i in range(1, len(lines)):
                f = lines[i].split(",")
                # rows whose quoted fields hold no comma before the column (gpusim's own)
                if len(f) == len(lines[0].split(",")):
                    f[col] = "1000000"
                    lines[i] = ",".join(f)
        return "\n".join(lines).encode()

    def run(*args):
        # in tmp, with names relative to it: the reports name the traces the same every time
        r = subprocess.run([os.path.abspath(gpusim)] + list(args), capture_output=True,
                           check=True, cwd=tmp)
        return steady(r.stdout)

    pol = ["-p", "pytorch", "-p", "pytorch:expandable_segments:True"]
    put("plot_saved", "replay.csv", run("replay", small, *pol, "--capacity", "300MiB", "--format", "csv"))
    put("plot_saved", "two-traces.csv", run("replay", small, two, "-p", "cupy", "--format", "csv"))
    put("plot_saved", "replay.json", run("replay", small, "-p", "pytorch", "--format", "json"))
    put("json", "report.json", run("replay", small, "-p", "pytorch", "--format", "json"))
    put("json", "report-clients.json", run("replay", two, "-p", "cupy", "--format", "json"))
    out = os.path.join(tmp, "plot.json")
    run("replay", small, *pol, "--capacity", "300MiB", "--plot", "p", "--format", "json",
        "-o", "plot.json")
    put("plot_saved", "replay-plot.json", steady(open(out, "rb").read()))
    run("replay", small, two, "-p", "pytorch", "--plot", "p2", "--format", "json", "-o", "plot.json")
    put("plot_saved", "two-traces-plot.json", steady(open(out, "rb").read()))
    put("plot_saved", "sweep.csv",
        run("sweep", small, "--policy", "pytorch:max_split_size_mb:{64,128}", "--capacity", "{300,400}MiB"))
    H = ("trace,policy,capacity_bytes,outcome,peak_allocated_bytes,peak_reserved_bytes,frag_peak,"
         "num_alloc_retries,num_ooms,device_time_us\n")
    hand = {
        "names.csv": H + '"a`id`$(x)\'"".gz",\'p\'"o`l,0,ok,1,2,0.5,0,0,1.5\n'
                     + '"line\nbreak",x,1,oom,1,2,0.5,0,0,1.5\n',
        "unterminated.csv": H + '"never ends,x,1,ok,1,2,0.5,0,0,1.5\n',
        "short-row.csv": H + "t,p,0,ok\n",
        "header-only.csv": H,
        "no-column.csv": "trace,policy\nt,p\n",
        "sweep-cells.csv": "cell,k," + H + "0,1,t,p,0,ok,1,2,0.5,0,0,1.5\n1,2,t,p,0,ok,1,2,0.5,0,0,1.5\n",
        "numbers.csv": H + "t,p,18446744073709551615,ok,-1,9223372036854775807,nan,99,99,1e400\n",
        "empty-json-results.json": '{"trace": "t", "results": []}',
        "json-array.json": '[{"trace": "t", "results": [{"policy": "p", "outcome": "ok", '
                           '"capacity_bytes": 0, "peak_allocated_bytes": 1, "peak_reserved_bytes": 2, '
                           '"frag_peak": 0.5, "num_alloc_retries": 0, "num_ooms": 0, '
                           '"device_time_us": 1.5}]}]',
        "json-name.json": '{"trace": "../../etc/`x`\\n\'\\"", "results": [{"policy": "a\'b`c`\\n", '
                          '"outcome": "ok", "capacity_bytes": 1, "peak_allocated_bytes": 1, '
                          '"peak_reserved_bytes": 2, "frag_peak": 0.5, "num_alloc_retries": 0, '
                          '"num_ooms": 0, "device_time_us": 1.5}]}',
        "empty": "",
        "space.json": "   ",
    }
    for k, v in hand.items():
        put("plot_saved", k, v)


def convert_seeds(shared):
    """Inputs of the converter's fuzz loop (fuzz_convert.py): small snapshots of every shape the
    converter reads (PyTorch's keys and actions, several devices, deferred frees, failed
    requests, a log cut mid-run, segments, frames with user and library files), under several
    pickle protocols and gzip, RMM logs, and the heads of real snapshots from --shared."""
    import pickle
    MiB = 1 << 20

    def ev(action, addr, size, t, stream=0, frames=None):
        e = {"action": action, "size": size, "stream": stream, "time_us": t,
             "compile_context": "N/A", "user_metadata": ""}
        e["device_free" if action == "oom" else "addr"] = addr
        if frames is not None:
            e["frames"] = frames
        return e

    def snap(*devs, conf="", segments=(), gc=0.0):
        return {"segments": list(segments), "device_traces": [list(d) for d in devs],
                "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": conf, "max_split_size": -1,
                                       "garbage_collection_threshold": gc,
                                       "expandable_segments": "expandable_segments:True" in conf,
                                       "roundup_power2_divisions": {"1": 0}},
                "external_annotations": []}

    A = 0x7F0000000000
    basic = [ev("segment_alloc", A, 2 * MiB, 990), ev("alloc", A, 100, 1000),
             ev("alloc", A + 512, 513, 1010), ev("free_requested", A, 100, 1020),
             ev("free_completed", A, 100, 1021), ev("snapshot", 0, 613, 1025),
             ev("segment_alloc", A + 0x200000, 20 * MiB, 1029), ev("alloc", A, 50, 1030),
             ev("alloc", A + 0x200000, 3 * MiB, 1031, stream=7),
             ev("free_requested", A + 512, 513, 1040), ev("free_completed", A + 512, 513, 1040)]
    deferred = [ev("alloc", A, 4096, 1), ev("free_requested", A, 4096, 2, stream=5),
                ev("alloc", A + 4096, 64, 3), ev("free_completed", A, 4096, 4, stream=5),
                ev("free_requested", A + 4096, 64, 5), ev("free_completed", A + 4096, 64, 5)]
    oom = [ev("segment_alloc", A, 20 * MiB, 1), ev("alloc", A, 10 * MiB, 2),
           ev("segment_free", A + 0x1000000, 2 * MiB, 3), ev("oom", 1 << 30, 1 << 40, 4),
           ev("alloc", A + 10 * MiB, 4096, 5)]
    expandable = [ev("segment_map", A, 20 * MiB, 1), ev("alloc", A, 8 * MiB, 2),
                  ev("free_requested", A, 8 * MiB, 3), ev("free_completed", A, 8 * MiB, 3),
                  ev("segment_unmap", A, 20 * MiB, 4), ev("segment_map", A, 20 * MiB, 5),
                  ev("alloc", A, 9 * MiB, 6)]
    midrun = [ev("free_requested", A, 512, 1), ev("free_completed", A, 512, 1),
              ev("free_completed", A + 512, 512, 2), ev("alloc", A + 1024, 7, 3),
              ev("segment_free", A + 0x400000, 2 * MiB, 4)]
    segs = [{"device": 0, "address": A, "total_size": 2 * MiB, "stream": 0,
             "segment_type": "small", "is_expandable": False,
             "blocks": [{"address": A, "size": 512, "requested_size": 100,
                         "state": "active_allocated"},
                        {"address": A + 512, "size": 2 * MiB - 512, "requested_size": 0,
                         "state": "inactive"}]}]
    lib = {"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py",
           "line": 125, "name": "forward"}
    user = {"filename": "/home/u/train.py", "line": 42, "name": "step"}
    stack = [lib, {"filename": "/usr/lib/python3.11/contextlib.py", "line": 81, "name": "inner"},
             user, {"filename": "/home/u/train.py", "line": 90, "name": "main"}]
    frames = [ev("alloc", A, 100, 1, frames=stack), ev("alloc", A + 512, 200, 2, frames=[lib]),
              ev("alloc", A + 1024, 300, 3, frames=[]),
              ev("free_requested", A, 100, 4, frames=stack),
              ev("free_completed", A, 100, 4, frames=stack)]
    cases = {
        "basic.pickle": snap(basic, conf="max_split_size_mb:128", segments=segs),
        "deferred.pickle": snap(deferred),
        "oom.pickle": snap(oom, conf="garbage_collection_threshold:0.6", gc=0.6),
        "oom-last.pickle": snap(oom[:4]),
        "expandable.pickle": snap(expandable, conf="expandable_segments:True"),
        "midrun.pickle": snap(midrun, segments=segs),
        "two-devices.pickle": snap(basic[:5], deferred),
        "empty-device.pickle": snap([], basic[:3]),
        "frames.pickle": snap(frames),
    }
    for name, s in cases.items():
        put("convert", name, pickle.dumps(s, protocol=4))
    put("convert", "basic-p0.pickle", pickle.dumps(cases["basic.pickle"], protocol=0))
    put("convert", "deferred-p2.pickle", pickle.dumps(cases["deferred.pickle"], protocol=2))
    put("convert", "frames-p5.pickle", pickle.dumps(cases["frames.pickle"], protocol=5))
    put("convert", "basic.pickle.gz", gz(pickle.dumps(cases["basic.pickle"], protocol=4)))
    put("convert", "not-a-snapshot.pickle", pickle.dumps([1, 2, {"segments": []}], protocol=4))
    put("convert", "rmm.csv", "Thread,Time,Action,Pointer,Size,Stream\n"
        "140,10:00:00.000001,allocate,0x7f0000000000,4096,0x0\n"
        "140,10:00:00.000005,allocate,0x7f0000001000,100,0x5\n"
        "140,10:00:00.000009,free,0x7f0000000000,4096,0x0\n"
        "140,23:59:59.999999,allocate,0x7f0000000000,8,0x0\n"
        "140,00:00:00.000001,free,0x7f0000000000,8,0x0\n")
    base = os.path.join(shared or "", "traces", "pytorch-2.11-h100")
    for run, n in (("resnet50__default__5.75", 80), ("gpt2__expandable_segments__nocap", 60)):
        pk = os.path.join(base, run + ".pickle.gz")
        if not os.path.exists(pk):
            continue
        with gzip.open(pk, "rb") as f:
            s = pickle.load(f)
        s["device_traces"] = [d[:n] for d in s["device_traces"]]
        s["segments"] = s["segments"][:2]
        for seg in s["segments"]:
            seg["blocks"] = seg["blocks"][:3]
        put("convert", "head-" + run + ".pickle", pickle.dumps(s, protocol=4))


def rows_seeds():
    """Inputs of fuzz_rows: streams the converter sends gpusim write-rows (gsconvert's
    output.rows_stream) for small traces of every kind of row, and broken ones."""
    sys.path.insert(0, os.path.join(ROOT, "traces"))
    from gsconvert import model, output
    head = (MAGIC + "# source: fuzz\n# device_total_bytes: 1073741824\n" + COLS).encode()

    def stream(*rows, prefix=(), hd=head, client=b"torch"):
        r = model.TraceRows()
        r.prefix = list(prefix)
        for row in rows:
            r.append(row)
        return b"".join(bytes(p) for p in output.rows_stream(hd, r, client))

    # (time, op, device, stream, id, size)
    # (a free carries its allocation's size, as the converter's rows do: the writer checks it)
    basic = [(0, "alloc", 0, 0, 1, 512), (1, "alloc", 0, 7, 2, 4 << 20),
             (2, "free", 0, 7, 2, 4 << 20), (3, "free_done", 0, 7, 2, 4 << 20),
             (4, "mark", 0, 0, 0, 1), (5, "empty_cache", 0, 0, 0, 0), (6, "oom", 0, 0, 0, 1 << 30),
             (7, "free", 0, 0, 1, 512)]
    put("rows", "basic.rows", stream(*basic))
    put("rows", "synthesized.rows",
        stream((9, "alloc", 0, 0, 3, 64), (10, "free", 0, 0, 1, 1 << 20),
               hd=(MAGIC + "# synthesized_allocs: 2\n# device_total_bytes: 1073741824\n" +
                   COLS).encode(),
               prefix=[(0, "alloc", 0, 0, 1, 1 << 20), (0, "alloc", 0, 5, 2, 2 << 20)]))
    put("rows", "two-devices.rows", stream((0, "alloc", 0, 0, 1, 512), (1, "alloc", 1, 0, 2, 512),
                                           (2, "free", 1, 0, 2, 512), (3, "free", 0, 0, 1, 512)))
    put("rows", "bad-empty.rows", stream())
    put("rows", "no-total.rows", stream(*basic, hd=(MAGIC + COLS).encode()))
    put("rows", "bad-out-of-order.rows", stream((0, "alloc", 0, 0, 2, 512)))
    put("rows", "bad-device.rows", stream((0, "alloc", 1 << 32, 0, 1, 512)))
    put("rows", "bad-free-unknown.rows", stream((0, "alloc", 0, 0, 1, 512), (1, "free", 0, 0, 9, 0)))
    put("rows", "bad-double-free.rows", stream((0, "alloc", 0, 0, 1, 512),
                                               (1, "free", 0, 0, 1, 512), (2, "free", 0, 0, 1, 512)))
    put("rows", "bad-free-size.rows", stream((0, "alloc", 0, 0, 1, 512), (1, "free", 0, 0, 1, 0)))
    put("rows", "bad-huge-device.rows", stream(*basic, hd=(MAGIC + "# device_total_bytes: "
                                                           "18691697672192\n" + COLS).encode()))
    put("rows", "bad-nul-in-header.rows", stream(*basic, hd=head + b"\0junk"))
    put("rows", "bad-client.rows", stream(*basic, client=b"a b"))
    put("rows", "bad-total.rows", stream(*basic, hd=(MAGIC + "# device_total_bytes: 1e9\n" +
                                                     COLS).encode()))
    put("rows", "bad-no-columns.rows", stream(*basic, hd=MAGIC.encode()))
    whole = stream(*basic)
    put("rows", "bad-truncated.rows", whole[:-5])
    put("rows", "bad-trailing.rows", whole + b"\0")
    put("rows", "bad-magic-only.rows", whole[:8])
    put("rows", "bad-huge-count.rows", whole[:8] + b"\xff\xff\xff\x7f")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpusim", default=os.path.join(ROOT, "build", "gpusim"))
    ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
    ap.add_argument("--only", metavar="CORPUS", help="rewrite this corpus only (e.g. convert)")
    a = ap.parse_args()
    gpusim = a.gpusim if os.path.exists(a.gpusim) else None
    shared = a.shared if os.path.isdir(a.shared) else None
    for d in os.listdir(CORPUS) if os.path.isdir(CORPUS) else []:
        if a.only and d != a.only:
            continue
        for f in os.listdir(os.path.join(CORPUS, d)):
            if f.startswith("seed-"):
                os.unlink(os.path.join(CORPUS, d, f))
    if a.only == "convert":
        convert_seeds(shared)
    if a.only == "rows":
        rows_seeds()
    with tempfile.TemporaryDirectory() as tmp:
        if a.only:
            pass
        else:
            traces()
            binary_seeds()
            json_seeds(gpusim)
            calibration_seeds(shared)
            reference_seeds(shared, tmp)
            plot_seeds(gpusim, tmp)
            convert_seeds(shared)
            rows_seeds()
    for d in sorted(os.listdir(CORPUS)):
        print("%-12s %d files" % (d, len(os.listdir(os.path.join(CORPUS, d)))))


if __name__ == "__main__":
    main()
