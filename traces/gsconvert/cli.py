"""The command line: the arguments (parse_args, whose --help is the converter's), the
conversion from input to outputs (convert), and main, which makes every failure one line."""

import argparse
import contextlib
import functools
import gc
import io
import json
import math
import os
import re
import sys

from .limits import ENV as MEMORY_ENV, MemoryBudget, default_budget, parse_bytes
from .model import (_O_EMPTY, EXIT_ERROR, PROG, ConvertError, _is_int, _is_num, device_total_ok,
                    header_text, warn)
from .snapshot import read_snapshot
from .fastread import gpusim_program, read_snapshot_fast
from .inputs import READERS, Input, Progress, detect_format
from .inference import infer_all_pools, infer_empty_cache, merge_devices
from .build import build_trace, full_device_limit, limit_at_death, trim_after_death
from .reference import (_by_device, build_reference, cap_bytes_of, pytorch_version_of,
                        read_sibling, sibling_json_path, trace_devices)
from .output import render_trace, write_bounded, write_chunks, write_rows, write_whole


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
else the highest reserved the run reached; ruled out when the .json's memory_stats say
num_alloc_retries 0 and no max_split_size was set); or garbage collection
(garbage_collection_threshold T > 0 and reserved > T x L).

failed requests, cut logs and several devices: the module's documentation
(python3 -c "import sys; sys.path.insert(0, 'traces'); import convert; help(convert)") and the
README's "Getting a trace".

