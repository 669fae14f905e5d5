#!/usr/bin/env python3
"""async_modes.py - does the driver's cudaMallocAsync pool place requests the same way when the
program synchronises, or while the GPU is busy? lab/driver_pool.py's rule was read from runs
that never synchronised on an idle GPU (lab/async_probe.py); real programs do both.

  python3 lab/async_modes.py device OUTDIR     on the GPU machine (CuPy there): OUTDIR/logs.tgz
  python3 lab/async_modes.py check DIR         here: lab/driver_pool.py's rule on each log of DIR
  python3 lab/async_modes.py model DIR [GPUSIM [SPEC...]]
                                               here: gpusim's cuda-async settings (default:
                                               vmm:0, vmm:1,remap:0 and its default, vmm:1,remap:1)
                                               replaying each log's requests, peak reserved
                                               against the pool's

`device` replays four traces' requests (the cut and LLM generation reference runs, the bundled
ResNet-50 and GPT-2) through the device's default pool, release threshold UINT64_MAX, on the
default stream, in three modes, logging each request as lab/async_probe.py does (i, op, id, size,
ptr from the run's lowest address, ReservedMemCurrent, UsedMemCurrent):
  plain  as async_probe.py: no synchronisation, an idle GPU (cut twice: the same run again);
  sync   cudaStreamSynchronize after every free;
  busy   a kernel that spins for the whole run is queued first, so every free is still pending
         on the stream when later requests come.
Standard library only, except CuPy on the device.
"""
import os
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

PLAN = [("cut", "plain"), ("cut", "plain"), ("cut", "sync"), ("cut", "busy"),
        ("resnet50", "plain"), ("resnet50", "sync"), ("resnet50", "busy"),
        ("gpt2", "plain"), ("gpt2", "sync"), ("gpt2", "busy"),
        ("llmgen", "sync"), ("llmgen", "busy")]


def run(events, deferred, mode, path):
    """One trace through the pool in mode (plain, sync, busy) into the log at path."""
    from async_probe import drive, write_log

    def spin(cupy):  # about 3 s plus 40 us an event at 2 GHz: past the run's end (it was)
        k = cupy.RawKernel(r'''extern "C" __global__ void spin(long long n)
            { long long t = clock64(); while (clock64() - t < n); }''', "spin")
        k((1,), (1,), (cupy.int64(int(2e9 * (3 + len(events) * 40e-6))),))

    rows, base = drive(events, deferred, before=spin if mode == "busy" else None,
                       after_free=(lambda rt: rt.streamSynchronize(0)) if mode == "sync" else None)
    write_log(path, rows, base)


def device(out):
    from device_pools import read_trace
    tmp = tempfile.mkdtemp(prefix="async-modes-")
    traces = {"resnet50": os.path.join(ROOT, "traces", "data", "resnet50.gstrace.gz"),
              "gpt2": os.path.join(ROOT, "traces", "data", "gpt2.gstrace.gz")}
    for name in ("cut", "llmgen"):
        traces[name] = os.path.join(tmp, name + ".gstrace.gz")
        subprocess.run([sys.executable, os.path.join(ROOT, "traces", "convert.py"), "-q",
                        "--no-bound", "-o", traces[name], "--",
                        os.path.join(ROOT, "traces", "references", "pytorch-2.11-h100",
                                     name + "__default__nocap.pickle.gz")], check=True)
    logs = os.path.join(tmp, "logs")
    os.makedirs(logs)
    seen = {}
    for trace, mode in PLAN:
        seen[(trace, mode)] = seen.get((trace, mode), 0) + 1
        name = f"{trace}-{mode}" + ("" if seen[(trace, mode)] == 1 else str(seen[(trace, mode)]))
        events, deferred = read_trace(traces[trace])
        t0 = time.time()
        run(events, deferred, mode, os.path.join(logs, name + ".csv.gz"))
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
    os.makedirs(out, exist_ok=True)
    with tarfile.open(os.path.join(out, "logs.tgz"), "w:gz") as tar:
        tar.add(logs, arcname="logs")
    return 0


def check(folder):
    import driver_pool
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".csv.gz"):
            continue
        rows = driver_pool.load(os.path.join(folder, name))
        mode = driver_pool.mode_of(name)
        n, hits, ops, res_ok, misses = driver_pool.replay(rows, False, mode)
        _, forced, _, _, _ = driver_pool.replay(rows, True, mode)
        print(f"{name[:-7]:<18} {mode:<5} allocs {n:6d}  forced {forced:6d}  free-run {hits:6d}  "
              f"reserved right {res_ok}/{ops}"
              + (f"  first misses (i, size, real, model): {misses}" if misses else ""))
    return 0


def model(folder, gpusim, specs):
    """Each log's requests as a gpusim trace, replayed under specs: peak reserved over the real
    pool's (the log's largest ReservedMemCurrent)."""
    import csv
    import gzip
    import driver_pool
    specs = specs or ["cuda-async:vmm:0", "cuda-async:vmm:1,remap:0", "cuda-async"]
    print("%-18s %-5s %10s  %s" % ("log", "mode", "real MiB", "  ".join(
        "%s MiB (x real)" % s for s in specs)))
    with tempfile.TemporaryDirectory(prefix="async-model-") as tmp:
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".csv.gz"):
                continue
            path = os.path.join(tmp, name[:-7] + ".gstrace")
            peak, live = 0, set()
            with gzip.open(os.path.join(folder, name), "rt") as f, open(path, "w") as out:
                out.write("# gpusim-trace 1\nseq,time_us,op,client,device,stream,id,size\n")
                for r in csv.DictReader(f):
                    peak = max(peak, int(r["reserved"]))
                    if r["op"] == "alloc":
                        live.add(r["id"])
                    elif r["id"] in live:
                        live.discard(r["id"])
                    else:
                        continue
                    out.write("%s,%s,%s,torch,0,0,%s,%s\n" % (
                        r["i"], r["i"], r["op"], r["id"], r["size"] if r["op"] == "alloc" else 0))
            cmd = [gpusim, "replay", path, "-q", "-f", "csv"]
            for s in specs:
                cmd += ["-p", s]
            res = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            got = {r["policy"]: int(r["peak_reserved_bytes"])
                   for r in csv.DictReader(res.splitlines()) if r["peak_reserved_bytes"]}
            print("%-18s %-5s %10.0f  %s" % (
                name[:-7], driver_pool.mode_of(name), peak / 2**20,
                "  ".join("%6.0f (%.3f)" % (got[s] / 2**20, got[s] / peak) for s in specs)))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "model":
        return model(argv[1], argv[2] if len(argv) > 2 else os.path.join(ROOT, "build", "gpusim"),
                     argv[3:])
    if len(argv) == 2 and argv[0] == "device":
        return device(argv[1])
    if len(argv) == 2 and argv[0] == "check":
        return check(argv[1])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
