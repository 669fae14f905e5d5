// oom.cpp - libgpusim_torch_oom.so: what libgpusim_torch.so needs of PyTorch's C++: an OOM
// raised in PyTorch as torch.OutOfMemoryError, as PyTorch's own allocator raises it, and the
// private pool hooks (below), whose arguments are C++ objects.
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

// ---- PyTorch's private pool hooks ----
//
// CUDAPluggableAllocator tells an allocator of CUDA graphs' and MemPools' private pools through
// three hooks of C++ signatures (set_begin_allocate_to_pool, set_end_allocate_to_pool_fn,
// set_release_pool): the pool is a std::pair of numbers, and the begin hands over a
// std::function saying which streams' requests go to the pool. C can hold neither, so the
// hooks are here: each keeps the filter until its end and calls libgpusim_torch.so's C
// functions (torch/pools.h), which ask it through call_filter at each request.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

struct CUstream_st;
using Stream = CUstream_st *; // cudaStream_t, as CUDA's driver_types.h defines it
// c10::cuda::MempoolId_t (std::pair<CaptureId_t, CaptureId_t>, CaptureId_t unsigned long long)
using PoolId = std::pair<unsigned long long, unsigned long long>;
using Filter = std::function<bool(Stream)>;

extern "C" {
typedef int (*gpusim_filter_fn)(void *ctx, void *stream);
typedef void (*gpusim_begin_fn)(int device, uint64_t graph, uint64_t user, gpusim_filter_fn filter,
                                void *ctx);
typedef void (*gpusim_pool_fn)(int device, uint64_t graph, uint64_t user);
}

namespace
{
gpusim_begin_fn begin_c;
gpusim_pool_fn end_c, release_c;
std::mutex lock;
// the filters of the begins not yet ended, newest last, by device and pool
std::map<std::tuple<int, unsigned long long, unsigned long long>, std::vector<Filter *>> open;

// Called with the library's lock held: nothing may unwind through it (the lock would stay
// taken and the next request hang). PyTorch's filter asks cudaStreamGetCaptureInfo through
// AT_CUDA_CHECK, which throws on an error; PyTorch's own allocator would raise it at once.
// Here the request is taken as not the capture's, and the program meets the error at its next
// CUDA call that checks.
int call_filter(void *ctx, void *stream) noexcept
{
    try {
        return (*static_cast<Filter *>(ctx))(static_cast<Stream>(stream)) ? 1 : 0;
    } catch (...) {
        return 0;
    }
}
} // namespace

// libgpusim_torch.so's C functions, given when it loads this library.
extern "C" __attribute__((visibility("default"))) void
gpusim_torch_pool_connect(void *begin, void *end, void *release)
{
    begin_c = reinterpret_cast<gpusim_begin_fn>(begin);
    end_c = reinterpret_cast<gpusim_pool_fn>(end);
    release_c = reinterpret_cast<gpusim_pool_fn>(release);
}

extern "C" __attribute__((visibility("default"))) void
gpusim_torch_begin_allocate_to_pool(int device, PoolId id, Filter filter)
{
    if (!begin_c) return;
    Filter *f = new Filter(std::move(filter));
    {
        std::lock_guard<std::mutex> g(lock);
        open[{device, id.first, id.second}].push_back(f);
    }
    begin_c(device, id.first, id.second, call_filter, f);
}

extern "C" __attribute__((visibility("default"))) void gpusim_torch_end_allocate_to_pool(int device,
                                                                                         PoolId id)
{
    if (!end_c) return;
    end_c(device, id.first, id.second); // no longer asked after this
    std::lock_guard<std::mutex> g(lock);
    auto it = open.find({device, id.first, id.second});
    if (it == open.end() || it->second.empty()) return;
    delete it->second.back();
    it->second.pop_back();
    if (it->second.empty()) open.erase(it);
}

extern "C" __attribute__((visibility("default"))) void gpusim_torch_release_pool(int device,
                                                                                 PoolId id)
{
    if (release_c) release_c(device, id.first, id.second);
}
