"""gsbin.py - gpusim's binary trace format, written from a text trace (standard library only).

The binary format (docs/trace-format.md, "The binary format") is a trace as gpusim holds it in
memory: ids resolved to dense slots, clients and streams to indices in order of first
appearance, the deferred flag of each free derived, and every event a 32-byte little-endian
record laid out as gpusim's gs_event. gpusim loads it with a read and one checking pass, where
the text needs parsing. This module writes it from the text that traces/convert.py renders, so
that the converter writes either form (it chooses this one for an output named NAME.gsbin):

    import gsbin
    binary = gsbin.encode_text(text_bytes)

The result is byte for byte what `gpusim convert TRACE -o NAME.gsbin` writes from the same
text (tests/test_convert.py checks it). The converter hands its rows to `gpusim write-rows`
(traces/rows.c), which writes the same bytes in a fraction of the time; where that program is
not there or declines, it calls encode_rows, which gives them from the rows it would render,
without the text. The text must be a valid trace: a problem raises
ValueError with the line (gpusim's reader is the one that explains bad input; this module
only refuses it).
"""

import array
import struct
import sys

MAGIC = b"\x89GSBIN\r\n"
VERSION = 1
HEADER = struct.Struct("<8sIIQQIIIIQQ")  # 64 bytes
RECORD = struct.Struct("<QQIIHBBI")  # 32 bytes: gs_event
COLUMNS = b"seq,time_us,op,client,device,stream,id,size"
OPS = {b"alloc": 0, b"free": 1, b"free_done": 2, b"empty_cache": 3, b"mark": 4, b"oom": 5}
NO_SLOT = 0xFFFFFFFF
DEFERRED = 1

assert HEADER.size == 64 and RECORD.size == 32


def _u64(field, lineno, what):
    if not field.isdigit():
        raise ValueError(f"line {lineno}: bad number in column '{what}'")
    v = int(field)
    if v >= 1 << 64:
        raise ValueError(f"line {lineno}: bad number in column '{what}'")
    return v


def _meta_entry(line, lineno, meta):
    """A header line (its line break taken off) that is a "# key: value" entry goes to meta as
    [key, value]; the device total it says, or None."""
    if line.startswith(b"# ") and b": " in line[2:]:
        key, value = line[2:].split(b": ", 1)
        if key and all(c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       b"0123456789_.-" for c in key):
            meta.append([key, value])
            if key == b"device_total_bytes":
                return _u64(value, lineno, "device_total_bytes")
    return None


def _meta(lines, first):
    """The header's "# key: value" entries of lines (from line number first), as [key, value]
    in file order, and the device total the last device_total_bytes entry says (or None)."""
    meta, device_total = [], None
    for lineno, raw in enumerate(lines, start=first):
        total = _meta_entry(raw[:-1] if raw.endswith(b"\r") else raw, lineno, meta)
        device_total = device_total if total is None else total
    return meta, device_total


def _assemble(meta, device_total, clients, streams, slot_ids, records, nevents):
    """The file as two pieces: its header, streams, slot ids (each slot's id) and strings, then
    the records (as given, bytes)."""
    if len(clients) > 65536 or len(streams) > 65536:
        raise ValueError("too many clients or streams")
    # The header entries as gpusim writes them: device_total_bytes holds the number the last
    # such entry says, in each entry's place.
    strings = bytearray()
    for c in clients:
        strings += struct.pack("<I", len(c)) + c
    for key, value in meta:
        if key == b"device_total_bytes":
            value = str(device_total).encode()
        strings += struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value
    n_strings = len(strings)
    strings += b"\0" * (-n_strings % 8)
    out = bytearray(HEADER.pack(MAGIC, VERSION, HEADER.size, nevents, len(slot_ids),
                                len(clients), len(streams), len(meta), RECORD.size, n_strings, 0))
    out += struct.pack(f"<{len(streams)}Q", *streams)
    out += array.array("Q", slot_ids).tobytes() if sys.byteorder == "little" else \
        struct.pack(f"<{len(slot_ids)}Q", *slot_ids)
    out += strings
    return [out, records]


