/* rmm_arena.c - RAPIDS Memory Manager's arena_memory_resource (rmm/mr/arena_memory_resource.hpp,
 * its implementation src/mr/detail/arena_memory_resource_impl.cpp and the arenas in
 * rmm/mr/detail/arena.hpp), as rmm.mr.ArenaMemoryResource(upstream, arena_size) sets it up.
 *
 * What the resource does, and where it is here:
 *   - sizes round up to 256 bytes (CUDA_ALLOCATION_ALIGNMENT; RMM's size classes are a compile
 *     option, RMM_ARENA_USE_SIZE_CLASSES, off by default): round_size;
 *   - one upstream allocation of arena_size bytes (default: half the free device memory; here
 *     half of --capacity, else of the device) is the global arena, a set of superblocks in
 *     address order; superblocks are never smaller than 1 MiB (superblock::minimum_size);
 *   - each stream has its own arena, a set of superblocks taken from the global arena. A
 *     request of at most 1 MiB (global_arena::handles: size > minimum_size goes global) takes
 *     the first fit by address among its stream's superblocks, splitting off the rest; when
 *     none fits, the stream's arena takes a new 1 MiB superblock from the global arena
 *     (expand_arena, acquire). Here: pool 0 ("small"), whose segments are the superblocks of
 *     the stream arenas, each on its stream; pick takes the lowest-addressed free block of the
 *     request's stream that fits, grow adds a 1 MiB segment on that stream;
 *   - a larger request is served from the global arena directly: the first superblock by
 *     address that holds it, split so that the remainder (if at least 1 MiB) stays a free
 *     superblock. Here: pool 1 ("large"), stream 0, its segments the superblocks of large
 *     requests; pick takes the lowest-addressed free block that fits, grow adds a segment of
 *     exactly the request;
 *   - a freed block coalesces within its superblock, and goes back to the superblock it came
 *     from whatever stream frees it (deallocate_from_other_arena): the core keeps a block on
 *     its segment's stream, so that is what the replay does too;
 *   - a large allocation's superblock that becomes empty goes back to the global arena at
 *     once, and coalesces there with free neighbours; a stream arena's empty superblocks stay
 *     with the stream until the arena is cleaned;
 *   - when a request fails, RMM synchronises the device, cleans every arena (defragment: all
 *     superblocks back to the global arena) and tries once more; then rmm::out_of_memory.
 *     Here: release_some gives back every superblock with nothing allocated in it, of every
 *     stream, and growth is tried once more;
 *   - the upstream allocation is given back only when the resource is destroyed: keeps_cache
 *     (empty_cache frees nothing; no counted retry).
 *
 * What the numbers mean: the replay's segments are the superblocks carved out of the arena and
 * in use (by a stream arena, or by a large allocation), so reserved_bytes is the part of the
 * arena that the resource has handed out, never more than arena_size; the free rest of the
 * global arena is not counted. The device holds arena_size bytes from the first request. An
 * arena_size above --capacity fails every request (RMM's constructor would throw).
 *
 * Where it departs from RMM, on purpose:
 *   - Superblocks are segments, each made where the backend puts it, so the global arena's own
 *     fragmentation (a large request failing for want of contiguous free superblocks while
 *     enough are free in total) is not modelled: the global arena serves a request whenever
 *     arena_size less the superblocks in use holds it.
 *   - A freed large superblock is given back to the global arena at the next growth (RMM: at
 *     the free); until then it serves large requests first fit, as RMM's global arena would.
 *   - Defragment gives back only the superblocks with nothing allocated; RMM moves every
 *     superblock of every arena to the global arena, where a later request of any stream may
 *     take a partly used one whole. A superblock of less than 2 MiB is never split in RMM (the
 *     remainder would be below 1 MiB): here stream arenas take exactly 1 MiB each time.
 *   - The device synchronisation of a defragment is not counted in the statistics, and a
 *     request of 0 bytes gets 256 (RMM returns nullptr). Per-thread default-stream arenas do
 *     not exist in a trace: every stream has a stream arena.
 */
#include <math.h>
#include <string.h>

#include "policies.h"

enum { kAlign = 256 };                         /* rmm::CUDA_ALLOCATION_ALIGNMENT */
static const uint64_t kSuper = UINT64_C(1) << 20; /* superblock::minimum_size */

enum { kSmall = 0, kLarge = 1 };

typedef struct {
    uint64_t size;  /* 0: size_frac of the limit or device */
    double size_frac;
} arena_cfg;

static const gs_pool_desc arena_pools[] = {{.is_small = true}, {.is_small = false}};

static bool set_arena_size(void *cfgv, const char *key, const char *val, GError **err)
{
    arena_cfg *cfg = cfgv;
    int pct = gs_family_percent(key, val, &cfg->size_frac, err);
    if (pct < 0) return false;
    if (pct) {
        cfg->size = 0;
        return true;
    }
    /* RMM: "Arena size smaller than minimum superblock size." */
    if (!gs_family_size(key, val, kSuper, &cfg->size, err)) return false;
    cfg->size = cfg->size / kAlign * kAlign; /* RMM aligns it down */
    cfg->size_frac = 0;
    return true;
}

static bool set_ignored(void *cfg, const char *key, const char *val, GError **err)
{
    bool b;
    return gs_family_bool(key, val, &b, err);
}

