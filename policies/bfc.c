/* bfc.c - the best-fit-with-coalescing allocator of TensorFlow and XLA (xla/tsl/framework/
 * bfc_allocator.cc), as JAX uses it on a GPU (xla/pjrt/gpu/gpu_helpers.cc: a BFCAllocator of
 * XLA_PYTHON_CLIENT_MEM_FRACTION of the device, allow_growth = !XLA_PYTHON_CLIENT_PREALLOCATE).
 *
 * What BFC does, and where it is here:
 *   - sizes round up to 256 bytes (kMinAllocationSize, RoundedBytes): round_size;
 *   - free chunks sit in 21 bins by powers of two from 256 bytes, each bin ordered by (size,
 *     address); the search starts at the request's bin and takes the first chunk large enough
 *     (FindChunkPtr). Bins ascend with size, so that is the smallest free chunk that fits,
 *     lowest address among equals: the core's best fit on one stream (pick; BFC knows no
 *     streams, so every region is made on stream 0);
 *   - the chunk is split only when it is at least twice the request or more than 128 MiB
 *     larger (ShouldSplitChunk, max_internal_fragmentation_bytes); otherwise the whole chunk is
 *     handed out, and its slack counts as allocated: should_split;
 *   - a freed chunk merges with free neighbours of its region; regions never merge;
 *   - Extend (grow): memory_limit is mem_fraction of the device (of --capacity when given);
 *     the next region is curr_region_allocation_bytes, which starts at 2 MiB with allow_growth
 *     and at the whole limit without it, doubles until it holds the request, and doubles again
 *     after a region of the old size; a region is capped by what the limit leaves, and when the
 *     device refuses, BFC backs off by 0.9 (kBackpedalFactor) down to the request. The region
 *     size is kept in the heap's policy state;
 *   - on failure, with garbage_collection (TF_ENABLE_GPU_GARBAGE_COLLECTION, on in TensorFlow;
 *     JAX leaves BFC's default, off), regions with no chunk in use are freed and Extend is tried
 *     again (DeallocateFreeRegions): the core's full release and the counted retry. Without it
 *     nothing is ever given back (keeps_cache).
 *
 * Where it departs from BFC, on purpose:
 *   - DeallocateFreeRegions first checks that the limit, once the free regions are gone, could
 *     hold the request, and frees nothing otherwise; the core's release frees them anyway.
 *   - A request of 0 bytes gets 256 (BFC returns nullptr); a replay serves every request.
 *   - BFC's timestamped chunks (freed_by_count), the allocation retry after waiting for other
 *     threads (AllocatorRetry, 10 s), coalescing regions of a sub-allocator that supports it and
 *     spatial partitioning are not modelled: none changes a single-stream replay's placement.
 */
#include <math.h>
#include <string.h>

#include "policies.h"

enum { kMinAllocationSize = 256 };
#define kMaxInternalFragmentation (UINT64_C(128) << 20)

typedef struct {
    double mem_fraction;
    bool preallocate;
    bool gc;
} bfc_cfg;

static const gs_pool_desc bfc_pools[] = {{.is_small = false}};

static bool set_fraction(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_fraction(key, val, &((bfc_cfg *)cfg)->mem_fraction, err);
}

static bool set_preallocate(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_bool(key, val, &((bfc_cfg *)cfg)->preallocate, err);
}

static bool set_allow_growth(void *cfg, const char *key, const char *val, GError **err)
{
    bool grow;
    if (!gs_family_bool(key, val, &grow, err)) return false;
    ((bfc_cfg *)cfg)->preallocate = !grow;
    return true;
}

static bool set_gc(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_bool(key, val, &((bfc_cfg *)cfg)->gc, err);
}

static const gs_policy_key bfc_keys[] = {
    {"XLA_PYTHON_CLIENT_PREALLOCATE", "true",
     "true (JAX's default): the first region is the whole limit;\n"
     "false: regions grow from 2 MiB, doubling (allow_growth)", set_preallocate},
    {"XLA_PYTHON_CLIENT_MEM_FRACTION", "F",
     "0<F<=1: the limit is F of --capacity, else of the device (default 0.75)", set_fraction},
    {"TF_ENABLE_GPU_GARBAGE_COLLECTION", "false",
     "true: free regions with nothing in use when growth fails, then retry\n"
     "(TensorFlow's default; JAX's is false)", set_gc},
    {"allow_growth", "true", "TensorFlow's name: the opposite of XLA_PYTHON_CLIENT_PREALLOCATE",
     set_allow_growth},
    {"preallocate", "true", NULL, set_preallocate},
    {"mem_fraction", "F", NULL, set_fraction},
    {"garbage_collection", "false", NULL, set_gc},
    {NULL, NULL, NULL, NULL},
};

