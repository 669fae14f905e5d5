/* gpusim_torch.h - libgpusim_torch.so's C entry points, the ones torch/pluggable.map exports,
 * declared once for the library and its C callers (its fuzzer). PyTorch finds
 * gpusim_malloc and gpusim_free by name (CUDAPluggableAllocator), gpusim run's hook the rest
 * through ctypes. What each does: docs/real-gpu.md's table and torch/pluggable.c. */
#ifndef GPUSIM_TORCH_H
#define GPUSIM_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* PyTorch's */
void *gpusim_malloc(ssize_t size, int device, void *stream);
void gpusim_free(void *ptr, ssize_t size, int device, void *stream);
void gpusim_empty_cache(void);
/* another library's, as a client of its own */
int gpusim_client(const char *name);
void *gpusim_client_malloc(int client, ssize_t size, int device, void *stream);
void gpusim_client_free(int client, void *ptr, ssize_t size, int device, void *stream);
void gpusim_client_empty_cache(int client);
size_t gpusim_reserved(int device);
size_t gpusim_client_reserved(int client, int device);
size_t gpusim_client_limit(int client, int device);
/* private pools: PyTorch's pool hooks (through the C++ shim) and a MemPool's life */
typedef int (*gpusim_pool_filter)(void *ctx, void *stream);
void gpusim_pool_begin(int device, uint64_t graph, uint64_t user, gpusim_pool_filter filter,
                       void *ctx);
void gpusim_pool_end(int device, uint64_t graph, uint64_t user);
void gpusim_pool_release(int device, uint64_t graph, uint64_t user);
int gpusim_mempool_create(int device, uint64_t graph, uint64_t user);
void gpusim_mempool_destroy(int device, uint64_t graph, uint64_t user);
int gpusim_mempool_use_count(int device, uint64_t graph, uint64_t user);
void *gpusim_pool_hook(int which);
/* torch.cuda.memory_stats() and its resets */
size_t gpusim_memory_stats(int device, char *buf, size_t cap);
void gpusim_reset_peak_stats(int device);
void gpusim_reset_accumulated_stats(int device);
/* the program ends of its last OOM, uncaught */
void gpusim_oom_fatal(void);

#endif
