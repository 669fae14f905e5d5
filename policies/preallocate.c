/* preallocate.c - one arena reserved up front and sub-allocated, as JAX does with
 * XLA_PYTHON_CLIENT_PREALLOCATE (an arena of XLA_PYTHON_CLIENT_MEM_FRACTION of the device, 0.75
 * by default) and vLLM with gpu_memory_utilization (0.9 of the device by default): the program
 * never asks the driver for memory again, so what matters is how well the arena is packed.
 *
 * What it does:
 *   - the first request cudaMallocs the arena: fraction:F of the memory the allocator may use
 *     (the limit, --capacity, when there is one, else the device's total), rounded down to the
 *     driver's 2 MiB, or size:BYTES; the arena is never given back (keeps_cache: the OOM
 *     ladder and empty_cache free nothing), and a request it cannot serve is an OOM;
 *   - sizes round up to align:N (256 bytes by default, the alignment of cudaMalloc);
 *   - fit:best (default): the smallest free block that fits, lowest address among equals;
 *     fit:first: the lowest-addressed free block that fits;
 *   - any remainder is split off, and a freed block merges with its free neighbours;
 *   - streams are not kept apart: one free list for all (as an arena of JAX's or vLLM's has).
 *
 * Where it departs from the originals, on purpose:
 *   - JAX sub-allocates its arena with BFC (the bfc policy, preallocate:true), vLLM with
 *     PyTorch's caching allocator under a cap; this policy is the idealised arena of both, to
 *     show what the fit alone costs. The fraction applies to --capacity when one is given, so
 *     `gpusim whatif` finds the device a fraction needs (min capacity = need / F).
 *   - A request larger than the arena fails at once: no retry, no second arena.
 */
#include <math.h>
#include <string.h>

#include "policies.h"

typedef struct {
    double fraction;  /* of the limit, else the device */
    uint64_t size;    /* 0: use fraction */
    uint64_t align;
    bool first_fit;
} prealloc_cfg;

static const gs_pool_desc prealloc_pools[] = {{.is_small = false}};

static bool set_fraction(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_fraction(key, val, &((prealloc_cfg *)cfg)->fraction, err);
}

static bool set_size(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_size(key, val, 2 * GS_MiB, &((prealloc_cfg *)cfg)->size, err);
}

static bool set_align(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_pow2(key, val, 8, 2 * GS_MiB, &((prealloc_cfg *)cfg)->align, err);
}

static bool set_fit(void *cfg, const char *key, const char *val, GError **err)
{
    prealloc_cfg *c = cfg;
    if (strcmp(val, "best") == 0) c->first_fit = false;
    else if (strcmp(val, "first") == 0) c->first_fit = true;
    else {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be best or first", key, val);
        return false;
    }
    return true;
}

static const gs_policy_key prealloc_keys[] = {
    {"fraction", "F", "0<F<=1: the arena is F of --capacity, else of the device\n"
                      "(default 0.9, vLLM's gpu_memory_utilization; JAX's is 0.75)", set_fraction},
    {"size", "BYTES", "the arena's size instead (512MiB, 20GiB)", set_size},
    {"fit", "best", "best (smallest free block that fits) or first (lowest address)", set_fit},
    {"align", "N", "round requests up to N bytes, a power of two (default 256)", set_align},
    {NULL, NULL, NULL, NULL},
};

static void *prealloc_parse(const char *conf, GError **err)
{
    prealloc_cfg *cfg = g_new0(prealloc_cfg, 1);
    cfg->fraction = 0.9;
    cfg->align = 256;
    if (!gs_policy_conf_parse(prealloc_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t prealloc_round(const void *cfgv, uint64_t size)
{
    const prealloc_cfg *cfg = cfgv;
    if (size == 0) return cfg->align; /* the core serves every request with a block */
    return (size + cfg->align - 1) & ~(cfg->align - 1);
}

static unsigned prealloc_pool_of(const void *cfg, uint64_t rounded) { return 0; }
static uint64_t prealloc_segment_size(const void *cfg, uint64_t rounded) { return rounded; }
static bool prealloc_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }
static bool prealloc_should_split(const void *cfg, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded;
}
static uint64_t prealloc_oversize(const void *cfg) { return UINT64_MAX; }

/* Every block is on stream 0 (one free list for all streams). First fit reads the core's
 * address order, which the core keeps only for fit:first (prealloc_addr_order): the walk over
 * every larger block it replaced made gpt2's replay 1062.7 instructions an event, not 397.2. */
static gs_block *prealloc_pick(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                               uint64_t rounded)
{
    const prealloc_cfg *cfg = cfgv;
    return cfg->first_fit ? gs_pool_first_fit(h, pool, 0, rounded)
                          : gs_family_best_fit0(h, pool, rounded);
}

static bool prealloc_addr_order(const void *cfgv)
{
    return ((const prealloc_cfg *)cfgv)->first_fit;
}

/* The arena's bytes for this heap. */
static uint64_t arena_bytes(gs_heap *h, const void *cfgv)
{
    const prealloc_cfg *cfg = cfgv;
    if (cfg->size) return cfg->size;
    uint64_t base = gs_heap_limit(h) ? gs_heap_limit(h) : gs_heap_device_total(h);
    uint64_t a = (uint64_t)floor((double)base * cfg->fraction);
    return a / (2 * GS_MiB) * (2 * GS_MiB);
}

static bool prealloc_keeps_cache(const void *cfg) { return true; }

/* The arena, once: a heap that has it refuses every other growth. */
static gs_status prealloc_grow(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                               uint64_t rounded, unsigned attempt)
{
    if (gs_heap_segments(h)) return GS_ERR_OOM;
    uint64_t arena = arena_bytes(h, cfg);
    if (arena < rounded || arena == 0) return GS_ERR_OOM;
    return gs_heap_grow_segment(h, pool, 0, arena);
}

const gs_policy_ops gs_policy_preallocate = {
    .version = GS_POLICY_VERSION,
    .name = "preallocate",
    .summary = "one arena reserved up front (JAX, vLLM), best or first fit inside it",
    .keys = prealloc_keys,
    .parse = prealloc_parse,
    .cfg_free = g_free,
    .npools = 1,
    .pools = prealloc_pools,
    .round_size = prealloc_round,
    .pool_of = prealloc_pool_of,
    .segment_size = prealloc_segment_size,
    .fits = prealloc_fits,
    .should_split = prealloc_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = prealloc_oversize,
    .pick = prealloc_pick,
    .grow = prealloc_grow,
    .keeps_cache = prealloc_keeps_cache,
    .addr_order = prealloc_addr_order,
};
