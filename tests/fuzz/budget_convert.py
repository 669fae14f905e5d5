#!/usr/bin/env python3
"""budget_convert.py - adversarial pickles against the converter's budgets of time and memory.

    python3 tests/fuzz/budget_convert.py                      # every pattern once (meson test)
    python3 tests/fuzz/budget_convert.py --random 200 --seed 3 --cpu 20 --memory 1024
    python3 tests/fuzz/budget_convert.py --keep DIR           # the inputs written to DIR too
    python3 tests/fuzz/budget_convert.py --convert OTHER/traces/convert.py   # another's

fuzz_convert.py mutates real snapshots and checks what the converter makes of them; this one
writes small inputs built to cost the converter much more than their size: nesting a million
deep (CPython hashes a tuple key recursively, in C), stacks and marks that a walker could rescan
at every opcode, strings of hundreds of MiB from a few KiB of gzip, dict keys that hash alike
(integers that are multiples of 2^61 - 1, tuples whose hashes are solved to collide), shared
references, text opcodes with endless lines. Each runs as a process of its own under
resource.setrlimit (--cpu seconds of CPU, --memory MiB of address space): it must convert (exit
0) or be refused (exit 2, one line "convert.py: ...", not an internal error), within those, and
never die of a signal. --random N adds N inputs made of the same patterns repeated and mixed at
random. The exit status is 1 when any input failed, else 0. Standard library only.
"""

import argparse
import gzip
import os
import random
import resource
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONVERT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "traces", "convert.py")
MEMORY_ENV = "GPUSIM_CONVERT_MAX_MEMORY"
M61 = (1 << 61) - 1
MASK = (1 << 64) - 1


# ---------------------------------------------------------------------------------------------
# Opcodes (pickletools' names)
# ---------------------------------------------------------------------------------------------

PROTO4 = b"\x80\x04"
STOP = b"."
MARK, POP, POP_MARK, DUP = b"(", b"0", b"1", b"2"
NONE, EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, EMPTY_SET = b"N", b"}", b"]", b")", b"\x8f"
TUPLE1, TUPLE2, TUPLE, LIST, DICT = b"\x85", b"\x86", b"t", b"l", b"d"
APPEND, APPENDS, SETITEM, SETITEMS, ADDITEMS, FROZENSET = b"a", b"e", b"s", b"u", b"\x90", b"\x91"
MEMOIZE, REDUCE = b"\x94", b"R"


def s(text):
    """SHORT_BINUNICODE (or BINUNICODE when long)."""
    b = text.encode()
    return (b"\x8c" + bytes([len(b)]) + b) if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b


def i(v):
    """An integer as the pickler writes it (BININT1, BININT, LONG1)."""
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if -(1 << 31) <= v < 1 << 31:
        return b"J" + struct.pack("<i", v)
    n = (v.bit_length() + 8) // 8
    return b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)


def get(k):
    return b"h" + bytes([k]) if k < 256 else b"j" + struct.pack("<I", k)


def put(k):
    return b"q" + bytes([k]) if k < 256 else b"r" + struct.pack("<I", k)


def snapshot(settings=b"N", traces=None):
    """A snapshot dict whose allocator_settings holds the value that the opcodes settings push
    (under a key of its own: the reference writes the settings when they are a dict)."""
    ev = (EMPTY_DICT + MARK + s("action") + s("alloc") + s("addr") + i(4096) + s("size") +
          i(512) + s("stream") + i(0) + s("time_us") + i(1) + SETITEMS)
    traces = traces if traces is not None else EMPTY_LIST + EMPTY_LIST + ev + APPEND + APPEND
    return (PROTO4 + EMPTY_DICT + MARK + s("segments") + EMPTY_LIST + s("device_traces") +
            traces + s("allocator_settings") + EMPTY_DICT + s("x") + settings + SETITEM +
            SETITEMS + STOP)


# ---------------------------------------------------------------------------------------------
# The patterns: each a function of a scale n, giving (name, bytes, gzip it)
# ---------------------------------------------------------------------------------------------

