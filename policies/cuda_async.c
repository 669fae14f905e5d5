/* cuda_async.c - a model of the driver's stream-ordered memory pool behind cudaMallocAsync and
 * cudaFreeAsync (the device's default cudaMemPool_t), as PyTorch's
 * PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync uses it (c10/cuda/CUDAMallocAsyncAllocator.cpp:
 * one pool per device, its release threshold set to UINT64_MAX, empty_cache = synchronise and
 * cudaMemPoolTrimTo(pool, 0)).
 *
 * The driver's pool is closed source: this is a model, with its parameters stated and checked
 * against the real pool on the device (lab/device_pools.sh; the fit is in BENCHMARKS.md):
 *   - requests round up to align:N bytes (default 512);
 *   - the pool reserves physical memory in chunks: a request no free block serves reserves
 *     one chunk of the request rounded up to granularity:BYTES, at least chunk:BYTES, on the
 *     requesting stream (both 32 MiB by default: on an H100 with driver 580, every growth of
 *     the real pool's ReservedMemCurrent over five traces was a multiple of 32 MiB, and the
 *     smallest was 32 MiB: lab/results/h100-2026-11-23-pools);
 *   - a request takes the smallest free block that fits on its own stream (memory freed on a
 *     stream is reusable by later work on that stream at once); failing that, when
 *     cudaMemPoolReuseAllowInternalDependencies is on (the driver's default), the smallest on
 *     another stream (the driver inserts the dependency on the free's stream); a block is
 *     always split and freed blocks coalesce within their chunk;
 *   - cudaMemPoolAttrReleaseThreshold (default 0; PyTorch sets UINT64_MAX): at a
 *     synchronisation the pool gives back wholly free chunks until it reserves no more than the
 *     threshold. A trace records no synchronisations, so the replay trims where it knows the
 *     program waits: after a failed growth (release_some: trim to the threshold, then try
 *     again), and at empty_cache (PyTorch's cudaMemPoolTrimTo(0): every free chunk);
 *   - when the driver still cannot grow, everything free is trimmed and growth is tried once
 *     more (the ladder's full release, counted as a retry), then the request fails.
 *
 * Three rules of the model (keys vmm, remap and small; BENCHMARKS.md, "Two model rules measured
 * against the same readings"): the real pool's growths were smaller than some requests, so a
 * block spans memory mapped at different growths; vmm:1 makes the pool one virtual range a
 * stream whose chunks are mapped at its end, extending a free block there (the core's
 * expandable segments, the chunk as the page); small:BYTES gives smaller requests a range of
 * their own. lab/async_probe.py's request-by-request readings (BENCHMARKS.md, "The driver's
 * pool, request by request") confirm the free tail extended and show a third rule, remap:1
 * (with vmm:1): a growth first moves the stream's free whole chunks behind the new range and
 * creates only what is missing (the core's stitched pools, a handle a chunk, always moving);
 * they refute a range of its own for small requests (a 16 MiB block, 100 of 64 KiB and one of
 * 8 MiB shared one 32 MiB chunk). vmm:1,remap:1 is the default since 2026-12-06: it reserves
 * the driver's peak exactly on three of four traces run with a synchronisation after every
 * free, within 3% on the fourth, where fixed chunks (vmm:0) reserved 7-21% more
 * (lab/async_modes.py model; BENCHMARKS.md, "cuda-async: one range, chunks remapped"). Where
 * the real pool places a request is
 * known now (lab/driver_pool.py, exact on every reading: BENCHMARKS.md, "The driver's pool: the
 * placement rule"): best fit among the blocks freed since the last synchronisation or miss
 * ("young", which merge only with each other), then among the others, numbered ties. This
 * model does not follow it: the core merges every free neighbour and splits a block only from
 * its start; and which blocks are young depends on where the program synchronised, which a
 * trace does not record.
 *
 * Where it departs from the driver, knowingly:
 *   - where the program waits decides the real pool's peak (the blocks freed since the last
 *     wait are kept apart: lab/driver_pool.py), and a trace does not record it: the same
 *     requests reserved 5,632, 6,048 and 5,600 MiB on ResNet-50 with a wait after every free,
 *     with none on an idle GPU and on a busy one; the model's 5,632 is the first. On a busy
 *     GPU it reserved 0.89-1.01 x the real pool's, on an idle one 0.80-1.00 x;
 *   - synchronisations the program made (cudaStreamSynchronize, .item(), the end of a step) are
 *     not in a trace: with a release threshold below the pool's size, the real pool gives back
 *     memory at those points and the replay does not. Without a synchronisation the real pool
 *     keeps its memory whatever the threshold (measured: 0 and UINT64_MAX gave the same
 *     reserved memory on every trace);
 *   - cudaMemPoolReuseFollowEventDependencies and ReuseAllowOpportunistic are not modelled
 *     apart: with internal dependencies allowed (the default) they change only when the wait
 *     happens, not which memory is used.
 */