memory: a conversion that would hold more than --max-memory (default: $GPUSIM_CONVERT_MAX_MEMORY,
else 2 GiB or 32 times the input's size, the larger) stops there with an error; a snapshot as
PyTorch writes it needs about 3 times its file's size (169 MiB at a million entries).

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


def memory_arg(text):
    try:
        return parse_bytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (BYTES, a number with K, M, G "
                                         f"or T, or 'none')") from None


def memory_limit(args, input_size):
    """The memory budget in bytes (None: none): --max-memory, else $GPUSIM_CONVERT_MAX_MEMORY,
    else limits.default_budget."""
    if args.max_memory is not None:
        return None if args.max_memory == NO_CAP else args.max_memory
    env = os.environ.get(MEMORY_ENV, "").strip()
    if env:
        try:
            return parse_bytes(env)
        except ValueError:
            raise ConvertError(f"${MEMORY_ENV}: not a size: {env!r} (BYTES, a number with K, "
                               f"M, G or T, or 'none')") from None
    return default_budget(input_size)


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
                    "(text format 1; 2 when the log has requests that failed: 'oom' rows; 3 "
                    "when it has private memory pools, a CUDA graph's or a MemPool's: "
                    "pool_begin, pool_end and pool_release rows, which the binary format does "
                    "not carry; docs/trace-format.md), "
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
    p.add_argument("--max-memory", metavar="BYTES|none",
                   type=lambda t: NO_CAP if t.strip().lower() == NO_CAP else memory_arg(t),
                   help="stop with an error when the conversion would hold more memory than "
                        "this (a number of bytes, or with K, M, G or T: 8G); default: "
                        f"${MEMORY_ENV}, else 2 GiB or 32 times the input's size, the larger")
    p.add_argument("--progress", action="store_true",
                   help="show a progress line on stderr (entries read, share of the input, "
                        "rate), even when stderr is not a terminal (then a plain line every 5 "
                        "seconds, for a log); on a terminal it is shown unless --quiet")
    p.add_argument("--no-bound", action="store_true",
                   help="do not store the offline bound in the output's header (by default "
                        "gpusim convert, when a gpusim is found beside the converter or in the "
                        "source tree's build/, writes the output with it, so that every replay "
                        "reads the figure instead of planning it again)")
    p.add_argument("--binary-or-text", action="store_true",
                   help="with -o NAME.gsbin: the binary format where it carries the trace, "
                        "else (private pools' events) text to NAME.gstrace beside it; frames "
                        "are left out without a warning (gpusim whatif's conversion: the trace "
                        "is read once)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress line, even on a terminal")
    args = p.parse_args(argv)
    if args.binary_or_text and not args.output.endswith(".gsbin"):
        p.error(f"--binary-or-text needs -o NAME.gsbin (got {args.output})")
    return args


def release_limit(args, sibling, dev, version=None):
    """The memory a device's allocator could reserve in the recorded run, for the empty_cache
    rule: --cap, else the sibling's cap (its device's, with several; computed as the run's
    PyTorch, version, did), else the device's memory when the sibling says the run had no cap;
    None when unknown."""
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
    if _is_num(cap):
        return cap_bytes_of(cap, total, version)
    if "cap_gib" in sibling and sibling["cap_gib"] is None and _is_int(total):
        return total
    return None


def infer_all_empty_cache(rec, args, sibling, label):
    if rec.per_device is None:
        return
    # a gpusim export of a policy not PyTorch's: the releases are that policy's own (stitch
    # moves a free handle by an unmap and a map), none an empty_cache() PyTorch would infer
    policy = (rec.gpusim_export or {}).get("policy")
    if isinstance(policy, str) and not policy.startswith("pytorch"):
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
        # no counted retry and no oversize blocks: the allocator never released under pressure
        retries = stats.get("num_alloc_retries") if isinstance(stats, dict) else None
        max_split = settings.get("max_split_size")
        no_oversize = _is_int(max_split) and (max_split < 0 or max_split >= 2**62)
        flushed = not (retries == 0 and no_oversize)
        limit = release_limit(args, sibling, dev, rec.pytorch_version)
        full = full_device_limit(rec, dev, events) if args.cap is None else None
        if full is not None and (limit is None or full < limit):
            limit = full
        rec.per_device[dev], n = infer_empty_cache(
            events, limit,
            peak if _is_int(peak) else None, gc, expandable, flushed, no_oversize)
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


def finite(v):
    """v with every float that is not finite (NaN, +-Infinity) made None, through lists and
    dicts, and every dict key a string: JSON's keys are (json.dumps would write a number, None
    or a bool as one, but sort_keys cannot order a None among numbers, and a tuple it refuses:
    both were an internal error)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k if isinstance(k, str) else _json_key(k): finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v


def _json_key(k):
    """A key as json.dumps writes it (true, null, 1.5, 7), or str() for what it refuses."""
    return (json.dumps(k) if k is None or isinstance(k, (bool, int)) or
            isinstance(k, float) and math.isfinite(k) else str(k))


def convert(args, progress_stream=None, progress_enabled=False):
    refuse_overwrite(args)
    if args.output.endswith(".gsbin.gz"):  # as gpusim convert refuses it (traces/write.c)
        raise ConvertError(f"{args.output}: the binary format is read where it lies, never "
                           f"compressed: write NAME.gsbin, or NAME.gstrace.gz for compressed text")
    label = header_text(args.input)     # (in warnings: a line break in a name must not split one)
    inp = Input(args.input)
    progress = Progress(progress_stream, header_text(args.input), inp, progress_enabled)
    try:
        budget = MemoryBudget(memory_limit(args, inp.size))
        kind = detect_format(inp.head)
        if kind == "pytorch-snapshot":
            rec = (read_snapshot_fast(args.input, inp, budget, progress) or
                   read_snapshot(inp, progress, budget))
        else:
            rec = READERS[kind](inp.read_all(budget))
    finally:
        inp.close()
        progress.done()

    sibling = None
    sib_path = sibling_json_path(args.input) if kind == "pytorch-snapshot" else None
    if sib_path:
        sibling = read_sibling(sib_path)
        rec.pytorch_version = pytorch_version_of(sibling, sib_path)
    device_total = args.device_total
    if device_total is None and sibling and _is_int(sibling.get("total_bytes")):
        device_total = sibling["total_bytes"]
    # gpusim's own export says the simulated device's memory (a real snapshot says none)
    export = rec.gpusim_export or {}
    if device_total is None and _is_int(export.get("device_total_bytes")):
        device_total = export["device_total_bytes"]
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
        # (a snapshot dumped before the death): the header says so, and a replay's "ok" is
        # then "gets through the recording", each minimum a lower bound
        tr.died_after_log = True
        warn(label, "the .json says the run died of an OOM, but the log does not end with one: "
                    "the trace stops before the death (header died_after_log)")
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
    if binary and tr.num_pool_rows and args.binary_or_text:
        binary = False
        args.output = args.output[:-len(".gsbin")] + ".gstrace"
        refuse_overwrite(args)
    if binary and tr.num_pool_rows:
        # as gpusim convert refuses it (traces/binary.c): binary version 1 has no pool events
        raise ConvertError(f"{tr.num_pool_rows} private pool event(s) (trace version 3) are not "
                           f"carried by the binary format: write text (-o NAME.gstrace.gz)")
    framed = tr.rows.num_framed()
    if binary and framed and not args.binary_or_text:
        warn(source, f"the binary format does not carry frames: the top user frames of "
                     f"{framed} allocation(s) are left out (write text to keep them)")
    trace_chunks = render_trace(rec, tr, source, device_total, args.client, totals,
                                frames=not binary)
    ref = None
    if args.reference:
        ref = build_reference(rec, tr, source, sibling, device_total)

    written = False
    if binary:
        # the rows' columns to gpusim write-rows, which writes the file (and its bound); else
        # encoded here from the rows themselves (encode_rows), the same bytes; the text
        # rendered and parsed back only where they are not numbered as build_trace numbers them
        head = next(trace_chunks)
        client = args.client.encode("utf-8")
        written = write_rows(gpusim_program(), args.output, head, tr.rows, client,
                             not args.no_bound)
        if not written:
            gsbin = load_gsbin()
            pieces = gsbin.encode_rows(head, tr.rows, client)
            if pieces is None:
                pieces = [gsbin.encode_text(head + b"".join(trace_chunks))]
            trace_chunks = pieces
    if not written:
        bounded = not args.no_bound and write_bounded(args.output, trace_chunks, binary,
                                                       gpusim_program())
        if not bounded:
            write_chunks(args.output, trace_chunks)
        elif bounded is not True:
            warn(header_text(source), f"the offline bound was not stored in "
                                      f"{header_text(args.output)} (gpusim convert: "
                                      f"{one_line(bounded)}); each replay plans it again")
    if ref is not None:
        # a NaN or an infinity (a sibling's memory_stats may hold one: Python's json reads them)
        # is no JSON: written as null, which gpusim reads as "not known"
        text = json.dumps(finite(ref), indent=1, sort_keys=True, default=str,
                          allow_nan=False) + "\n"
        write_whole(args.reference, text.encode("utf-8"))


@functools.lru_cache(maxsize=None)
def load_gsbin():
    """The binary format's writer: gsbin.py, beside this package (traces/gsbin.py;
    DATADIR/gpusim once installed, where the package is too)."""
    import importlib.util
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    spec = importlib.util.spec_from_file_location("gsbin", os.path.join(here, "gsbin.py"))
    gsbin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gsbin)
    return gsbin


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
