"""The sibling JSON beside a snapshot (NAME.json: its device, cap, outcome and statistics) and
the reference answer (--reference: what the recorded allocator did)."""

import collections
import json
import math
import os
import re

from .model import (MAX_DEVICE_BYTES, REFERENCE_FORMAT, ConvertError, _is_int, _is_num,
                    device_total_ok)
from .snapshot import check_settings_size
from .inference import GROWTHS, RELEASES


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
    # gpusim verify's report (torch/verify): its statistics per device are the run's, and its
    # limit_bytes the limit PyTorch enforced ((size_t)(fraction * total), the same fraction's on
    # every device; null: no cap), which is the run's cap (it was read nowhere: whatif judged
    # a capped run's own snapshot with no cap, and refused one that died for want of its cap)
    if doc.get("format") == "gpusim-verify 1":
        if isinstance(doc.get("devices"), dict):
            doc.setdefault("memory_stats_by_device", doc["devices"])
        if "limit_bytes" in doc and "cap_gib" not in doc:
            lim = doc["limit_bytes"]
            if not (lim is None or device_total_ok(lim)):
                raise ConvertError(f"sibling {path}: limit_bytes {lim!r} is out of range (a whole "
                                   f"number of bytes from 1 to 2^44, or null)")
            # in GiB, exactly: a power of two's quotient and product give the bytes back
            doc["cap_gib"] = None if lim is None else lim / 2**30
            devs = doc.get("devices")
            if lim is not None and isinstance(devs, dict) and len(devs) > 1:
                doc.setdefault("cap_gib_by_device", {str(d): lim / 2**30 for d in devs})
    return doc


def pytorch_version_of(sibling, path):
    """The run's torch.__version__ from its NAME.json ("torch", as lab/record_pytorch.py writes
    it), or None when it does not say."""
    v = sibling.get("torch")
    if v is not None and not (isinstance(v, str) and v and len(v) <= 64):
        raise ConvertError(f"sibling {path}: torch {v!r} is not a PyTorch version (a string "
                           f"such as \"2.13.0+cu130\")")
    return v


def truncated_cap_bytes(cap_gib, total, version=None):
    """The limit PyTorch enforced: (size_t)(fraction * total), fraction = cap * 2**30 / total.

    Evaluated in Python floats (IEEE doubles) exactly as the recording script and PyTorch did;
    for some caps it is one byte less than cap * 2**30, which decides whether a last 2 MiB
    segment fits (docs/fidelity.md section 1.1). From 2.13 PyTorch rounds the product instead
    (half away from zero, as the policy's gs_pytorch_limit does): version is the run's
    torch.__version__, None when unknown (2.11's rule).
    """
    b = cap_gib * 2**30 / total * total
    return math.floor(b + 0.5) if _minor(version) >= 13 else int(b)


def _minor(version):
    """2.x's minor number of a torch.__version__ ("2.13.0+cu130": 13), else 0."""
    m = re.match(r"2\.(\d+)(?!\d)", version) if isinstance(version, str) else None
    return int(m.group(1)) if m else 0


def cap_bytes_of(cap_gib, total, version=None):
    """A NAME.json's cap in bytes: as PyTorch computed it when the device's total is known
    (truncated_cap_bytes), else cap_gib GiB as given (a hand-written {"cap_gib": 14} beside a
    snapshot: the truncation can take a byte off, no more); None when cap_gib is no number."""
    if not _is_num(cap_gib):
        return None
    if _is_int(total) and total > 0:
        return truncated_cap_bytes(cap_gib, total, version)
    return int(cap_gib * 2**30)


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
    cap_bytes = cap_bytes_of(cap_gib, total_bytes, rec.pytorch_version)
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
        "pytorch_version": rec.pytorch_version,
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
                "cap_bytes": cap_bytes_of(cap, total, rec.pytorch_version),
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
