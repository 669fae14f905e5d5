// oom.cpp - libgpusim_torch_oom.so: an OOM of libgpusim_torch.so raised in PyTorch as
// torch.OutOfMemoryError, as PyTorch's own allocator raises it.
//
// PyTorch's CUDAPluggableAllocator (2.11) does not check what the allocator's malloc function
// returns: a NULL becomes a tensor at address 0. The exception PyTorch's own caching allocator
// throws at an OOM, c10::OutOfMemoryError, passes through CUDAPluggableAllocator::malloc and is
// turned into torch.OutOfMemoryError by PyTorch's Python bindings, catchable, after which the
// program goes on. Only C++ can throw it, and only against the headers of the PyTorch that will
// catch it: this is the one file of gpusim that sees PyTorch. libgpusim_torch.so stays C and
// loads without PyTorch; it dlopens this library from beside itself (or $GPUSIM_TORCH_OOM) and,
// at an OOM, calls gpusim_torch_raise_oom with its lock released. The exception then unwinds
// through gpusim_malloc (compiled with -fexceptions) into PyTorch.
//
// Built by torch/build-oom.sh against python3's torch (meson does it when python3 imports torch):
//     torch/build-oom.sh build/torch/libgpusim_torch_oom.so
#include <c10/util/Exception.h>

extern "C" __attribute__((visibility("default"), noreturn)) void
gpusim_torch_raise_oom(const char *msg)
{
    C10_THROW_ERROR(OutOfMemoryError, msg);
}
