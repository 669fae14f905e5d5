/* pytorch.c - PyTorch's native CUDA caching allocator as a gpusim policy: 2.11's algorithm, and
 * the branches 2.12 to 2.14 take where they differ (pytorch_versions.c names the releases and
 * their keys).
 *
 * Constants, rounding, pool choice, segment sizes, the oversize (max_split_size) rules, the split
 * rule, release_available_cached_blocks and garbage collection, as in
 * c10/cuda/CUDACachingAllocator.cpp and c10/core/AllocatorConfig.cpp (2.9+). Section numbers
 * refer to docs/pytorch-allocator.md.
 *
 * Config keys (PYTORCH_CUDA_ALLOC_CONF syntax, "key:value,key:value"):
 *   max_split_size_mb, max_non_split_rounding_mb, roundup_power2_divisions,
 *   garbage_collection_threshold, expandable_segments, large_segment_size_mb,
 *   per_process_memory_fraction, throw_on_cudamalloc_oom (2.12+), and keys accepted for
 *   compatibility that do not change what the simulator computes (backend:native,
 *   release_lock_on_cudamalloc, pinned_*, graph_capture_record_stream_reuse,
 *   expandable_segments_reserve and _by_class (2.14), each with a warning where PyTorch's
 *   allocator would differ).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pytorch-int.h"

enum { POOL_LARGE = 0, POOL_SMALL = 1 };

static const gs_pool_desc pytorch_pools[] = {
    [POOL_LARGE] = {.is_small = false},
    [POOL_SMALL] = {.is_small = true},
};

/* ---- sizes (§1.4, §1.5) ---- */

static unsigned floor_log2(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }

unsigned gs_pytorch_divisions(const void *cfgv, uint64_t size)
{
    const pytorch_cfg *cfg = cfgv;
    int idx = (int)floor_log2(size) - 20;
    if (idx < 0) idx = 0;
    if (idx > ROUNDUP_INTERVALS - 1) idx = ROUNDUP_INTERVALS - 1;
    return cfg->divisions[idx];
}

static uint64_t roundup_power2_next_division(uint64_t size, unsigned divisions)
{
    if ((size & (size - 1)) == 0) return size;
    uint64_t floor2 = UINT64_C(1) << floor_log2(size);
    uint64_t step = floor2 >> floor_log2(divisions);
    if (step == 0) return 2 * floor2; /* divisions exceed the interval's size */
    return (size & ~(step - 1)) == size ? size : (size & ~(step - 1)) + step;
}

uint64_t gs_pytorch_round_size(const void *cfg, uint64_t size)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    unsigned d = gs_pytorch_divisions(cfg, size);
    if (d > 1 && size > (uint64_t)kMinBlockSize * d) return roundup_power2_next_division(size, d);
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static unsigned pytorch_pool_of(const void *cfg, uint64_t size)
{
    return size <= kSmallSize ? POOL_SMALL : POOL_LARGE;
}