def deep_tuple_key(n):
    # a tuple nested n deep as a dict key: hash() recurses in C (SIGSEGV at 10^6)
    return snapshot(EMPTY_DICT + EMPTY_TUPLE + TUPLE1 * n + NONE + SETITEM), True


def deep_set_member(n):
    return snapshot(EMPTY_SET + MARK + EMPTY_TUPLE + TUPLE1 * n + ADDITEMS), True


def deep_list_value(n):
    # a list nested n deep as a value, through the stack (marks) and through the memo
    return snapshot(EMPTY_LIST + (EMPTY_LIST + MARK) * n + NONE + APPENDS * n + APPEND), True


def deep_memo_chain(n):
    # each list holds the one before, through the memo: n deep with a stack of two
    body = EMPTY_LIST + put(0) + POP + (EMPTY_LIST + get(0) + APPEND + put(0) + POP) * n
    return snapshot(body + get(0)), True


def cycle(n):
    # a list that holds itself, n times over
    return snapshot(EMPTY_LIST + put(0) + MARK + get(0) * n + APPENDS), True


def pending_gets(n):
    """n entries streamed as PyTorch writes them (the walker's fast path keeps them unmade
    until something else looks at them), n pushes, then a reference to each entry: a walker
    that looks for each on its stack from the top is quadratic."""
    return entries([4096 + 512 * k for k in range(n)], lambda slots: NONE * len(slots) +
                   b"".join(get(x) for x in slots)), True


def addresses_alike(n):
    # n allocations at addresses that are multiples of 2^61 - 1: one hash as dict keys
    return entries([k * M61 for k in range(1, n + 1)]), True


def entries(addrs, more=lambda slots: b""):
    """A snapshot of one device whose allocs at addrs are written as PyTorch writes them
    (keys as memo references), then the opcodes more(their memo slots) in the list."""
    slot = [0]

    def memo():
        slot[0] += 1
        return MEMOIZE

    def key(name):
        return s(name) + memo()

    head = PROTO4 + EMPTY_DICT + memo() + MARK + key("segments") + EMPTY_LIST + memo()
    head += key("device_traces") + EMPTY_LIST + memo() + MARK + EMPTY_LIST + memo() + MARK
    names = ["action", "addr", "size", "stream", "time_us"]
    first = EMPTY_DICT + memo() + MARK
    refs = {}
    for k, v in zip(names, [None, 4096, 512, 0, 1]):
        refs[k] = slot[0]
        first += key(k) + (key("alloc") if v is None else i(v))
        if v is None:
            refs["alloc"] = slot[0] - 1
    first += SETITEMS
    made, slots = [], []
    for k, a in enumerate(addrs):
        slots.append(slot[0])
        made.append(EMPTY_DICT + memo() + MARK + get(refs["action"]) + get(refs["alloc"]) +
                    get(refs["addr"]) + i(a) + get(refs["size"]) + i(512) +
                    get(refs["stream"]) + i(0) + get(refs["time_us"]) + i(k) + SETITEMS)
    body = first + b"".join(made) + more(slots) + APPENDS
    return head + body + APPENDS + key("allocator_settings") + NONE + SETITEMS + STOP


def push_then_pop(n):
    # n pushes, then n pops: a walker that rescans its stack at every opcode is quadratic
    return snapshot(NONE * n + POP * (n - 1)), True


def marks_then_lists(n):
    # n marks, then new lists over them: a scan back over the marks at every list
    return snapshot(MARK * n + (EMPTY_LIST + POP) * n + POP_MARK * n + NONE), True


def mark_pop_pairs(n):
    return snapshot(NONE * n + (MARK + POP_MARK) * n + POP * (n - 1)), True


def device_lists(n):
    # n device lists in a row, never appended: each new one looks past those before it
    return snapshot(traces=EMPTY_LIST + EMPTY_LIST * n + POP * n), True


def big_strings(n):
    # four strings of n MiB each from a little gzip: the pieces of a gzip file of several
    # members (one string's member made once, and written four times: encode)
    one = b"X" + struct.pack("<I", n << 20) + b"a" * (n << 20)
    head, tail = snapshot(MARK + b"@" + TUPLE).split(b"@")
    return [head, one, one, one, one, tail], True


