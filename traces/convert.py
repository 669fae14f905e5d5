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

Sibling JSON: for INPUT named NAME.pickle.gz or NAME.pickle, a NAME.json beside it (the layout
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
import collections
import gzip
import heapq
import io
import json
import os
import pickle
import re
import sys
import tempfile
import zlib

PROG = "convert.py"
EXIT_ERROR = 2
TRACE_MAGIC = "# gpusim-trace 1"     # a trace without oom rows
TRACE_MAGIC_2 = "# gpusim-trace 2"   # with oom rows (requests that failed in the recorded run)
MiB = 1 << 20
TRACE_COLUMNS = "seq,time_us,op,client,device,stream,id,size"
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

Event = collections.namedtuple(
    "Event", "action device stream addr size time_us deferred where")


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


# ---------------------------------------------------------------------------------------------
# Reading the file and detecting the format
# ---------------------------------------------------------------------------------------------

def read_input(path):
    """Return the file's bytes, gunzipped when it starts with the gzip magic."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except EOFError:
            raise ConvertError("truncated gzip file (compressed data ends early)") from None
        except (gzip.BadGzipFile, zlib.error, OSError) as e:
            raise ConvertError(f"corrupt gzip file ({e})") from None
    if not data:
        raise ConvertError("empty file")
    return data


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


def load_pickle(data):
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except ConvertError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of untrusted input is "bad pickle"
        # Unpickling garbage raises a zoo of exceptions (UnpicklingError, EOFError, ValueError,
        # KeyError, struct.error, RecursionError, ...); all mean the same thing to the user.
        if data[:1] != b"\x80":
            # No pickle protocol marker: most likely some other kind of file altogether.
            raise ConvertError("not a PyTorch memory snapshot (pickle) or an RMM log CSV "
                               "(unrecognized content)") from None
        detail = str(e).splitlines()[0] if str(e) else "no detail"
        raise ConvertError(f"not a valid pickle ({type(e).__name__}: {detail})") from None


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


def read_snapshot(data):
    snap = load_pickle(data)
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

    rec = Recording("pytorch-snapshot")
    settings = snap.get("allocator_settings")
    if isinstance(settings, dict):
        rec.allocator_settings = settings
        conf = settings.get("PYTORCH_CUDA_ALLOC_CONF")
        rec.allocator_conf = conf if isinstance(conf, str) else None

    per_device = []
    for dev, evs in enumerate(traces):
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
    rec.per_device = per_device
    return rec


def merge_devices(rec):
    """Merge the devices' events by time. heapq.merge keeps each input's own order (even where
    its clock went backwards) and, on equal times, takes the lower device first: a stable
    merge."""
    if rec.per_device is not None:
        rec.events = list(heapq.merge(*rec.per_device, key=lambda e: e.time_us))


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


def infer_empty_cache(events, limit=None, peak=None, gc_threshold=0.0, expandable=False):
    """One device's events with an 'empty_cache' Event before every run of releases that no
    allocation explains (the rule above). Returns (events, number inferred)."""
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
        if nxt is not None and nxt.action == "oom":
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
    return out, n


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
        for b in seg["blocks"]:
            if not isinstance(b, dict):
                return None
            if b.get("state") != "active_allocated":
                continue
            addr, size = b.get("address"), b.get("requested_size")
            if not _is_int(addr) or not _is_int(size):
                return None
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


def _snapshot_device_events(dev, evs, rec):
    """Turn one device's snapshot events into Events, pairing immediate frees."""
    out = []
    prev = None                   # previous raw event of this device (for immediacy)
    prev_free_index = None        # index in out of the 'free' made from prev, if prev was one
    for i, e in enumerate(evs):
        where = f"device {dev} event {i}"
        if not isinstance(e, dict):
            raise ConvertError(f"{where}: not a dict")
        action = e.get("action")
        if action in IGNORED_ACTIONS:
            prev, prev_free_index = e, None
            continue
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
        if fields["size"] < 0:
            raise ConvertError(f"{where} ({action}): negative size {fields['size']}")
        addr, size = fields[addr_key], fields["size"]
        stream = stream_u64(fields["stream"], where)

        this_free_index = None
        if action == "alloc":
            out.append(Event("alloc", dev, stream, addr, size, t, False, where))
        elif action == "free_requested":
            # Deferred until shown otherwise: if the very next event is its own free_completed,
            # that branch below turns this into an immediate free.
            this_free_index = len(out)
            out.append(Event("free", dev, stream, addr, size, t, True, where))
        elif action == "free_completed":
            if (prev is not None and prev.get("action") == "free_requested"
                    and prev.get("addr") == addr and prev_free_index is not None):
                # The very next event after its own free_requested: the free was immediate.
                out[prev_free_index] = out[prev_free_index]._replace(deferred=False)
            else:
                out.append(Event("free_done", dev, stream, addr, size, t, False, where))
        else:
            out.append(Event(action, dev, stream, addr, size, t, False, where))
        if action in PROGRAM_ACTIONS:
            rec.devices.add(dev)
            rec.streams.add(stream)
        prev, prev_free_index = e, this_free_index
    return out


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
        if action == "allocate failure":
            raise ConvertError(f"{where}: the log records a failed allocation of {size.strip()} "
                               f"bytes; the recorded run ran out of memory, and a trace cannot "
                               f"say what the program did next")
        if action not in ("allocate", "free"):
            raise ConvertError(f"{where}: unknown action {action!r} "
                               f"(expected allocate, free, allocate failure)")
        addr = _rmm_int(ptr, where, "pointer")
        nbytes = _rmm_int(size, where, "size")
        strm = stream_u64(_rmm_int(stream, where, "stream"), where)
        if nbytes < 0:
            raise ConvertError(f"{where}: negative size {nbytes}")
        op = "alloc" if action == "allocate" else "free"
        rec.events.append(Event(op, 0, strm, addr, nbytes, t, False, where))
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

class Block:
    __slots__ = ("id", "size", "stream", "device", "where")

    def __init__(self, size, stream, device, where):
        self.id = None          # assigned in trace order once we know the synthesized prefix
        self.size, self.stream, self.device, self.where = size, stream, device, where


class Trace:
    """The converted trace: rows to write, plus what the reference file needs."""

    def __init__(self):
        self.rows = []               # (time_us, op, device, stream, id, size)
        self.allocator_events = []   # [action, addr, size, seq]
        self.num_allocs = 0
        self.num_synthesized = 0
        self.num_deferred_frees = 0
        self.num_ooms = 0
        self.fatal_oom_seq = None    # the seq of the last row, an oom the program died of
        self.started_mid_run = False # evidence besides synthesized allocs (segments)


def build_trace(rec, label):
    live = {}        # (device, addr) -> Block, allocated and not yet freed
    pending = {}     # (device, addr) -> Block, freed but completion deferred (free_done later)
    synthesized = []  # Blocks freed without a recorded alloc (the log started mid-run)
    body = []        # (time, op, device, stream, Block) of real events, in order
    alloc_events = []  # [action, addr, size, number of body events before it, device]
    dropped_done = 0
    size_mismatch = 0
    segments = set()   # (device, addr) of the segments the log saw made and not yet freed
    unseen_segment = False

    for ev in rec.events:
        key = (ev.device, ev.addr)
        if ev.action == "alloc":
            if key in live or key in pending:
                other = live.get(key) or pending.get(key)
                state = "still allocated" if key in live else "freed but not yet completed"
                raise ConvertError(f"{ev.where}: alloc at address {ev.addr:#x} which is {state} "
                                   f"(allocated at {other.where})")
            blk = Block(ev.size, ev.stream, ev.device, ev.where)
            live[key] = blk
            body.append((ev.time_us, "alloc", ev.device, ev.stream, blk))
        elif ev.action == "free":
            blk = live.pop(key, None)
            if blk is None:
                if key in pending:
                    raise ConvertError(f"{ev.where}: address {ev.addr:#x} freed twice "
                                       f"(allocated at {pending[key].where})")
                # Freed but never allocated in the log: it was allocated before the log began.
                blk = Block(ev.size, ev.stream, ev.device, ev.where + " (synthesized)")
                synthesized.append(blk)
            elif ev.size != blk.size:
                size_mismatch += 1
            body.append((ev.time_us, "free", ev.device, ev.stream, blk))
            if ev.deferred:
                pending[key] = blk
        elif ev.action == "free_done":
            blk = pending.pop(key, None)
            if blk is None:
                if key in live:
                    raise ConvertError(f"{ev.where}: free_completed at address {ev.addr:#x} "
                                       f"which was never freed (allocated at {live[key].where})")
                # Its free_requested was before the log began: nothing to complete.
                dropped_done += 1
                continue
            body.append((ev.time_us, "free_done", ev.device, ev.stream, blk))
        elif ev.action == "empty_cache":
            body.append((ev.time_us, "empty_cache", ev.device, ev.stream, None))
        else:
            if ev.action == "oom":
                # The request the program made, at its place: a row of its own ('oom', version
                # 2 of the format), and the allocator's record of it in the reference.
                alloc_events.append([ev.action, ev.addr, ev.size, len(body), ev.device])
                body.append((ev.time_us, "oom", ev.device, ev.stream, ev.size))
                continue
            if ev.action == "segment_alloc":
                segments.add(key)
            elif ev.action == "segment_free":
                if key in segments:
                    segments.discard(key)
                else:
                    unseen_segment = True    # made before the log began
            alloc_events.append([ev.action, ev.addr, ev.size, len(body), ev.device])

    # Blocks still allocated when the log ended but never seen allocated in it were allocated
    # before the log began and held throughout: synthesize them too, so the replay carries that
    # memory. (Blocks freed before the log began with a completion still pending are left out.)
    held_before = []
    if rec.final_blocks is not None:
        for dev, addr, size, stream in rec.final_blocks:
            if (dev, addr) not in live and (dev, addr) not in pending:
                held_before.append(Block(size, stream, dev, f"segments block {addr:#x}"))
    if rec.final_segments is not None and rec.final_segments - segments:
        unseen_segment = True                # a segment held at the end, never seen made

    tr = Trace()
    next_id = 1
    # Synthesized allocs come first, at time 0: blocks freed in the log (in the order of their
    # frees), then blocks held from before the log to its end (by device and address).
    synthesized = synthesized + held_before
    for blk in synthesized:
        blk.id = next_id
        next_id += 1
        tr.rows.append((0, "alloc", blk.device, blk.stream, blk.id, blk.size))
    tr.num_synthesized = len(synthesized)

    base = body[0][0] if body else 0
    last_t = 0
    clamped = 0
    for t, op, dev, stream, blk in body:
        rel = int(round(t - base))
        if rel < last_t:
            # The recorded clock went backwards (TSC-derived and approximate): keep time
            # non-decreasing, because the event order is what replay follows.
            clamped += 1
            rel = last_t
        last_t = rel
        if op in ("oom", "empty_cache"):
            # No allocation: id 0; an oom's size is the request (blk holds it), empty_cache's 0.
            size = blk if op == "oom" else 0
            tr.num_ooms += op == "oom"
            tr.rows.append((rel, op, dev, stream, 0, size))
            continue
        if op == "alloc":
            blk.id = next_id
            next_id += 1
            tr.num_allocs += 1
        elif op == "free_done":
            tr.num_deferred_frees += 1
        tr.rows.append((rel, op, dev, stream, blk.id, blk.size))

    offset = len(synthesized)
    tr.allocator_events = [[a, addr, size, seq + offset, dev]
                           for a, addr, size, seq, dev in alloc_events]
    tr.started_mid_run = bool(synthesized) or unseen_segment
    # An oom that is the log's last event: the program died of it (an OOM observer took the
    # snapshot, or the process ended there). convert() may decide otherwise from the sibling.
    if tr.rows and tr.rows[-1][1] == "oom":
        tr.fatal_oom_seq = len(tr.rows) - 1

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
    if not tr.rows:
        warn(label, "no allocation events: the trace is empty")
    return tr


# ---------------------------------------------------------------------------------------------
# Sibling JSON and reference answer
# ---------------------------------------------------------------------------------------------

def sibling_json_path(input_path):
    for suffix in (".pickle.gz", ".pickle"):
        if input_path.endswith(suffix):
            candidate = input_path[: -len(suffix)] + ".json"
            if os.path.isfile(candidate):
                return candidate
    return None


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
    return sorted({r[2] for r in tr.rows} | {e[4] for e in tr.allocator_events})


def build_reference(rec, tr, source, sibling, device_total):
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

def render_trace(rec, tr, source, device_total, client, totals_by_device=None):
    # Version 2 only when a row needs it: a trace without oom rows is written as before.
    lines = [TRACE_MAGIC_2 if tr.num_ooms else TRACE_MAGIC, f"# source: {rec.kind} {source}"]
    if device_total is not None:
        lines.append(f"# device_total_bytes: {device_total}")
    if totals_by_device:
        lines.append("# device_total_bytes_by_device: " +
                     ",".join(f"{d}={n}" for d, n in sorted(totals_by_device.items())))
    if rec.allocator_conf is not None:
        lines.append(f"# allocator_conf: {rec.allocator_conf}")
    if tr.num_synthesized:
        lines.append(f"# synthesized_allocs: {tr.num_synthesized}")
    if tr.started_mid_run and not tr.num_synthesized:
        lines.append("# started_mid_run: yes")
    if tr.fatal_oom_seq is not None:
        lines.append(f"# fatal_oom_event: {tr.fatal_oom_seq}")
    if rec.num_inferred_empty_cache:
        lines.append(f"# inferred_empty_cache: {rec.num_inferred_empty_cache}")
    lines.append(TRACE_COLUMNS)
    for seq, (t, op, dev, stream, ident, size) in enumerate(tr.rows):
        lines.append(f"{seq},{t},{op},{client},{dev},{stream},{ident},{size}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_whole(path, data):
    """Write to a temporary file in the same directory, then rename over path.

    A reader never sees a half-written file, and an interrupted run leaves the old one intact.
    """
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
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


def maybe_gzip(path, data):
    # mtime=0 and no file name in the header: the same trace always gives the same bytes. The
    # header's OS byte (offset 9) is 255 up to Python 3.10 and from 3.13, 3 in 3.11 and 3.12: it is
    # always written as 3 (Unix), as zlib and gpusim's own writer write it.
    if not path.endswith(".gz"):
        return data
    out = gzip.compress(data, compresslevel=9, mtime=0)
    return out[:9] + b"\x03" + out[10:]


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


def parse_args(argv):
    p = argparse.ArgumentParser(
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
                   help="trace to write; gzip-compressed when it ends in .gz")
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


def convert(args):
    label = args.input
    data = read_input(args.input)
    kind = detect_format(data)
    rec = READERS[kind](data)

    sibling = None
    sib_path = sibling_json_path(args.input) if kind == "pytorch-snapshot" else None
    if sib_path:
        sibling = read_sibling(sib_path)
    device_total = args.device_total
    if device_total is None and sibling and _is_int(sibling.get("total_bytes")):
        device_total = sibling["total_bytes"]

    infer_all_empty_cache(rec, args, sibling, label)
    merge_devices(rec)
    tr = build_trace(rec, label)
    outcome = sibling.get("outcome") if sibling else None
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

    totals = None
    devices = trace_devices(tr)
    if len(devices) > 1 and sibling and isinstance(sibling.get("total_bytes_by_device"), dict):
        totals = {d: _by_device(sibling, "total_bytes_by_device", d) for d in devices}
        totals = {d: n for d, n in totals.items() if _is_int(n)}

    source = os.path.basename(args.input)
    trace_bytes = render_trace(rec, tr, source, device_total, args.client, totals)
    ref = None
    if args.reference:
        ref = build_reference(rec, tr, source, sibling, device_total)

    if args.output.endswith(".gsbin"):
        # The binary format: traces/gsbin.py, beside this script (DATADIR/gpusim once installed).
        import importlib.util
        here = os.path.dirname(os.path.realpath(__file__))
        path = next((p for p in (os.path.join(here, "gsbin.py"),
                                 os.path.join(here, "..", "share", "gpusim", "gsbin.py"))
                     if os.path.exists(p)), os.path.join(here, "gsbin.py"))
        spec = importlib.util.spec_from_file_location("gsbin", path)
        gsbin = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(gsbin)
        trace_bytes = gsbin.encode_text(trace_bytes)
    write_whole(args.output, maybe_gzip(args.output, trace_bytes))
    if ref is not None:
        text = json.dumps(ref, indent=1, sort_keys=True, default=str) + "\n"
        write_whole(args.reference, text.encode("utf-8"))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        convert(args)
    except ConvertError as e:
        # One line, always: messages about another file name it; the rest are about INPUT.
        msg = " ".join(str(e).split("\n"))
        print(f"{PROG}: {args.input}: {msg}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:
        print(f"{PROG}: {args.input}: out of memory while converting", file=sys.stderr)
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
