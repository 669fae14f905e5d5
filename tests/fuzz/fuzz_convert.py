#!/usr/bin/env python3
"""fuzz_convert.py - a fuzz loop for the converter (traces/convert.py), standard library only.

    python3 tests/fuzz/fuzz_convert.py --replay                  # each corpus file once (meson test)
    python3 tests/fuzz/fuzz_convert.py --iterations 100000       # mutate seeds 100,000 times
    python3 tests/fuzz/fuzz_convert.py --seconds 60 --crashes DIR

The libFuzzer harnesses of this directory cover the C readers; the converter is Python, so it
gets this loop instead. Inputs are the seed corpus tests/fuzz/corpus/convert/ (written by
make_corpus.py) and mutations of it: byte flips, insertions and deletions, truncation, and
structural mutations of an unpickled snapshot pickled again under a random protocol (values of
the wrong type, sizes of 2^64 and more, negative numbers, NaN and infinite times, control
characters in strings, keys deleted, entries duplicated, one list or event referred to twice,
frames added). Each input is converted in this process, with convert.main(), and must give
either a valid trace (checked against the text format's rules, docs/trace-format.md, and the
id rules: an alloc of a fresh id, a free of a live one, a free_done after a deferred free) or
exit status 2 with exactly one line on stderr starting "convert.py: " that is not an
"internal error" (the last-resort handler's line means a bug). An input that takes more than
--timeout seconds is a hang. Every failure is printed, and kept in --crashes DIR when given;
the exit status is 1 when any input failed, else 0. The same --seed gives the same inputs.
"""

import argparse
import contextlib
import copy
import io
import math
import os
import pickle
import random
import re
import resource
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "traces"))
import convert  # noqa: E402  (the converter under test, in this process)

CORPUS = os.path.join(HERE, "corpus", "convert")
U64 = 1 << 64
NAME = re.compile(r"[A-Za-z0-9_.-]+\Z")
NUM = re.compile(r"[0-9]+\Z")
COLUMNS = "seq,time_us,op,client,device,stream,id,size"


class Hang(BaseException):
    """Raised by the timer; a BaseException so that the converter's handlers let it through."""


def _alarm(signum, frame):
    raise Hang()


# ---------------------------------------------------------------------------------------------
# What a written trace must be (docs/trace-format.md)
# ---------------------------------------------------------------------------------------------