def encode(data, gz):
    """The file's bytes: data, or its pieces, gzip-compressed when gz (a piece as a member of
    its own, compressed once however often it comes)."""
    if not isinstance(data, list):
        return gzip.compress(data, 6) if gz else data
    if not gz:
        return b"".join(data)
    made = {}
    return b"".join(made.setdefault(id(p), gzip.compress(p, 6)) for p in data)


def int_keys_alike(n):
    # n integer keys that are multiples of 2^61 - 1: one hash, a quadratic dict
    return snapshot(EMPTY_DICT + MARK + b"".join(i(k * M61) + NONE for k in range(1, n + 1)) +
                    SETITEMS), True


def _tuple_hash(lanes):
    """CPython's tuplehash (Objects/tupleobject.c, xxHash's rounds) of the element hashes."""
    p1, p2, p5 = 11400714785074694791, 14029467366897019727, 2870177450012600261
    acc = p5
    for lane in lanes:
        acc = (acc + (lane & MASK) * p2) & MASK
        acc = ((acc << 31) | (acc >> 33)) & MASK
        acc = (acc * p1) & MASK
    return (acc + (len(lanes) ^ (p5 ^ 3527539))) & MASK


def colliding_pairs(n, target=12345):
    """n pairs (a, b) of integers below 2^63 whose tuples all hash to target: b's hash solved
    from a's (the rounds are invertible), kept when it is a hash an integer has."""
    p1, p2, p5 = 11400714785074694791, 14029467366897019727, 2870177450012600261
    inv1, inv2 = pow(p1, -1, 1 << 64), pow(p2, -1, 1 << 64)
    out, a = [], 1
    while len(out) < n:
        acc = (p5 + a * p2) & MASK
        acc = (((acc << 31) | (acc >> 33)) & MASK) * p1 & MASK
        want = (target - (2 ^ (p5 ^ 3527539))) & MASK
        x = (want * inv1) & MASK
        x = ((x >> 31) | (x << 33)) & MASK
        lane = ((x - acc) * inv2) & MASK
        if lane < M61:                      # hash(lane) == lane for 0 <= lane < 2^61 - 1
            assert _tuple_hash([a, lane]) == target
            out.append((a, lane))
        a += 1
    return out


def tuple_keys_alike(n):
    pairs = colliding_pairs(n)
    return snapshot(EMPTY_DICT + MARK + b"".join(i(a) + i(b) + TUPLE2 + NONE for a, b in pairs) +
                    SETITEMS), True


def shared_lists(n):
    # a list of n references to one list of n: n^2 values from 4n bytes
    inner = EMPTY_LIST + put(0) + MARK + NONE * n + APPENDS
    return snapshot(inner + POP + EMPTY_LIST + MARK + get(0) * n + APPENDS), True


def long_text_line(n):
    # a text INT opcode whose line is n MiB of digits: a walker that searches its line again at
    # every chunk is quadratic
    return PROTO4 + b"I" + b"1" * (n << 20) + b"\n" + STOP, True


def huge_long4(n):
    return snapshot(b"\x8b" + struct.pack("<i", n << 20) + b"\x01" * (n << 20)), True


PATTERNS = [
    ("deep_tuple_key", deep_tuple_key, 1_000_000),
    ("deep_set_member", deep_set_member, 1_000_000),
    ("deep_list_value", deep_list_value, 200_000),
    ("deep_memo_chain", deep_memo_chain, 200_000),
    ("cycle", cycle, 1000),
    ("pending_gets", pending_gets, 20_000),
    ("addresses_alike", addresses_alike, 40_000),
    ("push_then_pop", push_then_pop, 200_000),
    ("marks_then_lists", marks_then_lists, 100_000),
    ("mark_pop_pairs", mark_pop_pairs, 200_000),
    ("device_lists", device_lists, 70_000),
    ("big_strings", big_strings, 256),
    ("int_keys_alike", int_keys_alike, 40_000),
    ("tuple_keys_alike", tuple_keys_alike, 40_000),
    ("shared_lists", shared_lists, 20_000),
    ("long_text_line", long_text_line, 64),
    ("huge_long4", huge_long4, 64),
]


