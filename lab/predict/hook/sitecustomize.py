"""sitecustomize.py - lab/predict's recording hook: a real run's allocator history, unmodified.

lab/device_predict.sh puts this folder on PYTHONPATH (before torch/verify's hook, which this one
chains to for the outcome, the cap and memory_stats). With LAB_SNAPSHOT=FILE.pickle.gz it starts
PyTorch's allocator history before the program's first line, as a user records with
torch.cuda.memory._record_memory_history, and dumps the snapshot at exit, whatever the outcome.
"""
import atexit
import gzip
import importlib.util
import os
import pickle
import sys

_SNAP = os.environ.pop("LAB_SNAPSHOT", None)


def _dump():
    import torch
    snap = torch.cuda.memory._snapshot()
    with gzip.open(_SNAP, "wb", compresslevel=6) as f:
        pickle.dump(snap, f)


if _SNAP:
    import torch

    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=5_000_000)
    atexit.register(_dump)

here = os.path.dirname(os.path.abspath(__file__))
for entry in [p for p in sys.path if os.path.abspath(p or ".") != here]:
    candidate = os.path.join(entry or ".", "sitecustomize.py")
    if os.path.isfile(candidate):
        spec = importlib.util.spec_from_file_location("_next_sitecustomize", candidate)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        break