def check_trace(data):
    """None when data is a valid trace, else what is wrong with it."""
    if data[:2] == b"\x1f\x8b":
        import gzip
        data = gzip.decompress(data)
    if b"\r" in data or b"\x00" in data:
        return "a CR or NUL byte"
    if not data.endswith(b"\n"):
        return "no newline at the end"
    lines = data.split(b"\n")[:-1]
    if not lines or lines[0] not in (b"# gpusim-trace 1", b"# gpusim-trace 2", b"# gpusim-trace 3"):
        return "bad magic line"
    version = int(lines[0][-1:])
    i = 1
    frames = 0   # '# frame N: file:line:function' lines, N = 1, 2, ... (the Frames section)
    while i < len(lines) and lines[i].startswith(b"#"):
        fm = re.match(rb"# frame ([0-9]+): (.*)\Z", lines[i], re.S)
        if fm:
            if int(fm.group(1)) != frames + 1:
                return f"header line {i + 1}: frame {fm.group(1)!r}, want {frames + 1}"
            frames += 1
            i += 1
            continue
        m = re.match(rb"# ([A-Za-z0-9_.-]+): (.*)\Z", lines[i], re.S)
        if not m:
            return f"header line {i + 1} is not '# key: value': {lines[i][:60]!r}"
        i += 1
    want = COLUMNS + ",frame" if frames else COLUMNS
    if i >= len(lines) or lines[i] != want.encode():
        return "no column line"
    live, pending, seen = {}, set(), set()
    ops = {"alloc", "free", "free_done", "empty_cache", "mark"} | ({"oom"} if version >= 2 else set())
    # version 3: private pools (docs/trace-format.md); their id names a pool, not an allocation
    pool_ops = {"pool_begin", "pool_end", "pool_release"} if version >= 3 else set()
    ops |= pool_ops
    # ids that are freed and then get a free_done later are deferred: look ahead once
    rows = []
    for n, line in enumerate(lines[i + 1:]):
        f = line.decode("utf-8", "replace").split(",")
        if len(f) != (9 if frames else 8):
            return f"event {n}: {len(f)} fields"
        if frames:
            fr = f.pop()
            if fr and not (NUM.match(fr) and int(fr) <= frames and
                           (f[2] in ("alloc", "oom") or int(fr) == 0)):
                return f"event {n}: bad frame {fr!r}"
        seq, t, op, client, dev, stream, ident, size = f
        for name, v in (("seq", seq), ("time", t), ("device", dev), ("stream", stream),
                        ("id", ident), ("size", size)):
            if not NUM.match(v) or int(v) >= U64:
                return f"event {n}: bad {name} {v!r}"
        if int(seq) != n:
            return f"event {n}: seq {seq}"
        if int(dev) >= 1 << 32:
            return f"event {n}: device {dev}"
        if op not in ops:
            return f"event {n}: op {op!r}"
        if not NAME.match(client):
            return f"event {n}: client {client!r}"
        if op in pool_ops:
            if not 1 <= int(ident) <= 4294967294 or int(size) not in (0, 1):
                return f"event {n}: {op} of pool {ident} with size {size}"
            continue
        rows.append((op, int(ident), int(size)))
    done_later = set()
    for op, ident, size in reversed(rows):
        if op == "free_done":
            done_later.add(ident)
        elif op == "alloc":
            done_later.discard(ident)
    # forward pass: the reader's id rules (an alloc of a live id, a free of an unknown one...)
    for n, (op, ident, size) in enumerate(rows):
        if op == "alloc":
            if ident in live or ident in pending:
                return f"event {n}: alloc of live id {ident}"
            live[ident] = size
        elif op == "free":
            if ident not in live:
                return f"event {n}: free of unknown id {ident}"
            if size not in (0, live[ident]):
                return f"event {n}: free size {size} != {live[ident]}"
            del live[ident]
            pending.add(ident)
        elif op == "free_done":
            if ident not in pending:
                return f"event {n}: free_done without a pending free of {ident}"
            pending.discard(ident)
        if op == "alloc":
            pending.discard(ident)
        seen.add(ident)
    return None


# ---------------------------------------------------------------------------------------------
# One input through the converter
# ---------------------------------------------------------------------------------------------

def run_one(data, workdir, name, timeout):
    """Convert data (written to workdir/name); None when the promise holds, else why not."""
    src = os.path.join(workdir, name)
    out = os.path.join(workdir, "out.gstrace")
    with open(src, "wb") as f:
        f.write(data)
    if os.path.exists(out):
        os.unlink(out)
    err = io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stderr(err):
            rc = convert.main([src, "-o", out, "--quiet"] if convert_has_quiet else [src, "-o", out])
    except Hang:
        return f"hang: more than {timeout} s"
    except SystemExit as e:        # argparse; never expected with these arguments
        return f"SystemExit {e.code}: {err.getvalue()[:200]!r}"
    except BaseException as e:     # noqa: BLE001 - an exception out of main() is the bug sought
        return f"exception out of main(): {type(e).__name__}: {e}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    lines = err.getvalue().splitlines()
    if rc == 0:
        if not os.path.exists(out):
            return "exit 0 and no output"
        with open(out, "rb") as f:
            why = check_trace(f.read())
        return None if why is None else f"exit 0 and an invalid trace: {why}"
    if rc != 2:
        return f"exit {rc}"
    if len(lines) != 1:
        return f"exit 2 with {len(lines)} lines on stderr: {err.getvalue()[:300]!r}"
    if not lines[0].startswith("convert.py: "):
        return f"exit 2, stderr not 'convert.py: ...': {lines[0][:200]!r}"
    if "internal error" in lines[0]:
        return f"the last-resort handler: {lines[0][:300]}"
    if os.path.exists(out):
        return "exit 2 and an output written"
    return None


