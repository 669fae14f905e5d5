/* cuda.c - the real device: the CUDA runtime's cudaMalloc/cudaFree and the driver's
 * virtual-memory calls, so the same core and policy run on real memory.
 *
 * The driver API (cuMem*) is reached through cudaGetDriverEntryPointByVersion, and the runtime
 * is linked statically, so the gpusim binary starts on a machine without a GPU or driver (CI):
 * there gs_cuda_backend_new() fails with a message and nothing else changes.
 *
 * Failures: cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are GS_ERR_OOM, which the
 * policies handle; any other error is GS_ERR_DEVICE, and the call, its size and CUDA's message
 * are kept for gs_cuda_last_error(). Every call is timed on the host's monotonic clock.
 *
 * Everything the backend hands out is tracked, so destroying it returns every byte: mappings
 * are unmapped, handles released, reservations and cudaMalloc'd ranges freed. The granularity
 * is queried from the driver, never assumed.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <time.h>

#include <glib.h>

#include "backend.h"

typedef CUresult (*pfn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                               unsigned long long);
typedef CUresult (*pfn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_addrfree)(CUdeviceptr, size_t);
typedef CUresult (*pfn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                            unsigned long long);
typedef CUresult (*pfn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_setaccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*pfn_granularity)(size_t *, const CUmemAllocationProp *,
                                    CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_errstr)(CUresult, const char **);

typedef struct {
    pfn_create create;
    pfn_release release;
    pfn_reserve reserve;
    pfn_addrfree addrfree;
    pfn_map map;
    pfn_unmap unmap;
    pfn_setaccess setaccess;
    pfn_granularity granularity;
    pfn_errstr errstr;
} driver_api;

typedef struct {
    int device;
    driver_api drv;
    CUmemAllocationProp prop;
    uint64_t gran;
    GHashTable *live;      /* cudaMalloc'd address -> size */
    GHashTable *handles;   /* our handle id -> CUmemGenericAllocationHandle */
    GHashTable *maps;      /* mapped va -> size */
    GHashTable *reserved;  /* reservation va -> size */
    uint64_t next_handle;
    char *last_error;
} cuda_state;

static double now_us(void *st)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

G_GNUC_PRINTF(2, 3) static void set_error(cuda_state *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_free(s->last_error);
    s->last_error = g_strdup_vprintf(fmt, ap);
    va_end(ap);
}

static gs_status rt_status(cuda_state *s, cudaError_t e, const char *call, uint64_t size)
{
    if (e == cudaSuccess) return GS_OK;
    (void)cudaGetLastError(); /* clear the sticky state a failed allocation leaves */
    if (e == cudaErrorMemoryAllocation) return GS_ERR_OOM;
    set_error(s, "%s(%" G_GUINT64_FORMAT " bytes): %s", call, size, cudaGetErrorString(e));
    return GS_ERR_DEVICE;
}

static gs_status drv_status(cuda_state *s, CUresult r, const char *call, uint64_t size)
{
    if (r == CUDA_SUCCESS) return GS_OK;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return GS_ERR_OOM;
    const char *msg = NULL;
    if (s->drv.errstr) s->drv.errstr(r, &msg);
    set_error(s, "%s(%" G_GUINT64_FORMAT " bytes): %s (CUresult %d)", call, size,
              msg ? msg : "unknown error", (int)r);
    return GS_ERR_DEVICE;
}

/* Remember key -> value in t (key and value share one allocation, owned by the key). */
static void track(GHashTable *t, uint64_t key, uint64_t value)
{
    uint64_t *p = g_new(uint64_t, 2);
    p[0] = key;
    p[1] = value;
    g_hash_table_insert(t, p, &p[1]);
}

/* ---- cudaMalloc / cudaFree ---- */

static gs_status cu_malloc(void *st, uint64_t size, uint64_t *addr)
{
    cuda_state *s = st;
    void *p = NULL;
    /* A CUDA graph's capture (torch.cuda.graph's default, global mode) forbids this thread a
     * cudaMalloc, which a capture's first requests need: PyTorch makes it in relaxed mode
     * (cudaMallocMaybeCapturing: the graph gets the new memory, its replays ignore the call),
     * and so does gpusim. Outside a capture the mode changes nothing. */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    cudaError_t e = cudaThreadExchangeStreamCaptureMode(&mode);
    if (e == cudaSuccess) {
        e = cudaMalloc(&p, size);
        (void)cudaThreadExchangeStreamCaptureMode(&mode); /* the caller's mode back */
    }
    gs_status r = rt_status(s, e, "cudaMalloc", size);
    if (r != GS_OK) return r;
    *addr = (uint64_t)(uintptr_t)p;
    track(s->live, *addr, size);
    return GS_OK;
}

