/* tlsf.c - Two-Level Segregated Fit (Masmano et al., ECRTS 2004; Matthew Conte's tlsf.c, the
 * implementation most allocators borrow) as a gpusim policy: O(1) allocation from free lists
 * segregated by size class, over pools of device memory.
 *
 * What TLSF does, and where it is here:
 *   - sizes round up to align:N (tlsf.c's ALIGN_SIZE is 8; a GPU allocator aligns to 256, the
 *     default here);
 *   - classes: first level the power of two of the size, second level 2^sl_bits subdivisions
 *     of it (tlsf.c: SL_INDEX_COUNT_LOG2 = 5, 32 classes); sizes below align << sl_bits share
 *     one first-level row of align-wide classes;
 *   - good fit (mapping_search): the request is rounded up to the next class boundary, then
 *     the first non-empty class at or above it gives its block, so the block always fits and
 *     no list is searched; a block of the request's own class that would fit is passed over:
 *     pick;
 *   - the block is split when the remainder can hold a block (block_can_split), and a freed
 *     block merges with its free physical neighbours at once;
 *   - one set of lists for all streams (TLSF knows none): every pool is made on stream 0.
 *
 * The growth model (TLSF leaves it to the user, tlsf_add_pool): when no class serves a request,
 * a new pool of pool_size bytes (default 64 MiB), or of the request's class boundary rounded up
 * to 2 MiB when that is larger, is cudaMalloc'd and added; under pressure (the OOM ladder) and
 * at empty_cache, pools that are wholly free are given back (tlsf_remove_pool), then growth is
 * tried again.
 *
 * Where it departs from tlsf.c, on purpose:
 *   - Within a class tlsf.c takes the head of the class's list (the block freed last); gpusim's
 *     index orders a class by (size, address), so it takes the class's smallest block, lowest
 *     address first. Same class, same O(1) cost in TLSF's terms; the placement can differ.
 *   - No block headers: device memory holds no metadata (tlsf.c spends a word per block in the
 *     memory itself), so a split leaves any remainder of at least align bytes.
 */
#include "policies.h"

typedef struct {
    uint64_t align;
    unsigned sl_bits;
    uint64_t pool_size;
} tlsf_cfg;

static const gs_pool_desc tlsf_pools[] = {{.is_small = false}};

static bool set_align(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_pow2(key, val, 8, 2 * GS_MiB, &((tlsf_cfg *)cfg)->align, err);
}

static bool set_sl_bits(void *cfg, const char *key, const char *val, GError **err)
{
    char *end;
    guint64 v = g_ascii_strtoull(val, &end, 10);
    if (!*val || *end || v < 1 || v > 6) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a whole number from 1 to 6", key, val);
        return false;
    }
    ((tlsf_cfg *)cfg)->sl_bits = (unsigned)v;
    return true;
}

static bool set_pool_size(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_family_size(key, val, 2 * GS_MiB, &((tlsf_cfg *)cfg)->pool_size, err);
}

static const gs_policy_key tlsf_keys[] = {
    {"sl_bits", "N", "2^N second-level classes per power of two (1..6, default 5)", set_sl_bits},
    {"align", "N", "round requests up to N bytes, a power of two (default 256)", set_align},
    {"pool_size", "BYTES", "each pool added on a miss (default 64MiB; a larger request\n"
                           "gets a pool of its own)", set_pool_size},
    {NULL, NULL, NULL, NULL},
};

static void *tlsf_parse(const char *conf, GError **err)
{
    tlsf_cfg *cfg = g_new0(tlsf_cfg, 1);
    cfg->align = 256;
    cfg->sl_bits = 5;
    cfg->pool_size = 64 * GS_MiB;
    if (!gs_policy_conf_parse(tlsf_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static uint64_t tlsf_round(const void *cfgv, uint64_t size)
{
    const tlsf_cfg *cfg = cfgv;
    if (size == 0) return cfg->align;
    return (size + cfg->align - 1) & ~(cfg->align - 1);
}

/* mapping_search: the lower edge of the first class whose every block fits size. Below
 * align << sl_bits the classes are align wide, so an aligned size is its own class's edge. */
uint64_t gs_tlsf_search_size(const void *cfgv, uint64_t size)
{
    const tlsf_cfg *cfg = cfgv;
    if (size < cfg->align << cfg->sl_bits) return size;
    unsigned fl = 63u - (unsigned)__builtin_clzll(size);
    uint64_t width = UINT64_C(1) << (fl - cfg->sl_bits);
    return (size + width - 1) & ~(width - 1);
}

static unsigned tlsf_pool_of(const void *cfg, uint64_t rounded) { return 0; }
static uint64_t tlsf_segment_size(const void *cfg, uint64_t rounded) { return rounded; }
static bool tlsf_fits(const void *cfg, const gs_block *b, uint64_t rounded) { return true; }
static bool tlsf_should_split(const void *cfgv, const gs_block *b, uint64_t rounded)
{
    return b->size > rounded; /* remainders are multiples of align */
}
static uint64_t tlsf_oversize(const void *cfg) { return UINT64_MAX; }

static gs_block *tlsf_pick(gs_heap *h, const void *cfg, unsigned pool, uint32_t stream,
                           uint64_t rounded)
{
    /* every block is on stream 0; taken out in the descent that finds it (pick_takes) */
    return gs_pool_take_lower_bound(h, pool, 0, gs_tlsf_search_size(cfg, rounded));
}

static gs_status tlsf_grow(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                           uint64_t rounded, unsigned attempt)
{
    const tlsf_cfg *cfg = cfgv;
    uint64_t need = gs_tlsf_search_size(cfg, rounded);
    uint64_t bytes = MAX(cfg->pool_size, need);
    bytes = (bytes + 2 * GS_MiB - 1) / (2 * GS_MiB) * (2 * GS_MiB);
    return gs_heap_grow_segment(h, pool, 0, bytes);
}

const gs_policy_ops gs_policy_tlsf = {
    .version = GS_POLICY_VERSION,
    .name = "tlsf",
    .summary = "two-level segregated fit (O(1) good fit) over pools of 64 MiB",
    .keys = tlsf_keys,
    .parse = tlsf_parse,
    .blind_to_limit = gs_policy_always_blind,
    .cfg_free = g_free,
    .npools = 1,
    .pools = tlsf_pools,
    .round_size = tlsf_round,
    .pool_of = tlsf_pool_of,
    .segment_size = tlsf_segment_size,
    .fits = tlsf_fits,
    .should_split = tlsf_should_split,
    .fit_rule = gs_family_fit_rule_split_any,
    .oversize = tlsf_oversize,
    .pick = tlsf_pick,
    .grow = tlsf_grow,
    .pick_takes = true,
};
