"""sitecustomize.py - gpusim capture's start-up hook, run inside the user's own Python.

`gpusim predict` (and `gpusim capture`) put this file's folder first on the child's PYTHONPATH, so
Python imports it before the user's program, which stays unmodified. Like torch/verify's hook this
is one of the few places where gpusim's Python imports the user's PyTorch: the capture runs in
their process (the project's own scripts use the standard library only).

Only the first Python process that sees GPUSIM_CAPTURE_OUT captures (the variables are taken out
of the environment, so the program's own children, data-loader workers among them, run
untouched). It starts gpusim_capture (beside this file) before the program's first line: every
CUDA tensor becomes a fake one (sizes, no memory), and the storages the caching allocator would
have been asked for are written to GPUSIM_CAPTURE_OUT at exit as a gpusim trace. How, and what a
capture cannot know: docs/capture.md.

A sitecustomize.py of the user's own, if any, is still run: after its work this one imports the
next one on sys.path.
"""
import os
import runpy
import sys

_OUT = os.environ.pop("GPUSIM_CAPTURE_OUT", None)


if _OUT:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpusim_capture  # noqa: E402 - after the path it lives on

    del sys.path[0]
    try:
        gpusim_capture.start(_OUT, os.environ)
    except ImportError as e:  # no PyTorch in this Python: nothing to capture, and say so
        print(f"gpusim capture: cannot start: {e} (the capture runs in the program's own "
              "Python, which needs PyTorch)", file=sys.stderr)
        os._exit(3)
    except Exception:  # noqa: BLE001 - never run the program for real in the capture's place
        import traceback

        traceback.print_exc()
        print("gpusim capture: cannot start (above): the program was not run", file=sys.stderr)
        os._exit(3)

runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "hookchain.py"),
               {"HOOK": __file__}, "__gpusim_chain__")  # the user's own sitecustomize, after this one