static uint64_t pytorch_segment_size(const void *cfgv, uint64_t size)
{
    if (size <= kSmallSize) return kSmallBuffer;
    /* 2.11's large_segment_size_mb, kLargeBuffer by default */
    if (size < kMinLargeAlloc) return ((const pytorch_cfg *)cfgv)->large_segment;
    return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

/* ---- best fit (§1.7) and split (§1.8) ---- */

static bool pytorch_fits(const void *cfgv, const gs_block *b, uint64_t size)
{
    const pytorch_cfg *cfg = cfgv;
    /* A small request never takes an oversize block: it would be split and strand the rest. */
    if (size < cfg->max_split_size && b->size >= cfg->max_split_size) return false;
    /* A large request takes an oversize block only if it wastes less than the rounding
     * tolerance, since oversize blocks are never split. */
    if (size >= cfg->max_split_size && b->size >= size + cfg->max_non_split_rounding) return false;
    return true;
}

static bool pytorch_should_split(const void *cfgv, const gs_block *b, uint64_t size)
{
    const pytorch_cfg *cfg = cfgv;
    uint64_t remaining = b->size - size;
    if (gs_pool_kind(b->pool) == POOL_SMALL || cfg->expandable) return remaining >= kMinBlockSize;
    /* Note the strict '>': a large-pool remainder of exactly 1 MiB stays with the allocation. */
    return size < cfg->max_split_size && remaining > kSmallSize;
}

/* The two rules above as data, applied by the core without a call (policy.h). */
static bool pytorch_fit_rule(const void *cfgv, gs_fit_rule *out)
{
    const pytorch_cfg *cfg = cfgv;
    out->oversize = cfg->max_split_size;
    out->oversize_waste = cfg->max_non_split_rounding;
    for (unsigned k = 0; k < GS_MAX_POOLS; k++) {
        bool any = k == POOL_SMALL || cfg->expandable;
        out->split[k].below = any ? UINT64_MAX : cfg->max_split_size;
        out->split[k].min_rest = any ? kMinBlockSize : (uint64_t)kSmallSize + 1; /* '>' */
    }
    return true;
}

static uint64_t pytorch_oversize(const void *cfgv)
{
    return ((const pytorch_cfg *)cfgv)->max_split_size;
}

/* §2: one handle per page; 2 MiB pages for the small pool, 20 MiB (large_segment_size_mb) for
 * the large pool, because mapping costs grow with the number of handles. */
static uint64_t pytorch_expandable_page(const void *cfgv, unsigned pool)
{
    const pytorch_cfg *cfg = cfgv;
    if (!cfg->expandable) return 0;
    return pool == POOL_SMALL ? kSmallBuffer : cfg->large_segment;
}

/* The oversize rules (pytorch_fits, pytorch_should_split, pytorch_release_some and the oversize
 * statistics) all need a block or a request of max_split_size bytes or more. Without expandable
 * segments no block outgrows its segment, and no segment of a trace whose largest request is
 * largest bytes is larger than that request's segment or the large pool's floor
 * (pytorch_segment_size, monotonic but for that floor). So two settings that differ in
 * max_split_size_mb alone, both above that, decide alike at every step; only the
 * max_split_size statistic, which reports the setting, tells them apart. */
static bool pytorch_same_decisions(const void *av, const void *bv, uint64_t largest)
{
    const pytorch_cfg *a = av, *b = bv;
    /* (a larger request fails before any rounding, which could wrap: gs_policy_rounded) */
    if (largest > GS_MAX_REQUEST) return false;
    /* every field but max_split_size alike: b with a's threshold is a, byte for byte (both made
     * by g_new0 and set field by field, so their padding is zero; a field added later is
     * compared with the others) */
    pytorch_cfg x;
    memcpy(&x, b, sizeof x); /* (padding too, which an assignment need not copy) */
    x.max_split_size = a->max_split_size;
    if (memcmp(&x, a, sizeof x) != 0) return false;
    if (a->expandable) return false; /* a segment grows: its free blocks may pass any size */
    uint64_t seg = MAX(pytorch_segment_size(a, gs_pytorch_round_size(a, largest)),
                       MAX(a->large_segment, (uint64_t)kSmallBuffer));
    return a->max_split_size > seg && b->max_split_size > seg;
}

/* ---- release paths (§1.10) ---- */

/* release_available_cached_blocks: free one cached oversize block big enough for the request,
 * else free oversize blocks from the largest down until enough is freed. Returns false when
 * that was not enough, even though the blocks it freed stay freed: PyTorch then goes straight
 * to the full flush (docs/fidelity.md §1.2). Blocks of expandable segments are passed over,
 * as in PyTorch 2.9+ (they are not whole cudaMalloc segments; the full flush unmaps them). */
static bool pytorch_release_some(gs_heap *h, const void *cfgv, unsigned pool, uint32_t stream,
                                 uint64_t size, gs_status *st)
{
    const pytorch_cfg *cfg = cfgv;
    *st = GS_OK;
    if (cfg->max_split_size == UINT64_MAX) return false;
    uint64_t key = size < cfg->max_split_size ? cfg->max_split_size : size;
    gs_block *b = gs_pool_lower_bound(h, pool, stream, key);
    if (b && b->stream == stream && !gs_block_is_expandable(b)) {
        *st = gs_heap_release_block(h, b);
        return *st == GS_OK;
    }
    /* No single block is large enough. Back up one: the largest block of this stream, if any. */
    gs_block *cur = b ? gs_pool_prev(h, b) : gs_pool_last(h, pool);
    uint64_t released = 0;
    while (cur && released < key && cur->size >= cfg->max_split_size && cur->stream == stream) {
        gs_block *prev = gs_pool_prev(h, cur);
        uint64_t n = cur->size;
        if (!gs_block_is_expandable(cur)) {
            *st = gs_heap_release_block(h, cur);
            if (*st != GS_OK) return false;
            released += n;
        }
        cur = prev;
    }
    return released >= key;
}

/* The least limit C whose threshold, computed as pytorch_collect computes it, (uint64_t)(
 * gc_threshold * C), is at least reserved: under it a growth's collection frees nothing. */
static uint64_t pytorch_limit_unread(const void *cfgv, uint64_t reserved)
{
    double t = ((const pytorch_cfg *)cfgv)->gc_threshold;
    if (t <= 0.0 || !reserved) return 0;
    double guess = ceil((double)reserved / t);
    if (guess >= 0x1p62) return UINT64_MAX;
    uint64_t c = (uint64_t)guess;
    /* (the guess is within a few of it; the product's rounding decides which) */
    while (c > 0 && (uint64_t)(t * (double)(c - 1)) >= reserved) c--;
    while ((uint64_t)(t * (double)c) < reserved) c++;
    return c;
}

/* garbage_collect_cached_blocks: free unsplit cached blocks of the large pool whose age (in
 * get_free_block calls since they were cached) is at least the average, until reserved memory
 * is back under threshold * limit. */
static gs_status pytorch_collect(gs_heap *h, const void *cfgv)
{
    const pytorch_cfg *cfg = cfgv;
    if (cfg->gc_threshold <= 0.0) return GS_OK;
    uint64_t threshold = (uint64_t)(cfg->gc_threshold * (double)gs_heap_limit(h));
    uint64_t reserved = gs_heap_reserved(h);
    if (reserved <= threshold) return GS_OK;
    uint64_t target = reserved - threshold, reclaimed = 0, total_age = 0;
    int64_t count = 0;
    /* Candidates are unsplit, cudaMalloc'd blocks (2.9+ passes expandable ones over). */
    for (gs_block *b = gs_pool_first(h, POOL_LARGE); b; b = gs_pool_next(h, b)) {
        if (!gs_block_is_split(b)) {
            total_age += gs_block_age(h, b);
            count++;
        }
    }
    bool freed = true;
    uint64_t before = 0; /* reclaimed before the last pass */
    while (reclaimed < target && freed && count > 0) {
        before = reclaimed;
        double age_threshold = (double)total_age / (double)count;
        freed = false;
        gs_block *b = gs_pool_first(h, POOL_LARGE);
        while (b) {
            gs_block *next = gs_pool_next(h, b);
            uint64_t age = gs_block_age(h, b);
            if (!gs_block_is_split(b) && !gs_block_is_expandable(b) && (double)age >= age_threshold) {
                uint64_t n = b->size;
                gs_status st = gs_heap_release_block(h, b);
                if (st != GS_OK) return st;
                freed = true;
                reclaimed += n;
                total_age -= age;
                count--;
            }
            b = next;
        }
    }
    /* A pass frees every old enough block, so the same passes run for any target in (before,
     * reclaimed], or above before where the loop ran out of blocks; the threshold is then in
     * [reserved - reclaimed, reserved - before), and the limits that give it follow
     * (gs_heap_limit_decides: whatif answers those caps without replaying them). */
    bool more = freed && count > 0;
    gs_heap_limit_decides(h, more ? pytorch_limit_unread(cfg, reserved - reclaimed) : 0,
                          pytorch_limit_unread(cfg, reserved - before));
    return GS_OK;
}

/* ---- config parsing (§1.2) ---- */

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!*s || !g_ascii_isdigit(*s)) return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static bool is_pow2(uint64_t v) { return v && !(v & (v - 1)); }

