"""What the snapshot walker bounds besides the opcodes it allows: the dict keys and set members
it lets Python hash (KeyCheck), and the memory a conversion may hold (MemoryBudget).

Python code cannot crash the interpreter, but the interpreter's own C code can be made to: a
dict key is hashed recursively in C with no depth guard, so a tuple nested 10^6 deep as a key
(a 1 KiB gzip pickle) overflowed the C stack (SIGSEGV); and a dict whose keys share one hash is
quadratic (CPython hashes an int as itself modulo 2^61 - 1, so 40,000 multiples of it took
11.7 s). A snapshot's keys are strings (its settings' keys may be numbers), so keys are held to
what a snapshot can hold; every other object the walker builds is reached by code that Python
guards (comparison, repr and json recurse under the interpreter's recursion limit: a deep value
is refused in one line, "nests too deeply"), or freed without recursion (the trashcan).
"""

import os
import resource
import sys

from .model import U64_LIMIT, ConvertError

I64_MIN = -(1 << 63)
# A tuple key: tuples in it at most this deep, and this many values in all (CPython does not
# cache a tuple's hash: each lookup hashes it whole again).
KEY_DEPTH = 3
KEY_VALUES = 64
# Distinct tuple or float keys with one hash: a dict with k of them costs k comparisons a
# lookup. Ints are held to 64 bits instead: at most 13 of them share a hash. Strings and bytes
# hash with a key chosen at random when the interpreter starts.
KEYS_ALIKE = 64


class KeyCheck:
    """Refuses (ConvertError) a dict key or set member that a snapshot never holds: anything but
    str, bytes, None, bool, an int of 64 bits (-2^63 .. 2^64 - 1), a float, or a tuple of those
    at most KEY_DEPTH deep and KEY_VALUES values; and the KEYS_ALIKE + 1st distinct tuple or
    float key of one hash (hash flooding: the tuple hash's rounds are invertible, so a second
    element that makes any first one hash to a chosen value can be solved for)."""

    def __init__(self):
        self.first = {}     # hash -> the first tuple or float key seen with it
        self.alike = {}     # hash -> how many keys differing from that one came since

    def __call__(self, k, what):
        c = k.__class__
        if c is str or c is bytes or k is None or c is bool:
            return
        if c is int:
            if not I64_MIN <= k < U64_LIMIT:
                raise ConvertError(f"{what} is an integer of {k.bit_length()} bits; a PyTorch "
                                   f"snapshot's are at most 64")
            return
        if c is tuple:
            self._tuple(k, what)
        elif c is not float:
            raise ConvertError(f"{what} is a {_kind(k)}, which a PyTorch snapshot never has "
                               f"there (its keys are strings and numbers)")
        h = hash(k)
        f = self.first.setdefault(h, k)
        if f is not k and f != k:
            n = self.alike[h] = self.alike.get(h, 0) + 1
            if n > KEYS_ALIKE:
                raise ConvertError(f"more than {KEYS_ALIKE} different keys with one hash (a "
                                   f"pickle made to slow its reader down); a PyTorch snapshot "
                                   f"has none")

    @staticmethod
    def _tuple(t, what):
        todo, n = [(t, 1)], 0
        while todo:
            x, depth = todo.pop()
            for v in x:
                n += 1
                c = v.__class__
                if c is tuple:
                    if depth >= KEY_DEPTH:
                        raise ConvertError(f"{what} is a tuple nested more than {KEY_DEPTH} "
                                           f"deep; a PyTorch snapshot's keys are strings and "
                                           f"numbers")
                    todo.append((v, depth + 1))
                elif c is int:
                    if not I64_MIN <= v < U64_LIMIT:
                        raise ConvertError(f"{what} holds an integer of {v.bit_length()} bits; "
                                           f"a PyTorch snapshot's are at most 64")
                elif not (c is str or c is bytes or v is None or c is bool or c is float):
                    raise ConvertError(f"{what} is a tuple holding a {_kind(v)}, which a "
                                       f"PyTorch snapshot's keys never hold")
                if n > KEY_VALUES:
                    raise ConvertError(f"{what} is a tuple of more than {KEY_VALUES} values; a "
                                       f"PyTorch snapshot's keys are strings and numbers")


def _kind(v):
    name = type(v).__name__
    return {"_Pending": "dict", "_Frames": "list", "_DevList": "list",
            "_Global": "class"}.get(name, name)


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------

GiB = 1 << 30
# The budget unless --max-memory or $GPUSIM_CONVERT_MAX_MEMORY says otherwise: at least 2 GiB,
# and 32 times the input's size in the file. A snapshot read as PyTorch writes it needs far
# less: 169 MiB at a million entries, 51 MiB of gzip (BENCHMARKS.md, "Converting a large
# snapshot"), about 3 times its file; a pickle made to expand (a few KiB of gzip that hold
# strings of hundreds of MiB, or a million pushes) is stopped at the budget.
DEFAULT_FLOOR = 2 * GiB
DEFAULT_PER_INPUT_BYTE = 32
ENV = "GPUSIM_CONVERT_MAX_MEMORY"


def default_budget(input_size):
    return max(DEFAULT_FLOOR, DEFAULT_PER_INPUT_BYTE * input_size)


def _statm():
    """The process's resident memory in bytes (Linux's /proc), or None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def resident():
    r = _statm()
    if r is not None:
        return r
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024    # (bytes there, KiB here)


class MemoryBudget:
    """The memory a conversion may hold: check(more) refuses (ConvertError) when what the
    process holds, and more bytes it is about to take, would pass limit bytes (None: no limit).
    The walker checks at every MiB of input it reads, and before a string or bytes of its own,
    so the process ends within about limit + 100 MiB: between two checks a MiB of opcodes makes
    at most some 72 MiB of objects (an empty dict and its place on the stack for each byte)."""

    def __init__(self, limit):
        self.limit = limit

    def check(self, more=0):
        if self.limit is not None and resident() + more > self.limit:
            raise ConvertError(f"reading it would take more than {fmt_bytes(self.limit)} of "
                               f"memory, far more than a snapshot of its size needs (a pickle "
                               f"made to expand?); --max-memory or ${ENV} raises the limit")


def fmt_bytes(n):
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def parse_bytes(text):
    """BYTES, or a number with a binary suffix (K, M, G, T, with or without 'iB'); 'none' is no
    limit (None). ValueError when it is neither."""
    t = text.strip()
    if t.lower() == "none":
        return None
    mult = 1
    for k, suffix in enumerate(("K", "M", "G", "T"), 1):
        for spelled in (suffix + "iB", suffix + "B", suffix):
            if t.upper().endswith(spelled.upper()):
                t, mult = t[:-len(spelled)], 1 << (10 * k)
                break
        if mult != 1:
            break
    v = float(t) * mult
    if not v > 0 or v != v or v == float("inf"):
        raise ValueError(text)
    return int(v)
