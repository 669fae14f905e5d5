"""sitecustomize.py - lab/predict's recording hook: a real run's allocator history, unmodified.

lab/device_predict.sh puts this folder on PYTHONPATH (before torch/verify's hook, which this one
chains to for the outcome, the cap and memory_stats). With LAB_SNAPSHOT=FILE.pickle.gz it starts
PyTorch's allocator history before the program's first line, as a user records with
torch.cuda.memory._record_memory_history, and dumps the snapshot at exit, whatever the outcome.
"""
import atexit
import gzip
import os
import pickle
import runpy

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

# then the next sitecustomize on the path (torch/verify's), as gpusim's own hooks chain
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "torch",
                            "hookchain.py"), {"HOOK": __file__}, "__gpusim_chain__")
