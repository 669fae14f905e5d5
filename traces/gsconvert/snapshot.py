"""The PyTorch memory snapshot reader: read_snapshot (through walker.SnapshotWalker), the checks
of what a snapshot may hold, and its intake: the entries made Events (DeviceEvents), the final
'segments' read (blocks, segments, pools, reserved bytes)."""

import pickle

from .model import (_A_ALLOC, _A_FREE, _A_FREE_DONE, _ACTION_CODE, ALLOCATOR_ACTIONS,
                    IGNORED_ACTIONS, PROGRAM_ACTIONS, U64_LIMIT, ConvertError, EventColumns,
                    Recording, _is_int, _is_num, check_size, check_time, stream_u64)
from .limits import I64_MIN
from .walker import _FAST_ACTIONS, _DevList, _Frames, _Pending, SnapshotWalker, top_user_frame


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


def read_snapshot(f, progress=None, budget=None):
    """Read a snapshot from the binary file f (gunzipped), streaming its entries (budget: the
    limits.MemoryBudget the walker checks, None for none)."""
    rec = Recording("pytorch-snapshot")
    streamed = {}                 # device -> DeviceEvents, for the device lists streamed

    def feeder(dev):
        d = streamed.get(dev)
        if d is None:
            d = streamed[dev] = DeviceEvents(dev, rec)
        return d.feed_batch

    snap = SnapshotWalker(f, feeder, progress, budget).load()

    def streamed_events(dev, evs):
        if not isinstance(evs, _DevList):
            return None
        # streamed as it was read: its entries are in streamed[dev]
        if evs.dev != dev:
            raise ConvertError(f"snapshot device_traces[{dev}] is laid out out of order in "
                               f"the pickle (it was read as device {evs.dev})")
        return evs.count, (streamed[dev].out if dev in streamed else [])

    return _recording_of(rec, snap, streamed_events)


def _recording_of(rec, snap, streamed_events):
    """rec filled from snap, the snapshot as read; streamed_events(dev, evs): (entries, their
    events) of device dev's list evs when a reader took its entries as they came, else None."""
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

    export = snap.get("gpusim")
    if isinstance(export, dict) and export.get("simulated") is True:
        rec.gpusim_export = export
    settings = snap.get("allocator_settings")
    if isinstance(settings, dict):
        rec.allocator_settings = settings
        conf = settings.get("PYTORCH_CUDA_ALLOC_CONF")
        rec.allocator_conf = conf if isinstance(conf, str) else None

    per_device = []
    check_shared_references(traces)
    check_shared_segments(snap.get("segments"))
    for dev, evs in enumerate(traces):
        done = streamed_events(dev, evs)
        if done is not None:
            rec.num_raw_events += done[0]
            per_device.append(done[1])
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


def _is_key_int(v):
    """An integer of 64 bits, signed or not: what a snapshot's addresses, devices and pool ids
    are, and what the trace's tables may take as keys (past them, integers can be made to share
    one hash: limits.py)."""
    return _is_int(v) and I64_MIN <= v < U64_LIMIT


_MAX_SHARED_BLOCKS = 1_000_000
_MAX_SETTINGS_VALUES = 100_000


def check_settings_size(settings):
    """Refuse allocator_settings that would write more than _MAX_SETTINGS_VALUES values to the
    reference: its containers may be shared references (a list of a list of ... twice over, 40
    deep, is 2^40 values from 425 bytes of pickle, which json.dumps wrote until the kernel
    killed it at 24 GB: tests/fuzz/diff_convert.py's run). PyTorch's is a dozen settings."""
    todo, n = [settings], 1
    while todo:
        x = todo.pop()
        if isinstance(x, dict):
            n += 2 * len(x)
        elif isinstance(x, (list, tuple, set, frozenset)):
            n += len(x)
        else:
            continue
        # (counted before they are taken: a list that holds itself a thousand times filled the
        # list of values to visit with 10^8 of them, 800 MiB, before the count stopped it)
        if n > _MAX_SETTINGS_VALUES:
            raise ConvertError(f"snapshot 'allocator_settings' holds more than "
                               f"{_MAX_SETTINGS_VALUES:,} values (shared or circular references "
                               f"in the pickle?); PyTorch's holds a dozen settings")
        if isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
        else:
            todo.extend(x)


# ---------------------------------------------------------------------------------------------
# A snapshot's intake: its final 'segments', its entries made Events
# ---------------------------------------------------------------------------------------------

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
            if not _is_key_int(addr) or not _is_int(size):
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
        if not _is_key_int(dev) or not _is_key_int(addr):
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
        if not _is_key_int(dev) or not _is_int(size) or size < 0:
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
        if (not isinstance(pid, (tuple, list)) or len(pid) != 2 or
                not all(_is_key_int(v) for v in pid)):
            continue
        if tuple(pid) == (0, 0) or not (_is_key_int(dev) and _is_key_int(addr) and
                                        _is_int(size)):
            continue
        out.setdefault(dev, []).append((addr, size, bool(seg.get("is_expandable")), tuple(pid)))
    return out


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
                            0 <= size < U64_LIMIT and 0 <= stream < U64_LIMIT and
                        I64_MIN <= addr < U64_LIMIT)
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
                pid = (e.get("pool_id") if e.__class__ is dict else
                       e[8][e[7].index("pool_id")] if "pool_id" in e[7] else None)
                if pid is not None:
                    self.note_pool(pid, i)
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

    def note_pool(self, pid, i):
        """An alloc entry's pool_id (2.12+; 2.11's entries have none): the private pool the
        request went to, as a pair, (0, 0) for the ordinary pools. Entries carry no more than
        that; the trace's pools are still inferred (inference.py), and this checks them."""
        if (not isinstance(pid, (tuple, list)) or len(pid) != 2 or
                not all(_is_int(v) for v in pid)):
            raise ConvertError(f"device {self.dev} event {i} (alloc): 'pool_id' is not a pair "
                               f"of integers")
        pid = tuple(pid)
        if pid != (0, 0):
            self.rec.pool_ids[pid] = self.rec.pool_ids.get(pid, 0) + 1

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
        if not _is_key_int(addr):
            # (an address is a key of the trace's tables: integers past 64 bits can be made to
            # share one hash, and 40,000 of them took a dict minutes)
            raise ConvertError(f"{where} ({action}): {addr_key!r} is an integer of "
                               f"{addr.bit_length()} bits; a device address has 64")
        stream = stream_u64(fields["stream"], where)

        this_free_index = None
        if action == "alloc":
            frames = e.get("frames")
            frame = (frames.top if isinstance(frames, _Frames) else
                     top_user_frame(frames) if isinstance(frames, list) else None)
            out.add(_A_ALLOC, dev, stream, addr, size, t, 0, i, frame)
            if e.get("pool_id") is not None:
                self.note_pool(e["pool_id"], i)
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