def random_input(rng):
    """Patterns mixed: one at a random scale, inside another's settings or after it."""
    name, make, n = rng.choice(PATTERNS)
    scale = max(1, int(n * rng.choice((0.01, 0.1, 0.5, 1, 1.5))))
    data, gz = make(scale)
    if rng.random() < 0.3 and not isinstance(data, list) and data.endswith(STOP):
        # cut it somewhere, or run it twice over (the second STOP is what is left over)
        data = data[:rng.randrange(len(data))] if rng.random() < 0.5 else data[:-1] + data[2:]
    return f"{name}@{scale}", data, gz


# ---------------------------------------------------------------------------------------------
# Running one
# ---------------------------------------------------------------------------------------------

def run_one(convert, path, cpu, memory_mib, env):
    def limits():
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mib << 20, memory_mib << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    out, ref = path + ".gstrace", path + ".ref.json"
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, convert, "--quiet", "-o", out, "--reference", ref, "--",
                          path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=limits,
                         env=env)
    with p.stderr:
        err = p.stderr.read().decode("utf-8", "replace")
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    cpu_s = ru.ru_utime + ru.ru_stime
    rss = ru.ru_maxrss / 1024          # MiB (Linux gives KiB)
    for f in (out, ref):
        if os.path.exists(f):
            os.unlink(f)
    lines = err.splitlines()
    rc = p.returncode
    why = None
    if rc < 0:
        why = f"killed by signal {-rc}"
    elif rc == 0:
        pass
    elif rc != 2:
        why = f"exit status {rc}"
    elif len(lines) != 1 or not lines[0].startswith("convert.py: "):
        why = f"not one line: {err[:300]!r}"
    elif "internal error" in lines[0]:
        why = lines[0]
    return why, rc, cpu_s, rss, wall, (lines[-1] if lines else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", type=int, default=30, help="CPU seconds an input may take")
    ap.add_argument("--memory", type=int, default=1536, help="MiB of address space")
    ap.add_argument("--random", type=int, default=0, metavar="N")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", metavar="NAME", help="one pattern")
    ap.add_argument("--keep", metavar="DIR")
    ap.add_argument("--convert", default=CONVERT, metavar="PATH",
                    help="the converter to run (default: this tree's)")
    args = ap.parse_args()
    env = dict(os.environ)
    # The converter's own memory budget below the address space it is given, so that an input
    # past it is refused by its check, not by a MemoryError somewhere.
    env[MEMORY_ENV] = str((args.memory // 2) << 20)
    # (made one at a time, and dropped before the converter runs: a child forked from a parent
    # holding a GiB would count it in its own peak memory)
    inputs = [(name, make, n) for name, make, n in PATTERNS if args.only in (None, name)]
    rng = random.Random(args.seed)
    inputs += [(None, rng, None)] * args.random
    failed = 0
    with tempfile.TemporaryDirectory(prefix="budget_convert.") as tmp:
        where = args.keep or tmp
        os.makedirs(where, exist_ok=True)
        for k, (name, make, n) in enumerate(inputs):
            if name is None:
                name, data, gz = random_input(make)
            else:
                data, gz = make(n)
            path = os.path.join(where, f"{k:03d}-{name.replace('@', '-')}.pickle" +
                                (".gz" if gz else ""))
            with open(path, "wb") as f:
                f.write(encode(data, gz))
            del data
            why, rc, cpu_s, rss, wall, last = run_one(args.convert, path, args.cpu, args.memory,
                                                      env)
            size = os.path.getsize(path)
            print(f"{'FAIL' if why else 'ok  '} {name}: {size:,} bytes, exit {rc}, "
                  f"{cpu_s:.2f} s CPU, {rss:.0f} MiB, {wall:.1f} s: {why or last}", flush=True)
            failed += why is not None
    print(f"{len(inputs) - failed} of {len(inputs)} within {args.cpu} s of CPU and "
          f"{args.memory} MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