/* "4" or "[256:1,512:2,1024:4,>:8]" (keys in MB, powers of two; values powers of two or 0). */
static bool parse_divisions(pytorch_cfg *cfg, const char *val, GError **err)
{
    uint64_t v;
    if (val[0] != '[') {
        if (!parse_u64(val, &v) || (v != 0 && !is_pow2(v))) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                        "roundup_power2_divisions: '%s' is not a power of two", val);
            return false;
        }
        for (int i = 0; i < ROUNDUP_INTERVALS; i++) cfg->divisions[i] = (unsigned)v;
        return true;
    }
    size_t len = strlen(val);
    if (len < 2 || val[len - 1] != ']') {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "roundup_power2_divisions: unterminated list '%s'", val);
        return false;
    }
    char *inner = g_strndup(val + 1, len - 2);
    char **items = g_strsplit(inner, ",", -1);
    bool ok = true, first = true;
    int last = -1;
    for (char **it = items; ok && *it; it++) {
        char *colon = strchr(*it, ':');
        uint64_t d;
        if (!colon || !parse_u64(colon + 1, &d) || (d != 0 && !is_pow2(d))) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                        "roundup_power2_divisions: bad entry '%s' (want MB:DIVISIONS, a power of two)", *it);
            ok = false;
            break;
        }
        *colon = '\0';
        if (strcmp(*it, ">") == 0) {
            /* '>' fills every interval after the last explicit one (2.9+ behaviour). */
            for (int i = last + 1; i < ROUNDUP_INTERVALS; i++) cfg->divisions[i] = (unsigned)d;
            continue;
        }
        uint64_t mb;
        if (!parse_u64(*it, &mb) || !is_pow2(mb)) {
            g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                        "roundup_power2_divisions: key '%s' must be a power of two (MB)", *it);
            ok = false;
            break;
        }
        int idx = (int)floor_log2(mb);
        if (idx > ROUNDUP_INTERVALS - 1) idx = ROUNDUP_INTERVALS - 1;
        if (first) {
            for (int i = 0; i < idx; i++) cfg->divisions[i] = (unsigned)d;
            first = false;
        }
        cfg->divisions[idx] = (unsigned)d;
        last = idx;
    }
    g_strfreev(items);
    g_free(inner);
    return ok;
}