static gs_status cu_free(void *st, uint64_t addr)
{
    cuda_state *s = st;
    uint64_t *size = g_hash_table_lookup(s->live, &addr);
    if (!size) {
        set_error(s, "cudaFree(%#" G_GINT64_MODIFIER "x): not allocated by this backend", addr);
        return GS_ERR_INVALID;
    }
    gs_status r = rt_status(s, cudaFree((void *)(uintptr_t)addr), "cudaFree", *size);
    if (r == GS_OK) g_hash_table_remove(s->live, &addr);
    return r;
}

static gs_status cu_mem_info(void *st, uint64_t *free_b, uint64_t *total)
{
    cuda_state *s = st;
    size_t f = 0, t = 0;
    gs_status r = rt_status(s, cudaMemGetInfo(&f, &t), "cudaMemGetInfo", 0);
    *free_b = f;
    *total = t;
    return r;
}

/* ---- the driver's virtual memory ---- */

static gs_status cu_va_reserve(void *st, uint64_t size, uint64_t *va)
{
    cuda_state *s = st;
    CUdeviceptr p = 0;
    gs_status r = drv_status(s, s->drv.reserve(&p, size, 0, 0, 0), "cuMemAddressReserve", size);
    if (r != GS_OK) return r;
    track(s->reserved, p, size);
    *va = p;
    return GS_OK;
}

static gs_status cu_va_release(void *st, uint64_t va, uint64_t size)
{
    cuda_state *s = st;
    gs_status r = drv_status(s, s->drv.addrfree(va, size), "cuMemAddressFree", size);
    if (r == GS_OK) g_hash_table_remove(s->reserved, &va);
    return r;
}

static gs_status cu_page_create(void *st, uint64_t size, uint64_t *handle)
{
    cuda_state *s = st;
    CUmemGenericAllocationHandle h = 0;
    gs_status r = drv_status(s, s->drv.create(&h, size, &s->prop, 0), "cuMemCreate", size);
    if (r != GS_OK) return r;
    *handle = ++s->next_handle; /* our ids are never 0; the driver's may be */
    track(s->handles, *handle, h);
    return GS_OK;
}

static gs_status cu_page_release(void *st, uint64_t handle)
{
    cuda_state *s = st;
    uint64_t *h = g_hash_table_lookup(s->handles, &handle);
    if (!h) {
        set_error(s, "cuMemRelease: unknown handle %" G_GUINT64_FORMAT, handle);
        return GS_ERR_INVALID;
    }
    gs_status r = drv_status(s, s->drv.release(*h), "cuMemRelease", 0);
    if (r == GS_OK) g_hash_table_remove(s->handles, &handle);
    return r;
}

static gs_status cu_map(void *st, uint64_t va, uint64_t size, uint64_t handle)
{
    cuda_state *s = st;
    uint64_t *h = g_hash_table_lookup(s->handles, &handle);
    if (!h) {
        set_error(s, "cuMemMap: unknown handle %" G_GUINT64_FORMAT, handle);
        return GS_ERR_INVALID;
    }
    gs_status r = drv_status(s, s->drv.map(va, size, 0, *h, 0), "cuMemMap", size);
    if (r != GS_OK) return r;
    track(s->maps, va, size);
    return GS_OK;
}

static gs_status cu_set_access(void *st, uint64_t va, uint64_t size)
{
    cuda_state *s = st;
    CUmemAccessDesc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = s->device},
                         .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    return drv_status(s, s->drv.setaccess(va, size, &d, 1), "cuMemSetAccess", size);
}

static gs_status cu_unmap(void *st, uint64_t va, uint64_t size)
{
    cuda_state *s = st;
    /* Unlike cudaFree, cuMemUnmap does not wait for the device: work still queued on these
     * pages would fault ("an illegal memory access was encountered", sticky for the context).
     * PyTorch synchronizes the segment's stream before it unmaps; the backend does not know
     * streams, so it waits for the whole device. */
    gs_status r = rt_status(s, cudaDeviceSynchronize(), "cudaDeviceSynchronize before cuMemUnmap", size);
    if (r != GS_OK) return r;
    r = drv_status(s, s->drv.unmap(va, size), "cuMemUnmap", size);
    /* forget every mapping in the range (the core unmaps one page-sized mapping at a time) */
    for (uint64_t a = va; r == GS_OK && a < va + size; a += s->gran) g_hash_table_remove(s->maps, &a);
    return r;
}

static uint64_t cu_granularity(void *st) { return ((cuda_state *)st)->gran; }

static const char *cu_last_error(void *st) { return ((cuda_state *)st)->last_error; }

