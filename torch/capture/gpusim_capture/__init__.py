"""gpusim_capture - a PyTorch program's requests to the CUDA caching allocator, without a GPU.

start() runs in the user's own process (torch/capture/sitecustomize.py calls it before the
program's first line): it replaces torch.cuda's entry points with stand-ins (patches.py,
fakecuda.py) and enters a dispatch mode of gpusim's (mode.py) that runs every operation on the
device under PyTorch's FakeTensorMode, so CUDA tensors have the sizes of the real run and no
memory, and at exit writes the requests as a
gpusim trace (events.py) whose header says it is a capture and what it could not know.

Environment (the hook's caller, gpusim predict or gpusim capture, sets it):
  GPUSIM_CAPTURE_OUT           the trace to write (.gz: compressed)
  GPUSIM_CAPTURE_DEVICE_TOTAL  the device's memory the program is told of (default 80 GiB)
  GPUSIM_CAPTURE_DEVICES       how many devices it sees (default 1)
  GPUSIM_CAPTURE_CUBLAS_WORKSPACE, CUBLAS_WORKSPACE_CONFIG: kernels.py
  GPUSIM_CAPTURE_PROBE, GPUSIM_CAPTURE_PROBE_BUDGET: probe.py (0: operations not probed)
"""
import atexit
import sys

from . import events as ev
from . import fakecuda, kernels, patches

FORMAT = "gpusim-capture 1"


class Capture:
    def __init__(self, torch, out, env):
        self.torch = torch
        self.out = out
        self.argv = list(sys.argv)
        self.conf = env.get("PYTORCH_CUDA_ALLOC_CONF", "")
        self.total = int(env.get("GPUSIM_CAPTURE_DEVICE_TOTAL", 80 * 2**30))
        self.events = ev.Events()
        self.unknowns = {}
        self.outcome = "ok"
        self.fraction = {}
        self.fake_cuda = fakecuda.FakeCuda(torch, self.events, self.unknowns,
                                           int(env.get("GPUSIM_CAPTURE_DEVICES", 1)), self.total)
        self.kernels = kernels.Kernels(torch, self.events, self.fake_cuda, self.unknowns, env)
        from . import probe  # imports PyTorch's fake tensors: only once torch is imported

        self.probe = probe.Probe(torch, self.unknowns, env)  # before patches replace torch.cuda
        self.tracker = None

    def memory_fraction(self, fraction, device=None):
        """The program caps itself: the cap the real run would have had, for the header."""
        d = fakecuda._index(device) if device is not None else self.fake_cuda.device()
        self.fraction[d] = int(fraction * self.total)

    def record_stream(self, tensor, stream):
        self.tracker.record_stream(tensor, stream)

    def begin(self):
        torch = self.torch
        from . import mode  # imports torch's dispatch machinery: only once torch is imported

        patches.install(torch, self)
        # The autograd engine runs a CUDA backward on a thread per device, which needs a device
        # to exist: the capture runs it on the calling thread (kernels.py keeps the workspaces
        # apart as the real threads would).
        torch._C._set_multithreading_enabled(False)
        # FakeTensorMode makes a real CUDA tensor first, where a device is available, so that
        # the autograd engine has a CUDA context: the capture asks for none of the device's
        # memory (and where there is no device, the stand-ins say there is one).
        ft = mode.ft
        for name in ("init_gpu_context", "init_cuda_context"):
            if hasattr(ft, name):
                setattr(ft, name, lambda device=None: None)
        self.tracker = mode.Tracker(self.events, self.fake_cuda)
        self.fake = ft.FakeTensorMode(allow_non_fake_inputs=True)
        self.mode = mode.CaptureMode(self.fake, self.tracker, self.kernels, self.unknowns,
                                     self.probe)
        self.mode.__enter__()
        self._hook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self.finish)

    def _excepthook(self, kind, value, tb):
        self.outcome = f"error: {kind.__name__}: {value}"
        self._hook(kind, value, tb)

    def header(self):
        torch = self.torch
        cmd = " ".join(self.argv) or "(interactive)"
        head = [("source", f"gpusim-capture of python {cmd}"),
                ("device_total_bytes", str(self.total)),
                ("allocator_conf", self.conf),
                ("captured", f"{FORMAT}; PyTorch {torch.__version__}; {self.probe.summary()}"),
                ("capture_outcome", self.outcome)]
        if self.unknowns:
            head.append(("capture_unknown", ", ".join(
                f"{k}: {v}" for k, v in sorted(self.unknowns.items()))))
        if self.fraction:
            head.append(("capture_memory_fraction_bytes", ",".join(
                f"{d}={b}" for d, b in sorted(self.fraction.items()))))
        return head

    def finish(self):
        try:
            self.mode.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - at exit the mode stack may already be gone
            pass
        n = ev.write_trace(self.out, self.events, self.header())
        print(f"gpusim capture: {n} events, peak allocated {self.events.peak_bytes} bytes -> "
              f"{self.out}", file=sys.stderr)


def start(out, env):
    import torch  # the user's own

    cap = Capture(torch, out, env)
    cap.begin()
    return cap
