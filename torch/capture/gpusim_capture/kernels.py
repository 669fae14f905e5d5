"""kernels.py - what the caching allocator is asked for beside the outputs a dispatch mode sees.

A CUDA kernel's outputs are what a fake tensor shows; some kernels also ask the allocator for
memory of their own, which no fake tensor can show. The ones known to the capture, each measured
against real recordings on an H200 with PyTorch 2.11 (BENCHMARKS.md, "Predictions from a CPU
capture"):

- cuBLAS's workspace: the first matrix product of a (cuBLAS handle, stream) pair allocates one and
  keeps it until the process ends. torch.cuda.graph's capture keeps them too (its capture stream
  is a new stream, so the graph's own come from its pool beside them): a graph program's real
  recording on an H100 kept both warm-up workspaces through the capture (lab/predict's
  graph_train; only torch.compile's graph trees clear them, and the capture does not follow
  torch.compile). Handles are per thread, and the autograd engine
  runs a CUDA backward on a thread of its own: forward and backward each get one. Its size is
  CUBLAS_WORKSPACE_CONFIG's when set (":KIB:COUNT" pairs), else GPUSIM_CAPTURE_CUBLAS_WORKSPACE,
  else PyTorch 2.11's default on Hopper.
- cuBLASLt's workspace: one per stream, at the stream's first matrix product.
- A CUDA graph's random-number state: the first graph captured with a device's default generator
  registers with it, and the generator allocates a seed and an offset (one int64 each, 8 bytes)
  on the capture stream before the capture's pool begins; the last graph's death frees them,
  before its pool goes (PyTorch 2.11's CUDAGeneratorState::register_graph and unregister_graph;
  seen as two 8-byte requests before the pool in the same recording).

What the capture knows it cannot know (cuDNN's choice of algorithm and its workspace, made by
measuring kernels on the device) is counted in unknowns by operator, for the trace header.
"""
import os
import threading

MATMUL = frozenset(("mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "_addmm_activation",
                    "_scaled_mm", "addr", "dot", "vdot", "_int_mm"))
CUDNN = frozenset(("convolution", "_convolution", "cudnn_convolution", "convolution_backward",
                   "cudnn_convolution_transpose", "cudnn_batch_norm", "_cudnn_rnn"))

# PyTorch 2.11's cuBLAS workspace on Hopper (sm_90): seen as the first 32 MiB request after a
# first matrix product in every recording of tests/data and lab/results.
DEFAULT_CUBLAS_BYTES = 32 * 2**20
DEFAULT_CUBLASLT_BYTES = 2**20


def cublas_workspace_bytes(env):
    """CUBLAS_WORKSPACE_CONFIG's size (":4096:8" is 8 workspaces of 4096 KiB), else the
    override, else the default."""
    conf = env.get("CUBLAS_WORKSPACE_CONFIG", "")
    parts = conf.split(":")[1:] if conf.startswith(":") else []
    if parts and len(parts) % 2 == 0 and all(p.isdigit() for p in parts):
        return sum(int(parts[i]) * 1024 * int(parts[i + 1]) for i in range(0, len(parts), 2))
    return int(env.get("GPUSIM_CAPTURE_CUBLAS_WORKSPACE", DEFAULT_CUBLAS_BYTES))


class Kernels:
    def __init__(self, torch, events, fake_cuda, unknowns, env):
        self.torch = torch
        self.events = events
        self.fc = fake_cuda
        self.unknowns = unknowns
        self.cublas_bytes = cublas_workspace_bytes(env)
        self.lt_bytes = int(env.get("GPUSIM_CAPTURE_CUBLASLT_WORKSPACE", DEFAULT_CUBLASLT_BYTES))
        self.cublas = {}   # (device, stream, thread or "autograd") -> allocation id
        self.lt = {}       # (device, stream) -> allocation id
        self.graph_rng = {}  # device -> [live graphs registered, seed's id, offset's id]
        self.in_backward = getattr(torch._C, "_current_graph_task_id", lambda: -1)

    def _key_thread(self):
        # the autograd engine's CUDA thread runs every backward (the capture runs them on the
        # calling thread: there may be no device to start that thread for)
        return "autograd" if self.in_backward() != -1 else threading.get_ident()

    def after(self, name, device, probed=False):
        """After an operator on a CUDA device ran (its outputs already allocated; probed: its
        real requests were played from a probe, cuDNN's workspace among them)."""
        if name in MATMUL:
            stream = self.fc.stream_of(device)
            key = (device, stream, self._key_thread())
            if key not in self.cublas and self.cublas_bytes:
                self.cublas[key] = self.events.alloc(device, stream, self.cublas_bytes)
            if (device, stream) not in self.lt and self.lt_bytes:
                self.lt[(device, stream)] = self.events.alloc(device, stream, self.lt_bytes)
        elif name in CUDNN and not probed:
            self.unknowns["cuDNN workspace"] = self.unknowns.get("cuDNN workspace", 0) + 1

    def on_graph_capture(self, device, stream):
        """A CUDA graph's capture begins, its pool not yet: the graph registers with the
        device's default generator, which allocates its seed and offset for the first."""
        state = self.graph_rng.get(device)
        if state is None:
            state = self.graph_rng[device] = [0, self.events.alloc(device, stream, 8),
                                              self.events.alloc(device, stream, 8)]
        state[0] += 1

    def on_graph_gone(self, device):
        """A captured graph's death (before its pool's release): the last one registered frees
        the generator's seed and offset."""
        state = self.graph_rng.get(device)
        if state is None:
            return
        state[0] -= 1
        if state[0] == 0:
            self.events.free(state[1])
            self.events.free(state[2])
            del self.graph_rng[device]