static const gs_policy_key arena_keys[] = {
    {"arena_size", "BYTES",
     "the global arena, one upstream allocation: bytes (at least\n"
     "1 MiB), or P% of --capacity, else of the device (default 50%,\n"
     "as RMM's half of the free memory)", set_arena_size},
    /* writes a log file on failure; nothing to replay */
    {"dump_log_on_failure", "B", NULL, set_ignored},
    {NULL, NULL, NULL, NULL},
};

static void *arena_parse(const char *conf, GError **err)
{
    arena_cfg *cfg = g_new0(arena_cfg, 1);
    cfg->size_frac = 0.5;
    if (!gs_policy_conf_parse(arena_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t arena_bytes(gs_heap *h, const arena_cfg *cfg)
{
    if (cfg->size) return cfg->size;
    uint64_t base = gs_heap_limit(h) ? gs_heap_limit(h) : gs_heap_device_total(h);
    return (uint64_t)floor((double)base * cfg->size_frac) / kAlign * kAlign;
}

static uint64_t arena_round(const void *cfg, uint64_t size)
{
    return size ? (size + kAlign - 1) / kAlign * kAlign : kAlign;
}

/* global_arena::handles: strictly above the minimum superblock */
static unsigned arena_pool_of(const void *cfg, uint64_t rounded)
{
    return rounded > kSuper ? kLarge : kSmall;
}
static uint64_t arena_segment_size(const void *cfg, uint64_t rounded)
{
    return MAX(rounded, kSuper);
}
static bool arena_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }
static bool arena_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded;
}
static uint64_t arena_oversize(const void *cfg) { return UINT64_MAX; }
static bool arena_keeps_cache(const void *cfg) { return true; }
static bool arena_addr_order(const void *cfg) { return true; }

static gs_block *arena_pick(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                            uint64_t rounded)
{
    /* The lowest-addressed free block of the stream that holds the request: RMM's first fit
     * over a set of superblocks in address order, then over each one's free blocks in address
     * order (one descent of the core's address order: addr_order). Large superblocks all live
     * on stream 0: the global arena is one, shared by the streams. */
    return gs_pool_first_fit(h, pool, gs_pool_kind(pool) == kLarge ? 0 : stream, rounded);
}

/* Give back the free blocks of pool that are whole segments (superblocks with nothing in them)
 * on stream 0, or on every stream when all; true if any went. In the index's order (stream,
 * size, address), as a walk of the index would: the core keeps them at hand
 * (gs_pool_whole_blocks), since this runs at every growth and most find none. */
static bool give_back_empty(gs_heap *h, unsigned pool, bool all, gs_status *st)
{
    bool any = false;
    size_t n;
    gs_block **whole = gs_pool_whole_blocks(h, pool, &n);
    for (size_t i = 0; i < n && (all || whole[i]->stream == 0); i++) {
        *st = gs_heap_release_block(h, whole[i]);
        if (*st != GS_OK) break;
        any = true;
    }
    g_free(whole);
    return any;
}

static gs_status arena_grow(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                            uint64_t rounded, unsigned attempt)
{
    const arena_cfg *cfg = cfgv;
    uint64_t arena = arena_bytes(h, cfg);
    /* the upstream allocation itself: RMM's constructor fails when the device lacks it, under
     * a limit or with none (an arena of 100 GiB on an 80 GiB device "completed") */
    uint64_t room = gs_heap_limit(h) ? gs_heap_limit(h) : gs_heap_device_total(h);
    if (room && arena > room) return GS_ERR_OOM;
    /* The empty superblocks of large allocations were back in the global arena at their free:
     * hand them back before carving a new one (same private pool's large pool). */
    gs_status st = GS_OK;
    give_back_empty(h, pool - gs_pool_kind(pool) + kLarge, false, &st);
    if (st != GS_OK) return st;
    uint64_t need = arena_segment_size(cfg, rounded);
    if (gs_heap_reserved(h) + need > arena) return GS_ERR_OOM; /* "No room in arena." */
    return gs_heap_grow_segment(h, pool, gs_pool_kind(pool) == kLarge ? 0 : stream, need);
}

/* defragment(): every arena's superblocks back to the global arena; here the empty ones, of
 * both pools and every stream. Growth is tried again when any went. */
static bool arena_release_some(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                               uint64_t rounded, gs_status *st)
{
    unsigned base = pool - gs_pool_kind(pool);
    bool small = give_back_empty(h, base + kSmall, true, st);
    if (*st != GS_OK) return false;
    bool large = give_back_empty(h, base + kLarge, true, st);
    if (*st != GS_OK) return false;
    return small || large;
}

const gs_policy_ops gs_policy_rmm_arena = {
    .version = GS_POLICY_VERSION,
    .name = "rmm-arena",
    .summary = "RAPIDS RMM's arena_memory_resource: per-stream arenas of 1 MiB superblocks",
    .keys = arena_keys,
    .parse = arena_parse,
    .cfg_free = g_free,
    .npools = 2,
    .pools = arena_pools,
    .round_size = arena_round,
    .pool_of = arena_pool_of,
    .segment_size = arena_segment_size,
    .fits = arena_fits,
    .should_split = arena_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = arena_oversize,
    .release_some = arena_release_some,
    .pick = arena_pick,
    .grow = arena_grow,
    .keeps_cache = arena_keeps_cache,
    .addr_order = arena_addr_order,
};