/* The least of max_split_size_mb and max_non_split_rounding_mb is the large segment's size,
 * which PyTorch reads first, wherever it stands in the string: checked once every key is read
 * (check_mb_keys). */
static bool parse_mb_key(const char *key, const char *val, uint64_t *out, GError **err)
{
    uint64_t mb;
    if (!parse_u64(val, &mb)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' is not a whole number of MB", key, val);
        return false;
    }
    *out = mb > UINT64_MAX / GS_MiB ? UINT64_MAX : mb * GS_MiB;
    return true;
}

static bool check_mb_key(const char *key, uint64_t v, uint64_t least, GError **err)
{
    if (v >= least) return true;
    g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                "%s: %" G_GUINT64_FORMAT " is too small, must be >= %" G_GUINT64_FORMAT, key,
                v / GS_MiB, least / GS_MiB);
    return false;
}

bool gs_pytorch_parse_bool(const char *key, const char *val, bool *out, GError **err)
{
    /* PyTorch accepts exactly these two spellings. */
    if (strcmp(val, "True") == 0) *out = true;
    else if (strcmp(val, "False") == 0) *out = false;
    else {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be True or False", key, val);
        return false;
    }
    return true;
}

static bool set_max_split(void *cfg, const char *key, const char *val, GError **err)
{
    return parse_mb_key(key, val, &((pytorch_cfg *)cfg)->max_split_size, err);
}

