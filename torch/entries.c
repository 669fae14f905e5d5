/* entries.c - libgpusim_torch.so's entry points for PyTorch's private pools (CUDA graphs'
 * captures and MemPools, through the C++ shim's hooks and gpusim run's MemPool stand-in) and
 * for torch.cuda.memory_stats() (gpusim run's hook), over the library's one state (library.h;
 * pluggable.c holds the requests'). */
#include <dlfcn.h>
#include <stdio.h>

#include "gpusim_torch.h"
#include "library.h"
#include "report.h"

/* The policy of PyTorch's requests. */
static const gs_policy *torch_policy(const gs_pluggable *a)
{
    const gs_policy *own = a->mode == GS_CLIENTS_SHARED ? NULL : a->client_policy[a->torch];
    return own ? own : a->policy;
}

void gs_lib_torch_stats(const gs_pluggable *a, int d, bool full, gs_stats *out)
{
    const gs_heap *h = gs_tenants_heap(a->tenants, d, a->torch); /* (shared: the one heap) */
    *out = full ? *gs_heap_stats(h) : *gs_heap_stats_now(h);
}

/* PyTorch's pool hooks, for its client (through libgpusim_torch_oom.so's C++ ones, which hold
 * the filter PyTorch gives): pools.h. Lock held inside. */
void gpusim_pool_begin(int device, uint64_t graph, uint64_t user, gs_pool_filter filter, void *ctx)
{
    gs_pluggable *a = gs_lib();
    if (!gs_lib_enter(a)) return;
    if (a->torch < 0) a->torch = gs_lib_client_of(a, "torch");
    if (a->torch >= 0 && gs_lib_open_device(a, device)) {
        gs_pools_site site = gs_lib_pools_site(a);
        if (gs_pools_begin(a->pools, &site, device, graph, user, filter, ctx) != GS_OK)
            fprintf(stderr,
                    "gpusim: private pool (%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
                    ") on device %d: too many pools or captures at once (15 pools, deleted "
                    "ones counted until their memory is released); its requests go to the "
                    "ordinary pools\n",
                    graph, user, device);
    }
    pthread_mutex_unlock(&a->lock);
}

enum { POOL_END, POOL_RELEASE, POOL_DESTROY, POOL_USES };

/* A call on pool (graph, user) that some begin or creation made: the end, the release, the
 * release that empties its cache at once, or its uses (the value returned; 0 otherwise). */
static int pool_call(int device, uint64_t graph, uint64_t user, int which)
{
    gs_pluggable *a = gs_lib();
    int n = 0;
    if (!gs_lib_enter(a)) return 0;
    if (a->torch >= 0 && device >= 0 && device < MAX_DEVICES && a->used[device]) {
        gs_pools_site site = gs_lib_pools_site(a);
        if (which == POOL_END) gs_pools_end(a->pools, &site, device, graph, user);
        else if (which == POOL_USES) n = gs_pools_uses(a->pools, &site, device, graph, user);
        else gs_pools_release(a->pools, &site, device, graph, user, which == POOL_DESTROY);
    }
    pthread_mutex_unlock(&a->lock);
    return n;
}

void gpusim_pool_end(int device, uint64_t graph, uint64_t user)
{
    pool_call(device, graph, user, POOL_END);
}
void gpusim_pool_release(int device, uint64_t graph, uint64_t user)
{
    pool_call(device, graph, user, POOL_RELEASE);
}

/* torch.cuda.MemPool's life, for gpusim run's stand-in (torch/run/gpusim_mempool.py), since
 * PyTorch 2.11's CUDAPluggableAllocator refuses to make one: the construction (the pool made,
 * with a use: createOrIncrefPool), the destruction (releasePool, then emptyCache of the pool)
 * and use_count. Nonzero from create when the pool could not be made (a 16th pool: its use is
 * owed until a begin finds it a slot, pools.h; a pair of zeros): its requests go to the
 * ordinary pools until then. */
