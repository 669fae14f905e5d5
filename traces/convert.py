#!/usr/bin/env python3
"""Convert a recorded GPU allocation log into a gpusim trace (text format version 1 or 2).

gpusim replays traces that name allocations by id, not by address, so that one trace can be
replayed under any allocator policy. This tool turns what a real program recorded into such a
trace, and can also write down what the real allocator did with it (the "reference answer"),
so that a simulated policy can be checked against reality.

Input formats (detected from the content, never from the file name):

  pytorch-snapshot  A PyTorch CUDA memory snapshot: the pickle written by
                    torch.cuda.memory._dump_snapshot(), or pickle.dump(torch.cuda.memory._snapshot()),
                    plain or gzip-compressed. Recording must have been on
                    (torch.cuda.memory._record_memory_history(enabled="all", ...)).
  rmm-log           An RMM logging_resource_adaptor CSV log (header
                    "Thread,Time,Action,Pointer,Size,Stream"), plain or gzip-compressed.

Output: the gpusim trace text format (docs/trace-format.md), version 1, or version 2 when
the log holds a request that failed (an 'oom' row):

    # gpusim-trace 1
    # source: pytorch-snapshot resnet50__default__nocap.pickle.gz
    # device_total_bytes: 85017493504
    # allocator_conf: expandable_segments:True
    seq,time_us,op,client,device,stream,id,size
    0,0,alloc,torch,0,0,1,37632
    1,12,free,torch,0,0,1,37632

gzip-compressed when OUTPUT ends in ".gz" (with a zero timestamp, so the same input always gives
the same bytes). The file is written whole: to a temporary file beside it, then renamed.

How snapshot events become trace events (per device, in recorded order):

  alloc           -> alloc with a fresh id (1, 2, 3, ... in trace order); size is the request
                     the program made, before any rounding.
  free_requested  -> free of the allocation live at that (device, address).
  free_completed  -> nothing when it immediately follows its own free_requested (the memory was
                     reusable at once); otherwise free_done at its own position (the deferred
                     completion of a free whose block was used on another stream).
  oom             -> oom (trace version 2): the request the program made, which failed (size:
                     what PyTorch logged, the request rounded to 512 bytes), id 0, at its place.
                     Where the log goes on after it, the program caught the error; where it is
                     the log's last event, the program died there: the header gets
                     "# fatal_oom_event: N" (unless a .json beside the snapshot says the run
                     ended 'ok': then a mark follows the oom, so that a replay goes past it).
                     The oom also goes to the --reference file (addr: its device_free).
  segment_alloc, segment_free, segment_map, segment_unmap
                  -> not in the trace: they are what this particular allocator did, so they go
                     to the --reference file instead; but a run of segment_free/segment_unmap
                     that no allocation explains is a torch.cuda.empty_cache() call, and an
                     empty_cache row goes before it ("empty_cache() inferred" below; the header
                     counts them: "# inferred_empty_cache: N").
  snapshot        -> ignored (a marker that _snapshot() was called).

empty_cache() inferred. PyTorch logs no event for it: it shows only as the segments it
released (segment_free; segment_unmap with expandable segments), after the free_completed of
the frees it synchronized. The allocator releases segments on its own only inside an allocation
that could not be served otherwise: garbage collection (garbage_collection_threshold, with a
memory fraction, above threshold x limit), the release of oversize blocks (max_split_size_mb)
and the full flush, the last two only after a first attempt failed (reserved + the segment it
needs > the limit, or the device full); those releases are followed, before any other event, by
that allocation's segment_alloc/segment_map or oom. The rule, per device: a run of
segment_free/segment_unmap entries (free_completed entries may come between them) is an
empty_cache() placed before the run, unless the allocator event right after it explains it:
an oom; or a segment_alloc/segment_map of an allocation under pressure, reserved (before the
run) + the segment it needed (the larger of that event's size and the cudaMalloc size of the
request that follows) > L, L the run's limit (the .json's cap_gib, or --cap), else, the limit
unknown, the highest reserved the run reached (less one 20 MiB page with expandable segments);
or, with garbage_collection_threshold T > 0, reserved > T x L. With no limit known, a release
made right at the run's peak is therefore taken as the allocator's own: give --cap BYTES, or
--cap none for a run without one, to decide it.

Private pools inferred (CUDA graphs, torch.cuda.MemPool; trace version 3). Trace entries name
no pool: an allocation is a private pool's when it lies in a segment the final 'segments' list
gives a segment_pool_id other than (0, 0), or in one freed by a pool's own release: a run of
segment_free/segment_unmap that leaves memory an empty_cache() would have freed (MemPool's
destruction), which then gets pool_release rows instead of an empty_cache. pool_begin and
pool_end rows go around each pool's allocations, on their stream. A pool whose segments all
went in a full empty_cache() before the snapshot is not seen: take the snapshot while graphs
and pools live (the README, "CUDA graphs and private pools").

A snapshot may start in the middle of a run (the ring buffer of max_entries dropped the oldest
events, or recording started late). A free of an address never seen allocated then gets a
synthesized alloc at the start of the trace (with the size the free reports), and so does a
block that the snapshot's 'segments' show allocated at the end but that the log never saw
allocated (it was held from before the log began; its requested_size is used). A
free_completed whose free_requested was dropped is skipped. Each case prints a warning, and
the header gets "# synthesized_allocs: N" (or "# started_mid_run: yes" when the only evidence is
a segment the log never saw made): gpusim then says its results are approximate. Better still:
record from the first allocation, with max_entries large enough.

Several devices are merged by time_us (stable; each device's own order is always kept); the
device column says which. With a .json beside the snapshot that gives total_bytes_by_device,
the header gets "# device_total_bytes_by_device: 0=N,1=N", and the reference file a "devices"
object: per device its cap_bytes (cap_gib_by_device), device_total_bytes, outcome (and
outcome_event), memory_stats (memory_stats_by_device), derived and device_events.
time_us is relative to the first trace event (which gets 0), in integer microseconds; it is kept
non-decreasing (recorded clocks are approximate, and replay order is what matters).

Reference file (--reference OUT.json): what the recorded allocator did, as JSON:
  format ("gpusim-reference 1"), source, allocator_conf, allocator_settings,
  device_total_bytes, cap_gib, cap_bytes, outcome (and outcome_event, the seq of the oom row the
  run died at), memory_stats, derived {...}, device_events [[action, addr, size, seq], ...]
  where seq is the number of trace events that precede the allocator event (so it happened just
  before trace event number seq; with several devices a fifth field says which). For 'oom',
  addr holds the event's device_free (what cudaMemGetInfo reported free).

Sibling JSON: for INPUT named NAME.EXT or NAME.EXT.gz (NAME.pickle.gz, NAME.pkl, ...), a
NAME.json beside it (the layout
of shared/traces/pytorch-2.11-h100/) supplies total_bytes, cap_gib, outcome and memory_stats.
cap_bytes is the limit PyTorch really enforced: set_per_process_memory_fraction() truncates
fraction * total to an integer, and the runs set fraction = cap_gib * 2**30 / total, so
cap_bytes = int(cap_gib * 2**30 / total * total) in doubles (6.25 GiB gives 6710886399, one byte
less than 6.25 * 2**30). total is the sibling's total_bytes (the device the run had), even when
--device-total overrides the device_total_bytes written out.

Errors (unreadable input, not a snapshot, a malformed event, an inconsistent trace) are reported
as one line "convert.py: FILE: message" on stderr, with exit status 2. Warnings go to stderr
and do not change the exit status.

Standard library only (Python 3.10+).
"""

import argparse
import array
import codecs
import bisect
import collections
import contextlib
import gc
import gzip
import heapq
import io
import json
import math
import os
import pickle
import re
import stat
import struct
import sys
import tempfile
import time
import zlib

PROG = "convert.py"
EXIT_ERROR = 2
TRACE_MAGIC = "# gpusim-trace 1"     # a trace without oom rows
TRACE_MAGIC_2 = "# gpusim-trace 2"   # with oom rows (requests that failed in the recorded run)
TRACE_MAGIC_3 = "# gpusim-trace 3"   # with private pool rows (pool_begin, pool_end, pool_release)
POOL_ACTIONS = ("pool_begin", "pool_end", "pool_release")
MiB = 1 << 20
TRACE_COLUMNS = "seq,time_us,op,client,device,stream,id,size"
# With frames (docs/trace-format.md, "Frames"): '# frame N: file:line:function' header lines
# and a 9th column naming an alloc's or oom's frame.
TRACE_COLUMNS_FRAMES = TRACE_COLUMNS + ",frame"
REFERENCE_FORMAT = "gpusim-reference 1"
RMM_HEADER = "Thread,Time,Action,Pointer,Size,Stream"

# Snapshot actions that describe what the allocator did (not what the program asked for).
# They are the reference answer; the trace leaves them out so it replays under any policy.
ALLOCATOR_ACTIONS = ("segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom")
PROGRAM_ACTIONS = ("alloc", "free_requested", "free_completed")
IGNORED_ACTIONS = ("snapshot",)


class ConvertError(Exception):
    """Bad input or an impossible conversion; main() prints it as one line and exits 2."""