static bool set_max_non_split_rounding(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    cfg->non_split_given = true;
    return parse_mb_key(key, val, &cfg->max_non_split_rounding, err);
}

static bool set_divisions(void *cfg, const char *key, const char *val, GError **err)
{
    return parse_divisions(cfg, val, err);
}

static bool set_gc_threshold(void *cfg, const char *key, const char *val, GError **err)
{
    char *end;
    double v = g_ascii_strtod(val, &end);
    if (!*val || *end || !(v > 0.0 && v < 1.0)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "garbage_collection_threshold: '%s' must be a number with 0 < x < 1", val);
        return false;
    }
    ((pytorch_cfg *)cfg)->gc_threshold = v;
    return true;
}

static bool set_expandable(void *cfg, const char *key, const char *val, GError **err)
{
    return gs_pytorch_parse_bool(key, val, &((pytorch_cfg *)cfg)->expandable, err);
}

static bool set_backend(void *cfg, const char *key, const char *val, GError **err)
{
    if (strcmp(val, "native") == 0) return true;
    g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                "backend: '%s' is not simulated as a key of pytorch (only 'native' is)%s", val,
                g_ascii_strcasecmp(val, "cudaMallocAsync") == 0
                    ? ": the driver's pool that backend:cudaMallocAsync uses is its own policy, "
                      "-p cuda-async"
                    : "");
    return false;
}

/* Keys of PyTorch's that change nothing in a single-threaded replay: checked, then ignored. */
static bool set_ignored_bool(void *cfg, const char *key, const char *val, GError **err)
{
    bool ignored;
    return gs_pytorch_parse_bool(key, val, &ignored, err);
}

/* Host (pinned) allocator settings: outside the device allocator. */
static bool set_pinned(void *cfg, const char *key, const char *val, GError **err) { return true; }

/* PYTORCH_CUDA_ALLOC_CONF's keys (§1.2): the parser and --help both read this table. */
static const gs_policy_key pytorch_keys[] = {
    {"max_split_size_mb", "N",
     "blocks >= N MiB are never split (N >= large_segment_size_mb;\n"
     "default unlimited)",
     set_max_split},
    {"max_non_split_rounding_mb", "N",
     "an oversize block may serve a request up to N MiB smaller\n"
     "(default large_segment_size_mb, 20)",
     set_max_non_split_rounding},
    {"roundup_power2_divisions", "D",
     "round sizes to D divisions per power of two, or a list [256:1,512:2,>:8]", set_divisions},
    {"garbage_collection_threshold", "X",
     "0<X<1: free old cached blocks above X*capacity (needs --capacity)", set_gc_threshold},
    {"expandable_segments", "True",
     "grow one virtual range per stream and pool by mapping pages\n"
     "(2 MiB small, 20 MiB large), unmap them on empty_cache/OOM",
     set_expandable},
    {"large_segment_size_mb", "N",
     "N > 10: the segment of a 1-10 MiB miss and the large pool's\n"
     "expandable page, N MiB (default 20)",
     gs_pytorch_set_large_segment},
    {"per_process_memory_fraction", "X",
     "0<=X<=1: the allocator may reserve X of the device's memory\n"
     "(as --capacity, which wins when both are given)",
     gs_pytorch_set_fraction},
    {"throw_on_cudamalloc_oom", "True",
     "2.12+: a growth past per_process_memory_fraction fails at once,\n"
     "without releasing the cache or retrying",
     gs_pytorch_set_throw_on_oom},
    {"backend", "native", NULL, set_backend},
    {"release_lock_on_cudamalloc", "True", NULL, set_ignored_bool},
    {"graph_capture_record_stream_reuse", "True", NULL, set_ignored_bool},
    {"expandable_segments_reserve", "X", NULL, gs_pytorch_set_es_reserve},
    {"expandable_segments_reserve_by_class", "[C:X,...]", NULL, gs_pytorch_set_es_reserve_by_class},
    {"pinned_*", "", NULL, set_pinned},
    {NULL, NULL, NULL, NULL},
};

