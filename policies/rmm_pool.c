/* rmm_pool.c - RAPIDS Memory Manager's pool_memory_resource (rmm/mr/pool_memory_resource.hpp,
 * its implementation src/mr/detail/pool_memory_resource_impl.cpp, over
 * detail/stream_ordered_memory_resource.hpp and detail/coalescing_free_list.hpp), as
 * rmm.reinitialize(pool_allocator=True, initial_pool_size=..., maximum_pool_size=...) sets it up.
 *
 * What the pool does, and where it is here:
 *   - sizes round up to 256 bytes (CUDA_ALLOCATION_ALIGNMENT): round_size;
 *   - the initial pool (initial_pool_size; RMM's Python default is half of the free device
 *     memory, here half of --capacity, else of the device) is one upstream allocation made when
 *     the resource is built, and its block goes to the default stream's free list: here at the
 *     first request, on stream 0;
 *   - free lists are per stream (stream_free_blocks_). A request on stream S takes the best fit
 *     of S's list (the smallest block that fits, lowest address among equals); failing that,
 *     the best fit of the first other stream's list that has one (cudaStreamWaitEvent on that
 *     stream's event: reuse after a stream dependency); failing that, RMM merges the other
 *     lists into S's and searches again; failing that, it grows: pick, gs_family_stream_first;
 *   - a block is always split, the remainder back in the list it came from
 *     (allocate_and_insert_remainder): should_split;
 *   - a freed block coalesces with free neighbours of the same upstream allocation (blocks
 *     never merge across upstream allocations: is_head): the core's merge within a segment;
 *   - growth (expand_pool, size_to_grow, try_to_expand): without maximum_pool_size the pool
 *     asks upstream for max(request, current pool size), i.e. it doubles; with one, for
 *     max(request, half of what the maximum leaves), or fails when the request does not fit
 *     what is left. A refused upstream allocation is retried at half the size, down to the
 *     request, then the request fails (rmm::out_of_memory): grow, on the requesting stream;
 *   - the pool never gives memory back before the resource is destroyed (release()):
 *     keeps_cache (empty_cache frees nothing; no retry ladder).
 *
 * Where it departs from RMM, on purpose:
 *   - A freed block returns to the free list of the stream whose growth made its upstream
 *     allocation (the core keeps a block on its segment's stream), where RMM puts it in the
 *     list of the stream that frees it. For a trace on one stream, and for a block freed on
 *     the stream that grew the pool, the two are the same; across streams RMM's lists trade
 *     blocks, and the replay's do not.
 *   - RMM's second pass (merge the other streams' lists into S's, synchronising them, then
 *     search) can only find a block by coalescing neighbours that sat in different lists; the
 *     replay has no such neighbours, so the pass finds nothing new and is not made. Neither
 *     the stream waits nor the merges' synchronisations are counted in the statistics.
 *   - A request of 0 bytes gets 256 (RMM returns nullptr); a replay serves every request.
 *   - An upstream allocation that would pass --capacity is refused like a device OOM, so the
 *     halving retry runs against the capacity as it would against the device.
 */
#include <math.h>
#include <string.h>

#include "policies.h"

enum { kAlign = 256 }; /* rmm::CUDA_ALLOCATION_ALIGNMENT */

typedef struct {
    uint64_t initial;   /* 0 with initial_frac: a fraction of the limit or device */
    double initial_frac;
    uint64_t maximum;   /* 0: none */
} rmm_pool_cfg;

static const gs_pool_desc rmm_pools[] = {{.is_small = false}};

static uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

static bool set_initial(void *cfgv, const char *key, const char *val, GError **err)
{
    rmm_pool_cfg *cfg = cfgv;
    /* a trailing % is RMM's percent_of_free_device_memory */
    int pct = gs_family_percent(key, val, &cfg->initial_frac, err);
    if (pct < 0) return false;
    if (pct) {
        cfg->initial = 0;
        return true;
    }
    uint64_t v = 0;
    if (strcmp(val, "0") != 0 && !gs_family_size(key, val, kAlign, &v, err)) return false;
    if (v % kAlign) {
        /* RMM: "initial_pool_size is not aligned to a multiple of 256 bytes" */
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a multiple of 256 bytes", key, val);
        return false;
    }
    cfg->initial = v;
    cfg->initial_frac = 0;
    return true;
}