def warn(label, message):
    print(f"{PROG}: {label}: warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Common event model shared by every input reader.
#
# A reader turns its format into a list of Event, in replay order, using these actions:
#   'alloc'      a request (addr identifies the block while it lives)
#   'free'       the program released the block at addr; deferred=True when its completion is
#                recorded separately later (PyTorch record_stream), False when immediate
#   'free_done'  the deferred completion of an earlier 'free' at addr
#   one of ALLOCATOR_ACTIONS   (reference only)
# build_trace() then resolves addresses to ids. Adding an input format means adding a reader.
# ---------------------------------------------------------------------------------------------

_tuple_new = tuple.__new__     # an Event made at once (Event(...) is a Python-level __new__)
Event = collections.namedtuple(
    "Event", "action device stream addr size time_us deferred where frame", defaults=(None,))

# An Event's where: a string ("line 12" of an RMM log), or, for a snapshot's, the entry's index
# in its device's list (said "device D event I" by _where: the string only when a message needs
# it, not 70 bytes and an f-string an entry).


def _where(ev):
    return _said(ev.device, ev.where)


def _said(device, where):
    return where if where.__class__ is str else f"device {device} event {where}"


_ACTIONS = ("alloc", "free", "free_done", "segment_alloc", "segment_free", "segment_map",
            "segment_unmap", "oom", "empty_cache") + ("pool_begin", "pool_end", "pool_release")
_ACTION_CODE = {a: k for k, a in enumerate(_ACTIONS)}
_A_ALLOC, _A_FREE, _A_FREE_DONE, _A_OOM, _A_EMPTY_CACHE, _A_POOL_BEGIN = 0, 1, 2, 7, 8, 9
_BIG = -(1 << 63)       # EventColumns: the value is in big (see there)


def _frame_number(frames, frame_no, frame):
    """frame's number in the table frames (its inverse frame_no), appended when new; 0 is no
    frame. EventColumns, TraceRows and build_trace number frames alike."""
    f = frame_no.get(frame)
    if f is None:
        f = frame_no[frame] = len(frames)
        frames.append(frame)
    return f


class EventColumns:
    """A snapshot's events as parallel arrays (about 60 bytes an event, where an Event tuple and
    its objects took about 300: the speed work, a 5-million-entry snapshot in bounded memory).
    Indexing and iteration give the same Events as a list of them would. addr and time_us
    are 64-bit signed; a value that is not (a float time, an address past 2^63) is kept in
    big, keyed by (column, index), with _BIG in the array; frames are numbers in frames."""

    __slots__ = ("action", "device", "stream", "addr", "size", "time", "deferred", "where",
                 "frame", "big", "frames", "frame_no")

    def __init__(self):
        self.action = array.array("B")
        self.deferred = array.array("B")
        self.device = array.array("Q")
        self.stream = array.array("Q")
        self.addr = array.array("q")
        self.size = array.array("Q")
        self.time = array.array("q")
        self.where = array.array("Q")
        self.frame = array.array("I")
        self.big = {}
        self.frames = [None]            # frame number -> top user frame (0: none)
        self.frame_no = {None: 0}

    def add(self, action, device, stream, addr, size, t, deferred, where, frame):
        """action: its code (_ACTION_CODE); the rest as an Event's fields."""
        k = len(self.action)
        try:
            self.addr.append(addr)
        except (OverflowError, TypeError):
            self.addr.append(_BIG)
            self.big["a", k] = addr
        try:
            self.time.append(t)
        except (OverflowError, TypeError):
            self.time.append(_BIG)
            self.big["t", k] = t
        self.action.append(action)
        self.deferred.append(deferred)
        self.device.append(device)
        self.stream.append(stream)
        self.size.append(size)
        self.where.append(where)
        # _frame_number inline: once per snapshot event, where the call cost about 5% of a
        # conversion
        f = self.frame_no.get(frame)
        if f is None:
            f = self.frame_no[frame] = len(self.frames)
            self.frames.append(frame)
        self.frame.append(f)

    def append(self, ev):
        self.add(_ACTION_CODE[ev.action], ev.device, ev.stream, ev.addr, ev.size, ev.time_us,
                 ev.deferred, ev.where, ev.frame)

    def __len__(self):
        return len(self.action)

    def __getitem__(self, k):
        if k < 0:
            k += len(self.action)
        addr, t = self.addr[k], self.time[k]
        if addr == _BIG:
            addr = self.big.get(("a", k), addr)
        if t == _BIG:
            t = self.big.get(("t", k), t)
        return _tuple_new(Event, (_ACTIONS[self.action[k]], self.device[k], self.stream[k], addr,
                                  self.size[k], t, self.deferred[k] == 1, self.where[k],
                                  self.frames[self.frame[k]]))

    def __iter__(self):
        if self.big:
            return (self[k] for k in range(len(self.action)))
        return self._iter()

    def _iter(self):
        names, frames, new = _ACTIONS, self.frames, _tuple_new
        for a, dev, stream, addr, size, t, d, w, f in zip(
                self.action, self.device, self.stream, self.addr, self.size, self.time,
                self.deferred, self.where, self.frame):
            yield new(Event, (names[a], dev, stream, addr, size, t, d == 1, w, frames[f]))

    def has(self, actions):
        """Whether an event's action is one of actions (names)."""
        return any(self.action.count(_ACTION_CODE[a]) for a in actions)


def _has_action(events, actions):
    if isinstance(events, EventColumns):
        return events.has(actions)
    return any(e.action in actions for e in events)


class Recording:
    """What a reader found: the events plus metadata for the header and the reference."""

    def __init__(self, kind):
        self.kind = kind                  # source kind for '# source:' ("pytorch-snapshot", ...)
        self.events = []                  # list of Event, in replay order
        self.allocator_conf = None        # PYTORCH_CUDA_ALLOC_CONF string, or None if unknown
        self.allocator_settings = None    # the snapshot's allocator_settings dict, or None
        self.num_raw_events = 0           # entries in the log, all actions (incl. 'snapshot')
        self.devices = set()
        self.streams = set()
        # Blocks the allocator held when the log ended, as (device, addr, size, stream), or None
        # when the format does not say. Lets build_trace() find allocations made before the log
        # began and never freed during it (a snapshot's 'segments' lists them).
        self.final_blocks = None
        # cudaMalloc'd segments (not expandable) the allocator held when the log ended, as
        # (device, addr); None when the format does not say. One the log never saw made was made
        # before the log began.
        self.final_segments = None
        # A snapshot's events per device (allocator actions included), before the merge: the
        # inference of empty_cache() reads one device's allocator at a time.
        self.per_device = None
        self.num_inferred_empty_cache = 0
        # A snapshot's final segments that belong to a private pool, per device, as
        # {device: [(address, total_size, expandable, pool id tuple)]}; None when not known.
        self.final_pool_segments = None
        self.num_private_pools = 0
        # Bytes of the segments the allocator held when the log ended, per device ({device:
        # bytes}; a snapshot's 'segments'), or None: what was reserved before the log began
        # follows from it (limit_at_death).
        self.final_reserved = None


# ---------------------------------------------------------------------------------------------
# Reading the file and detecting the format
# ---------------------------------------------------------------------------------------------

class Input:
    """The input file, read as a stream: gunzipped as it is read when it starts with the gzip
    magic, its errors turned into ConvertError; tell() is the position in the file itself (for
    the progress line's percentage), size its size."""

    def __init__(self, path):
        try:
            self.raw = open(path, "rb")
            self.size = os.fstat(self.raw.fileno()).st_size
            magic = self.raw.read(2)
            self.raw.seek(0)
        except OSError as e:
            raise ConvertError(f"cannot read: {e.strerror or e}") from None
        self.f = gzip.GzipFile(fileobj=self.raw, mode="rb") if magic == b"\x1f\x8b" else self.raw
        self.head = self.read(4096)
        if not self.head:
            raise ConvertError("empty file")

    def read(self, n=-1):
        if getattr(self, "head", None):
            # what detect_format looked at comes first
            out, self.head = self.head, b""
            if n < 0:
                return out + self._read(-1)
            return out + (self._read(n - len(out)) if n > len(out) else b"")
        return self._read(n)

    def _read(self, n):
        try:
            return self.f.read(n)
        except EOFError:
            raise ConvertError("truncated gzip file (compressed data ends early)") from None
        except (gzip.BadGzipFile, zlib.error, OSError) as e:
            raise ConvertError(f"corrupt gzip file ({e})") from None

    def tell(self):
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def close(self):
        self.raw.close()


class Progress:
    """A progress line on stderr for a long conversion: entries read, the share of the input
    read, the rate; rewritten in place (carriage return) at most 4 times a second, and erased
    at the end. Nothing at all unless enabled (--progress, or stderr a terminal and no
    --quiet)."""

    INTERVAL = 0.25     # seconds between two updates of the line

    def __init__(self, stream, label, inp, enabled):
        self.stream, self.label, self.inp, self.enabled = stream, label, inp, enabled
        self.t0 = self.last = time.monotonic()
        self.shown = False

    def __call__(self, entries):
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < self.INTERVAL:
            return
        self.last = now
        pct = 100.0 * self.inp.tell() / self.inp.size if self.inp.size else 0.0
        rate = entries / max(now - self.t0, 1e-9)
        self.stream.write(f"\r{PROG}: {self.label}: {entries:,} entries, {pct:.0f}% of "
                          f"{self.inp.size / MiB:.1f} MiB read, {rate / 1000:.0f}k entries/s ")
        self.stream.flush()
        self.shown = True

    def step(self, what):
        """A later stage (no count of its own): said on the line, when there is one."""
        if self.enabled and self.shown:
            self.stream.write(f"\r\x1b[K{PROG}: {self.label}: {what}")
            self.stream.flush()

    def done(self):
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.shown = False


def detect_format(data):
    """Name the input format from the (decompressed) content.

    An RMM log is recognised by its CSV header. Anything else is tried as a pickle: pickle
    protocol 2+ starts with the PROTO opcode 0x80, but protocols 0 and 1 can start with almost
    any opcode, so the unpickler itself decides (read_snapshot reports what it found).
    """
    head = data[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    if head.startswith(RMM_HEADER.encode()):
        return "rmm-log"
    return "pytorch-snapshot"


# ---------------------------------------------------------------------------------------------
# PyTorch memory snapshot
# ---------------------------------------------------------------------------------------------

class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds only plain data.

    pickle.load() can call any importable callable, so loading an untrusted pickle can run
    arbitrary code. A memory snapshot holds only dicts, lists, tuples, str, int, float, bool and
    None, none of which needs a class lookup; we allow a few harmless containers and refuse
    everything else, so a hostile or foreign pickle fails with a message instead of running.
    """

    ALLOWED = {
        ("builtins", "set"), ("builtins", "frozenset"),
        ("__builtin__", "set"), ("__builtin__", "frozenset"),   # protocol 2 spelling
        ("collections", "OrderedDict"),
    }

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise ConvertError(
            f"the pickle needs class {module}.{name}, which a PyTorch memory snapshot never "
            f"holds; refusing to load it (unpickling arbitrary classes can run code)")

    def persistent_load(self, pid):
        raise ConvertError("the pickle uses persistent ids, which a memory snapshot never holds")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def stream_u64(v, where):
    """The stream column holds the raw 64-bit stream handle, read back as unsigned.

    PyTorch and RMM record a cudaStream_t (a pointer) as a signed 64-bit integer; a negative
    value is the same handle with the top bit set, so it is written as its unsigned twin.
    """
    if v < 0:
        v += 1 << 64
    if not 0 <= v < 1 << 64:
        raise ConvertError(f"{where}: stream {v} does not fit in 64 bits")
    return v


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# Limits of what the trace can say (docs/trace-format.md, "Limits"): every number in an event
# line is an unsigned 64-bit integer, and a device's size is at most GS_MAX_DEVICE_BYTES (2^44,
# util/util.h). A value past them is refused here, with a message, rather than written for the
# reader to refuse later (or, for a time, to wrap).
U64_LIMIT = 1 << 64
MAX_DEVICE_BYTES = 1 << 44


def check_size(v, where):
    """A recorded size: an integer 0 <= v < 2^64 (what the trace's size column can hold)."""
    if v < 0:
        raise ConvertError(f"{where}: negative size {v}")
    if v >= U64_LIMIT:
        raise ConvertError(f"{where}: size {v} does not fit in 64 bits (2^64 and more)")
    return v


def check_time(t, where):
    """A recorded time: a finite number (NaN or an infinity would have no place in the order)."""
    if isinstance(t, float) and (t != t or t in (float("inf"), float("-inf"))):
        raise ConvertError(f"{where}: 'time_us' is {t}, not a finite number")
    return t


def device_total_ok(v):
    """A device size the trace reader accepts: an integer 1 .. 2^44."""
    return _is_int(v) and 0 < v <= MAX_DEVICE_BYTES


# Header values are the rest of a '# key: value' line: a line break in one would start a new
# header line (a forged '# device_total_bytes: 1', say), and the reader refuses NUL and CR.
# Free text (the source's file name) is written with its control characters escaped as \xNN;
# a value gpusim reads as a setting (allocator_conf) is refused instead, since an altered
# setting would be replayed as if it were the recorded one.
# The C1 controls (0x9b is a terminal's CSI), the bidirectional marks, embeddings and isolates,
# and the line and paragraph separators count as control characters too, as gpusim's
# gs_unichar_hidden counts them: a terminal acts on them, or they reorder what it shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _escaped(m):
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def header_text(value):
    """Free text for a header line: control characters as \\xNN or \\uNNNN (backslashes stay
    as they are)."""
    value = _CONTROL.sub(_escaped, value)
    # A file name that is not UTF-8 comes as surrogate escapes, which UTF-8 cannot encode.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\x{ord(m.group()) & 0xff:02x}", value)


def header_setting(key, value):
    """A header value gpusim reads: refused when it holds a control character."""
    m = _CONTROL.search(value) or re.search("[\ud800-\udfff]", value)
    if m:
        raise ConvertError(f"the recorded {key} {value[:60]!r} holds a control character "
                           f"({ord(m.group()):#04x}) at offset {m.start()}; a header value is "
                           f"one line of text, and this one cannot be written as recorded")
    return value


def read_snapshot(f, progress=None):
    """Read a snapshot from the binary file f (gunzipped), streaming its entries."""
    rec = Recording("pytorch-snapshot")
    streamed = {}                 # device -> DeviceEvents, for the device lists streamed

    def feeder(dev):
        d = streamed.get(dev)
        if d is None:
            d = streamed[dev] = DeviceEvents(dev, rec)
        return d.feed_batch

    snap = SnapshotWalker(f, feeder, progress).load()
    if not isinstance(snap, dict) or "device_traces" not in snap or "segments" not in snap:
        what = type(snap).__name__
        if isinstance(snap, dict):
            keys = ", ".join(sorted(map(str, snap))[:8]) or "none"
            what = f"dict with keys {keys}"
        raise ConvertError(f"not a PyTorch memory snapshot (expected a dict with 'segments' "
                           f"and 'device_traces'; found a {what})")
    traces = snap["device_traces"]
    if not isinstance(traces, list):
        raise ConvertError("snapshot 'device_traces' is not a list")

    settings = snap.get("allocator_settings")
    if isinstance(settings, dict):
        rec.allocator_settings = settings
        conf = settings.get("PYTORCH_CUDA_ALLOC_CONF")
        rec.allocator_conf = conf if isinstance(conf, str) else None

    per_device = []
    check_shared_references(traces)
    check_shared_segments(snap.get("segments"))
    for dev, evs in enumerate(traces):
        if isinstance(evs, _DevList):
            # streamed as it was read: its entries are in streamed[dev]
            if evs.dev != dev:
                raise ConvertError(f"snapshot device_traces[{dev}] is laid out out of order in "
                                   f"the pickle (it was read as device {evs.dev})")
            rec.num_raw_events += evs.count
            per_device.append(streamed[dev].out if dev in streamed else [])
            continue
        if not isinstance(evs, list):
            raise ConvertError(f"snapshot device_traces[{dev}] is not a list")
        rec.num_raw_events += len(evs)
        per_device.append(_snapshot_device_events(dev, evs, rec))

    if rec.num_raw_events == 0:
        raise ConvertError("snapshot holds no trace events; record with "
                           "torch.cuda.memory._record_memory_history(enabled='all') before "
                           "the workload, then _dump_snapshot()")

    rec.final_blocks = _snapshot_final_blocks(snap.get("segments"))
    rec.final_segments = _snapshot_final_segments(snap.get("segments"))
    rec.final_pool_segments = _snapshot_final_pool_segments(snap.get("segments"))
    rec.final_reserved = _snapshot_final_reserved(snap.get("segments"))
    rec.per_device = per_device
    return rec


# ---------------------------------------------------------------------------------------------
# Streaming a snapshot
#
# pickle.load() builds the whole snapshot before anything else can start: 1-3 KiB of Python
# objects per entry (each entry a dict, its stack a list of frame dicts), so a 5-million-entry
# recording needs gigabytes. SnapshotWalker instead runs the pickle's opcodes itself, over the
# input read in chunks (gunzipped as it goes), and hands each entry of device_traces[d] to a
# callback as soon as it is complete; the entry is then dropped, and its frames list becomes
# the one frame the trace keeps (top_user_frame). What it keeps is what the conversion needs:
# the memo's strings and frame dicts (PyTorch writes each distinct frame once and refers to it),
# the segments list, and no entry. It builds plain data only (dicts, lists, tuples, str, bytes,
# int, float, bool, None; set, frozenset and OrderedDict through their allowed globals), as
# SafeUnpickler does, and refuses anything else before it could run.
#
# How it finds the entries: the pickler writes the top-level dict's value for 'device_traces'
# as a list created right after that key, and each device's list right after it or after a
# MARK. A list created so is a _DevList: what is appended to it is an entry, consumed, never
# stored. A pickle laid out otherwise still converts (its lists are built as plain lists, and
# read_snapshot reads them as pickle.load's result), only without the memory bound.
#
# Speed (BENCHMARKS.md, "Converting a large snapshot"): the opcode loop costs about 1 us an
# opcode, 30 an entry. An entry written as PyTorch's pickler writes it (its keys memo
# references, its values plain) is matched whole by one regex (_ENTRY, then by its layout's:
# the same keys as literals, tried first for the next entry) and built by _values without the
# loop, with the same dict and
# the same memo slots; what each frame reference is (a user's frame, a library's) is found
# once (_frame_top). Anything else goes through the loop, so both read the same objects. An
# entry that DeviceEvents.feed_batch takes on its fast path is not even made a dict: a _Pending
# carries its fields to feed_batch, and becomes its dict only where the pickle would see it.
# ---------------------------------------------------------------------------------------------

class _DevList(list):
    """A device's event list, being streamed: it stays empty, its entries go to the callback."""
    __slots__ = ("dev", "count")


class _Gone:
    """The memo's slot of an entry or event list already consumed: referring to it again is a
    shared reference, which read_snapshot refuses (check_shared_references says why)."""
    __slots__ = ("what",)

    def __init__(self, what):
        self.what = what


class _Frames:
    """A frames list reduced to what the trace keeps: its top user frame, or None."""
    __slots__ = ("top",)

    def __init__(self, top):
        self.top = top

    # These stand-ins can end up inside data the reference writes (a malformed snapshot whose
    # allocator_settings refers to an entry's frames, a global, a MARK): json's default=str
    # then writes their repr, which must not be the object's address, different in every run
    # (found by tests/fuzz/diff_convert.py: main against itself differed).
    def __repr__(self):
        return "<frames read>"


class _Global:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make

    def __repr__(self):
        return f"<global {self.make.__name__}>"


class _Mark:
    def __repr__(self):
        return "<mark>"


_MARK = _Mark()


class _Pending(tuple):
    """An entry that the fast path read and that DeviceEvents.feed_batch will take as it is,
    in place of its dict (which would only be read back): (action, addr, size, stream,
    time_us, frames, memo slot, key names, values). It lives on the walker's stack and in its
    memo slot until its batch is consumed; anything else that would see the entry (a memo
    reference, an opcode that stores or pops it elsewhere) first gets the dict it stands for,
    the same one each time (SnapshotWalker._settle)."""
    __slots__ = ()

    def __repr__(self):
        return "<entry read>"


_SPECIAL = (_Gone, _DevList, _Pending)
# The opcodes of SnapshotWalker._rare that only push (or read the input): a _Pending on the
# stack stays one (before any other, the stack's are settled into their dicts).
_PUSH_ONLY = frozenset(b"\x80\x95NGXCBUTILFVS)cg\x88\x89\x8b\x8d\x8e\x96\x8f")
# A run of BINGET/LONG_BINGET opcodes closed by APPENDS: a frames list of shared frame dicts.
_FRAME_REFS = re.compile(rb"(?:h.|j.{4})*e", re.S)
# One whole entry as PyTorch's pickler writes it, for the fast path (SnapshotWalker._entry):
# EMPTY_DICT MEMOIZE MARK, then up to 16 (key, value) pairs, then SETITEMS. A key is a memo
# reference (BINGET/LONG_BINGET: every entry after the first refers to the key strings), a
# value an integer (BININT1/BININT2/BININT/LONG1 of up to 8 bytes), a memo reference, a short
# string and its MEMOIZE, None, True, False, a float, or a frames list (an empty one, or one of
# memo references closed by APPEND or APPENDS). Anything else (a key seen for the first time, a
# frame dict written inline, a FRAME opcode in the middle) does not match, and the entry goes
# through the general loop: both build the same objects, the fast path only skips the loop.
_E_REF = rb"h.|j...."
_E_VALUE = (_E_REF + rb"|\x8a(?:" + b"|".join(re.escape(bytes([n])) + b".{%d}" % n
                                             for n in range(9)) +
            rb")|K.|J....|M..|\x8c(?:" +
            b"|".join(re.escape(bytes([n])) + b".{%d}" % n for n in range(64)) +
            rb")\x94|\]\x94(?:\((?:h.|j....)*e|(?:h.|j....)a)?|N|\x88|\x89|G.{8}")
_E_PAIRS = b""
for _ in range(16):
    # nested, (k v (k v (...)?)?)?, so that a failed match backtracks linearly, not over every
    # choice of 16 optional pairs
    _E_PAIRS = b"(?:(" + _E_REF + b")(" + _E_VALUE + b")" + _E_PAIRS + b")?"
# (compiled when a snapshot is read, not at import: 30 ms that an RMM log need not pay)
_ENTRY = rb"\}\x94\(" + _E_PAIRS + rb"u"


_LIB, _NOT_FRAME = object(), object()     # what a frame reference is (SnapshotWalker.tops)


def _roles(names):
    """Where action, addr, size, stream, time_us and frames (-1: none) are among an entry's
    key names, for SnapshotWalker._values to make a _Pending; None when it cannot (a key twice:
    the dict keeps the last)."""
    if len(set(names)) != len(names):
        return None
    try:
        return (names.index("action"), names.index("addr"), names.index("size"),
                names.index("stream"), names.index("time_us"),
                names.index("frames") if "frames" in names else -1)
    except ValueError:
        return None
# The memo's value for an entry consumed (one object for all of them: see _Gone).
_GONE_EVENT = _Gone("an event")
_CHUNK = 1 << 20
_MAX_STRING = 1 << 28       # a string or bytes of 256 MiB: no snapshot has one; refuse it
_ALLOWED_GLOBALS = {
    ("builtins", "set"): set, ("__builtin__", "set"): set,
    ("builtins", "frozenset"): frozenset, ("__builtin__", "frozenset"): frozenset,
    ("collections", "OrderedDict"): collections.OrderedDict,
}


class _BadPickle(Exception):
    pass


class SnapshotWalker:
    def __init__(self, f, feeder, progress=None):
        self.f = f                  # a binary file (already gunzipped)
        # feeder(dev): a function (index of the first, entries) that takes a batch of device
        # dev's entries, each a dict or a _Pending (DeviceEvents.feed_batch)
        self.feeder = feeder
        self.progress = progress    # progress(entries consumed), called every 4096 entries
        self.buf = b""
        self.pos = 0
        self.eof = False
        self.dt = None              # the device_traces list, once seen
        self.ndev = 0
        self.entries = 0
        # The fast path's caches (_entry), valid while the memo slots they read keep their
        # values: a PUT over a slot, or a slot read by _frame_top becoming _Gone or _Frames,
        # empties them (_forget).
        self.names = {}             # key opcodes of an entry -> the key strings
        self.layouts = {}           # key opcodes of an entry -> (its layout's match, names)
        self.layout = None          # the last entry's layout, tried first
        self.tops = {}              # a frame's memo reference -> what it is (_frame_top)
        self.top_slots = set()      # memo slots that the tops were read from
        self.frames_by_top = {}     # top user frame -> its _Frames (one object for each)
        self.stacks = {}            # memo references of a whole frames list -> its _Frames
        self.strs = {}              # SHORT_BINUNICODE opcode -> its str (action names etc.)
        self.sparse = False         # a PUT made the memo's keys other than 0 .. len - 1

    def _fill(self, n):
        """At least n bytes from pos in buf, else _BadPickle (the pickle is cut short)."""
        if n > _MAX_STRING:
            raise _BadPickle(f"an object of {n} bytes (no snapshot holds one that large)")
        parts = [self.buf[self.pos:]]
        have = len(parts[0])
        while have < n and not self.eof:
            chunk = self.f.read(max(_CHUNK, n - have))
            if not chunk:
                self.eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0
        if have < n:
            raise _BadPickle("pickle data was truncated")

    def _refill(self):
        """One more chunk after what is left of buf (the hot loop keeps 64 KiB ahead)."""
        chunk = self.f.read(_CHUNK)
        if not chunk:
            self.eof = True
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _readline(self):
        while True:
            i = self.buf.find(b"\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 1
                return line
            if self.eof:
                raise _BadPickle("pickle data was truncated (no newline)")
            self._fill(len(self.buf) - self.pos + 1)

    def _consume(self, lst, items):
        dev = lst.dev
        if len({id(e) for e in items}) != len(items):
            # a reference to an entry of the same batch (the memo catches later ones)
            raise ConvertError("the snapshot refers to an event it already holds a second "
                               "time (a shared reference in the pickle); a PyTorch snapshot "
                               "never repeats an event or an event list")
        # (the whole batch is fed before the memo slots below change: feed reads no slot)
        self.feeder(dev)(lst.count, items)
        lst.count += len(items)
        memo, pop, top_slots = self.memo, self.memo_of.pop, self.top_slots
        for e in items:
            if e.__class__ is _Pending:
                # its slot (it has no memo_of: nothing but the stack held it), its frames
                idx = e[6]
                memo[idx] = _GONE_EVENT
                if idx in top_slots:
                    self._forget()
                fr = e[5]
            else:
                # the entry's memo slot, if it has one, now refuses a second reference
                idx = pop(id(e), None)
                if idx is not None:
                    if idx < len(memo):
                        memo[idx] = _GONE_EVENT
                    else:
                        self._set(idx, _GONE_EVENT)
                    if idx in top_slots:
                        self._forget()
                fr = e.get("frames") if e.__class__ is dict or isinstance(e, dict) else None
            if fr.__class__ is not _Frames and isinstance(fr, list):
                idx = pop(id(fr), None)
                if idx is not None:
                    self._set(idx, _Frames(top_user_frame(fr)))
                    if idx in top_slots:
                        self._forget()
        self.entries += len(items)
        if self.progress is not None and self.entries >> 12 != (self.entries - len(items)) >> 12:
            self.progress(self.entries)

    def _new_list(self, stack):
        """An empty list: a _DevList when it is device_traces' next device list (below it on
        the stack, past a MARK and the device lists before it: device_traces)."""
        k = len(stack) - 1
        while k >= 0 and (stack[k] is _MARK or isinstance(stack[k], _DevList)):
            k -= 1
        top = stack[k] if k >= 0 else None
        if self.dt is not None and top is self.dt:
            lst = _DevList()
            lst.dev = self.ndev
            lst.count = 0
            self.ndev += 1
            return lst
        lst = []
        if self.dt is None and isinstance(top, str) and top == "device_traces":
            self.dt = lst
        return lst

    def _frame_refs(self, buf, start, end):
        """The top user frame of the frame dicts that the BINGET/LONG_BINGET opcodes in
        buf[start:end] refer to (top_user_frame, reading no further than it must)."""
        pos = start
        while pos < end:
            if buf[pos] == 0x68:
                v = self._get(buf[pos + 1])
                pos += 2
            else:
                v = self._get(struct.unpack_from("<I", buf, pos + 1)[0])
                pos += 5
            if not isinstance(v, dict):
                return None
            fn = v.get("filename")
            if isinstance(fn, str) and not _LIBRARY_FRAME.search(fn):
                return top_user_frame([v])
        return None

    def _get(self, idx):
        memo = self.memo
        if 0 <= idx < len(memo):
            v = memo[idx]
        else:
            try:
                v = self.extra[idx]
            except KeyError:
                raise _BadPickle(f"memo key {idx} not found") from None
        if v.__class__ is _Pending:
            return self._dict_of(v)
        if isinstance(v, _Gone):
            raise ConvertError(f"the snapshot refers to {v.what} it already holds a second "
                               f"time (a shared reference in the pickle); a PyTorch snapshot "
                               f"never repeats an event or an event list")
        if isinstance(v, _DevList):
            raise ConvertError("the snapshot refers to a device's event list a second time (a "
                               "shared reference in the pickle); a PyTorch snapshot never "
                               "repeats an event list")
        return v

    def _put(self, idx, v):
        if isinstance(v, (dict, list)):
            self.memo_of[id(v)] = idx
        if 0 <= idx < len(self.memo) or idx in self.extra:
            self._forget()
        elif idx != len(self.memo) + len(self.extra):
            self.sparse = True      # MEMOIZE may now overwrite: the fast path stops (_entry)
        self._set(idx, v)

    # The memo is a list (slot i at index i: what MEMOIZE makes, 8 bytes a slot, where a dict
    # took about 80 with its int key: a third of the converter's memory at 1M entries) and a
    # dict, extra, of the slots a PUT made past its end. Its keys are the list's indices and
    # extra's, as the pickle module's dict would hold them: once extra has one, the list grows
    # no more, and MEMOIZE's slot (the count of keys) goes to extra too.
    def _set(self, idx, v):
        memo = self.memo
        if 0 <= idx < len(memo):
            memo[idx] = v
        elif idx == len(memo) and not self.extra:
            memo.append(v)
        else:
            self.extra[idx] = v

    def _memoize(self, v):
        """MEMOIZE: v in the next slot (the count of keys)."""
        self._set(len(self.memo) + len(self.extra), v)

    def _forget(self):
        self.layouts.clear()
        self.layout = None
        self.names.clear()
        self.tops.clear()
        self.stacks.clear()
        self.top_slots.clear()

    def _frame_top(self, refs):
        """The _Frames of a frames list whose memo references are refs (BINGET/LONG_BINGET
        opcodes), as _frame_refs finds it, from what each frame reference was found to be
        before (self.tops: the reference's opcode -> its 'file:line:function' when it is a
        user's frame, _LIB when it is a library's, _NOT_FRAME when it is no frame dict), or
        at once when the same list was seen before (self.stacks: a program makes its
        allocations from a few code paths, and a free's entry often repeats its alloc's)."""
        fr = self.stacks.get(refs)
        if fr is not None:
            return fr
        tops = self.tops
        top = None
        pos, end = 0, len(refs)
        while pos < end:
            # (refs is BINGET/LONG_BINGET opcodes only: _FRAME_REFS matched it)
            if refs[pos] == 0x68:
                ref = refs[pos:pos + 2]
                pos += 2
            else:
                ref = refs[pos:pos + 5]
                pos += 5
            t = tops.get(ref)
            if t is None:
                idx = ref[1] if ref[0] == 0x68 else int.from_bytes(ref[1:], "little")
                v = self._get(idx)          # raises as _frame_refs does
                if not isinstance(v, dict):
                    t = _NOT_FRAME
                else:
                    fn = v.get("filename")
                    t = (top_user_frame([v]) if isinstance(fn, str) and
                         not _LIBRARY_FRAME.search(fn) else _LIB)
                self.top_slots.add(idx)     # (self.stacks' answers rest on it too)
                if len(tops) < 1 << 20:
                    tops[ref] = t
            if t is _LIB:
                continue
            if t is not _NOT_FRAME:
                top = t
            break
        fr = self.frames_by_top.get(top)
        if fr is None:
            fr = _Frames(top)
            if len(self.frames_by_top) < 1 << 16:
                self.frames_by_top[top] = fr
        if len(self.stacks) >= 1 << 16:
            self.stacks.clear()         # a bound on its memory; the frequent ones come back
        self.stacks[refs] = fr
        return fr

    def _entry(self, m):
        """The entry (a dict) that _ENTRY matched, built as the general loop builds it from
        the same opcodes, memo slots included (it is then pushed, and consumed with the rest
        of its batch at APPENDS, as before). None, with nothing changed, when the general loop
        must take it instead (a key not yet a string in the memo, a reference that is not
        plain data, a list under another key than 'frames'): the errors stay the general
        loop's."""
        memo = self.memo
        if self.sparse:
            return None
        g = m.groups()
        keys = g[0::2]
        lay = self.layouts.get(keys)
        if lay is not None:
            e = self._values(lay[1], g[1::2], lay[2])
            if e is not None:
                self.layout = lay
            return e
        names = self.names.get(keys)
        if names is None:
            names = []
            for k in keys:
                if k is None:
                    break
                v = k[1] if k[0] == 0x68 else int.from_bytes(k[1:], "little")
                v = memo[v] if v < len(memo) else None
                if v.__class__ is not str:
                    return None
                names.append(v)
            names = tuple(names)
            if len(self.names) < 4096:
                self.names[keys] = names
        roles = _roles(names)
        e = self._values(names, g[1::2], roles)
        if e is not None and len(self.layouts) < 64:
            # the entries after it are likely laid out the same: matched by a pattern with its
            # keys as literals (half the groups, no tuple of keys to hash), tried first
            ks = [k for k in keys if k is not None]
            self.layouts[keys] = self.layout = (re.compile(
                rb"\}\x94\(" + b"".join(re.escape(k) + b"(" + _E_VALUE + b")" for k in ks) +
                rb"u", re.S).match, names, roles)
        return e

    def _values(self, names, vals, roles=None):
        """The entry (a dict) of these key strings and value opcodes (the groups of _ENTRY or
        of a layout's pattern), or None, with nothing changed (_entry says when). With roles
        (_roles: where its fields are), an entry that DeviceEvents.feed_batch would take on its
        fast path comes as a _Pending instead, the dict left unmade (it would only be read
        back: about a fifth of the reading)."""
        memo = self.memo
        if self.sparse:
            return None
        slot = len(memo)
        e = {}          # in its slot while the values are read, as the loop has it
        memo.append(e)
        nmemo = len(memo)
        xs = []
        add = xs.append
        own = False     # a value is the entry itself (a reference to its own slot)
        for k, v in zip(names, vals):
            c = v[0]
            # by frequency in a snapshot: memo references (past the first 256 slots, long
            # ones), addresses and times (LONG1), small ints, strings
            if c == 0x6A:                                   # LONG_BINGET
                x = int.from_bytes(v[1:], "little")
                if x >= slot:
                    if x >= nmemo:
                        break
                    own = own or x == slot
                x = memo[x]
                if x.__class__ in _SPECIAL:
                    break
            elif c == 0x8A:                                 # LONG1
                x = int.from_bytes(v[2:], "little", signed=True)
            elif c == 0x4B:                                 # BININT1
                x = v[1]
            elif c == 0x68:                                 # BINGET
                x = v[1]
                if x >= slot:
                    if x >= nmemo:
                        break
                    own = own or x == slot
                x = memo[x]
                if x.__class__ in _SPECIAL:
                    break
            elif c == 0x8C:                                 # SHORT_BINUNICODE, MEMOIZE
                x = self.strs.get(v)
                if x is None:
                    x = str(v[2:-1], "utf-8", "surrogatepass")
                    if len(self.strs) < 4096:
                        self.strs[v] = x
                memo.append(x)
                nmemo += 1
            elif c == 0x4A:                                 # BININT
                x = int.from_bytes(v[1:], "little", signed=True)
            elif c == 0x4D:                                 # BININT2
                x = v[1] | v[2] << 8
            elif c == 0x5D:                                 # EMPTY_LIST, MEMOIZE (frames)
                if k != "frames":
                    break
                if len(v) == 2:                             # empty
                    x = []
                    self.memo_of[id(x)] = len(memo)
                elif v[2] == 0x28:                          # MARK refs APPENDS
                    if "filename" in names:
                        # _frame_top may read the entry (a reference to its own slot) as a
                        # frame dict: with the values before this one, as the loop had it
                        e.update(zip(names, xs))
                    x = self._frame_top(v[3:-1])
                else:                                       # one ref, APPEND
                    x = v[3] if v[2] == 0x68 else int.from_bytes(v[3:-1], "little")
                    if x >= slot:
                        if x >= nmemo:
                            break
                        own = own or x == slot
                    x = memo[x]
                    if x.__class__ in _SPECIAL:
                        break
                    x = [x]
                    self.memo_of[id(x)] = len(memo)
                memo.append(x)
                nmemo += 1
            elif c == 0x4E:
                x = None
            elif c == 0x88:
                x = True
            elif c == 0x89:
                x = False
            else:                                           # BINFLOAT
                x = struct.unpack(">d", v[1:])[0]
            add(x)
        else:
            if roles is not None and not own:
                ia, iaddr, isize, istream, it, ifr = roles
                action, addr, size, stream, t = xs[ia], xs[iaddr], xs[isize], xs[istream], xs[it]
                # DeviceEvents.feed_batch's condition for its fast path
                if (action.__class__ is str and action in _FAST_ACTIONS and
                        addr.__class__ is int and size.__class__ is int and
                        stream.__class__ is int and t.__class__ is int and
                        0 <= size < U64_LIMIT and 0 <= stream < U64_LIMIT):
                    x = memo[slot] = _tuple_new(_Pending, (
                        action, addr, size, stream, t, xs[ifr] if ifr >= 0 else None, slot,
                        names, xs))
                    return x
            e.update(zip(names, xs))
            self.memo_of[id(e)] = slot
            return e
        # the general loop takes it: undo what was done
        for x in memo[slot:]:
            self.memo_of.pop(id(x), None)
        del memo[slot:]
        return None

    def _dict_of(self, p, scan=True):
        """The dict that the _Pending p stands for, made now and put where p was (its memo
        slot, and the stack when scan): what _values would have made."""
        e = dict(zip(p[7], p[8]))
        slot = p[6]
        if self.memo[slot] is p:
            self.memo[slot] = e
        self.memo_of[id(e)] = slot
        if scan:
            stack = self.stack
            for k in range(len(stack) - 1, -1, -1):
                if stack[k] is p:
                    stack[k] = e
                    break
        return e

    def _settle(self, seq):
        """The dicts in place of the _Pendings in seq (the stack, or items popped off it)."""
        if _Pending in map(type, seq):
            for k, x in enumerate(seq):
                if x.__class__ is _Pending:
                    seq[k] = self._dict_of(x, scan=seq is not self.stack)

    def _pop_mark(self, stack):
        for k in range(len(stack) - 1, -1, -1):
            if stack[k] is _MARK:
                items = stack[k + 1:]
                del stack[k:]
                return items
        raise _BadPickle("could not find MARK")

    def load(self):
        first = None
        try:
            self._refill()
            first = self.buf[:1]
            return self._load()
        except (_BadPickle, struct.error, IndexError, KeyError, TypeError, ValueError,
                AttributeError, UnicodeDecodeError, OverflowError) as e:
            if isinstance(e, ConvertError):
                raise
            if first != b"\x80":
                # No pickle protocol marker: most likely some other kind of file altogether.
                raise ConvertError("not a PyTorch memory snapshot (pickle) or an RMM log CSV "
                                   "(unrecognized content)") from None
            detail = str(e).splitlines()[0] if str(e) else "no detail"
            name = "UnpicklingError" if isinstance(e, _BadPickle) else type(e).__name__
            raise ConvertError(f"not a valid pickle ({name}: {detail})") from None

    def _load(self):
        self.memo = memo = []      # see _set
        self.extra = {}
        self.memo_of = memo_of = {}   # id of a memoized dict or list -> its memo index
        self.stack = stack = []
        settle = self._settle
        push = stack.append
        unpack_from = struct.unpack_from
        consume = self._consume
        get = self._get
        entry, entry_match = self._entry, re.compile(_ENTRY, re.S).match
        values = self._values
        dict_, list_, str_ = dict, list, str
        buf, pos = self.buf, self.pos
        # buf and pos live in locals here; self.buf and self.pos are brought up to date before
        # anything that reads the input (_refill, _rare) and taken back after it.
        while True:
            if len(buf) - pos < 65536 and not self.eof:
                self.pos = pos
                self._refill()
                buf, pos = self.buf, self.pos
            if pos >= len(buf):
                raise _BadPickle("pickle data was truncated")
            op = buf[pos]
            pos += 1
            # The opcodes of a snapshot first: an entry's first (the fast path takes the whole
            # entry), then the rest by frequency.
            if op == 0x7D:                                  # EMPTY_DICT
                # An entry (or any dict) as PyTorch writes it: built at once (_values), matched
                # by the last entry's layout, else by _ENTRY (_entry, which finds its layout)
                lay = self.layout
                m = lay[0](buf, pos - 1) if lay is not None else None
                if m is not None:
                    e = values(lay[1], m.groups(), lay[2])
                else:
                    m = entry_match(buf, pos - 1)
                    e = entry(m) if m is not None else None
                if e is not None:
                    push(e)
                    pos = m.end()
                    # the entries that follow, while buf holds them (see the loop's top)
                    lay = self.layout
                    while (lay is not None and buf[pos:pos + 1] == b"}" and
                           len(buf) - pos >= 65536):
                        m = lay[0](buf, pos)
                        if m is None:
                            break
                        e = values(lay[1], m.groups(), lay[2])
                        if e is None:
                            break
                        push(e)
                        pos = m.end()
                    continue
                push({})
            elif op == 0x68:                                # BINGET
                v = buf[pos]
                v = memo[v] if v < len(memo) else memo
                if v is memo or v.__class__ in _SPECIAL:
                    v = get(buf[pos])
                push(v)
                pos += 1
            elif op == 0x94:                                # MEMOIZE
                v = stack[-1]
                if v.__class__ is _Pending:
                    settle(stack)
                    v = stack[-1]
                idx = len(memo)
                if self.sparse:
                    idx += len(self.extra)
                    self._set(idx, v)
                else:
                    memo.append(v)
                if v.__class__ is dict_ or v.__class__ is list_:
                    memo_of[id(v)] = idx
            elif op == 0x8C:                                # SHORT_BINUNICODE
                n = buf[pos]
                push(str_(buf[pos + 1:pos + 1 + n], "utf-8", "surrogatepass"))
                pos += 1 + n
            elif op == 0x6A:                                # LONG_BINGET
                k = unpack_from("<I", buf, pos)[0]
                v = memo[k] if k < len(memo) else memo
                if v is memo or v.__class__ in _SPECIAL:
                    v = get(k)
                push(v)
                pos += 4
            elif op == 0x4B:                                # BININT1
                push(buf[pos])
                pos += 1
            elif op == 0x4A:                                # BININT
                push(unpack_from("<i", buf, pos)[0])
                pos += 4
            elif op == 0x8A:                                # LONG1
                n = buf[pos]
                push(int.from_bytes(buf[pos + 1:pos + 1 + n], "little", signed=True))
                pos += 1 + n
            elif op == 0x4D:                                # BININT2
                push(unpack_from("<H", buf, pos)[0])
                pos += 2
            elif op == 0x28:                                # MARK
                push(_MARK)
            elif op == 0x75:                                # SETITEMS
                items = self._pop_mark(stack)
                settle(items)
                d = stack[-1]
                if d.__class__ is _Pending:
                    settle(stack)
                    d = stack[-1]
                if len(items) % 2 or d.__class__ is not dict_ and not isinstance(d, dict_):
                    raise _BadPickle("bad SETITEMS")
                for k in range(0, len(items), 2):
                    d[items[k]] = items[k + 1]
            elif op == 0x5D:                                # EMPTY_LIST
                if stack and stack[-1] == "frames" and buf[pos:pos + 2] == b"\x94(":
                    # A stack as PyTorch writes it: its frames are references to frame dicts
                    # written before. Only the first frames up to the user's are looked at.
                    m = _FRAME_REFS.match(buf, pos + 2)
                    if m is not None:
                        fr = self._frame_top(buf[pos + 2:m.end() - 1])
                        self._memoize(fr)
                        push(fr)
                        pos = m.end()
                        continue
                push(self._new_list(stack))
            elif op == 0x65:                                # APPENDS
                items = self._pop_mark(stack)
                lst = stack[-1]
                if isinstance(lst, _DevList):
                    consume(lst, items)
                elif isinstance(lst, list_):
                    settle(items)
                    lst.extend(items)
                else:
                    raise _BadPickle("APPENDS to a non-list")
            elif op == 0x61:                                # APPEND
                v = stack.pop()
                lst = stack[-1]
                if isinstance(lst, _DevList):
                    consume(lst, [v])
                elif isinstance(lst, list_):
                    if v.__class__ is _Pending:
                        v = self._dict_of(v, scan=False)
                    lst.append(v)
                else:
                    raise _BadPickle("APPEND to a non-list")
            else:
                self.pos = pos
                if op not in _PUSH_ONLY:
                    settle(stack)       # what it pops or stores is the entry's dict
                if self._rare(op, stack):
                    return stack.pop()
                buf, pos = self.buf, self.pos

    def _rare(self, op, stack):
        """Every other opcode; True at STOP."""
        unpack_from = struct.unpack_from

        def arg(n):
            if len(self.buf) - self.pos < n:
                self._fill(n)
            b = self.buf[self.pos:self.pos + n]
            self.pos += n
            return b

        c = chr(op)
        if op == 0x80:                                      # PROTO
            arg(1)
        elif op == 0x95:                                    # FRAME: framing is transparent
            arg(8)
        elif c == ".":                                      # STOP
            if len(stack) != 1 or stack[0] is _MARK:
                raise _BadPickle("STOP with a stack of %d" % len(stack))
            return True
        elif c == "N":
            stack.append(None)
        elif op == 0x88:
            stack.append(True)
        elif op == 0x89:
            stack.append(False)
        elif c == "G":                                      # BINFLOAT
            stack.append(unpack_from(">d", arg(8))[0])
        elif op == 0x8B:                                    # LONG4
            n = unpack_from("<i", arg(4))[0]
            if n < 0:
                raise _BadPickle("LONG pickle has negative byte count")
            stack.append(int.from_bytes(arg(n), "little", signed=True))
        elif c == "X":                                      # BINUNICODE
            stack.append(str(arg(unpack_from("<I", arg(4))[0]), "utf-8", "surrogatepass"))
        elif op == 0x8D:                                    # BINUNICODE8
            stack.append(str(arg(unpack_from("<Q", arg(8))[0]), "utf-8", "surrogatepass"))
        elif c == "C":                                      # SHORT_BINBYTES
            stack.append(arg(arg(1)[0]))
        elif c == "B":                                      # BINBYTES
            stack.append(arg(unpack_from("<I", arg(4))[0]))
        elif op == 0x8E:                                    # BINBYTES8
            stack.append(arg(unpack_from("<Q", arg(8))[0]))
        elif op == 0x96:                                    # BYTEARRAY8
            stack.append(bytearray(arg(unpack_from("<Q", arg(8))[0])))
        elif c == "U":                                      # SHORT_BINSTRING
            stack.append(arg(arg(1)[0]).decode("ascii"))
        elif c == "T":                                      # BINSTRING
            n = unpack_from("<i", arg(4))[0]
            if n < 0:
                raise _BadPickle("BINSTRING pickle has negative byte count")
            stack.append(arg(n).decode("ascii"))
        elif c == "I":                                      # INT (text)
            line = self._readline()
            stack.append({b"00": False, b"01": True}.get(line) if line in (b"00", b"01")
                         else int(line, 10))
        elif c == "L":                                      # LONG (text)
            stack.append(int(self._readline().rstrip(b"L"), 10))
        elif c == "F":                                      # FLOAT (text)
            stack.append(float(self._readline()))
        elif c == "V":                                      # UNICODE (text)
            stack.append(str(self._readline(), "raw-unicode-escape"))
        elif c == "S":                                      # STRING (text, quoted)
            line = self._readline()
            if len(line) < 2 or line[:1] != line[-1:] or line[:1] not in (b"'", b'"'):
                raise _BadPickle("the STRING opcode argument must be quoted")
            stack.append(codecs.escape_decode(line[1:-1])[0].decode("ascii"))
        elif c == ")":
            stack.append(())
        elif c == "t":
            stack.append(tuple(self._pop_mark(stack)))
        elif op == 0x85:
            stack[-1:] = [(stack[-1],)]
        elif op == 0x86:
            stack[-2:] = [tuple(stack[-2:])]
        elif op == 0x87:
            stack[-3:] = [tuple(stack[-3:])]
        elif c == "l":                                      # LIST (from the mark)
            items = self._pop_mark(stack)
            lst = self._new_list(stack)
            if isinstance(lst, _DevList):
                stack.append(lst)
                self._consume(lst, items)
            else:
                lst.extend(items)
                stack.append(lst)
        elif c == "d":                                      # DICT (from the mark)
            items = self._pop_mark(stack)
            if len(items) % 2:
                raise _BadPickle("odd number of items for DICT")
            stack.append({items[k]: items[k + 1] for k in range(0, len(items), 2)})
        elif c == "s":                                      # SETITEM
            v = stack.pop()
            k = stack.pop()
            stack[-1][k] = v
        elif op == 0x8F:                                    # EMPTY_SET
            stack.append(set())
        elif op == 0x90:                                    # ADDITEMS
            items = self._pop_mark(stack)
            stack[-1].update(items)
        elif op == 0x91:                                    # FROZENSET
            stack.append(frozenset(self._pop_mark(stack)))
        elif c == "0":                                      # POP
            if stack and stack[-1] is _MARK:
                raise _BadPickle("POP of a MARK")
            stack.pop()
        elif c == "1":                                      # POP_MARK
            self._pop_mark(stack)
        elif c == "2":                                      # DUP
            v = stack[-1]
            if isinstance(v, _DevList):
                raise ConvertError("the snapshot refers to a device's event list a second "
                                   "time (a shared reference in the pickle)")
            stack.append(v)
        elif c == "p":                                      # PUT (text)
            self._put(int(self._readline()), stack[-1])
        elif c == "q":                                      # BINPUT
            self._put(arg(1)[0], stack[-1])
        elif c == "r":                                      # LONG_BINPUT
            self._put(unpack_from("<I", arg(4))[0], stack[-1])
        elif c == "g":                                      # GET (text)
            stack.append(self._get(int(self._readline())))
        elif c in "c\x93":                                  # GLOBAL, STACK_GLOBAL
            if c == "c":
                module = self._readline().decode("utf-8")
                name = self._readline().decode("utf-8")
            else:
                name = stack.pop()
                module = stack.pop()
            make = _ALLOWED_GLOBALS.get((module, name))
            if make is None:
                raise ConvertError(
                    f"the pickle needs class {module}.{name}, which a PyTorch memory snapshot "
                    f"never holds; refusing to load it (unpickling arbitrary classes can run "
                    f"code)")
            stack.append(_Global(make))
        elif c == "R":                                      # REDUCE: an allowed global only
            args = stack.pop()
            fn = stack.pop()
            if not isinstance(fn, _Global) or not isinstance(args, tuple):
                raise _BadPickle("REDUCE of something that is not an allowed global")
            stack.append(fn.make(*args))
        elif c in "PQ":
            raise ConvertError("the pickle uses persistent ids, which a memory snapshot never "
                               "holds")
        else:
            raise ConvertError(
                f"the pickle uses opcode {chr(op)!r} ({op:#04x}), which builds objects a PyTorch "
                f"memory snapshot never holds; refusing to load it (unpickling arbitrary classes "
                f"can run code)" if c in "ibo\x81\x92\x82\x83\x84" else
                f"not a valid pickle (UnpicklingError: invalid load key, {chr(op)!r}.)")
        return False


# Frames inside these are not the user's (the rule of top_user_frame): PyTorch itself (a path
# component 'torch'), and anything of the Python installation (lib/pythonX.Y: the standard
# library, site-packages, dist-packages), and frozen or generated code ('<frozen ...>').
_LIBRARY_FRAME = re.compile(r"(^|[/\\])(torch[/\\]|lib[/\\]python\d)|^<")


def top_user_frame(frames):
    """'file:line:function' of the first frame (innermost first, as PyTorch lists them) outside
    torch/ and Python's own libraries, or None when there is none (or frames are not frames)."""
    for fr in frames:
        if not isinstance(fr, dict):
            return None
        fn = fr.get("filename")
        if not isinstance(fn, str) or _LIBRARY_FRAME.search(fn):
            continue
        line, name = fr.get("line"), fr.get("name")
        return f"{fn}:{line if _is_int(line) else 0}:{name if isinstance(name, str) else ''}"
    return None


def check_shared_references(traces):
    """Refuse a snapshot whose event lists or events are one object referred to many times.

    A pickle may refer to an object it already holds (its memo): a few bytes then stand for a
    whole list again, and a small file can name 10^4 times a list of 10^4 events, 10^8 events
    to convert (minutes and gigabytes). PyTorch never writes one device's events twice, nor one
    event in two places (it shares only the frames of a stack), so a repeat is refused at once.
    """
    seen_lists = {}
    seen_events = {}
    for dev, evs in enumerate(traces):
        if not isinstance(evs, list):
            continue
        other = seen_lists.setdefault(id(evs), dev)
        if other != dev:
            raise ConvertError(f"snapshot device_traces[{dev}] is the same list as "
                               f"device_traces[{other}] (a shared reference in the pickle); "
                               f"a PyTorch snapshot never repeats an event list")
        for i, e in enumerate(evs):
            if isinstance(e, (dict, list)):
                other = seen_events.setdefault(id(e), (dev, i))
                if other != (dev, i):
                    raise ConvertError(f"device {dev} event {i} is the same object as device "
                                       f"{other[0]} event {other[1]} (a shared reference in "
                                       f"the pickle); a PyTorch snapshot never repeats an event")


def check_shared_segments(segments):
    """Refuse a 'segments' list whose segments or block lists are shared references that
    expand to more than _MAX_SHARED_BLOCKS blocks: as with the event lists
    (check_shared_references), a few bytes of a pickle could name 10^4 times a segment of 10^4
    blocks, 10^8 blocks to read; PyTorch writes each once. A small repeat (a mutated snapshot
    of the fuzz corpus) converts as before."""
    if not isinstance(segments, list):
        return
    seen = set()
    shared = False
    total = 0
    for seg in segments:
        blocks = seg.get("blocks") if isinstance(seg, dict) else None
        for o in (seg, blocks):
            if isinstance(o, (dict, list)):
                shared = shared or id(o) in seen
                seen.add(id(o))
        if isinstance(blocks, list):
            total += len(blocks)
            if shared and total > _MAX_SHARED_BLOCKS:
                raise ConvertError("snapshot 'segments' refers to segments or block lists it "
                                   "already holds again and again (shared references in the "
                                   f"pickle), more than {_MAX_SHARED_BLOCKS:,} blocks; a "
                                   "PyTorch snapshot never repeats one")


_MAX_SHARED_BLOCKS = 1_000_000
_MAX_SETTINGS_VALUES = 100_000


def check_settings_size(settings):
    """Refuse allocator_settings that would write more than _MAX_SETTINGS_VALUES values to the
    reference: its containers may be shared references (a list of a list of ... twice over, 40
    deep, is 2^40 values from 425 bytes of pickle, which json.dumps wrote until the kernel
    killed it at 24 GB: tests/fuzz/diff_convert.py's run). PyTorch's is a dozen settings."""
    todo, n = [settings], 0
    while todo:
        x = todo.pop()
        n += 1
        if n > _MAX_SETTINGS_VALUES:
            raise ConvertError(f"snapshot 'allocator_settings' holds more than "
                               f"{_MAX_SETTINGS_VALUES:,} values (shared or circular references "
                               f"in the pickle?); PyTorch's holds a dozen settings")
        if isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        elif isinstance(x, (list, tuple, set, frozenset)):
            todo.extend(x)


def merge_devices(rec):
    """Merge the devices' events by time. heapq.merge keeps each input's own order (even where
    its clock went backwards) and, on equal times, takes the lower device first: a stable
    merge."""
    if rec.per_device is None:
        return
    if len(rec.per_device) == 1:
        rec.events = rec.per_device[0]      # (what the merge of one gives, in its order)
        return
    out = EventColumns()
    for e in heapq.merge(*rec.per_device, key=lambda e: e.time_us):
        out.append(e)
    rec.events = out


# ---------------------------------------------------------------------------------------------
# torch.cuda.empty_cache(), inferred
#
# PyTorch records no event for empty_cache(); it shows only as the segments it released
# (segment_free, or segment_unmap with expandable segments), after the free_completed of the
# frees it synchronized. The allocator releases segments on its own only inside an allocation
# that could not be served otherwise: its garbage collection (garbage_collection_threshold, with
# a memory fraction, when reserved memory is above threshold x limit), its release of oversize
# blocks (max_split_size_mb) and its full flush, the last two only after a first attempt to
# allocate failed (reserved + the segment it needs > the limit, or the device is full). Such
# releases are followed, before any other event of the program, by that allocation's
# segment_alloc/segment_map, or by its oom.
#
# The rule: a run of segment_free/segment_unmap entries of one device (free_completed entries
# may come between them) is an empty_cache() of that device, placed just before the run, unless
# the allocator event right after the run explains it:
#   - an oom (a failing allocation releases all it can first), or
#   - a segment_alloc/segment_map of an allocation under pressure: reserved (before the run) +
#     the segment it needed > L, where L is the run's limit when known (the .json beside a
#     snapshot: cap_gib), else the highest reserved the run ever reached (a limit is at least
#     that, and so is the device: below it, nothing forced a release), less one 20 MiB page with
#     expandable segments (whose mappings may pass the limit by less than a page); or
#   - with garbage_collection_threshold T > 0: reserved > T x L (T x the peak when the limit is
#     unknown: a lower bound of T x limit, so the test is necessary for a collection).
# "The segment it needed" is what a cudaMalloc for that allocation would take (the limit test in
# PyTorch's alloc_block uses it, with expandable segments too): the larger of the segment
# event's size and the allocation size of the request that follows (2 MiB up to 1 MiB, 20 MiB
# below 10 MiB, else rounded up to 2 MiB).
# ---------------------------------------------------------------------------------------------

RELEASES = ("segment_free", "segment_unmap")
GROWTHS = ("segment_alloc", "segment_map")


def _allocation_size(size):
    if size <= MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * (2 * MiB)


def _running_peak(events):
    reserved = peak = 0
    for e in events:
        if e.action in GROWTHS:
            reserved += e.size
        elif e.action in RELEASES:
            reserved -= e.size
        peak = max(peak, reserved)
    return peak


# ---------------------------------------------------------------------------------------------
# Private pools (CUDA graphs, torch.cuda.MemPool), inferred
#
# PyTorch's trace entries carry no pool. What a snapshot does say:
#   - the final 'segments' list gives each live segment's segment_pool_id: a private pool's
#     segments still held when the snapshot was taken are known (a graph that is alive, or
#     deleted with no empty_cache() since);
#   - a private pool's release by torch.cuda.MemPool's destruction (releasePool, then
#     emptyCache(pool)) frees that pool's cached segments only: a run of segment_free/
#     segment_unmap that leaves cached memory an empty_cache() would have released (a wholly
#     free cudaMalloc'd segment, or a wholly free page of an expandable segment) is such a
#     release, and the segments it frees are a private pool's.
# Each allocation then lies in a segment (cudaMalloc'd: the one made at its address range;
# expandable: the reservation, told apart by address: reservations lie 9/8 of the device apart)
# whose pool is known or the ordinary pools'. A pool's allocations give its route: a
# pool_begin before its first allocation and a pool_end after its last one, on their stream
# (every stream when they are on several and no other allocation comes between), split where
# an ordinary allocation on that stream comes between (each route a use of the pool). A pool
# released as above gets pool_release rows before the run (the last one empties it now).
# Not inferred: a pool whose segments all went in a full empty_cache() (they look like the
# ordinary pools' segments), or one whose allocations all lie in segments freed before the
# snapshot by anything but the pool's own release.
# ---------------------------------------------------------------------------------------------

_CLUSTER_GAP = 1 << 35   # expandable reservations lie ~9/8 of the device apart; pages within one
_PAGE_SMALL, _PAGE_LARGE = 2 * MiB, 20 * MiB


def _round512(n):
    return max(512, -(-n // 512) * 512)


class _PoolState:
    """One device's segments as the snapshot's events make and release them, with the live
    allocations in each, enough to tell a pool's own release from an empty_cache()."""

    def __init__(self, events):
        maps = sorted({e.addr for e in events if e.action in ("segment_map", "segment_unmap")})
        self.bases = []                      # expandable reservations' lowest addresses
        for a in maps:
            if not self.bases or a - self.last > _CLUSTER_GAP:
                self.bases.append(a)
            self.last = a
        self.mapped = {b: [] for b in self.bases}   # base -> [(addr, size)] mapped ranges
        # a reservation of the large pool maps 20 MiB pages, the small pool's 2 MiB ones
        sizes = {}
        for e in events:
            if e.action == "segment_map":
                sizes.setdefault(self.base_of(e.addr), []).append(e.size)
        self.page = {b: _PAGE_LARGE if all(n % _PAGE_LARGE == 0 for n in sizes.get(b, [1]))
                     else _PAGE_SMALL for b in self.bases}
        self.segs = {}        # addr -> [size, live count, key] of cudaMalloc'd segments
        # segs' addresses in order, for seg_of's bisection; once two segments overlap (a
        # malformed snapshot), seg_of scans segs in order as it always did, so the answer is
        # the same either way
        self.starts = []
        self.overlap = False
        self.live = {}        # alloc addr -> (key, rounded size)
        self.live_by_key = {}  # key -> {alloc addr: rounded size}, the same allocations
        self.nseg = 0

    def base_of(self, addr):
        i = bisect.bisect_right(self.bases, addr) - 1
        return self.bases[i] if i >= 0 else None

    def seg_of(self, addr):
        if self.overlap:
            for a, (size, _, key) in self.segs.items():
                if a <= addr < a + size:
                    return key
        else:
            # segments apart: only the last one starting at or below addr can hold it
            i = bisect.bisect_right(self.starts, addr) - 1
            if i >= 0:
                size, _, key = self.segs[self.starts[i]]
                if addr < self.starts[i] + size:
                    return key
        b = self.base_of(addr)
        return ("x", b) if b is not None else None

    def _add_segment(self, addr, size):
        if addr in self.segs:
            self.starts.remove(addr)
        i = bisect.bisect_left(self.starts, addr)
        if (i > 0 and self.starts[i - 1] + self.segs[self.starts[i - 1]][0] > addr) or \
                (i < len(self.starts) and addr + size > self.starts[i]):
            self.overlap = True
        self.starts.insert(i, addr)

    def _drop_segment(self, addr):
        if self.segs.pop(addr, None) is not None:
            del self.starts[bisect.bisect_left(self.starts, addr)]

    def _live_add(self, addr, key, size):
        old = self.live.get(addr)
        if old is not None:
            del self.live_by_key[old[0]][addr]
        self.live[addr] = (key, size)
        self.live_by_key.setdefault(key, {})[addr] = size

    def _live_pop(self, addr):
        got = self.live.pop(addr, None)
        if got is not None:
            del self.live_by_key[got[0]][addr]
        return got

    def apply(self, e):
        if e.action == "segment_alloc":
            self.nseg += 1
            self._add_segment(e.addr, e.size)
            self.segs[e.addr] = [e.size, 0, ("s", e.addr, self.nseg)]
        elif e.action == "segment_free":
            self._drop_segment(e.addr)
        elif e.action == "segment_map":
            b = self.base_of(e.addr)
            self.mapped[b].append((e.addr, e.size))
        elif e.action == "segment_unmap":
            b = self.base_of(e.addr)
            lo, hi = e.addr, e.addr + e.size
            rest = []
            for a, n in self.mapped[b]:
                if a + n <= lo or a >= hi:
                    rest.append((a, n))
                    continue
                if a < lo:
                    rest.append((a, lo - a))
                if a + n > hi:
                    rest.append((hi, a + n - hi))
            self.mapped[b] = rest
        elif e.action == "alloc":
            key = self.seg_of(e.addr)
            self._live_add(e.addr, key, _round512(e.size))
            if key and key[0] == "s":
                self.segs[key[1]][1] += 1
            return key
        elif e.action in ("free", "free_done"):
            if e.action == "free" and e.deferred:
                return None
            got = self._live_pop(e.addr)
            if got and got[0] and got[0][0] == "s" and got[0][1] in self.segs:
                self.segs[got[0][1]][1] -= 1
        return None

    def freeable(self, skip):
        """Keys of segments an empty_cache() would release something of, less those in skip."""
        out = set()
        for a, (size, n, key) in self.segs.items():
            if n == 0 and key not in skip:
                out.add(key)
        for b in self.bases:
            key = ("x", b)
            if key in skip or not self.mapped[b]:
                continue
            p = self.page[b]
            # the reservation's live allocations by address, and the furthest end among the
            # first i of them: a page [pg, pg + p) holds one iff some allocation starting below
            # pg + p ends above pg
            allocs = sorted(self.live_by_key.get(key, {}).items())
            starts = [x for x, _ in allocs]
            reach = [0]
            for x, m in allocs:
                reach.append(max(reach[-1], x + m))
            for a, n in self.mapped[b]:
                pg = b + -(-(a - b) // p) * p
                while pg + p <= a + n:
                    if reach[bisect.bisect_left(starts, pg + p)] <= pg:
                        out.add(key)
                        break
                    pg += p
                if key in out:
                    break
        return out


def infer_pools(events, final_pool_segments, next_id):
    """One device's events with pool_begin/pool_end/pool_release Events (addr: the pool's
    number, size: the flag) where the snapshot shows a private pool (the rule above). Returns
    (events, {pool id tuple or None: number}, next_id)."""
    if not _has_action(events, GROWTHS):
        return events, {}, next_id
    if not final_pool_segments and not _has_action(events, RELEASES):
        # no pool can be named (the final segments name none, and no run of releases can be
        # a pool's): what the walk below would find, without it
        return events, {}, next_id
    given, events = events, list(events)
    st = _PoolState(events)
    label = {}            # segment key -> pool number
    numbers = {}          # pool id tuple (or ('released', k)) -> number
    releases = {}         # event index of a release run's start -> pool number
    # 1. the final segments' pool ids: the last segment made at each address is the live one
    last_seg = {}
    nseg = 0
    for e in events:
        if e.action == "segment_alloc":
            nseg += 1
            last_seg[e.addr] = ("s", e.addr, nseg)
    for addr, size, expandable, pid in final_pool_segments or ():
        if pid not in numbers:
            numbers[pid] = next_id
            next_id += 1
        key = ("x", st.base_of(addr)) if expandable else last_seg.get(addr)
        if key is not None and key[1] is not None:
            label[key] = numbers[pid]
    # 2. walk: allocations' segments, and release runs that are a pool's own
    alloc_key = {}        # event index -> segment key
    i = 0
    while i < len(events):
        e = events[i]
        if e.action not in RELEASES:
            k = st.apply(e)
            if e.action == "alloc":
                alloc_key[i] = k
            i += 1
            continue
        j = i
        while j < len(events) and events[j].action in RELEASES + ("free_done",):
            j += 1
        nxt = events[j] if j < len(events) else None
        touched = set()
        for k in range(i, j):
            x = events[k]
            if x.action == "free_done":
                st.apply(x)
            elif x.action == "segment_free" and x.addr in st.segs:
                touched.add(st.segs[x.addr][2])
            elif x.action == "segment_unmap":
                touched.add(("x", st.base_of(x.addr)))
        pressure = nxt is not None and nxt.action in GROWTHS + ("oom",)
        if touched and not pressure and st.freeable(touched):
            known = {label[k] for k in touched if k in label}
            if len(known) == 1:
                n = known.pop()
            else:
                n = next_id
                numbers[("released", n)] = n
                next_id += 1
            for k in touched:
                label.setdefault(k, n)
            releases[i] = n
        for k in range(i, j):
            if events[k].action != "free_done":
                st.apply(events[k])
        i = j
    if not label:
        return given, {}, next_id
    # 3. each pool's routes, from its allocations
    pool_of = {i: label.get(k) for i, k in alloc_key.items()}
    order = list(alloc_key)     # the allocations' event indices, ascending (the walk's order)
    by_pool = {}
    for i in order:
        by_pool.setdefault(pool_of[i], []).append(i)
    begins, ends = {}, {}   # event index -> [(number, stream, every_stream)]
    uses = {}
    for n in sorted(set(label.values())):
        idx = by_pool.get(n)
        if not idx:
            continue
        streams = {events[i].stream for i in idx}
        window = order[bisect.bisect_left(order, idx[0]):bisect.bisect_right(order, idx[-1])]
        every = len(streams) > 1 and all(pool_of[i] == n for i in window)
        stream = events[idx[0]].stream
        start = prev = None
        for i in window:
            mine = pool_of[i] == n
            if not every and events[i].stream not in streams:
                continue
            if mine:
                if start is None:
                    start = i
                prev = i
            elif start is not None:
                begins.setdefault(start, []).append((n, stream, every))
                ends.setdefault(prev, []).append((n, stream, every))
                uses[n] = uses.get(n, 0) + 1
                start = None
        if start is not None:
            begins.setdefault(start, []).append((n, stream, every))
            ends.setdefault(prev, []).append((n, stream, every))
            uses[n] = uses.get(n, 0) + 1
    out = []
    for i, e in enumerate(events):
        if i in releases and uses.get(releases[i]):
            n = releases[i]
            for u in range(uses[n]):
                out.append(Event("pool_release", e.device, 0, n, int(u == uses[n] - 1),
                                 e.time_us, False, e.where))
            uses[n] = 0
        for n, stream, every in begins.get(i, ()):
            out.append(Event("pool_begin", e.device, stream, n, int(every), e.time_us, False,
                             e.where))
        out.append(e)
        for n, stream, every in ends.get(i, ()):
            out.append(Event("pool_end", e.device, stream, n, 0, e.time_us, False, e.where))
    return out, {p: n for p, n in numbers.items() if n in uses}, next_id


def infer_all_pools(rec, label):
    if rec.per_device is None:
        return
    next_id = 1
    for dev, events in enumerate(rec.per_device):
        finals = (rec.final_pool_segments or {}).get(dev, ())
        rec.per_device[dev], found, next_id = infer_pools(events, finals, next_id)
        rec.num_private_pools += len(found)
    if rec.num_private_pools:
        warn(label, f"inferred {rec.num_private_pools} private memory pool(s) (CUDA graphs or "
                    f"torch.cuda.MemPool): the trace is version 3 (see --help)")


def infer_empty_cache(events, limit=None, peak=None, gc_threshold=0.0, expandable=False):
    """One device's events with an 'empty_cache' Event before every run of releases that no
    allocation explains (the rule above). Returns (events, number inferred)."""
    if not _has_action(events, RELEASES):
        return events, 0        # (what the walk below gives: the events as they are)
    given, events = events, list(events)
    if peak is None:
        peak = _running_peak(events)
    bound = limit if limit is not None else peak - (20 * MiB if expandable else 0)
    out, n, reserved, i = [], 0, 0, 0
    while i < len(events):
        e = events[i]
        if e.action not in RELEASES:
            if e.action in GROWTHS:
                reserved += e.size
            out.append(e)
            i += 1
            continue
        j = i
        while j < len(events) and events[j].action in RELEASES + ("free_done",):
            j += 1
        nxt = events[j] if j < len(events) else None
        explained = False
        if out and out[-1].action == "pool_release":
            explained = True    # a private pool's own release (infer_pools)
        elif nxt is not None and nxt.action == "oom":
            explained = True
        elif nxt is not None and nxt.action in GROWTHS:
            need = nxt.size
            k = j
            while k < len(events) and events[k].action in GROWTHS:
                k += 1
            if k < len(events) and events[k].action == "alloc":
                need = max(need, _allocation_size(events[k].size))
            gc_bound = gc_threshold * (limit if limit is not None else peak)
            explained = (reserved + need > bound or
                         (gc_threshold > 0 and reserved > gc_bound))
        if not explained:
            out.append(Event("empty_cache", e.device, 0, 0, 0, e.time_us, False, e.where))
            n += 1
        for k in range(i, j):
            if events[k].action in RELEASES:
                reserved -= events[k].size
            out.append(events[k])
        i = j
    return (out, n) if n else (given, 0)


def _snapshot_final_blocks(segments):
    """The allocated blocks in the snapshot's 'segments' (the state when the log ended).

    Returns None (no cross-check) when the list is not in the expected shape: the segments are
    not needed for the trace itself, so an odd layout should not stop the conversion.
    """
    if not isinstance(segments, list):
        return None
    blocks = []
    for seg in segments:
        if not isinstance(seg, dict) or not isinstance(seg.get("blocks"), list):
            return None
        dev, stream = seg.get("device"), seg.get("stream")
        if not _is_int(dev) or not _is_int(stream):
            return None
        if not 0 <= dev < 1 << 32:
            # the trace's device column holds 0 .. 2^32 - 1 (found by fuzz_convert.py)
            raise ConvertError(f"segments: device {dev} is not a device number (0 .. 2^32 - 1)")
        for b in seg["blocks"]:
            if not isinstance(b, dict):
                return None
            if b.get("state") != "active_allocated":
                continue
            addr, size = b.get("address"), b.get("requested_size")
            if not _is_int(addr) or not _is_int(size):
                return None
            check_size(size, f"segments: block {addr:#x}")
            blocks.append((dev, addr, size, stream_u64(stream, "segments")))
    return sorted(blocks)


def _snapshot_final_segments(segments):
    """(device, address) of every cudaMalloc'd segment in the snapshot's 'segments', or None."""
    if not isinstance(segments, list):
        return None
    out = set()
    for seg in segments:
        if not isinstance(seg, dict):
            return None
        dev, addr = seg.get("device"), seg.get("address")
        if not _is_int(dev) or not _is_int(addr):
            return None
        if not seg.get("is_expandable"):
            out.add((dev, addr))
    return out


def _snapshot_final_reserved(segments):
    """{device: bytes} of the snapshot's 'segments' (an expandable one's mapped size), or None."""
    if not isinstance(segments, list):
        return None
    out = {}
    for seg in segments:
        if not isinstance(seg, dict):
            return None
        dev, size = seg.get("device"), seg.get("total_size")
        if not _is_int(dev) or not _is_int(size) or size < 0:
            return None
        out[dev] = out.get(dev, 0) + size
    return out


def _snapshot_final_pool_segments(segments):
    """{device: [(address, total_size, expandable, pool id)]} of the snapshot's segments that
    belong to a private pool (segment_pool_id other than (0, 0)), or None."""
    if not isinstance(segments, list):
        return None
    out = {}
    for seg in segments:
        if not isinstance(seg, dict):
            return None
        pid = seg.get("segment_pool_id")
        dev, addr, size = seg.get("device"), seg.get("address"), seg.get("total_size")
        if not isinstance(pid, (tuple, list)) or len(pid) != 2 or not all(_is_int(v) for v in pid):
            continue
        if tuple(pid) == (0, 0) or not (_is_int(dev) and _is_int(addr) and _is_int(size)):
            continue
        out.setdefault(dev, []).append((addr, size, bool(seg.get("is_expandable")), tuple(pid)))
    return out


# DeviceEvents.feed_batch's fast path: the program's own actions (the allocator's are few, and
# whatever they come to carry goes through the checks one by one)
_FAST_ACTIONS = frozenset(PROGRAM_ACTIONS)


class DeviceEvents:
    """One device's snapshot entries turned into Events as they come, pairing immediate frees;
    kept as EventColumns, each Event's where the entry's index."""

    def __init__(self, dev, rec):
        self.dev, self.rec = dev, rec
        self.out = EventColumns()
        self.count = 0                # entries fed
        self.prev_action = None       # the previous entry's action and address (for immediacy)
        self.prev_addr = None
        self.prev_free_index = None   # index in out of the 'free' made from it, if it was one

    def feed_batch(self, i, items):
        """Each of items (the first the entry of index i): a _Pending (SnapshotWalker._values
        made it only for an entry that passes the fast path's test), or a dict, taken on the
        fast path when it passes that test and by feed, checked field by field, when not."""
        dev, out = self.dev, self.out
        add = out.add
        prev_action, prev_addr, prev_free_index = (self.prev_action, self.prev_addr,
                                                   self.prev_free_index)
        last_stream = None
        for e in items:
            if e.__class__ is _Pending:
                action, addr, size, stream, t, frames = e[:6]
            else:
                # The common entry (alloc, free_requested or free_completed; addr, size, stream
                # and time_us plain ints in range) as a dict: the same test as _values makes
                # before it makes a _Pending, and the same Events as feed's checks give.
                if e.__class__ is dict:
                    action = e.get("action")
                    addr, size, stream, t = (e.get("addr"), e.get("size"), e.get("stream"),
                                             e.get("time_us"))
                    fast = (action.__class__ is str and action in _FAST_ACTIONS and
                            addr.__class__ is int and size.__class__ is int and
                            stream.__class__ is int and t.__class__ is int and
                            0 <= size < U64_LIMIT and 0 <= stream < U64_LIMIT)
                else:
                    fast = False
                if not fast:
                    self.prev_action, self.prev_addr, self.prev_free_index = (
                        prev_action, prev_addr, prev_free_index)
                    self.feed(i, e)
                    prev_action, prev_addr, prev_free_index = (self.prev_action, self.prev_addr,
                                                               self.prev_free_index)
                    i += 1
                    continue
                frames = e.get("frames")
            self.count += 1
            this_free_index = None
            if action == "alloc":
                frame = (frames.top if frames.__class__ is _Frames else
                         top_user_frame(frames) if isinstance(frames, list) else None)
                add(_A_ALLOC, dev, stream, addr, size, t, 0, i, frame)
            elif action == "free_requested":
                this_free_index = len(out)
                add(_A_FREE, dev, stream, addr, size, t, 1, i, None)
            elif (prev_action == "free_requested" and prev_addr == addr      # free_completed
                  and prev_free_index is not None):
                out.deferred[prev_free_index] = 0      # immediate
            else:
                add(_A_FREE_DONE, dev, stream, addr, size, t, 0, i, None)
            if stream != last_stream:       # (adding it again would change nothing)
                self.rec.devices.add(dev)
                self.rec.streams.add(stream)
                last_stream = stream
            prev_action, prev_addr, prev_free_index = action, addr, this_free_index
            i += 1
        self.prev_action, self.prev_addr, self.prev_free_index = (prev_action, prev_addr,
                                                                  prev_free_index)

    def feed(self, i, e):
        """Entry e (of index i), checked field by field: every entry that feed_batch does not
        take on its fast path (the Events must be the same either way)."""
        dev, out = self.dev, self.out
        self.count += 1
        where = f"device {dev} event {i}"
        if not isinstance(e, dict):
            raise ConvertError(f"{where}: not a dict")
        action = e.get("action")
        if action in IGNORED_ACTIONS:
            self.prev_action, self.prev_addr, self.prev_free_index = action, e.get("addr"), None
            return
        if action not in PROGRAM_ACTIONS and action not in ALLOCATOR_ACTIONS:
            known = ", ".join(PROGRAM_ACTIONS + ALLOCATOR_ACTIONS + IGNORED_ACTIONS)
            raise ConvertError(f"{where}: unknown action {action!r} (known: {known})")
        addr_key = "device_free" if action == "oom" else "addr"
        fields = {}
        for key in (addr_key, "size", "stream"):
            v = e.get(key)
            if not _is_int(v):
                raise ConvertError(f"{where} ({action}): {key!r} is missing or not an integer")
            fields[key] = v
        t = e.get("time_us")
        if not _is_num(t):
            raise ConvertError(f"{where} ({action}): 'time_us' is missing or not a number")
        check_time(t, f"{where} ({action})")
        check_size(fields["size"], f"{where} ({action})")
        addr, size = fields[addr_key], fields["size"]
        stream = stream_u64(fields["stream"], where)

        this_free_index = None
        if action == "alloc":
            frames = e.get("frames")
            frame = (frames.top if isinstance(frames, _Frames) else
                     top_user_frame(frames) if isinstance(frames, list) else None)
            out.add(_A_ALLOC, dev, stream, addr, size, t, 0, i, frame)
        elif action == "free_requested":
            # Deferred until shown otherwise: if the very next event is its own free_completed,
            # that branch below turns this into an immediate free.
            this_free_index = len(out)
            out.add(_A_FREE, dev, stream, addr, size, t, 1, i, None)
        elif action == "free_completed":
            if (self.prev_action == "free_requested" and self.prev_addr == addr
                    and self.prev_free_index is not None):
                # The very next event after its own free_requested: the free was immediate.
                out.deferred[self.prev_free_index] = 0
            else:
                out.add(_A_FREE_DONE, dev, stream, addr, size, t, 0, i, None)
        else:
            frame = None
            if action == "oom":   # PyTorch records the failed request's stack too
                frames = e.get("frames")
                frame = (frames.top if isinstance(frames, _Frames) else
                         top_user_frame(frames) if isinstance(frames, list) else None)
            out.add(_ACTION_CODE[action], dev, stream, addr, size, t, 0, i, frame)
        if action in PROGRAM_ACTIONS:
            self.rec.devices.add(dev)
            self.rec.streams.add(stream)
        self.prev_action, self.prev_addr, self.prev_free_index = action, addr, this_free_index


def _snapshot_device_events(dev, evs, rec):
    """Turn one device's snapshot events (a list) into Events."""
    d = DeviceEvents(dev, rec)
    d.feed_batch(0, evs)
    return d.out


# ---------------------------------------------------------------------------------------------
# RMM logging_resource_adaptor CSV
# ---------------------------------------------------------------------------------------------

_RMM_TIME = re.compile(r"^(\d+):(\d+):(\d+)[.:](\d+)$")


def _rmm_int(text, where, column):
    """Pointers and streams are printed as hex ("0x7f..."), sizes in decimal."""
    t = text.strip()
    try:
        if t.lower() in ("nullptr", "(nil)"):
            return 0
        return int(t, 16) if t.lower().startswith("0x") else int(t)
    except ValueError:
        raise ConvertError(f"{where}: bad {column} {text!r}") from None


def read_rmm_log(data):
    """Read an RMM logging_resource_adaptor log: Thread,Time,Action,Pointer,Size,Stream.

    RMM logs with the pattern "%t,%H:%M:%S.%f" so Time is a wall-clock time of day; we turn it
    into microseconds and add a day whenever it wraps past midnight. The adaptor wraps one
    memory resource of one device, so everything is device 0. Frees are immediate.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConvertError(f"RMM log is not UTF-8 text ({e})") from None
    lines = text.splitlines()
    rec = Recording("rmm-log")
    header_seen = False
    day = 0
    last_tod = None
    for lineno, line in enumerate(lines, 1):
        where = f"line {lineno}"
        if not line.strip():
            continue
        if not header_seen:
            if line.strip() != RMM_HEADER:
                raise ConvertError(f"{where}: expected the header {RMM_HEADER!r}")
            header_seen = True
            continue
        cols = line.split(",")
        if len(cols) != 6:
            raise ConvertError(f"{where}: expected 6 comma-separated fields, found {len(cols)}")
        _thread, tstr, action, ptr, size, stream = cols
        action = action.strip()
        m = _RMM_TIME.match(tstr.strip())
        if not m:
            raise ConvertError(f"{where}: bad time {tstr!r} (expected HH:MM:SS.ffffff)")
        h, mi, s, frac = m.groups()
        tod = ((int(h) * 60 + int(mi)) * 60 + int(s)) * 1_000_000 + int(frac.ljust(6, "0")[:6])
        if last_tod is not None and tod < last_tod - 12 * 3600 * 1_000_000:
            day += 1                       # wrapped past midnight
        last_tod = tod
        t = day * 86_400_000_000 + tod
        rec.num_raw_events += 1
        if action not in ("allocate", "free", "allocate failure"):
            raise ConvertError(f"{where}: unknown action {action!r} "
                               f"(expected allocate, free, allocate failure)")
        addr = _rmm_int(ptr, where, "pointer")
        nbytes = _rmm_int(size, where, "size")
        strm = stream_u64(_rmm_int(stream, where, "stream"), where)
        check_size(nbytes, where)
        # A failed allocation is the request the program made (an oom row): where the log goes
        # on with new requests the program caught it; where it ends there, or only frees
        # follow, the program died of it (build_trace, trim_after_death). RMM logs no free
        # device memory with it (0).
        op = {"allocate": "alloc", "free": "free"}.get(action, "oom")
        rec.events.append(Event(op, 0, strm, 0 if op == "oom" else addr, nbytes, t, False, where))
        rec.devices.add(0)
        rec.streams.add(strm)
    if not header_seen:
        raise ConvertError("empty RMM log")
    return rec


READERS = {
    "pytorch-snapshot": read_snapshot,
    "rmm-log": read_rmm_log,
}


# ---------------------------------------------------------------------------------------------
# Address -> id resolution (shared by all readers)
# ---------------------------------------------------------------------------------------------

_OPS = ("alloc", "free", "free_done", "oom", "empty_cache", "mark") + POOL_ACTIONS
_OP_CODE = {o: k for k, o in enumerate(_OPS)}
_O_ALLOC, _O_FREE, _O_FREE_DONE, _O_OOM, _O_EMPTY = 0, 1, 2, 3, 4


class TraceRows:
    """The trace's rows, (time_us, op, device, stream, id, size) as a sequence: the
    synthesized allocs first (prefix, tuples), then the rest as parallel arrays (about 50 bytes
    a row, where a tuple and its ints took about 140), each row's frame a number in frames
    (0: none)."""

    def __init__(self):
        self.prefix = []
        self.t = array.array("Q")
        self.op = array.array("B")
        self.dev = array.array("Q")
        self.stream = array.array("Q")
        self.id = array.array("q")
        self.size = array.array("Q")
        self.frame = array.array("I")
        self.frames = [None]
        self.frame_no = {None: 0}

    def add(self, t, op, dev, stream, ident, size, frame=None):
        """A row after the prefix; op its code (_OP_CODE)."""
        self.t.append(t)
        self.op.append(op)
        self.dev.append(dev)
        self.stream.append(stream)
        self.id.append(ident)
        self.size.append(size)
        self.frame.append(_frame_number(self.frames, self.frame_no, frame))

    def append(self, row):
        self.add(row[0], _OP_CODE[row[1]], *row[2:])

    def __len__(self):
        return len(self.prefix) + len(self.op)

    def __getitem__(self, k):
        if k < 0:
            k += len(self)
        if k < len(self.prefix):
            return self.prefix[k]
        k -= len(self.prefix)
        return (self.t[k], _OPS[self.op[k]], self.dev[k], self.stream[k], self.id[k],
                self.size[k])

    def __iter__(self):
        yield from self.prefix
        ops = _OPS
        for t, op, dev, stream, ident, size in zip(self.t, self.op, self.dev, self.stream,
                                                   self.id, self.size):
            yield t, ops[op], dev, stream, ident, size

    def devices(self):
        return {r[2] for r in self.prefix} | set(self.dev)

    def num_framed(self):
        """Rows that have a frame."""
        return len(self.frame) - self.frame.count(0)


class Trace:
    """The converted trace: rows to write, plus what the reference file needs."""

    def __init__(self):
        self.rows = TraceRows()      # (time_us, op, device, stream, id, size)
        self.allocator_events = []   # [action, addr, size, seq]
        self.num_allocs = 0
        self.num_synthesized = 0
        self.num_deferred_frees = 0
        self.num_ooms = 0
        self.num_pool_rows = 0
        self.fatal_oom_seq = None    # the seq of the last row, an oom the program died of
        self.death_seq = None        # the seq of the last request, when it is an oom
        self.unwound_rows = 0        # rows after it that trim_after_death took off
        self.limit = None            # limit_at_death's answer (a dict), or None
        self.started_mid_run = False # evidence besides synthesized allocs (segments)


def build_trace(rec, label):
    """The trace of rec.events, in one pass: each row is made as its event comes (its time
    relative to the first row's, held non-decreasing), an alloc's id being its number among the
    log's allocs; the synthesized allocs, known only at the end, come first with ids 1..S, and
    the others' ids are then moved up by S. An error of the events' order is raised as it is
    met, one of the time span after the pass (as when the rows were made in a second pass)."""
    # a block: (id, size, stream, device, where) of an allocation (where as an Event's)
    live = {}        # (device, addr) -> block, allocated and not yet freed
    pending = {}     # (device, addr) -> block, freed but completion deferred (free_done later)
    synthesized = []  # blocks freed without a recorded alloc (the log started mid-run)
    alloc_events = []  # [action, addr, size, number of rows (after the prefix) before it, device]
    dropped_done = 0
    size_mismatch = 0
    segments = set()   # (device, addr) of the segments the log saw made and not yet freed
    unseen_segment = False
    tr = Trace()
    rows = tr.rows
    base = None        # the first row's time
    last_t = 0
    clamped = 0
    too_long = None    # the first time past the time column's reach (raised after the pass)
    nalloc = 0

    events = rec.events
    if isinstance(events, EventColumns) and not events.big:
        # the columns as they are (no Event made): action codes, frames as their numbers
        ftab, fno = events.frames, events.frame_no
        src = zip(events.action, events.device, events.stream, events.addr, events.size,
                  events.time, events.deferred, events.where, events.frame)
    else:
        ftab = [None]
        fno = {None: 0}
        src = ((_ACTION_CODE[e.action], e.device, e.stream, e.addr, e.size, e.time_us,
                e.deferred, e.where, _frame_number(ftab, fno, e.frame)) for e in events)
    # the rows' frames are the events' (numbers in ftab); the rows' columns appended at once
    rows.frames, rows.frame_no = ftab, fno
    add_t, add_op, add_dev, add_stream, add_id, add_size, add_frame = (
        rows.t.append, rows.op.append, rows.dev.append, rows.stream.append, rows.id.append,
        rows.size.append, rows.frame.append)
    for action, dev, stream, addr, size, t, deferred, where, frame in src:
        key = (dev, addr)
        if action == _A_ALLOC:
            if key in live or key in pending:
                other = live.get(key) or pending.get(key)
                state = "still allocated" if key in live else "freed but not yet completed"
                raise ConvertError(f"{_said(dev, where)}: alloc at address {addr:#x} which is "
                                   f"{state} (allocated at {_said(other[3], other[4])})")
            nalloc += 1
            live[key] = (nalloc, size, stream, dev, where)
            op, ident = _O_ALLOC, nalloc
        elif action == _A_FREE:
            blk = live.pop(key, None)
            if blk is None:
                if key in pending:
                    other = pending[key]
                    raise ConvertError(f"{_said(dev, where)}: address {addr:#x} freed twice "
                                       f"(allocated at {_said(other[3], other[4])})")
                # Freed but never allocated in the log: it was allocated before the log began.
                # Its id: -blk[0] (see the fix below).
                blk = (-len(synthesized) - 1, size, stream, dev,
                       _said(dev, where) + " (synthesized)")
                synthesized.append(blk)
            elif size != blk[1]:
                size_mismatch += 1
            if deferred:
                pending[key] = blk
            op, ident, size, frame = _O_FREE, blk[0], blk[1], 0
        elif action == _A_FREE_DONE:
            blk = pending.pop(key, None)
            if blk is None:
                if key in live:
                    other = live[key]
                    raise ConvertError(f"{_said(dev, where)}: free_completed at address "
                                       f"{addr:#x} which was never freed (allocated at "
                                       f"{_said(other[3], other[4])})")
                # Its free_requested was before the log began: nothing to complete.
                dropped_done += 1
                continue
            tr.num_deferred_frees += 1
            op, ident, size, frame = _O_FREE_DONE, blk[0], blk[1], 0
        elif action == _A_EMPTY_CACHE:
            op, ident, size, frame = _O_EMPTY, 0, 0, 0
        elif action >= _A_POOL_BEGIN:
            tr.num_pool_rows += 1
            op, ident, frame = _OP_CODE[_ACTIONS[action]], addr, 0
        elif action == _A_OOM:
            # The request the program made, at its place: a row of its own ('oom', version 2 of
            # the format), and the allocator's record of it in the reference.
            alloc_events.append(["oom", addr, size, len(rows.op), dev])
            tr.num_ooms += 1
            op, ident = _O_OOM, 0
        else:
            name = _ACTIONS[action]
            if name == "segment_alloc":
                segments.add(key)
            elif name == "segment_free":
                if key in segments:
                    segments.discard(key)
                else:
                    unseen_segment = True    # made before the log began
            alloc_events.append([name, addr, size, len(rows.op), dev])
            continue
        if base is None:
            base = t
        rel = int(round(t - base))
        if rel >= U64_LIMIT:
            if too_long is None:
                too_long = rel
            rel = last_t
        if rel < last_t:
            # The recorded clock went backwards (TSC-derived and approximate): keep time
            # non-decreasing, because the event order is what replay follows.
            clamped += 1
            rel = last_t
        last_t = rel
        add_t(rel)
        add_op(op)
        add_dev(dev)
        add_stream(stream)
        add_id(ident)
        add_size(size)
        add_frame(frame)
    if too_long is not None:
        raise ConvertError(f"time_us spans {too_long} microseconds, more than the trace's time "
                           f"column holds (2^64)")

    # Blocks still allocated when the log ended but never seen allocated in it were allocated
    # before the log began and held throughout: synthesize them too, so the replay carries that
    # memory. (Blocks freed before the log began with a completion still pending are left out.)
    held_before = []
    if rec.final_blocks is not None:
        for dev, addr, size, stream in rec.final_blocks:
            if (dev, addr) not in live and (dev, addr) not in pending:
                held_before.append((None, size, stream, dev, f"segments block {addr:#x}"))
    if rec.final_segments is not None and rec.final_segments - segments:
        unseen_segment = True                # a segment held at the end, never seen made

    # Synthesized allocs come first, at time 0: blocks freed in the log (in the order of their
    # frees), then blocks held from before the log to its end (by device and address).
    synthesized = synthesized + held_before
    for k, blk in enumerate(synthesized, 1):
        rows.prefix.append((0, "alloc", blk[3], blk[2], k, blk[1]))
    tr.num_synthesized = offset = len(synthesized)
    if offset:
        # the log's allocs after them: ids 1.. become offset + 1..; a synthesized one's -k is k
        ids, ops = rows.id, rows.op
        for k in range(len(ids)):
            if ops[k] <= _O_FREE_DONE:
                v = ids[k]
                ids[k] = v + offset if v > 0 else -v
    tr.num_allocs = nalloc

    tr.allocator_events = [[a, addr, size, seq + offset, dev]
                           for a, addr, size, seq, dev in alloc_events]
    tr.started_mid_run = bool(synthesized) or unseen_segment
    # An oom that is the log's last event: the program died of it (an OOM observer took the
    # snapshot, or the process ended there). convert() may decide otherwise from the sibling.
    if len(rows) and rows[-1][1] == "oom":
        tr.fatal_oom_seq = len(rows) - 1
    # An oom after which the program made no new request: only frees, their completions, cache
    # releases and pool ends follow (the exception unwinding: a snapshot dumped after `except
    # torch.OutOfMemoryError`). That is the death of the run too; convert() trims what follows
    # it unless the sibling says the run ended 'ok'.
    ops = rows.op
    for k in range(len(ops) - 1, -1, -1):
        if ops[k] == _O_ALLOC:
            break
        if ops[k] == _O_OOM:
            tr.death_seq = len(rows.prefix) + k
            break

    if synthesized:
        n_freed = len(synthesized) - len(held_before)
        warn(label, f"the log starts mid-run: synthesized {len(synthesized)} alloc(s) at the "
                    f"start of the trace ({n_freed} for blocks freed but never seen allocated, "
                    f"{len(held_before)} for blocks held from before the log to its end); "
                    f"replay results are approximate (the header says so)")
    elif unseen_segment:
        warn(label, "the log starts mid-run: it shows segments it never saw made; replay "
                    "results are approximate (the header says so)")
    if dropped_done:
        warn(label, f"skipped {dropped_done} free completion(s) whose free was before the "
                    f"log began")
    if size_mismatch:
        warn(label, f"{size_mismatch} free(s) reported a size different from their alloc; "
                    f"the trace uses the alloc's size")
    if clamped:
        warn(label, f"time_us went backwards {clamped} time(s); held it non-decreasing")
    if not len(rows):
        warn(label, "no allocation events: the trace is empty")
    return tr


# ---------------------------------------------------------------------------------------------
# The death of a run: where it died, and the limit it met there
# ---------------------------------------------------------------------------------------------

def trim_after_death(tr):
    """Take off the rows after tr.death_seq (frees and cache releases only: the exception
    unwinding) and the allocator's events they caused, so the trace ends at the OOM the run
    died of; returns how many rows went."""
    k = tr.death_seq + 1 - len(tr.rows.prefix)
    rows = tr.rows
    n = len(rows.op) - k
    for col in (rows.t, rows.op, rows.dev, rows.stream, rows.id, rows.size, rows.frame):
        del col[k:]
    # an allocator event's seq is the row it came before: those after the oom row go with the
    # rows (the unwinding's releases); the oom's own and the releases that led to it stay
    tr.allocator_events = [e for e in tr.allocator_events if e[3] <= tr.death_seq]
    tr.fatal_oom_seq = tr.death_seq
    tr.unwound_rows = n
    return n


def growth_needed(size, settings):
    """The least the allocator must get from the device to serve a request of size bytes (its
    rounded size, as the oom entry records it), by PyTorch's get_allocation_size: a 2 MiB
    segment up to 1 MiB, 20 MiB below 10 MiB, else the size in 2 MiB; with expandable segments
    the request's pages (2 MiB each), at least one."""
    if isinstance(settings, dict) and settings.get("expandable_segments") is True:
        return max(1, -(-size // (2 * MiB))) * 2 * MiB
    if size <= MiB:
        return 2 * MiB
    if size < 10 * MiB:
        return 20 * MiB
    return -(-size // (2 * MiB)) * 2 * MiB


def limit_at_death(rec, tr, events_before_trim):
    """The memory the allocator of the device that died could have had, from the snapshot
    itself (docs/cli.md, "The limit a run met"): what it held at the failing request
    (R: its segments after the releases that came first) plus the free bytes the device
    reported then (F, the oom entry's device_free). When F is smaller than the least growth the
    request needed, the device was full (another process, another library): the limit was
    R + F. Otherwise the device had room and something below it refused the growth (a memory
    fraction): the limit is unknown, between the peak the allocator had reached (it was
    allowed) and R plus that growth (it was not). A run that did not die but caught OOMs met
    its limit at each: the last one tells it the same way. None when the run met none."""
    seq, where = tr.fatal_oom_seq, "the OOM"
    if seq is None:
        ops = tr.rows.op
        k = next((k for k in range(len(ops) - 1, -1, -1) if ops[k] == _O_OOM), None)
        if k is None:
            return None
        seq, where = len(tr.rows.prefix) + k, "a caught OOM"
    _t, _op, dev, _stream, _id, size = tr.rows[seq]
    oom = next((e for e in events_before_trim if e[0] == "oom" and e[3] == seq), None)
    running = peak = 0
    for e in events_before_trim:
        if e[4] != dev or e[0] == "oom":
            continue
        if e[3] > seq:
            break
        running += e[2] if e[0] in GROWTHS else -e[2] if e[0] in RELEASES else 0
        peak = max(peak, running)
    # segments made before the log began: what the snapshot's final segments hold beyond what
    # the log's events add up to (0 for a log recorded from the first allocation)
    before = 0
    if rec.final_reserved is not None and dev in rec.final_reserved:
        total = sum((e[2] if e[0] in GROWTHS else -e[2] if e[0] in RELEASES else 0)
                    for e in events_before_trim if e[4] == dev)
        before = max(0, rec.final_reserved[dev] - total)
    held = before + running
    need = growth_needed(size, rec.allocator_settings)
    out = {"device": dev, "held_bytes": held, "request_bytes": size, "growth_bytes": need,
           "device_free_bytes": oom[1] if oom is not None and rec.kind == "pytorch-snapshot"
           else None}
    free = out["device_free_bytes"]
    if free is not None and free < need:
        out.update(bytes=held + free, source=f"device full at {where}")
    else:
        out.update(bytes=None, source=None, min_bytes=before + peak,
                   max_bytes=held + need - 1)
    return out


# ---------------------------------------------------------------------------------------------
# Sibling JSON and reference answer
# ---------------------------------------------------------------------------------------------

def sibling_json_path(input_path):
    """NAME.json beside NAME.EXT or NAME.EXT.gz (NAME.pickle.gz, NAME.pkl, run.snapshot.gz...):
    gpusim whatif takes a snapshot by what it holds, whatever its name, and its NAME.json must
    come with it (without, a run that died at its cap was judged at the device's memory)."""
    base = input_path[:-3] if input_path.endswith(".gz") else input_path
    root, ext = os.path.splitext(base)
    if not ext or not os.path.basename(root):
        return None
    candidate = root + ".json"
    return candidate if candidate != input_path and os.path.isfile(candidate) else None


def read_sibling(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ConvertError(f"cannot read sibling {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ConvertError(f"sibling {path} is not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ConvertError(f"sibling {path} is not a JSON object")
    # The numbers it gives the trace and the reference: a cap of NaN, infinity, 1e300, -1 or
    # "1.5" (a string) is refused here, not carried into a cap of -1073741823 bytes or ignored.
    def cap_ok(v):
        return v is None or (_is_num(v) and math.isfinite(v) and 0 < v <= MAX_DEVICE_BYTES / 2**30)

    def total_ok(v):
        return v is None or device_total_ok(v)

    for key, ok, what in (("cap_gib", cap_ok, "a positive number of GiB up to 16384, or null"),
                          ("total_bytes", total_ok, "a whole number of bytes from 1 to 2^44, or null")):
        if key in doc and not ok(doc[key]):
            raise ConvertError(f"sibling {path}: {key} {doc[key]!r} is out of range ({what})")
        by = doc.get(key + "_by_device")
        if by is not None and not (isinstance(by, dict) and all(ok(v) for v in by.values())):
            raise ConvertError(f"sibling {path}: {key}_by_device is out of range (an object of "
                               f"{what})")
    return doc


def truncated_cap_bytes(cap_gib, total):
    """The limit PyTorch enforced: (size_t)(fraction * total), fraction = cap * 2**30 / total.

    Evaluated in Python floats (IEEE doubles) exactly as the recording script and PyTorch did;
    for some caps it is one byte less than cap * 2**30, which decides whether a last 2 MiB
    segment fits (docs/fidelity.md section 1.1).
    """
    return int(cap_gib * 2**30 / total * total)


def _derived(events):
    """Counts and the running peak of reserved bytes over allocator events [action, addr, size,
    ...]."""
    counts = collections.Counter(e[0] for e in events)
    reserved = peak = 0
    for e in events:
        action, size = e[0], e[2]
        if action in GROWTHS:
            reserved += size
        elif action in RELEASES:
            reserved -= size
        peak = max(peak, reserved)
    return {
        "num_segment_alloc": counts["segment_alloc"],
        "num_segment_free": counts["segment_free"],
        "num_segment_map": counts["segment_map"],
        "num_segment_unmap": counts["segment_unmap"],
        "num_oom_events": counts["oom"],
        # Bytes reserved from the device, as a running sum over the allocator's events.
        # Starts at 0, so it is exact only for a log recorded from the first allocation.
        "peak_reserved_bytes": peak,
        "final_reserved_bytes": reserved,
    }


def _by_device(sibling, key, dev):
    """sibling[key][str(dev)] (the layout of a several-device run's JSON), or None."""
    v = sibling.get(key) if sibling else None
    return v.get(str(dev)) if isinstance(v, dict) else None


def trace_devices(tr):
    return sorted(tr.rows.devices() | {e[4] for e in tr.allocator_events})


def build_reference(rec, tr, source, sibling, device_total):
    if rec.allocator_settings is not None:
        check_settings_size(rec.allocator_settings)
    total_bytes = sibling.get("total_bytes") if sibling else None
    cap_gib = sibling.get("cap_gib") if sibling else None
    cap_bytes = None
    if _is_num(cap_gib) and _is_int(total_bytes) and total_bytes > 0:
        cap_bytes = truncated_cap_bytes(cap_gib, total_bytes)
    devices = trace_devices(tr)
    several = len(devices) > 1
    outcome = sibling.get("outcome") if sibling else None
    if outcome is None and tr.fatal_oom_seq is not None:
        outcome = "oom"

    derived = _derived(tr.allocator_events)
    derived.update({
        # Every entry of the log, all actions (a snapshot's JSON calls it n_trace_events).
        "num_events": rec.num_raw_events,
        "num_trace_events": len(tr.rows),
        "num_allocs": tr.num_allocs + tr.num_synthesized,
        "num_synthesized_allocs": tr.num_synthesized,
        "num_deferred_frees": tr.num_deferred_frees,
        "num_inferred_empty_cache": rec.num_inferred_empty_cache,
    })
    ref = {
        "format": REFERENCE_FORMAT,
        "source": source,
        "source_kind": rec.kind,
        "allocator_conf": rec.allocator_conf,
        "allocator_settings": rec.allocator_settings,
        "device_total_bytes": device_total,
        "cap_gib": cap_gib,
        "cap_bytes": cap_bytes,
        "outcome": outcome,
        "memory_stats": sibling.get("memory_stats") if sibling else None,
        "derived": derived,
        # [action, addr, size, seq] (and the device, with several)
        "device_events": [e if several else e[:4] for e in tr.allocator_events],
    }
    if tr.fatal_oom_seq is not None:
        ref["outcome_event"] = tr.fatal_oom_seq
    if tr.unwound_rows:
        ref["unwound_rows"] = tr.unwound_rows
    if tr.limit is not None:
        # the limit the run met at its death, from the snapshot (limit_at_death); a cap_bytes
        # (the sibling's) wins over it
        for key in ("bytes", "source", "min_bytes", "max_bytes", "device", "held_bytes",
                    "device_free_bytes", "growth_bytes"):
            if key in tr.limit:
                ref["limit_" + key] = tr.limit[key]
    if several:
        # Each device as a reference of its own (gpusim compares device by device).
        ref["devices"] = {}
        fatal_dev = tr.rows[tr.fatal_oom_seq][2] if tr.fatal_oom_seq is not None else None
        for dev in devices:
            events = [e[:4] for e in tr.allocator_events if e[4] == dev]
            total = _by_device(sibling, "total_bytes_by_device", dev) or total_bytes
            cap = _by_device(sibling, "cap_gib_by_device", dev)
            d = {
                "device_total_bytes": total if _is_int(total) else device_total,
                "cap_gib": cap,
                "cap_bytes": (truncated_cap_bytes(cap, total)
                              if _is_num(cap) and _is_int(total) and total > 0 else None),
                "outcome": (None if outcome is None else
                            "oom" if dev == fatal_dev else "ok"),
                "memory_stats": _by_device(sibling, "memory_stats_by_device", dev),
                "derived": _derived(events),
                "device_events": events,
            }
            if dev == fatal_dev:
                d["outcome_event"] = tr.fatal_oom_seq
            ref["devices"][str(dev)] = d
    return ref


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def render_trace(rec, tr, source, device_total, client, totals_by_device=None, frames=True):
    """The trace's text; with frames (and a row that has one) its '# frame N:' lines and frame
    column, numbered in order of first use. A trace without frames is written as before."""
    # Version 2 only when a row needs it: a trace without oom rows is written as before.
    lines = [TRACE_MAGIC_3 if tr.num_pool_rows else TRACE_MAGIC_2 if tr.num_ooms else TRACE_MAGIC,
             f"# source: {rec.kind} {header_text(source)}"]
    if device_total is not None:
        lines.append(f"# device_total_bytes: {device_total}")
    if totals_by_device:
        lines.append("# device_total_bytes_by_device: " +
                     ",".join(f"{d}={n}" for d, n in sorted(totals_by_device.items())))
    if rec.allocator_conf is not None:
        lines.append(f"# allocator_conf: {header_setting('allocator_conf', rec.allocator_conf)}")
    if tr.num_synthesized:
        lines.append(f"# synthesized_allocs: {tr.num_synthesized}")
    if tr.started_mid_run and not tr.num_synthesized:
        lines.append("# started_mid_run: yes")
    if tr.fatal_oom_seq is not None:
        lines.append(f"# fatal_oom_event: {tr.fatal_oom_seq}")
    if rec.num_inferred_empty_cache:
        lines.append(f"# inferred_empty_cache: {rec.num_inferred_empty_cache}")
    rows = tr.rows
    if not (frames and rows.num_framed()):
        lines.append(TRACE_COLUMNS)
        return _render_rows(lines, rows, client, None)
    # the frames in order of first use, each numbered once (header_text once per frame)
    number = {}
    fnum = [""] * len(rows.frames)      # a row's frame (its number in rows.frames) -> column
    for fi in dict.fromkeys(rows.frame):
        if fi == 0:
            continue
        # header_text: a frame is free text; control characters (a line break) become \xNN.
        f = header_text(rows.frames[fi])
        if f not in number:
            number[f] = len(number) + 1
            lines.append(f"# frame {number[f]}: {f}")
        fnum[fi] = number[f]
    lines.append(TRACE_COLUMNS_FRAMES)
    return _render_rows(lines, rows, client, fnum)


_RENDER_BATCH = 1 << 16     # rows rendered, encoded and written at a time


def _render_rows(lines, rows, client, fnum):
    """The header (encoded now: its errors come before anything is written) and then an
    iterator of the rows' text in batches: the trace is written as it is rendered, never held
    whole."""
    head = ("\n".join(lines) + "\n").encode("utf-8")

    def body():
        yield head
        tail = "," if fnum is not None else ""      # their frame column: empty
        for seq, (t, op, dev, stream, ident, size) in enumerate(rows.prefix):
            yield f"{seq},{t},{op},{client},{dev},{stream},{ident},{size}{tail}\n".encode()
        seq = len(rows.prefix)
        ops = _OPS
        n = len(rows.op)
        for a in range(0, n, _RENDER_BATCH):
            b = min(n, a + _RENDER_BATCH)
            cols = (rows.t[a:b], rows.op[a:b], rows.dev[a:b], rows.stream[a:b], rows.id[a:b],
                    rows.size[a:b])
            if fnum is None:
                out = [f"{s},{t},{ops[op]},{client},{dev},{stream},{ident},{size}"
                       for s, t, op, dev, stream, ident, size in zip(range(seq + a, seq + b),
                                                                     *cols)]
            else:
                out = [f"{s},{t},{ops[op]},{client},{dev},{stream},{ident},{size},{fnum[f]}"
                       for s, t, op, dev, stream, ident, size, f in zip(
                           range(seq + a, seq + b), *cols, rows.frame[a:b])]
            out.append("")
            yield "\n".join(out).encode()
    return body()


def write_whole(path, data):
    """Write to a temporary file in the same directory, then rename over path.

    A reader never sees a half-written file, and an interrupted run leaves the old one intact.
    """
    _write_atomic(path, lambda f: f.write(data))


class _CheckedWriter:
    """A file object over a descriptor whose every write is whole: os.write until each byte is
    written, an error raised (a short write to a pipe, or to a file at its size limit, was
    taken as done)."""

    def __init__(self, fd):
        self.fd = fd

    def write(self, data):
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            if n <= 0:
                raise OSError(0, "nothing written")
            view = view[n:]
        return len(data)


def _exists_not_regular(path):
    """path exists and is not a regular file itself (a device, a FIFO, a link), as gpusim's
    output writer (util/file.c) tells it by lstat."""
    try:
        return not stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _write_in_place(path, write):
    what = "standard output" if path == "-" else path
    try:
        if path == "-":
            sys.stdout.flush()
            write(_CheckedWriter(sys.stdout.fileno()))
        else:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_CLOEXEC, 0o666)
            try:
                write(_CheckedWriter(fd))
            finally:
                os.close(fd)
    except OSError as e:
        raise ConvertError(f"cannot write {what}: {e.strerror or e}") from None


def _write_atomic(path, write):
    """write(f) into a temporary file beside path, then rename it over path (write_whole); path
    "-" is standard output, as for gpusim's -o."""
    if path == "-" or _exists_not_regular(path):
        # standard output, or an existing target that is not a regular file (a device, a FIFO, a
        # link such as /dev/stdout): written in place, as gpusim's -o writes it, never replaced
        # by a rename (as root that turned /dev/full into a regular file)
        _write_in_place(path, write)
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        # a short name: the output's own name with a suffix could pass NAME_MAX (255 bytes)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".convert-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            write(f)
        # mkstemp creates the file 0600; give it the mode a plain open() would have.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise ConvertError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_chunks(path, chunks):
    """write_whole for a trace rendered in chunks (render_trace), gzip-compressed as it is
    written when path ends in .gz: the same bytes as maybe_gzip of the whole (one deflate stream
    fed piece by piece gives what one call gives), without the whole text or its compressed
    copy in memory."""
    def write(f):
        if path.endswith(".gz"):
            comp = zlib.compressobj(9, zlib.DEFLATED, -15)
            crc = n = 0
            f.write(_GZIP_HEADER)
            for c in chunks:
                crc = zlib.crc32(c, crc)
                n += len(c)
                f.write(comp.compress(c))
            f.write(comp.flush())
            f.write(struct.pack("<LL", crc, n & 0xFFFFFFFF))
        else:
            for c in chunks:
                f.write(c)
    _write_atomic(path, write)


def maybe_gzip(path, data):
    # mtime=0 and no file name in the header: the same trace always gives the same bytes. The
    # header's OS byte (offset 9) is 255 up to Python 3.10 and from 3.13, 3 in 3.11 and 3.12: it is
    # always written as 3 (Unix), as zlib and gpusim's own writer write it.
    if not path.endswith(".gz"):
        return data
    out = gzip.compress(data, compresslevel=9, mtime=0)
    return out[:9] + b"\x03" + out[10:]


_GZIP_HEADER = maybe_gzip(".gz", b"")[:10]      # what maybe_gzip writes before the deflate data


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

EXAMPLES = """\
examples:
  # The bundled ResNet-50 example (the device total comes from the .json beside the input):
  python3 traces/convert.py ../shared/traces/pytorch-2.11-h100/resnet50__default__nocap.pickle.gz \\
      -o traces/data/resnet50.gstrace.gz

  # Also write what the real allocator did with it (segments, peak reserved, stats):
  python3 traces/convert.py ../shared/traces/pytorch-2.11-h100/resnet50__default__6.25.pickle.gz \\
      -o /tmp/r.gstrace --reference /tmp/resnet50__default__6.25.ref.json

  # Your own run; no .json beside it, so say how big the device is:
  python3 traces/convert.py my_run.pickle -o my_run.gstrace.gz --device-total 85017493504

  # An RMM log, labelled with its own client name:
  python3 traces/convert.py rmm_log.csv -o rmm.gstrace --client cudf

  # A run that had a 20 GiB cap and no .json beside it (tells empty_cache() from the
  # allocator's own releases), or one that had none:
  python3 traces/convert.py my_run.pickle -o my_run.gstrace.gz --cap 21474836480
  python3 traces/convert.py my_run.pickle -o my_run.gstrace.gz --cap none

recording a PyTorch snapshot that answers everything (start before the first CUDA allocation,
with max_entries above the events the run makes, and without a cap, or on a larger device, so
that every request is in the trace; a cut log gets synthesized allocations and approximate
results, and a run that dies under a cap ends where it died):
  torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                           max_entries=5_000_000)
  ...  # the workload
  torch.cuda.memory._dump_snapshot("my_run.pickle")

a snapshot at the OOM that kills the run (the failed request is its last event, the header
gets "# fatal_oom_event"):
  def on_oom(device, alloc, device_alloc, device_free):
      torch.cuda.memory._dump_snapshot("my_run_oom.pickle")
  torch._C._cuda_attach_out_of_memory_observer(on_oom)

empty_cache() inferred (PyTorch logs no event for it): a run of segment_free/segment_unmap
entries of one device is an empty_cache() placed before it, unless the allocator event right
after the run explains it: an oom; a segment_alloc/segment_map of an allocation that had to
release (reserved + the segment it needed > L, the run's limit: the .json's cap_gib or --cap,
else the highest reserved the run reached); or garbage collection (garbage_collection_threshold
T > 0 and reserved > T x L).

failed requests, cut logs and several devices: the module's documentation
(python3 -c "import sys; sys.path.insert(0, 'traces'); import convert; help(convert)") and the
README's "Getting a trace".

exit status: 0 on success, 2 on any error (one line on stderr: "convert.py: FILE: message").
"""


def positive_int(text):
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return v


NO_CAP = "none"


def cap_arg(text):
    return NO_CAP if text == NO_CAP else positive_int(text)


def client_name(text):
    # The client lands in a CSV column; the trace reader (traces/trace.c) accepts exactly
    # these characters so that names never need quoting.
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", text):
        raise argparse.ArgumentTypeError(
            f"client name must be letters, digits or _.- (got {text!r})")
    return text


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as every other error: one line on stderr, exit 2 (not argparse's usage
    block)."""

    def error(self, message):
        prog = self.prog.split()[0]  # a subcommand's parser is "synth.py batch-alternate"
        self.exit(EXIT_ERROR, f"{prog}: {one_line(message)} (try '{self.prog} --help')\n")


def parse_args(argv):
    p = _OneLineParser(
        prog="convert.py",
        description="Convert a PyTorch memory snapshot (or an RMM log CSV) into a gpusim trace "
                    "(text format 1, or 2 when the log has requests that failed: 'oom' rows), "
                    "optionally writing what the recorded allocator did as a reference JSON. "
                    "The input format is detected from the content; gzip is detected too. "
                    "Requests that failed stay in the trace, at their place (a last one is the "
                    "OOM the run died of: '# fatal_oom_event'); torch.cuda.empty_cache() calls "
                    "are inferred from segment releases that no allocation explains; a log cut "
                    "by max_entries gets synthesized allocations and says so in its header.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", metavar="INPUT",
                   help="snapshot pickle (.pickle, .pickle.gz) or RMM log CSV")
    p.add_argument("-o", "--output", metavar="OUTPUT", required=True,
                   help="trace to write ('-': standard output); gzip-compressed when it ends in "
                        ".gz, binary when it ends in .gsbin")
    p.add_argument("--reference", metavar="REF.json",
                   help="also write the recorded allocator's own events and statistics here")
    p.add_argument("--device-total", metavar="BYTES", type=positive_int,
                   help="device memory in bytes for '# device_total_bytes' (default: "
                        "total_bytes from NAME.json beside NAME.pickle[.gz], else omitted)")
    p.add_argument("--client", metavar="NAME", type=client_name, default="torch",
                   help="value of the client column (default: torch)")
    p.add_argument("--cap", metavar="BYTES|none", type=cap_arg,
                   help="the memory limit the recorded run had (PyTorch's memory fraction times "
                        "the device's memory), or 'none' for no limit, when no .json beside the "
                        "snapshot says it: tells the allocator's own segment releases from "
                        "empty_cache() calls (see 'empty_cache() inferred' below)")
    p.add_argument("--progress", action="store_true",
                   help="show a progress line on stderr (entries read, share of the input, "
                        "rate), even when stderr is not a terminal; on a terminal it is shown "
                        "unless --quiet")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress line, even on a terminal")
    return p.parse_args(argv)


def release_limit(args, sibling, dev):
    """The memory a device's allocator could reserve in the recorded run, for the empty_cache
    rule: --cap, else the sibling's cap (its device's, with several), else the device's memory
    when the sibling says the run had no cap; None when unknown."""
    if args.cap == NO_CAP:
        return args.device_total or float("inf")
    if args.cap is not None:
        return args.cap
    if not sibling:
        return None
    total = _by_device(sibling, "total_bytes_by_device", dev) or sibling.get("total_bytes")
    cap = _by_device(sibling, "cap_gib_by_device", dev)
    if cap is None:
        cap = sibling.get("cap_gib")
    if _is_num(cap) and _is_int(total) and total > 0:
        return truncated_cap_bytes(cap, total)
    if "cap_gib" in sibling and sibling["cap_gib"] is None and _is_int(total):
        return total
    return None


def infer_all_empty_cache(rec, args, sibling, label):
    if rec.per_device is None:
        return
    settings = rec.allocator_settings or {}
    gc = settings.get("garbage_collection_threshold")
    gc = gc if _is_num(gc) else 0.0
    expandable = settings.get("expandable_segments") is True
    for dev, events in enumerate(rec.per_device):
        stats = _by_device(sibling, "memory_stats_by_device", dev)
        if stats is None and dev == 0 and sibling:
            stats = sibling.get("memory_stats")
        peak = stats.get("reserved_bytes.all.peak") if isinstance(stats, dict) else None
        rec.per_device[dev], n = infer_empty_cache(
            events, release_limit(args, sibling, dev), peak if _is_int(peak) else None, gc,
            expandable)
        rec.num_inferred_empty_cache += n
    if rec.num_inferred_empty_cache:
        warn(label, f"inferred {rec.num_inferred_empty_cache} empty_cache() call(s) from segment "
                    f"releases that no allocation explains (see --help)")


def _same_file(a, b):
    """Whether paths a and b name one file: by device and inode when both exist (through any
    link), else by their absolute, normalised names."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def refuse_overwrite(args):
    """Nothing this run writes (OUTPUT, --reference) is one of what it reads (INPUT, the NAME.json
    beside it), nor are the two outputs one file: checked before anything is read, as gpusim's
    -o is (a snapshot overwritten by its own trace cannot be converted again)."""
    inputs = [args.input]
    sib = sibling_json_path(args.input)
    if sib:
        inputs.append(sib)
    outputs = [("-o", args.output)] + ([("--reference", args.reference)] if args.reference else [])
    for flag, out in outputs:
        for inp in inputs:
            if _same_file(out, inp):
                raise ConvertError(f"{flag} {out}: that is {inp}, an input of this run; not "
                                   f"overwritten")
    if args.reference and _same_file(args.output, args.reference):
        raise ConvertError(f"-o and --reference name one file ({args.output}): the trace would be "
                           f"lost")


def convert(args, progress_stream=None, progress_enabled=False):
    refuse_overwrite(args)
    if args.output.endswith(".gsbin.gz"):  # as gpusim convert refuses it (traces/write.c)
        raise ConvertError(f"{args.output}: the binary format is read where it lies, never "
                           f"compressed: write NAME.gsbin, or NAME.gstrace.gz for compressed text")
    label = args.input
    inp = Input(args.input)
    progress = Progress(progress_stream, header_text(args.input), inp, progress_enabled)
    try:
        kind = detect_format(inp.head)
        if kind == "pytorch-snapshot":
            rec = read_snapshot(inp, progress)
        else:
            rec = READERS[kind](inp.read())
    finally:
        inp.close()
        progress.done()

    sibling = None
    sib_path = sibling_json_path(args.input) if kind == "pytorch-snapshot" else None
    if sib_path:
        sibling = read_sibling(sib_path)
    device_total = args.device_total
    if device_total is None and sibling and _is_int(sibling.get("total_bytes")):
        device_total = sibling["total_bytes"]
    if device_total is not None and not device_total_ok(device_total):
        raise ConvertError(f"device total {device_total} bytes is out of range (1 to 2^44, the "
                           f"most gpusim simulates)")

    infer_all_pools(rec, label)
    infer_all_empty_cache(rec, args, sibling, label)
    merge_devices(rec)
    tr = build_trace(rec, label)
    rec.events = rec.per_device = None      # (their memory, before the trace is written)
    outcome = sibling.get("outcome") if sibling else None
    events_before_trim = tr.allocator_events
    if tr.death_seq is not None and tr.fatal_oom_seq is None and outcome != "ok":
        empties = tr.rows.op[tr.death_seq + 1 - len(tr.rows.prefix):].count(_O_EMPTY)
        n = trim_after_death(tr)
        # (the header's count of inferred empty_cache calls is of the rows that stay)
        rec.num_inferred_empty_cache = max(0, rec.num_inferred_empty_cache - empties)
        warn(label, f"the program made no request after the OOM at event {tr.death_seq}, only "
                    f"{n} free(s) and cache releases (the exception unwinding): the run died "
                    f"there, and the trace ends at it (a .json beside it with \"outcome\": "
                    f"\"ok\" would say otherwise)")
    if tr.fatal_oom_seq is not None and outcome == "ok":
        # The log ends with a failed request, but the run went on (it caught the error, then
        # the snapshot was taken): a mark after it says the program did not die there.
        last = tr.rows[-1]
        tr.rows.append((last[0], "mark", last[2], last[3], 0, 0))
        tr.fatal_oom_seq = None
        warn(label, "the log ends with an oom that the run survived (the .json says 'ok'); a "
                    "mark follows it so that a replay goes on past it")
    elif tr.fatal_oom_seq is None and outcome == "oom":
        warn(label, "the .json says the run died of an OOM, but the log does not end with one")
    tr.limit = limit_at_death(rec, tr, events_before_trim)

    totals = None
    devices = trace_devices(tr)
    if len(devices) > 1 and sibling and isinstance(sibling.get("total_bytes_by_device"), dict):
        totals = {d: _by_device(sibling, "total_bytes_by_device", d) for d in devices}
        totals = {d: n for d, n in totals.items() if _is_int(n)}
        for d, n in totals.items():
            if not device_total_ok(n):
                raise ConvertError(f"{sib_path}: total_bytes_by_device of device {d}, {n} bytes, "
                                   f"is out of range (1 to 2^44, the most gpusim simulates)")

    source = os.path.basename(args.input)
    binary = args.output.endswith(".gsbin")
    if binary and tr.num_pool_rows:
        # as gpusim convert refuses it (traces/binary.c): binary version 1 has no pool events
        raise ConvertError(f"{tr.num_pool_rows} private pool event(s) (trace version 3) are not "
                           f"carried by the binary format: write text (-o NAME.gstrace.gz)")
    framed = tr.rows.num_framed()
    if binary and framed:
        warn(source, f"the binary format does not carry frames: the top user frames of "
                     f"{framed} allocation(s) are left out (write text to keep them)")
    trace_chunks = render_trace(rec, tr, source, device_total, args.client, totals,
                                frames=not binary)
    ref = None
    if args.reference:
        ref = build_reference(rec, tr, source, sibling, device_total)

    if binary:
        # The binary format: traces/gsbin.py, beside this script (DATADIR/gpusim once installed).
        import importlib.util
        here = os.path.dirname(os.path.realpath(__file__))
        path = next((p for p in (os.path.join(here, "gsbin.py"),
                                 os.path.join(here, "..", "share", "gpusim", "gsbin.py"))
                     if os.path.exists(p)), os.path.join(here, "gsbin.py"))
        spec = importlib.util.spec_from_file_location("gsbin", path)
        gsbin = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gsbin)
        write_whole(args.output, maybe_gzip(args.output, gsbin.encode_text(b"".join(trace_chunks))))
    else:
        write_chunks(args.output, trace_chunks)
    if ref is not None:
        text = json.dumps(ref, indent=1, sort_keys=True, default=str) + "\n"
        write_whole(args.reference, text.encode("utf-8"))


def one_line(text):
    """A message as one printable line (it may quote input: a line break must not split it)."""
    return header_text(" ".join(str(text).splitlines()))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    label = header_text(args.input)
    # Warnings are held until the conversion succeeds: a failure is one line on stderr, and
    # warnings about a conversion that did not happen would only bury it.
    held = io.StringIO()
    # The cyclic garbage collector is off while converting: a conversion keeps millions of
    # objects (entries' dicts in a batch, Events, rows, the memo), none of them in a cycle, and
    # each collection of the oldest generation walks them all (a third of build_trace's time at
    # 200k entries). What little it could free is freed when it is back on, at the end.
    gc_was = gc.isenabled()
    gc.disable()
    try:
        real = sys.stderr
        # --progress by name wins over --quiet; otherwise a terminal gets one unless --quiet
        progress = args.progress or (not args.quiet and real.isatty())
        with contextlib.redirect_stderr(held):
            convert(args, real, progress)
        sys.stderr.write(held.getvalue())
    except ConvertError as e:
        # One line, always: messages about another file name it; the rest are about INPUT.
        print(f"{PROG}: {label}: {one_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print(f"{PROG}: {label}: out of memory while converting", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        # Ctrl-C: one line and 130, as a shell reports SIGINT; the output is untouched (it is
        # written whole, through a temporary file that _write_atomic removes)
        print(f"{PROG}: {label}: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        print(f"{PROG}: {label}: the input nests too deeply to convert", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # noqa: BLE001 - the last resort: one line and exit 2, never a traceback
        # Every expected failure is a ConvertError; reaching here is a bug of the converter on
        # this input. Its type and message still say where to look.
        print(f"{PROG}: {label}: internal error, please report it with the input: "
              f"{type(e).__name__}: {one_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if gc_was:
            gc.enable()
    return 0


if __name__ == "__main__":
    sys.exit(main())