static void *bfc_parse(const char *conf, GError **err)
{
    bfc_cfg *cfg = g_new0(bfc_cfg, 1);
    cfg->mem_fraction = 0.75;
    cfg->preallocate = true;
    if (!gs_policy_conf_parse(bfc_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t rounded_bytes(uint64_t n)
{
    return (n + kMinAllocationSize - 1) / kMinAllocationSize * kMinAllocationSize;
}

static uint64_t bfc_round(const void *cfg, uint64_t size)
{
    return size ? rounded_bytes(size) : kMinAllocationSize;
}

static unsigned bfc_pool_of(const void *cfg, uint64_t rounded) { return 0; }
static uint64_t bfc_segment_size(const void *cfg, uint64_t rounded) { return rounded; }
static bool bfc_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }

static bool bfc_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size >= 2 * rounded || b->size - rounded >= kMaxInternalFragmentation;
}

static uint64_t bfc_oversize(const void *cfg) { return UINT64_MAX; }

static gs_block *bfc_pick(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                          uint64_t rounded)
{
    return gs_family_best_fit0(h, pool, rounded);
}

/* memory_limit_: the fraction of what this allocator may use. */
static uint64_t memory_limit(gs_heap *h, const bfc_cfg *cfg)
{
    uint64_t base = gs_heap_limit(h) ? gs_heap_limit(h) : gs_heap_device_total(h);
    return (uint64_t)floor((double)base * cfg->mem_fraction);
}

/* BFCAllocator::Extend. state[0]: curr_region_allocation_bytes_ (0 until the first call). */
static gs_status bfc_grow(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                          uint64_t rounded, unsigned attempt)
{
    const bfc_cfg *cfg = cfgv;
    uint64_t *curr = &gs_heap_policy_state(h)[0];
    uint64_t limit = memory_limit(h, cfg), pool_bytes = gs_heap_reserved(h);
    if (!*curr)
        *curr = cfg->preallocate ? rounded_bytes(limit)
                                 : rounded_bytes(MIN(limit, 2 * GS_MiB));
    uint64_t avail = limit > pool_bytes ? limit - pool_bytes : 0;
    avail = avail / kMinAllocationSize * kMinAllocationSize;
    if (rounded > avail) return GS_ERR_OOM;
    bool increased = false;
    while (rounded > *curr) {
        *curr *= 2;
        increased = true;
    }
    uint64_t bytes = MIN(*curr, avail);
    gs_status st;
    while ((st = gs_heap_grow_segment(h, pool, 0, bytes)) == GS_ERR_OOM) {
        uint64_t back = rounded_bytes((uint64_t)((double)bytes * 0.9));
        if (back >= bytes) back = bytes - kMinAllocationSize;
        bytes = back;
        if (bytes < rounded) return GS_ERR_OOM;
    }
    if (st != GS_OK) return st;
    if (!increased) *curr *= 2;
    return GS_OK;
}

static bool bfc_keeps_cache(const void *cfg) { return !((const bfc_cfg *)cfg)->gc; }

const gs_policy_ops gs_policy_bfc = {
    .version = GS_POLICY_VERSION,
    .name = "bfc",
    .summary = "TF/XLA's best-fit-with-coalescing, as JAX uses it (256-byte chunks, regions)",
    .keys = bfc_keys,
    .parse = bfc_parse,
    .cfg_free = g_free,
    .npools = 1,
    .pools = bfc_pools,
    .round_size = bfc_round,
    .pool_of = bfc_pool_of,
    .segment_size = bfc_segment_size,
    .fits = bfc_fits,
    .should_split = bfc_should_split,
    .oversize = bfc_oversize,
    .pick = bfc_pick,
    .grow = bfc_grow,
    .keeps_cache = bfc_keeps_cache,
};