/* Write the range once, as the program that asked for it would. */
/* Write the range and wait for it: a replay has no kernels of its own, so nothing is left
 * queued behind the allocator's next call (and a fault shows at the touch that caused it). */
static gs_status cu_touch(void *st, uint64_t addr, uint64_t size)
{
    gs_status r = rt_status(st, cudaMemset((void *)(uintptr_t)addr, 0xA5, size), "cudaMemset", size);
    return r != GS_OK ? r : rt_status(st, cudaDeviceSynchronize(), "cudaMemset (synchronize)", size);
}

/* Return everything still held, then check the driver agrees: every byte is back. */
static void cu_destroy(void *st)
{
    cuda_state *s = st;
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, s->maps);
    while (g_hash_table_iter_next(&it, &k, &v)) (void)s->drv.unmap(*(uint64_t *)k, *(uint64_t *)v);
    g_hash_table_iter_init(&it, s->handles);
    while (g_hash_table_iter_next(&it, &k, &v)) (void)s->drv.release(*(uint64_t *)v);
    g_hash_table_iter_init(&it, s->reserved);
    while (g_hash_table_iter_next(&it, &k, &v)) (void)s->drv.addrfree(*(uint64_t *)k, *(uint64_t *)v);
    g_hash_table_iter_init(&it, s->live);
    while (g_hash_table_iter_next(&it, &k, &v)) (void)cudaFree((void *)(uintptr_t)*(uint64_t *)k);
    g_hash_table_destroy(s->maps);
    g_hash_table_destroy(s->handles);
    g_hash_table_destroy(s->reserved);
    g_hash_table_destroy(s->live);
    g_free(s->last_error);
    g_free(s);
}

static const gs_backend_ops cuda_ops = {
    .version = GS_BACKEND_VERSION,
    .name = "cuda",
    .malloc = cu_malloc,
    .free = cu_free,
    .va_reserve = cu_va_reserve,
    .va_release = cu_va_release,
    .page_create = cu_page_create,
    .page_release = cu_page_release,
    .map = cu_map,
    .set_access = cu_set_access,
    .unmap = cu_unmap,
    .granularity = cu_granularity,
    .mem_info = cu_mem_info,
    .now_us = now_us,
    .touch = cu_touch,
    .last_error = cu_last_error,
    .destroy = cu_destroy,
};

static bool load_symbol(const char *name, void **fn, char **errmsg)
{
    enum cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
        *errmsg = g_strdup_printf("the CUDA driver has no %s (%s)", name,
                                  e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found");
        return false;
    }
    return true;
}

gs_backend *gs_cuda_backend_new(int device, char **errmsg)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        *errmsg = g_strdup_printf("no CUDA device: %s",
                                  e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        (void)cudaGetLastError();
        return NULL;
    }
    if (device < 0 || device >= n) {
        *errmsg = g_strdup_printf("CUDA device %d does not exist (%d found)", device, n);
        return NULL;
    }
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaFree(NULL)) != cudaSuccess) {
        *errmsg = g_strdup_printf("CUDA device %d: %s", device, cudaGetErrorString(e));
        return NULL;
    }
    cuda_state *s = g_new0(cuda_state, 1);
    s->device = device;
    bool ok = load_symbol("cuMemCreate", (void **)&s->drv.create, errmsg) &&
              load_symbol("cuMemRelease", (void **)&s->drv.release, errmsg) &&
              load_symbol("cuMemAddressReserve", (void **)&s->drv.reserve, errmsg) &&
              load_symbol("cuMemAddressFree", (void **)&s->drv.addrfree, errmsg) &&
              load_symbol("cuMemMap", (void **)&s->drv.map, errmsg) &&
              load_symbol("cuMemUnmap", (void **)&s->drv.unmap, errmsg) &&
              load_symbol("cuMemSetAccess", (void **)&s->drv.setaccess, errmsg) &&
              load_symbol("cuMemGetAllocationGranularity", (void **)&s->drv.granularity, errmsg) &&
              load_symbol("cuGetErrorString", (void **)&s->drv.errstr, errmsg);
    if (!ok) {
        g_free(s);
        return NULL;
    }
    s->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    s->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    s->prop.location.id = device;
    size_t g = 0;
    CUresult r = s->drv.granularity(&g, &s->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || g == 0) {
        *errmsg = g_strdup_printf("cuMemGetAllocationGranularity failed (CUresult %d)", (int)r);
        g_free(s);
        return NULL;
    }
    s->gran = g;
    s->live = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->handles = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->maps = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    s->reserved = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
    gs_backend *be = g_new0(gs_backend, 1);
    be->ops = &cuda_ops;
    be->state = s;
    return be;
}
