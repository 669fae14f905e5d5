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

Private pools inferred (CUDA graphs, torch.cuda.MemPool; trace version 3). 2.11's trace
entries name no pool: an allocation is a private pool's when it lies in a segment the final
'segments' list gives a segment_pool_id other than (0, 0), or in one freed by a pool's own
release: a run of segment_free/segment_unmap that leaves memory an empty_cache() would have
freed (MemPool's destruction), which then gets pool_release rows instead of an empty_cache.
pool_begin and pool_end rows go around each pool's allocations, on their stream. A pool whose
segments all went in a full empty_cache() before the snapshot is not seen: take the snapshot
while graphs and pools live (the README, "CUDA graphs and private pools"). Newer releases'
entries name their pool (pool_id, a pair; (0, 0) the ordinary pools): read, checked, and a
warning when they name pools that were not inferred (whose requests then replay in the
ordinary pools). Their forward_frames are read past, as any field the trace does not need.

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
  format ("gpusim-reference 1"), source, allocator_conf, allocator_settings, pytorch_version,
  device_total_bytes, cap_gib, cap_bytes, outcome (and outcome_event, the seq of the oom row the
  run died at), memory_stats, derived {...}, device_events [[action, addr, size, seq], ...]
  where seq is the number of trace events that precede the allocator event (so it happened just
  before trace event number seq; with several devices a fifth field says which). For 'oom',
  addr holds the event's device_free (what cudaMemGetInfo reported free).

Sibling JSON: for INPUT named NAME.EXT or NAME.EXT.gz (NAME.pickle.gz, NAME.pkl, ...), a
NAME.json beside it (the layout
of shared/traces/pytorch-2.11-h100/) supplies total_bytes, cap_gib, outcome, memory_stats and
torch, the run's torch.__version__ (the header's "# pytorch_version: 2.13.0+cu130", the release
gpusim's plain pytorch policy emulates for the trace; and the reference's pytorch_version).
cap_bytes is the limit PyTorch really enforced: set_per_process_memory_fraction() truncates
fraction * total to an integer, and the runs set fraction = cap_gib * 2**30 / total, so
cap_bytes = int(cap_gib * 2**30 / total * total) in doubles (6.25 GiB gives 6710886399, one byte
less than 6.25 * 2**30); from 2.13 (torch says it) PyTorch rounds the product to the nearest
byte instead. total is the sibling's total_bytes (the device the run had), even when
--device-total overrides the device_total_bytes written out.

Errors (unreadable input, not a snapshot, a malformed event, an inconsistent trace) are reported
as one line "convert.py: FILE: message" on stderr, with exit status 2. Warnings go to stderr
and do not change the exit status.

Standard library only (Python 3.10+).
"""

import os
import sys

# The converter is the package gsconvert beside this script (traces/gsconvert/: a module per
# job, its __init__.py lists them); once installed, this script is BINDIR/gpusim-convert and the
# package is in DATADIR/gpusim, found as ../share/gpusim from here (as gsbin.py is).
_HERE = os.path.dirname(os.path.realpath(__file__))
_INSTALLED = os.path.join(_HERE, "..", "share", "gpusim")
if (not os.path.isdir(os.path.join(_HERE, "gsconvert"))
        and os.path.isdir(os.path.join(_INSTALLED, "gsconvert"))):
    # (no __pycache__ written into the installed tree: it stays what meson installed)
    sys.dont_write_bytecode = True
    _HERE = _INSTALLED
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
from gsconvert import (model, limits, walker, snapshot, inputs, inference,  # noqa: E402
                       build, reference, output, cli)
from gsconvert.cli import main  # noqa: E402

# This module's names are the package's, all of them: the tests, the fuzz loops and the
# benchmarks load this file by path and use the names it had when the converter was this one
# file (convert.read_snapshot, convert.SnapshotWalker, convert.ConvertError, ...). A stand-in
# is set on the module that uses the name (convert.cli.build_trace, convert.walker._ENTRY).
# (tests/fuzz/fuzz_convert.py looks for "--quiet" in this file to know that the converter has
# that option: it has, in gsconvert.cli.)
for _m in (model, limits, walker, snapshot, inputs, inference, build, reference, output, cli):
    globals().update((k, v) for k, v in vars(_m).items() if not k.startswith("__"))

if __name__ == "__main__":
    sys.exit(main())