convert_has_quiet = "--quiet" in open(convert.__file__, encoding="utf-8").read()


# ---------------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------------

NASTY_NUMBERS = [U64, U64 + 1, U64 - 1, 1 << 63, -(1 << 63), -1, 0, 10 ** 30, 1 << 200,
                 float("nan"), float("inf"), float("-inf"), 1e300, -0.0, 0.5, 2 ** 44 + 1]
NASTY_STRINGS = ["", "\n", "a\nb", "\r", "\x00", "\x1b[31m", "\ud800", "alloc", "free_requested",
                 "free_completed", "oom", "segment_free", "segment_unmap", "segment_map",
                 "snapshot", "x" * 300, "expandable_segments:True\n# device_total_bytes: 1"]
ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
           "segment_map", "segment_unmap", "oom", "snapshot"]


def containers(obj, path=(), out=None, depth=0):
    """Every dict and list inside obj, with its path, so one can be picked at random."""
    if out is None:
        out = []
    if depth > 8 or len(out) > 4000:
        return out
    if isinstance(obj, (dict, list)):
        out.append((path, obj))
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        for k, v in items:
            containers(v, path + (k,), out, depth + 1)
    return out


def nasty(rng):
    r = rng.random()
    if r < 0.5:
        return rng.choice(NASTY_NUMBERS)
    if r < 0.8:
        return rng.choice(NASTY_STRINGS)
    return rng.choice([None, True, [], {}, [1, 2], {"action": "alloc"}, (1, 2), b"bytes"])


def mutate_structure(snap, rng):
    cs = containers(snap)
    if not cs:
        return nasty(rng)
    for _ in range(rng.randint(1, 3)):
        path, c = rng.choice(cs)
        keys = list(c.keys()) if isinstance(c, dict) else list(range(len(c)))
        r = rng.random()
        if not keys:
            if isinstance(c, list):
                c.append(nasty(rng))
            else:
                c[rng.choice(["action", "addr", "size", "time_us", "frames"])] = nasty(rng)
            continue
        k = rng.choice(keys)
        if r < 0.35:
            c[k] = nasty(rng)                                    # a wrong value or type
        elif r < 0.45 and isinstance(c, dict):
            del c[k]                                             # a key missing
        elif r < 0.55:
            path2, other = rng.choice(cs)                        # a shared reference
            if other is not c:
                c[k] = other
        elif r < 0.65 and isinstance(c, list):
            c.insert(rng.randrange(len(c) + 1), c[k])            # an entry duplicated (shared)
        elif r < 0.72 and isinstance(c, list):
            c.insert(rng.randrange(len(c) + 1), copy.deepcopy(c[k]))
        elif r < 0.8 and isinstance(c, list):
            rng.shuffle(c)
        elif r < 0.88 and isinstance(c, dict) and "action" in c:
            c["action"] = rng.choice(ACTIONS)
        elif isinstance(c, dict):                                # frames, user and library ones
            c["frames"] = [{"filename": rng.choice(["/usr/lib/python3.11/x.py", "torch/nn/a.py",
                                                    "train.py", "", "a\nb.py"]),
                            "line": rng.choice([1, -1, U64, "7"]),
                            "name": rng.choice(["f", "", "\x00"])}
                           for _ in range(rng.randint(0, 4))]
        else:
            c[k] = rng.randint(0, 1 << 48)
    return snap