static void pytorch_warnings(const void *cfgv, bool has_limit, GPtrArray *out)
{
    const pytorch_cfg *cfg = cfgv;
    if (cfg->gc_threshold > 0 && !has_limit && cfg->fraction >= 1.0)
        g_ptr_array_add(out, g_strdup("garbage_collection_threshold does nothing without a limit "
                                      "(--capacity): PyTorch collects only under a memory "
                                      "fraction"));
    if (cfg->expandable && cfg->max_split_size != UINT64_MAX)
        g_ptr_array_add(out, g_strdup("max_split_size_mb with expandable_segments:True: PyTorch's "
                                      "reserved memory is known to grow with the two together "
                                      "(3.86 against 1.85 GiB with expandable segments alone, "
                                      "seen on a two-stream program), and the replay reproduces "
                                      "that growth"));
    gs_pytorch_release_warnings(cfg, has_limit, out);
}

/* Every key read: the sizes whose least is the large segment's (parse_mb_key says why). */
static bool check_mb_keys(pytorch_cfg *cfg, GError **err)
{
    if (!cfg->non_split_given) cfg->max_non_split_rounding = cfg->large_segment;
    else if (!check_mb_key("max_non_split_rounding_mb", cfg->max_non_split_rounding,
                           cfg->large_segment, err))
        return false;
    return cfg->max_split_size == UINT64_MAX ||
           check_mb_key("max_split_size_mb", cfg->max_split_size, cfg->large_segment, err);
}

void *gs_pytorch_parse_release(unsigned release, const char *conf, GError **err)
{
    pytorch_cfg *cfg = g_new0(pytorch_cfg, 1);
    cfg->release = release;
    cfg->max_split_size = UINT64_MAX;
    cfg->large_segment = kLargeBuffer;
    cfg->fraction = 1.0;
    if (!gs_policy_conf_parse(pytorch_keys, cfg, conf, err) || !check_mb_keys(cfg, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

static void *pytorch_parse(const char *conf, GError **err)
{
    return gs_pytorch_parse_release(0, conf, err);
}

const gs_policy_ops gs_policy_pytorch = {
    .version = GS_POLICY_VERSION,
    .name = "pytorch",
    .summary = "PyTorch's native CUDA caching allocator, 2.11 to 2.14 (pytorch@2.12; best-fit "
               "bins)",
    .keys = pytorch_keys,
    .warnings = pytorch_warnings,
    .parse = pytorch_parse,
    .parse_at = gs_pytorch_parse_at,
    .cfg_free = g_free,
    .npools = 2,
    .pools = pytorch_pools,
    .round_size = gs_pytorch_round_size,
    .pool_of = pytorch_pool_of,
    .segment_size = pytorch_segment_size,
    .fits = pytorch_fits,
    .should_split = pytorch_should_split,
    .fit_rule = pytorch_fit_rule,
    .oversize = pytorch_oversize,
    .expandable_page = pytorch_expandable_page,
    .limit = gs_pytorch_limit,
    .reject_above = gs_pytorch_reject_above,
    /* Only garbage collection reads the limit before a growth meets it (the own limit of
     * per_process_memory_fraction is the heap's limit, which a caller's cap replaces), and
     * limit_unread says up to where it does nothing. */
    .blind_to_limit = gs_policy_always_blind,
    .same_decisions = pytorch_same_decisions,
    .limit_unread = pytorch_limit_unread,
    .collect = pytorch_collect,
    .release_some = pytorch_release_some,
};
