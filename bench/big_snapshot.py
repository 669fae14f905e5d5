#!/usr/bin/env python3
"""big_snapshot.py - write a large synthetic PyTorch memory snapshot, for the converter's benchmark.

    python3 bench/big_snapshot.py ENTRIES OUTPUT.pickle[.gz] [--depth D] [--no-frames] [--seed S]

The snapshot has the shape torch.cuda.memory._dump_snapshot() writes (a dict with 'segments',
'device_traces' and 'allocator_settings'; entries with action, addr, size, stream, time_us,
compile_context, user_metadata and 'frames') and is pickled the way PyTorch's snapshot is: each
distinct frame is one dict shared by every stack that holds it (PyTorch's py_symbolize dedups
frames), and an allocation's free entries share its frames list (they carry the context of the
allocation). Stacks are D frames deep (default 20): a few in torch/ and Python's own library on
top, then the user's program. ENTRIES entries in all: allocations, their free_requested and
free_completed (a quarter of the frees deferred, completed later on another stream), segment
allocations as the heap grows, so that the converter has every kind of work to do.

The pickle is written opcode by opcode as it is generated (protocol 4 without framing), so a
5-million-entry snapshot takes little memory to write; `--check` loads a small one with
pickle.load and compares it with the same snapshot built as Python objects.
"""
import argparse
import gzip
import random
import struct
import sys

LIB_FILES = ["/usr/lib/python3.11/site-packages/torch/nn/modules/module.py",
             "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py",
             "/usr/lib/python3.11/site-packages/torch/_tensor.py",
             "/usr/lib/python3.11/contextlib.py", "/usr/lib/python3.11/functools.py"]
USER_FILES = ["/home/user/project/train.py", "/home/user/project/model.py",
              "/home/user/project/data.py"]