# the converter's op codes (traces/gsconvert/model.py, _OPS: alloc, free, free_done, oom,
# empty_cache, mark) as this format's
_FROM_CONVERTER = bytes([0, 1, 2, 5, 3, 4]) + bytes(250)


def encode_rows(head, rows, client):
    """The binary form of the trace that the converter would render as head (its header lines,
    the column line last, as bytes) and then rows (a gsconvert TraceRows whose allocations are
    numbered 1, 2, ... in the order they come, as build_trace numbers them), every row of
    client (bytes): the bytes encode_text gives of that text, in two pieces to write one after
    the other, without making the text (a million rows took 3 s and 400 MiB that way). None
    when the rows are not numbered so (the caller then renders the text)."""
    lines = head.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    if not lines or lines[-1].rstrip(b"\r") != COLUMNS:
        return None
    meta, device_total = _meta(lines[1:-1], 2)
    pre = rows.prefix
    if any(r[1] != "alloc" for r in pre):
        return None
    n = len(pre) + len(rows.op)
    ops = bytes(len(pre)) + rows.op.tobytes().translate(_FROM_CONVERTER)
    ids = array.array("q", [r[4] for r in pre]) + rows.id
    nalloc = ops.count(0)
    # (compared a batch at a time: a list of a million ints is 36 MiB)
    k = 0
    done = bytearray(nalloc + 2)        # done[id]: a free_done of id follows
    for a in range(0, n, _BATCH):
        b = min(n, a + _BATCH)
        got = [i for i, o in zip(ids[a:b], ops[a:b]) if o == 0]
        if got != list(range(k + 1, k + 1 + len(got))):
            return None
        k += len(got)
        for i, o in zip(ids[a:b], ops[a:b]):
            if o == 2 and 0 < i <= nalloc:
                done[i] = 1
    # the synthesized allocations (a tuple each), then the rows' columns, a batch at a time
    p = len(pre)
    parts = [tuple(array.array("Q", [r[c] for r in pre]) for c in (0, 5, 2, 3))]
    parts += [(rows.t[a:a + _BATCH], rows.size[a:a + _BATCH], rows.dev[a:a + _BATCH],
               rows.stream[a:a + _BATCH]) for a in range(0, n - p, _BATCH)]
    if max((max(d) for _, _, d, _ in parts if d), default=0) > 0xFFFFFFFF:
        raise ValueError("bad number in column 'device'")
    streams = list(dict.fromkeys(s for part in parts for s in dict.fromkeys(part[3])))
    index = {s: k for k, s in enumerate(streams)}
    if sys.byteorder == "little":
        records = _records_by_column(pre, rows, ops, ids, done, index, n)
        return _assemble(meta, device_total, [client], streams, range(1, nalloc + 1), records, n)
    records = bytearray()
    a = 0
    for times, sizes, devs, stream_col in parts:
        b = a + len(times)
        bops, bids = ops[a:b], ids[a:b]
        slots = [i - 1 if o <= 2 else NO_SLOT for i, o in zip(bids, bops)]
        flags = [DEFERRED if o == 1 and done[i] else 0 for i, o in zip(bids, bops)]
        sidx = [index[s] for s in stream_col]
        records += b"".join(map(RECORD.pack, times, sizes, slots, sidx, bytes(b - a), bops,
                                flags, devs))
        a = b
    return _assemble(meta, device_total, [client], streams, range(1, nalloc + 1), records, n)


_BATCH = 1 << 16


def _records_by_column(pre, rows, ops, ids, done, index, n):
    """The records of encode_rows, each field written for every event at once (a strided
    memoryview assignment per field, in C) where packing event by event cost about half a
    microsecond each; little-endian machines only, as the records are."""
    times, sizes, devs, stream_col = (array.array("Q", [r[c] for r in pre]) + col
                                      for c, col in ((0, rows.t), (5, rows.size), (2, rows.dev),
                                                     (3, rows.stream)))
    records = bytearray(RECORD.size * n)
    per = RECORD.size // 8
    q, i32, b = (memoryview(records).cast(f) for f in ("Q", "I", "B"))
    q[0::per] = times
    q[1::per] = sizes
    i32[4::2 * per] = array.array("I", [i - 1 if o <= 2 else NO_SLOT for i, o in zip(ids, ops)])
    i32[5::2 * per] = array.array("I", [index[s] for s in stream_col])
    b[26::RECORD.size] = ops
    b[27::RECORD.size] = bytes([DEFERRED if o == 1 and done[i] else 0
                                for i, o in zip(ids, ops)])
    i32[7::2 * per] = array.array("I", devs)
    return records