def mutate_bytes(data, rng):
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        r = rng.random()
        if not b:
            b += bytes([rng.randrange(256)])
        elif r < 0.4:
            b[rng.randrange(len(b))] = rng.randrange(256)                 # a byte flipped
        elif r < 0.55:
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)                                 # a bit flipped
        elif r < 0.7:
            i = rng.randrange(len(b))
            del b[i:i + rng.randint(1, 16)]                               # bytes deleted
        elif r < 0.8:
            i = rng.randrange(len(b))
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif r < 0.9:
            i = rng.randrange(len(b))
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 64)]                          # a piece repeated
        else:
            del b[rng.randrange(len(b)):]                                 # truncated
    return bytes(b)


def mutate(data, rng):
    r = rng.random()
    if r < 0.55 and data[:1] in (b"\x80", b"(", b"}", b"]"):
        try:
            snap = convert.SafeUnpickler(io.BytesIO(data)).load()
        except Exception:  # noqa: BLE001 - a seed that is already broken: mutate its bytes
            return mutate_bytes(data, rng)
        snap = mutate_structure(snap, rng)
        try:
            out = pickle.dumps(snap, protocol=rng.randint(0, pickle.HIGHEST_PROTOCOL))
        except Exception:  # noqa: BLE001 - e.g. a surrogate under protocol 0
            return mutate_bytes(data, rng)
        return out if rng.random() < 0.8 else mutate_bytes(out, rng)
    if r < 0.6:
        import gzip
        return gzip.compress(mutate_bytes(data, rng), mtime=0)
    return mutate_bytes(data, rng)


# ---------------------------------------------------------------------------------------------

def load_corpus(path):
    files = []
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            files.append((name, f.read()))
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--replay", action="store_true", help="run each corpus file once, then stop")
    ap.add_argument("--iterations", type=int, default=0, help="mutated inputs to run")
    ap.add_argument("--seconds", type=float, default=0, help="run mutated inputs this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=10, help="seconds per input (a hang)")
    ap.add_argument("--crashes", metavar="DIR", help="keep failing inputs here")
    ap.add_argument("--memory-mib", type=int, default=2048,
                    help="address-space limit of this process (a blow-up is a MemoryError)")
    a = ap.parse_args()
    if not a.replay and not a.iterations and not a.seconds:
        ap.error("give --replay, --iterations N or --seconds S")
    if a.memory_mib:
        lim = a.memory_mib << 20
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    signal.signal(signal.SIGALRM, _alarm)
    corpus = load_corpus(a.corpus)
    if not corpus:
        print(f"{a.corpus}: empty corpus", file=sys.stderr)
        return 2
    rng = random.Random(a.seed)
    failures = 0
    runs = 0
    t0 = time.monotonic()
    cpu0 = time.process_time()
    with tempfile.TemporaryDirectory(prefix="fuzz_convert.") as work:
        def one(data, label, name):
            nonlocal failures, runs
            runs += 1
            why = run_one(data, work, name, a.timeout)
            if why is not None:
                failures += 1
                print(f"FAIL {label}: {why}", file=sys.stderr)
                if a.crashes:
                    os.makedirs(a.crashes, exist_ok=True)
                    with open(os.path.join(a.crashes, f"crash-{a.seed}-{runs}"), "wb") as f:
                        f.write(data)
        if a.replay:
            for name, data in corpus:
                # the input keeps its seed's extension (a sibling .json is never beside it)
                one(data, name, "input" + os.path.splitext(name)[1])
        else:
            while True:
                if a.iterations and runs >= a.iterations:
                    break
                if a.seconds and time.monotonic() - t0 >= a.seconds:
                    break
                name, data = rng.choice(corpus)
                one(mutate(data, rng), f"input {runs} (from {name}, seed {a.seed})",
                    rng.choice(["input.pickle", "input.pickle.gz", "input.csv"]))
    wall = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    print(f"fuzz_convert: {runs} inputs, {failures} failed, {wall:.1f} s wall, {cpu:.1f} s CPU "
          f"({runs / max(cpu, 1e-9):.0f} inputs per CPU second)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
