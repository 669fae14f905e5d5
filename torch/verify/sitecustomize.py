"""sitecustomize.py - gpusim verify's start-up hook, run inside the user's own Python.

`gpusim verify` puts this file's folder first on the child's PYTHONPATH, so Python imports it
before the user's program, which stays unmodified. This is the one place besides the recorders of
lab/ where gpusim's Python imports the user's PyTorch (it is their process; the project's own
scripts use the standard library only).

What it does, only in the first Python process that sees GPUSIM_VERIFY_OUT (it takes the variables
out of the environment, so the program's own children, data-loader workers among them, run
untouched):
- GPUSIM_VERIFY_CAP=BYTES: torch.cuda.set_per_process_memory_fraction(BYTES / total) on every
  visible device before the program's first CUDA allocation; PyTorch then enforces
  (size_t)(fraction * total), which the report gives as limit_bytes. Where that fails (no torch
  in this Python, no device) the report's outcome is "error" with hook_error saying why, and the
  program is not run: a run without its cap would measure nothing that was asked;
- the allocator setting itself comes from PYTORCH_CUDA_ALLOC_CONF, which gpusim sets;
- at exit: GPUSIM_VERIFY_OUT gets one JSON object: the outcome ("oom" when the program died of
  torch.OutOfMemoryError, "error" for another uncaught exception, else "ok"), the allocator's
  memory_stats() of each device (peak reserved, retries, OOMs, device calls), the wall time from
  start-up, and the versions.

A sitecustomize.py of the user's own, if any, is still run: after its work this one imports the
next one on sys.path.
"""
import atexit
import json
import math
import os
import runpy
import sys
import time

_START = time.monotonic()
_OUT = os.environ.pop("GPUSIM_VERIFY_OUT", None)
_CAP = os.environ.pop("GPUSIM_VERIFY_CAP", None)
_state = {"died_of": None}


def _excepthook(kind, value, tb):
    _state["died_of"] = kind.__name__
    _previous_hook(kind, value, tb)


def _stats(torch):
    devices = {}
    for d in range(torch.cuda.device_count()):
        s = torch.cuda.memory_stats(d)
        devices[str(d)] = {k: s.get(k) for k in (
            "reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_alloc_retries",
            "num_ooms", "num_device_alloc", "num_device_free", "segment.all.peak")}
    return devices


def _write():
    torch = sys.modules.get("torch")
    doc = {"format": "gpusim-verify 1", "wall_s": time.monotonic() - _START,
           "died_of": _state["died_of"],
           "python": sys.version.split()[0],
           "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}
    died = _state["died_of"]
    doc["outcome"] = ("oom" if died in ("OutOfMemoryError",) else "error" if died else "ok")
    if _state.get("hook_error"):
        doc["outcome"] = "error"
        doc["hook_error"] = _state["hook_error"]
    if torch is not None:
        doc["torch"] = getattr(torch, "__version__", None)
        try:
            if torch.cuda.is_initialized():
                doc["devices"] = _stats(torch)
        except Exception as e:  # noqa: BLE001 - the report says what it could not read
            doc["stats_error"] = f"{type(e).__name__}: {e}"
    doc["limit_bytes"] = _state.get("limit_bytes")
    tmp = _OUT + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    os.replace(tmp, _OUT)


def _set_cap(cap):
    import torch  # the user's own

    limits = []
    for d in range(torch.cuda.device_count()):
        total = torch.cuda.get_device_properties(d).total_memory
        # PyTorch enforces (size_t)(fraction * total): the least fraction that gives the cap
        # itself (cap / total alone can give a byte less, and a last 2 MiB page may hang on it)
        frac = min(1.0, cap / total)
        while frac < 1.0 and int(frac * total) < cap:
            frac = math.nextafter(frac, 2.0)
        torch.cuda.set_per_process_memory_fraction(frac, d)
        limits.append(int(frac * total))
    if not limits:
        raise RuntimeError("torch.cuda sees no device")
    _state["limit_bytes"] = min(limits)


if _OUT:
    _previous_hook = sys.excepthook
    sys.excepthook = _excepthook
    atexit.register(_write)
    if _CAP:
        try:
            _set_cap(int(_CAP))
        except Exception as e:  # noqa: BLE001 - any failure leaves the run without its cap
            # A run without the cap measures nothing verify asked for (it printed "ok" for a
            # program whose hook could not import torch): the report says why, and the program
            # is not run for nothing (os._exit: no cleanup of a program that has not started).
            _state["hook_error"] = f"cannot set the cap: {type(e).__name__}: {e}"
            print(f"gpusim verify: {_state['hook_error']}", file=sys.stderr)
            _write()
            os._exit(2)

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hookchain.py"),
               {"HOOK": __file__}, "__gpusim_chain__")  # the user's own sitecustomize, after this one
