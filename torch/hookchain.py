"""hookchain.py - what gpusim's start-up hooks (verify/, capture/, run/) share: running the
user's own sitecustomize.py after theirs.

Python imports one sitecustomize, the first on sys.path; a hook put first on PYTHONPATH would
hide the user's. Each hook loads this file by its path (beside the hooks' folders, in the source
tree and where gpusim is installed: DATADIR/gpusim/), with runpy, in one line:

    runpy.run_path(os.path.join(os.path.dirname(__file__), "..", "hookchain.py"),
                   {"HOOK": __file__}, "__gpusim_chain__")
"""
import importlib.util
import os
import sys


def chain(here):
    """Import the next sitecustomize on sys.path (the user's), the folder `here` left out."""
    here = os.path.abspath(here)
    for entry in [p for p in sys.path if os.path.abspath(p or ".") != here]:
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_user_sitecustomize", candidate)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return


def chain_from(hook_file):
    """chain() for the hook whose __file__ is hook_file."""
    chain(os.path.dirname(os.path.abspath(hook_file)))


if __name__ == "__gpusim_chain__":  # run by a hook (runpy), which passes its file as HOOK
    chain_from(HOOK)  # noqa: F821 - given by the caller