#include <string.h>

#include "policies.h"

typedef struct {
    uint64_t threshold;   /* cudaMemPoolAttrReleaseThreshold */
    bool internal_deps;   /* cudaMemPoolReuseAllowInternalDependencies */
    uint64_t align, granularity, chunk;
    bool vmm;       /* model: chunks mapped at the end of one virtual range a stream */
    bool remap;     /* model (with vmm): free whole chunks move behind a growth first */
    bool remap_set; /* remap given in the setting (vmm:0 alone turns the default remap off) */
    uint64_t small; /* model: requests below this in a range of their own (0: none) */
} async_cfg;

static const gs_pool_desc async_pools[] = {{.is_small = false}, {.is_small = true}};

static bool set_threshold(void *cfg, const char *key, const char *val, GError **err)
{
    uint64_t *t = &((async_cfg *)cfg)->threshold;
    if (!g_ascii_strcasecmp(val, "UINT64_MAX") || !g_ascii_strcasecmp(val, "max")) {
        *t = UINT64_MAX;
        return true;
    }
    if (!strcmp(val, "0")) {
        *t = 0;
        return true;
    }
    return gs_family_size(key, val, 1, t, err);
}

static bool set_deps(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_bool(key, val, &((async_cfg *)cfg)->internal_deps, err);
}

static bool set_align(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_pow2(key, val, 256, 2 * GS_MiB, &((async_cfg *)cfg)->align, err);
}

static bool set_granularity(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_pow2(key, val, 64 * 1024, GS_GiB, &((async_cfg *)cfg)->granularity, err);
}

static bool set_chunk(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_size(key, val, 64 * 1024, &((async_cfg *)cfg)->chunk, err);
}

static bool set_vmm(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_bool(key, val, &((async_cfg *)cfg)->vmm, err);
}

static bool set_remap(void *cfg, const char *key, const char *val, GError **err)
{
    ((async_cfg *)cfg)->remap_set = true;
    return gs_family_bool(key, val, &((async_cfg *)cfg)->remap, err);
}

static bool set_small(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_size(key, val, 0, &((async_cfg *)cfg)->small, err);
}

static const gs_policy_key async_keys[] = {
    {"cudaMemPoolAttrReleaseThreshold", "BYTES",
     "free chunks above this go back when the program\n"
     "waits (default 0; PyTorch's backend:cudaMallocAsync sets UINT64_MAX,\nalso written max)",
     set_threshold},
    {"cudaMemPoolReuseAllowInternalDependencies", "1",
     "1: a stream may reuse memory freed on another\n"
     "(the driver's default); 0: not",
     set_deps},
    {"granularity", "BYTES",
     "model: chunks are whole multiples of this\n"
     "(default 32MiB, measured)",
     set_granularity},
    {"chunk", "BYTES",
     "model: the smallest chunk the pool reserves\n"
     "(default 32MiB, measured)",
     set_chunk},
    {"align", "N", "model: requests round up to N bytes, a power of two (default 512)", set_align},
    {"vmm", "1",
     "model: 1 (the default): the pool is one virtual range a stream,\n"
     "grown by chunks at its end that extend a free block there; 0: fixed\n"
     "chunks, each a segment (the default until 2026-12-06)",
     set_vmm},
    {"remap", "1",
     "model, with vmm:1: 1 (the default): a growth first moves the\n"
     "stream's free whole chunks from anywhere in its range behind the new\n"
     "range, and creates only what is still missing",
     set_remap},
    {"small", "BYTES", "model: requests below this in chunks of their own", set_small},
    {"release_threshold", "BYTES", NULL, set_threshold},
    {NULL, NULL, NULL, NULL},
};