class Writer:
    """Pickle opcodes, with a memo of the strings and frames written once and referred to."""

    def __init__(self, f):
        self.f, self.memo, self.n = f, {}, 0
        self.parts = []

    def w(self, b):
        self.parts.append(b)
        if len(self.parts) > 4096:
            self.f.write(b"".join(self.parts))
            self.parts = []

    def flush(self):
        self.f.write(b"".join(self.parts))
        self.parts = []

    def begin(self):
        """The snapshot's start as PyTorch's pickler writes it: the outer dict, an empty
        'segments', 'device_traces' and one device's list, left open for its entries."""
        self.w(b"\x80\x04}")
        self.memoize()
        self.w(b"(")
        self.str("segments")
        self.value([])
        self.str("device_traces")
        self.w(b"]")
        self.memoize()
        self.w(b"]")
        self.memoize()

    def memoize(self):
        self.w(b"\x94")
        self.n += 1
        return self.n - 1

    def get(self, idx):
        self.w(b"h" + bytes([idx]) if idx < 256 else b"j" + struct.pack("<I", idx))

    def str(self, s, share=True):
        if share and s in self.memo:
            self.get(self.memo[s])
            return
        b = s.encode()
        self.w(b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b)
        idx = self.memoize()
        if share:
            self.memo[s] = idx

    def int(self, v):
        if 0 <= v < 256:
            self.w(b"K" + bytes([v]))
        elif -(1 << 31) <= v < 1 << 31:
            self.w(b"J" + struct.pack("<i", v))
        else:
            b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            self.w(b"\x8a" + bytes([len(b)]) + b)

    def value(self, v):
        if isinstance(v, bool):
            self.w(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self.int(v)
        elif isinstance(v, float):
            self.w(b"G" + struct.pack(">d", v))
        elif isinstance(v, str):
            self.str(v)
        elif isinstance(v, dict):
            self.dict(v)
        elif isinstance(v, list):
            self.w(b"]")
            self.memoize()
            for i in range(0, len(v), 1000):
                self.w(b"(")
                for x in v[i:i + 1000]:
                    self.value(x)
                self.w(b"e")
        else:
            raise TypeError(v)

    def dict(self, d):
        self.w(b"}")
        self.memoize()
        if d:
            self.w(b"(")
            for k, v in d.items():
                self.str(k)
                self.value(v)
            self.w(b"u")


def generate(n, depth, frames, seed):
    """Yield the entries (dicts; 'frames' as a key into the stack table) and the stacks."""
    rng = random.Random(seed)
    base_addr = 0x7F0000000000
    t = 1_795_000_000_000_000
    live = []            # (addr, size, stack id)
    deferred = []        # (addr, size, stack id, stream) freed, completion pending
    next_addr = base_addr
    seg_end = base_addr
    produced = 0
    stack_id = 0
    while produced < n:
        t += rng.randint(1, 40)
        r = rng.random()
        if deferred and (r < 0.05 or produced + len(deferred) >= n):
            addr, size, sid, stream = deferred.pop(rng.randrange(len(deferred)))
            yield {"action": "free_completed", "addr": addr, "size": size, "stream": stream,
                   "time_us": t}, sid
            produced += 1
        elif live and (r < 0.5 or produced + 2 * len(live) + len(deferred) >= n - 3):
            addr, size, sid = live.pop(rng.randrange(len(live)))
            stream = 0 if rng.random() < 0.75 else 7
            yield {"action": "free_requested", "addr": addr, "size": size, "stream": stream,
                   "time_us": t}, sid
            produced += 1
            if stream == 0:
                yield {"action": "free_completed", "addr": addr, "size": size, "stream": 0,
                       "time_us": t}, sid
                produced += 1
            else:
                deferred.append((addr, size, sid, stream))
        elif produced + 2 * len(live) + len(deferred) < n - 4:
            size = rng.choice([512, 4096, 65536, 1 << 20, 3 << 20, 25 << 20]) + rng.randrange(512)
            addr = next_addr
            next_addr += (size + 511) // 512 * 512
            if next_addr > seg_end:
                seg = max(20 << 20, next_addr - seg_end)
                yield {"action": "segment_alloc", "addr": seg_end, "size": seg, "stream": 0,
                       "time_us": t}, None
                produced += 1
                seg_end += seg
            stack_id += 1
            yield {"action": "alloc", "addr": addr, "size": size, "stream": 0,
                   "time_us": t}, stack_id
            produced += 1
            live.append((addr, size, stack_id))
        else:
            # too few entries left to open an allocation and close it: pad with snapshots
            yield {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": t}, None
            produced += 1


def stack_frames(sid, depth, rng_seed):
    """The frames of stack sid: (file, line, function), innermost first."""
    rng = random.Random(sid * 7919 + rng_seed)
    lib = rng.randint(2, 5)
    out = []
    for i in range(depth):
        if i < lib:
            f = LIB_FILES[rng.randrange(len(LIB_FILES))]
            out.append((f, 100 + rng.randrange(50), "forward" if "module" in f else "inner"))
        else:
            f = USER_FILES[rng.randrange(len(USER_FILES))]
            out.append((f, 10 + rng.randrange(200), f"fn{rng.randrange(40)}"))
    return out


def write(path, n, depth, frames, seed):
    opener = (lambda p: gzip.open(p, "wb", compresslevel=1)) if path.endswith(".gz") else \
        (lambda p: open(p, "wb"))
    with opener(path) as f:
        w = Writer(f)
        w.begin()
        frame_memo = {}      # (file, line, name) -> memo index of its dict
        stack_memo = {}      # stack id -> memo index of its frames list (alloc's, for its frees)
        count = 0
        w.w(b"(")
        for e, sid in generate(n, depth, frames, seed):
            if count and count % 1000 == 0:
                w.w(b"e(")
            count += 1
            w.w(b"}")
            w.memoize()
            w.w(b"(")
            for k in ("action", "addr", "size", "stream", "time_us"):
                w.str(k)
                w.value(e[k])
            w.str("compile_context")
            w.str("N/A", share=False)
            w.str("user_metadata")
            w.str("")
            if frames:
                w.str("frames")
                if sid is None:
                    w.w(b"]")
                    w.memoize()
                elif sid in stack_memo:
                    w.get(stack_memo.pop(sid))
                else:
                    w.w(b"]")
                    stack_memo[sid] = w.memoize()
                    w.w(b"(")
                    for fr in stack_frames(sid, depth, seed):
                        if fr in frame_memo:
                            w.get(frame_memo[fr])
                        else:
                            w.w(b"}")
                            frame_memo[fr] = w.memoize()
                            w.w(b"(")
                            w.str("filename")
                            w.str(fr[0])
                            w.str("line")
                            w.int(fr[1])
                            w.str("name")
                            w.str(fr[2])
                            w.w(b"u")
                    w.w(b"e")
            w.w(b"u")
        w.w(b"e")        # the last batch of entries into the device's list
        w.w(b"a")        # the device's list into device_traces
        w.str("allocator_settings")
        w.value({"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                 "garbage_collection_threshold": 0.0, "expandable_segments": False})
        w.w(b"u.")
        w.flush()
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("entries", type=int)
    ap.add_argument("output")
    ap.add_argument("--depth", type=int, default=20)
    ap.add_argument("--no-frames", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check", action="store_true",
                    help="load the written pickle and check its shape (small ENTRIES only)")
    a = ap.parse_args()
    n = write(a.output, a.entries, a.depth, not a.no_frames, a.seed)
    if a.check:
        import pickle
        op = gzip.open if a.output.endswith(".gz") else open
        with op(a.output, "rb") as f:
            s = pickle.load(f)
        evs = s["device_traces"][0]
        assert len(evs) == n == a.entries, (len(evs), n)
        for e in evs:
            assert {"action", "addr", "size", "stream", "time_us"} <= set(e), e
            if not a.no_frames:
                assert isinstance(e["frames"], list)
        print(f"ok: {n} entries, e.g. {evs[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