def encode_text(data):
    """The binary form of a text trace (bytes, not compressed)."""
    lines = data.split(b"\n")
    if not data.endswith(b"\n"):
        raise ValueError("truncated line (no newline at end of file)")
    lines.pop()
    if not lines or lines[0].rstrip(b"\r") not in (b"# gpusim-trace 1", b"# gpusim-trace 2"):
        raise ValueError("line 1: not a gpusim trace")
    meta = []  # [key, value] in file order
    device_total = None
    clients, client_ix = [], {}
    streams, stream_ix = [], {}
    slot_ids = []
    events = []  # [time, size, slot, stream, client, op, flags, device]
    live = {}  # id -> (slot, event index of its free or None)
    slot_size = []
    in_header = True
    seq = 0
    for lineno, raw in enumerate(lines[1:], start=2):
        line = raw[:-1] if raw.endswith(b"\r") else raw
        if not line:
            continue
        if line.startswith(b"#"):
            if in_header:
                total = _meta_entry(line, lineno, meta)
                device_total = device_total if total is None else total
            continue
        if in_header:
            if line != COLUMNS:
                raise ValueError(f"line {lineno}: expected the column line")
            in_header = False
            continue
        f = line.split(b",")
        if len(f) != 8:
            raise ValueError(f"line {lineno}: expected 8 columns, got {len(f)}")
        if _u64(f[0], lineno, "seq") != seq:
            raise ValueError(f"line {lineno}: expected seq {seq}")
        seq += 1
        time_us = _u64(f[1], lineno, "time_us")
        op = OPS.get(f[2])
        if op is None:
            raise ValueError(f"line {lineno}: unknown op")
        device = _u64(f[4], lineno, "device")
        stream = _u64(f[5], lineno, "stream")
        ident = _u64(f[6], lineno, "id")
        size = _u64(f[7], lineno, "size")
        if device > 0xFFFFFFFF:
            raise ValueError(f"line {lineno}: bad number in column 'device'")
        slot, flags = NO_SLOT, 0
        if op == 0:  # alloc
            prev = live.get(ident)
            if prev is not None and prev[1] is None:
                raise ValueError(f"line {lineno}: alloc of live id {ident}")
            slot = len(slot_ids)
            slot_ids.append(ident)
            slot_size.append(size)
            live[ident] = (slot, None)
        elif op in (1, 2):  # free, free_done
            prev = live.get(ident)
            if op == 1 and (prev is None or prev[1] is not None):
                raise ValueError(f"line {lineno}: free of id {ident} that is not live")
            if op == 2 and (prev is None or prev[1] is None):
                raise ValueError(f"line {lineno}: free_done of id {ident} without a pending free")
            slot = prev[0]
            if size not in (0, slot_size[slot]):
                raise ValueError(f"line {lineno}: size differs from the allocation's")
            size = slot_size[slot]
            if op == 1:
                live[ident] = (slot, len(events))
            else:
                events[prev[1]][6] |= DEFERRED
                del live[ident]
        if f[3] not in client_ix:
            client_ix[f[3]] = len(clients)
            clients.append(f[3])
        if stream not in stream_ix:
            stream_ix[stream] = len(streams)
            streams.append(stream)
        events.append([time_us, size, slot, stream_ix[stream], client_ix[f[3]], op, flags,
                       device])
    if in_header:
        raise ValueError("missing column line")
    records = b"".join(RECORD.pack(*e) for e in events)
    return b"".join(_assemble(meta, device_total, clients, streams, slot_ids, records,
                              len(events)))
