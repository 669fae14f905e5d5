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
text (tests/test_convert.py checks it). The text must be a valid trace: a problem raises
ValueError with the line (gpusim's reader is the one that explains bad input; this module
only refuses it).
"""

import struct

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
            if in_header and line.startswith(b"# ") and b": " in line[2:]:
                key, value = line[2:].split(b": ", 1)
                if key and all(c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               b"0123456789_.-" for c in key):
                    if key == b"device_total_bytes":
                        device_total = _u64(value, lineno, "device_total_bytes")
                    meta.append([key, value])
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
    if len(clients) > 65536 or len(streams) > 65536:
        raise ValueError("too many clients or streams")

    # The header entries as gpusim writes them: device_total_bytes holds the number the last
    # such entry says, in each entry's place.
    strings = bytearray()
    for s in clients:
        strings += struct.pack("<I", len(s)) + s
    for key, value in meta:
        if key == b"device_total_bytes":
            value = str(device_total).encode()
        strings += struct.pack("<I", len(key)) + key + struct.pack("<I", len(value)) + value
    n_strings = len(strings)
    strings += b"\0" * (-n_strings % 8)

    out = bytearray(HEADER.pack(MAGIC, VERSION, HEADER.size, len(events), len(slot_ids),
                                len(clients), len(streams), len(meta), RECORD.size, n_strings, 0))
    out += struct.pack(f"<{len(streams)}Q", *streams)
    out += struct.pack(f"<{len(slot_ids)}Q", *slot_ids)
    out += strings
    base = len(out)
    out += bytes(RECORD.size * len(events))
    pack = RECORD.pack_into
    for i, e in enumerate(events):
        pack(out, base + RECORD.size * i, *e)
    return bytes(out)