static void *async_parse(const char *conf, GError **err)
{
    async_cfg *cfg = g_new0(async_cfg, 1);
    cfg->internal_deps = true;
    cfg->align = 512;
    cfg->granularity = 32 * GS_MiB; /* every growth of the real pool was a multiple of 32 MiB */
    cfg->chunk = 32 * GS_MiB;
    /* one virtual range, free chunks remapped behind a growth: the peaks of the driver's pool
     * when the program synchronises (BENCHMARKS.md, "cuda-async: one range, chunks remapped") */
    cfg->vmm = true;
    cfg->remap = true;
    if (!gs_policy_conf_parse(async_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    if (!cfg->vmm && !cfg->remap_set) cfg->remap = false; /* vmm:0 alone: the fixed chunks */
    if (cfg->remap && !cfg->vmm) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "remap:1 moves chunks within one virtual range: it needs vmm:1");
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t async_round(const void *cfgv, uint64_t size)
{
    const async_cfg *cfg = cfgv;
    if (size == 0) return cfg->align; /* the core serves every request with a block */
    return (size + cfg->align - 1) & ~(cfg->align - 1);
}

static unsigned async_pool_of(const void *cfgv, uint64_t rounded)
{
    const async_cfg *cfg = cfgv;
    return rounded < cfg->small ? 1 : 0;
}
static uint64_t async_segment_size(const void *cfgv, uint64_t rounded)
{
    const async_cfg *cfg = cfgv;
    uint64_t g = cfg->granularity;
    uint64_t c = (rounded + g - 1) / g * g;
    return MAX(c, cfg->chunk);
}
static bool async_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }
static bool async_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded;
}
static uint64_t async_oversize(const void *cfg) { return UINT64_MAX; }

static gs_block *async_pick(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                            uint64_t rounded)
{
    const async_cfg *cfg = cfgv;
    /* the request's own stream first, taken out in the descent that finds it (pick_takes) */
    gs_block *b = gs_pool_take_lower_bound(h, pool, stream, rounded);
    if (b || !cfg->internal_deps) return b;
    b = gs_family_other_stream_first(h, pool, stream, rounded);
    if (b) gs_pool_take(h, b);
    return b;
}

static gs_status async_grow(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                            uint64_t rounded, unsigned attempt)
{
    const async_cfg *cfg = cfgv;
    if (cfg->remap) return gs_heap_grow_stitched(h, pool, stream, rounded);
    if (cfg->vmm) return gs_heap_grow_pages(h, pool, stream, rounded);
    return gs_heap_grow_segment(h, pool, stream, async_segment_size(cfg, rounded));
}

static uint64_t async_page(const void *cfgv, unsigned pool)
{
    const async_cfg *cfg = cfgv;
    return cfg->vmm ? cfg->granularity : 0;
}

/* remap:1: the pool is stitched with a handle a chunk, always (the driver moved a free chunk
 * behind a 64 MiB request in a pool of 96 MiB that was mostly free: no notion of plenty), and
 * no growth ahead of need. */
static bool async_stitch(const void *cfgv, unsigned pool, gs_stitch_conf *conf)
{
    const async_cfg *cfg = cfgv;
    if (!cfg->remap) return false;
    *conf = (gs_stitch_conf){.max_handle = cfg->granularity};
    return true;
}

/* The synchronisation after a failed growth: trim wholly free chunks, newest first, down to
 * the release threshold. Growth is tried again when anything went back. */
static bool async_release_some(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                               uint64_t rounded, gs_status *st)
{
    const async_cfg *cfg = cfgv;
    bool released = false;
    if (cfg->vmm) {
        /* the model's free pages are not chosen one by one here: all of them go back (exact
         * for the driver's default threshold 0, more than the driver gives back above it) */
        if (gs_heap_reserved(h) <= cfg->threshold) return false;
        uint64_t before = gs_heap_reserved(h);
        *st = gs_heap_release_cached(h);
        return *st == GS_OK && gs_heap_reserved(h) < before;
    }
    const gs_segment *s = gs_heap_segments(h);
    while (s && gs_heap_reserved(h) > cfg->threshold) {
        const gs_segment *next = s->next;
        gs_block *b = s->head;
        if (b->state == GS_BLOCK_FREE && !b->next) {
            *st = gs_heap_release_block(h, b);
            if (*st != GS_OK) return false;
            released = true;
        }
        s = next;
    }
    return released;
}

const gs_policy_ops gs_policy_cuda_async = {
    .version = GS_POLICY_VERSION,
    .name = "cuda-async",
    .summary = "a model of the driver's cudaMallocAsync pool (release threshold, streams)",
    .keys = async_keys,
    .parse = async_parse,
    .cfg_free = g_free,
    .npools = 2,
    .pools = async_pools,
    .round_size = async_round,
    .pool_of = async_pool_of,
    .segment_size = async_segment_size,
    .expandable_page = async_page,
    .stitch = async_stitch,
    .fits = async_fits,
    .should_split = async_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = async_oversize,
    .pick = async_pick,
    .grow = async_grow,
    .release_some = async_release_some,
    .pick_takes = true,
};