static bool set_maximum(void *cfgv, const char *key, const char *val, GError **err)
{
    rmm_pool_cfg *cfg = cfgv;
    if (!gs_family_size(key, val, kAlign, &cfg->maximum, err)) return false;
    if (cfg->maximum % kAlign) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a multiple of 256 bytes", key, val);
        return false;
    }
    return true;
}

static const gs_policy_key rmm_pool_keys[] = {
    {"initial_pool_size", "BYTES",
     "the pool made up front: bytes (0: none), or P% of --capacity, else of\n"
     "the device (default 50%, RMM's Python default)", set_initial},
    {"maximum_pool_size", "BYTES",
     "the pool never grows past this (default: none, and\n"
     "growth doubles the pool)",
     set_maximum},
    {NULL, NULL, NULL, NULL},
};

static void *rmm_pool_parse(const char *conf, GError **err)
{
    rmm_pool_cfg *cfg = g_new0(rmm_pool_cfg, 1);
    cfg->initial_frac = 0.5;
    if (!gs_policy_conf_parse(rmm_pool_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t rmm_round(const void *cfg, uint64_t size)
{
    return size ? align_up(size) : kAlign;
}

static unsigned rmm_pool_of(const void *cfg, uint64_t rounded) { return 0; }
static uint64_t rmm_segment_size(const void *cfg, uint64_t rounded) { return rounded; }
static bool rmm_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }
static bool rmm_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded;
}
static uint64_t rmm_oversize(const void *cfg) { return UINT64_MAX; }
static bool rmm_keeps_cache(const void *cfg) { return true; }

static gs_block *rmm_pick(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                          uint64_t rounded)
{
    return gs_family_stream_first(h, pool, stream, rounded, true);
}

/* try_to_expand: try_size, halved on each refusal down to min_size. */
static gs_status try_to_expand(gs_heap *h, unsigned pool, uint32_t stream, uint64_t try_size,
                               uint64_t min_size)
{
    while (try_size >= min_size) {
        gs_status st = gs_heap_grow_segment(h, pool, stream, try_size);
        if (st != GS_ERR_OOM) return st;
        if (try_size == min_size) break;
        try_size = MAX(min_size, try_size / 2);
    }
    return GS_ERR_OOM;
}

/* state[0]: 1 once the initial pool was made (or tried). Its size counts in the pool's size
 * as RMM's current_pool_size_ does; the pool never shrinks, so that is the heap's reserved
 * bytes. */
static gs_status rmm_grow(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                          uint64_t rounded, unsigned attempt)
{
    const rmm_pool_cfg *cfg = cfgv;
    uint64_t *made = &gs_heap_policy_state(h)[0];
    if (!*made) {
        *made = 1;
        uint64_t initial = cfg->initial;
        if (!initial) {
            uint64_t base = gs_heap_limit(h) ? gs_heap_limit(h) : gs_heap_device_total(h);
            initial = (uint64_t)floor((double)base * cfg->initial_frac) / kAlign * kAlign;
        }
        if (cfg->maximum && initial > cfg->maximum) initial = cfg->maximum;
        if (initial) {
            gs_status st = try_to_expand(h, pool, 0, initial, initial);
            if (st != GS_OK && st != GS_ERR_OOM) return st;
            if (st == GS_OK && initial >= rounded) return GS_OK;
        }
    }
    uint64_t size = rounded, pool_size = gs_heap_reserved(h), grow;
    if (cfg->maximum) {
        uint64_t remaining = cfg->maximum > pool_size ? align_up(cfg->maximum - pool_size) : 0;
        if (size > remaining) return GS_ERR_OOM;
        grow = MAX(size, remaining / 2);
    } else {
        grow = MAX(size, pool_size);
    }
    return try_to_expand(h, pool, stream, grow, size);
}

const gs_policy_ops gs_policy_rmm_pool = {
    .version = GS_POLICY_VERSION,
    .name = "rmm-pool",
    .summary = "RAPIDS RMM's pool_memory_resource: stream-ordered best fit, doubling growth",
    .keys = rmm_pool_keys,
    .parse = rmm_pool_parse,
    .cfg_free = g_free,
    .npools = 1,
    .pools = rmm_pools,
    .round_size = rmm_round,
    .pool_of = rmm_pool_of,
    .segment_size = rmm_segment_size,
    .fits = rmm_fits,
    .should_split = rmm_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = rmm_oversize,
    .pick = rmm_pick,
    .grow = rmm_grow,
    .keeps_cache = rmm_keeps_cache,
};