int gpusim_mempool_create(int device, uint64_t graph, uint64_t user)
{
    gs_pluggable *a = gs_lib();
    gs_status st = GS_ERR_INVALID;
    if (!gs_lib_enter(a)) return 1;
    if (a->torch < 0) a->torch = gs_lib_client_of(a, "torch");
    if (a->torch >= 0 && gs_lib_open_device(a, device)) {
        gs_pools_site site = gs_lib_pools_site(a);
        st = gs_pools_create(a->pools, &site, device, graph, user);
    }
    pthread_mutex_unlock(&a->lock);
    return st != GS_OK;
}
void gpusim_mempool_destroy(int device, uint64_t graph, uint64_t user)
{
    pool_call(device, graph, user, POOL_DESTROY);
}
int gpusim_mempool_use_count(int device, uint64_t graph, uint64_t user)
{
    return pool_call(device, graph, user, POOL_USES);
}

/* torch.cuda.memory_stats() and its resets under gpusim run (torch/run/gpusim_stats.py puts
 * these behind torch._C's, which throw for a pluggable allocator): PyTorch's statistics of
 * device's as gpusim keeps them for the client torch, as the program sees them (memstats.h).
 * gpusim_memory_stats writes the JSON object of PyTorch's flat keys into buf (cap bytes with
 * the NUL; nothing with cap 0) and returns its length: call again with more when it is not less
 * than cap. 0 for a device out of range or that cannot be opened. */
size_t gpusim_memory_stats(int device, char *buf, size_t cap)
{
    gs_pluggable *a = gs_lib();
    size_t n = 0;
    if (device < 0 || device >= MAX_DEVICES || !gs_lib_enter(a)) return 0;
    if (a->torch < 0) a->torch = gs_lib_client_of(a, "torch");
    if (a->torch >= 0) {
        /* a device PyTorch has not used: zeros, not opened (opening makes a CUDA context and
         * moves the thread's current device; the run's figures would gain a device) */
        gs_stats run = {0}, seen;
        if (a->used[device]) gs_lib_torch_stats(a, device, true, &run);
        else run.max_split_size = gs_policy_max_split_size(torch_policy(a));
        gs_memstats_view(a->memstats, device, &run, &seen);
        GString *out = g_string_new(NULL);
        gs_jw w;
        gs_jw_init(&w, out);
        gs_report_memory_stats(&w, &seen);
        n = out->len;
        if (cap) g_strlcpy(buf, out->str, cap);
        g_string_free(out, TRUE);
    }
    pthread_mutex_unlock(&a->lock);
    return n;
}

/* which: 0, the peaks (reset_peak_memory_stats); 1, the accumulated counts. */
static void reset_stats(int device, int which)
{
    gs_pluggable *a = gs_lib();
    if (device < 0 || device >= MAX_DEVICES || !gs_lib_enter(a)) return;
    if (a->torch < 0) a->torch = gs_lib_client_of(a, "torch");
    if (a->torch >= 0) {
        gs_stats now = {0}; /* (a device not used yet: all zeros) */
        if (a->used[device]) gs_lib_torch_stats(a, device, which == 1, &now);
        if (which == 0) gs_memstats_reset_peaks(a->memstats, device, &now);
        else gs_memstats_reset_accumulated(a->memstats, device, &now);
    }
    pthread_mutex_unlock(&a->lock);
}

void gpusim_reset_peak_stats(int device)
{
    reset_stats(device, 0);
}
void gpusim_reset_accumulated_stats(int device)
{
    reset_stats(device, 1);
}

/* The address of libgpusim_torch_oom.so's hook of PyTorch's signature (0: begin, 1: end,
 * 2: release), for CUDAPluggableAllocator's setters; NULL without that library, or one built
 * before it had them. (The first call sets the library up, as a first request would.) */
void *gpusim_pool_hook(int which)
{
    static const char *const names[] = {"gpusim_torch_begin_allocate_to_pool",
                                        "gpusim_torch_end_allocate_to_pool",
                                        "gpusim_torch_release_pool"};
    gs_pluggable *a = gs_lib();
    if (which < 0 || which > 2 || !gs_lib_enter(a)) return NULL;
    void *f = a->torch_lib ? dlsym(a->torch_lib, names[which]) : NULL;
    pthread_mutex_unlock(&a->lock);
    return f;
}
