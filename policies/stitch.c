/* stitch.c - gpusim's own policy: stitched virtual memory (GMLake's idea, ASPLOS'24), on the
 * core's expandable segments (core/stitch.c holds the mechanism).
 *
 * What it does:
 *   - sizes round to 512 bytes, as PyTorch's; requests up to 1 MiB go to a small pool, larger
 *     ones to a large pool (PyTorch's split, so small long-lived tensors do not pin the large
 *     pool's memory), both served best fit with any remainder of 512 bytes or more split off;
 *   - each pool is one virtual reservation per stream (9/8 of the device, as an expandable
 *     segment), backed by physical handles of whole 2 MiB pages;
 *   - when no free block serves a request, the pool grows where expandable segments grow (the
 *     lowest free-and-unmapped run that holds it), and maps there first the free memory it
 *     already has: every physical handle lying wholly inside a free block of the same stream
 *     (of any stream, the same one's first, when that is not enough within the limit), in
 *     either pool, may be unmapped where it is and mapped at the growth (the old range
 *     becomes a hole that a later growth maps again), from the highest free block down (the
 *     older free blocks below stay whole for best fit). Only the rest is created, as one handle
 *     (or pieces of max_handle_mb), in handles of at most 0.004 of the limit (max_handle_frac:
 *     26 MiB of 6.5 GiB). So reserved memory grows only when no free whole handle is left:
 *     what stays unusable is the free memory inside handles that a live block pins, at most a
 *     handle's size for each such block (a large request's memory, reused by smaller blocks
 *     once it is freed, is not pinned whole by one of them);
 *   - while memory is plentiful (by default: reserved bytes after the growth within half the
 *     limit, the device's memory when there is none; with headroom:0, within 1 + slack times
 *     the peak allocated bytes, and within the limit) a growth creates and moves nothing:
 *     a move unmaps, which on the real driver waits for the whole device, and in a training
 *     loop's steady state moves repeat every step (measured on the H100: ResNet-50 2% slower
 *     per step with 10 moves a step; docs/stitch.md, "stitch on the real GPU"). A plentiful
 *     growth of the large pool creates at least 20 MiB, as PyTorch's default rounds a 1-10 MiB
 *     request to a 20 MiB segment, and up to twice what it needs (ahead, at most 20 MiB more,
 *     and never past the peak reserved so far): as few growths as the default makes. Above
 *     that bound a growth creates what it needs, one handle a page when that is at most 128
 *     MiB (fine), so each page can move or go back alone, and stitches first only when
 *     creating would pass the limit (with headroom; a private pool, whose free memory the
 *     out-of-memory ladder cannot give back, and the eager setting stitch on every growth
 *     past the bound);
 *   - empty_cache and the out-of-memory ladder unmap and release every free whole handle.
 *
 * Where it departs from GMLake:
 *   - GMLake keeps each physical block mapped where it was and maps it a second time into the
 *     stitched range (a block then has two addresses, and its allocator tracks both); here a
 *     handle is mapped once: it moves, and its old range is a hole (so gs_heap_check can insist
 *     that no handle is mapped twice, and the device's mappings are the core's page tables);
 *   - GMLake stitches only when an allocation would otherwise fail (and then keeps the
 *     stitched block cached); by default this policy too stitches only when creating would
 *     pass the limit, but before the cache is released and with no stitched block kept, and
 *     the eager setting stitches on every growth past the slack, so it creates memory only
 *     when there is no free handle anywhere, whatever the limit;
 *   - GMLake creates fixed 2 MiB chunks; here a growth's new memory is one handle of the size
 *     needed (fewer driver calls: cuMemSetAccess costs per mapping), so a handle is the unit
 *     that moves, and a handle partly in use cannot move;
 *   - memory freed on one stream serves that stream first (PyTorch serves it to no other):
 *     only when the growth's own stream's free handles and what it may create within the
 *     limit are short does it take free handles of other streams, and then handles larger
 *     than what is missing, before the out-of-memory ladder and never during a capture (a
 *     move's unmap waits for the whole device on the real driver, so no queued work still
 *     uses them; GMLake has no streams). A release so skipped is made when the next capture
 *     begins (core/heap.c, gs_heap_pool_begin).
 *
 * Config keys: max_handle_mb:N (create new memory in handles of at most N MiB; 0, the
 * default: no such cap); max_handle_frac:F (handles of at most F times the limit, the device's
 * memory with none; default 0.004, 0: no such cap); slack:F (0 <= F <= 1, default 0.02:
 * memory is plentiful up to 1 + F times the peak allocated bytes; 0: always stitch first);
 * ahead:F (grow ahead while plentiful); headroom:F (plentiful while within 1 - F times the
 * limit, or the device, instead of the slack's bound: no move until memory is needed);
 * grow:BYTES (while plentiful, a large-pool growth creates at least this much, as PyTorch's
 * 20 MiB segments); fine:BYTES (once not plentiful, a growth of at most this much is one
 * handle per page). The default is the lazy setting, headroom:0.5,grow:20MiB,ahead:1,
 * fine:128MiB with max_handle_frac:0.004 (docs/stitch.md, "The lazy setting");
 * headroom:0,grow:0,ahead:0,fine:0,max_handle_frac:0 is the eager one, the default until
 * 2026-12-05.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "policies.h"

enum {
    kMinBlockSize = 512,
    kSmallSize = 1048576,
    kPage = 2097152,
};

enum { POOL_LARGE = 0, POOL_SMALL = 1 };

enum { kDefaultSlackPermille = 20 };

/* max_handle_frac's default, in thousandths of the limit: 4 met the target on the most real
 * traces of 2 to 6 (BENCHMARKS.md, "Handles sized by the limit"). */
enum { kDefaultHandlePermille = 4 };

typedef struct {
    uint64_t max_handle; /* bytes; 0: any */
    double slack;        /* gs_stitch_conf.slack */
    double ahead;        /* gs_stitch_conf.ahead */
    uint64_t min_grow;   /* gs_stitch_conf.min_grow */
    double headroom;     /* gs_stitch_conf.headroom */
    uint64_t fine;       /* gs_stitch_conf.fine */
    double max_handle_frac; /* gs_stitch_conf.max_handle_frac */
} stitch_cfg;

static const gs_pool_desc stitch_pools[] = {
    [POOL_LARGE] = {.is_small = false},
    [POOL_SMALL] = {.is_small = true},
};

static uint64_t stitch_round_size(const void *cfg, uint64_t size)
{
    if (size < kMinBlockSize) return kMinBlockSize;
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

static unsigned stitch_pool_of(const void *cfg, uint64_t size)
{
    return size <= kSmallSize ? POOL_SMALL : POOL_LARGE;
}

/* Only the other allocators on the device are told this much (gs_heap_config.reclaim): a
 * stitched pool checks the limit against what it creates. */
static uint64_t stitch_segment_size(const void *cfg, uint64_t size)
{
    return (size + kPage - 1) / kPage * kPage;
}

static bool stitch_fits(const void *cfg, const gs_block *b, uint64_t size) { return true; }

static bool stitch_should_split(const void *cfg, const gs_block *b, uint64_t size)
{
    return b->size - size >= kMinBlockSize;
}

static bool stitch_fit_rule(const void *cfg, gs_fit_rule *out)
{
    gs_family_rule_any_fit(out, kMinBlockSize);
    return true;
}

static uint64_t stitch_oversize(const void *cfg) { return UINT64_MAX; }

static uint64_t stitch_page(const void *cfg, unsigned pool) { return kPage; }

static bool stitch_stitch(const void *cfgv, unsigned pool, gs_stitch_conf *conf)
{
    const stitch_cfg *cfg = cfgv;
    conf->max_handle = cfg->max_handle;
    conf->slack = cfg->slack;
    conf->ahead = cfg->ahead;
    conf->min_grow = pool == POOL_LARGE ? cfg->min_grow : 0;
    conf->headroom = cfg->headroom;
    conf->fine = cfg->fine;
    conf->max_handle_frac = cfg->max_handle_frac;
    return true;
}

/* The headroom's bound and max_handle_frac's handles are fractions of the limit; with neither,
 * plentiful memory is the slack's bound, and the limit is read only as a growth meets it. */
static bool stitch_blind_to_limit(const void *cfgv)
{
    const stitch_cfg *cfg = cfgv;
    return cfg->headroom <= 0.0 && cfg->max_handle_frac <= 0.0;
}

static bool set_max_handle(void *cfg, const char *key, const char *val, GError **err)
{
    char *end;
    errno = 0;
    unsigned long long mb = g_ascii_isdigit(*val) ? strtoull(val, &end, 10) : 0;
    if (!g_ascii_isdigit(*val) || errno || *end || (mb && mb % 2) || mb > (UINT64_C(1) << 30)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be 0 or an even number of MiB", key, val);
        return false;
    }
    ((stitch_cfg *)cfg)->max_handle = (uint64_t)mb * GS_MiB;
    return true;
}

/* A number from 0 to 1 (slack, ahead, headroom, max_handle_frac). */
static bool unit_fraction(const char *key, const char *val, double *out, GError **err)
{
    char *end;
    double f = g_ascii_isdigit(*val) ? g_ascii_strtod(val, &end) : -1;
    if (!g_ascii_isdigit(*val) || *end || !(f >= 0 && f <= 1)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a number from 0 to 1", key, val);
        return false;
    }
    *out = f;
    return true;
}

static bool set_slack(void *cfg, const char *key, const char *val, GError **err)
{
    return unit_fraction(key, val, &((stitch_cfg *)cfg)->slack, err);
}

static bool set_ahead(void *cfg, const char *key, const char *val, GError **err)
{
    return unit_fraction(key, val, &((stitch_cfg *)cfg)->ahead, err);
}

/* A size (20MiB), or 0: off. */
static bool size_or_zero(const char *key, const char *val, uint64_t *out, GError **err)
{
    if (strcmp(val, "0") == 0) {
        *out = 0;
        return true;
    }
    return gs_family_size(key, val, 1, out, err);
}

static bool set_min_grow(void *cfg, const char *key, const char *val, GError **err)
{
    return size_or_zero(key, val, &((stitch_cfg *)cfg)->min_grow, err);
}

static bool set_headroom(void *cfg, const char *key, const char *val, GError **err)
{
    return unit_fraction(key, val, &((stitch_cfg *)cfg)->headroom, err);
}

static bool set_fine(void *cfg, const char *key, const char *val, GError **err)
{
    return size_or_zero(key, val, &((stitch_cfg *)cfg)->fine, err);
}

static bool set_max_handle_frac(void *cfg, const char *key, const char *val, GError **err)
{
    return unit_fraction(key, val, &((stitch_cfg *)cfg)->max_handle_frac, err);
}

static const gs_policy_key stitch_keys[] = {
    {"max_handle_mb", "N",
     "create new memory in handles of at most N MiB (even; 0, the default:\n"
     "no such cap, as few driver calls as max_handle_frac allows)",
     set_max_handle},
    {"max_handle_frac", "F",
     "0..1: create new memory in handles of at most F times the limit\n"
     "(the device's memory when there is none), so a live block pins at most\n"
     "that much (default 0.004: 26 MiB of 6.5 GiB, 326 MiB of 80 GiB; 0: none)",
     set_max_handle_frac},
    {"slack", "F",
     "0..1: with headroom:0, create instead of moving free handles while\n"
     "reserved memory stays within 1+F times the peak allocated (default 0.02;\n"
     "0: always move first)",
     set_slack},
    {"ahead", "F",
     "0..1: while memory is plentiful, also create up to F times what a\n"
     "growth needs, in the same handle: fewer growths and driver calls, more\n"
     "memory a live block pins (default 1)",
     set_ahead},
    {"headroom", "F",
     "0..1: memory is plentiful while reserved memory stays within 1-F times\n"
     "the limit (the device's memory when there is none) instead of the slack's\n"
     "bound: no move until memory is needed (default 0.5; 0: the slack decides)",
     set_headroom},
    {"grow", "BYTES",
     "while memory is plentiful, a growth of the large pool creates at least\n"
     "this much, as PyTorch's 20 MiB segments do, and ahead adds at most this\n"
     "much (default 20MiB)",
     set_min_grow},
    {"fine", "BYTES",
     "once memory is not plentiful, a growth of at most this much is made of\n"
     "one-page handles, each free to move or go back alone (default 128MiB)",
     set_fine},
    {NULL, NULL, NULL, NULL},
};

static void *stitch_parse(const char *conf, GError **err)
{
    stitch_cfg *cfg = g_new0(stitch_cfg, 1);
    /* the lazy setting (docs/stitch.md): no move until memory is near the limit */
    cfg->slack = kDefaultSlackPermille / 1000.0;
    cfg->headroom = 0.5;
    cfg->min_grow = 20 * GS_MiB;
    cfg->ahead = 1;
    cfg->fine = 128 * GS_MiB;
    cfg->max_handle_frac = kDefaultHandlePermille / 1000.0;
    if (!gs_policy_conf_parse(stitch_keys, cfg, conf, err)) {
        g_free(cfg);
        return NULL;
    }
    return cfg;
}

const gs_policy_ops gs_policy_stitch = {
    .version = GS_POLICY_VERSION,
    .name = "stitch",
    .summary = "gpusim's own: expandable segments that grow by moving free physical handles "
               "(GMLake's stitching)",
    .keys = stitch_keys,
    .parse = stitch_parse,
    .cfg_free = g_free,
    .npools = 2,
    .pools = stitch_pools,
    .round_size = stitch_round_size,
    .pool_of = stitch_pool_of,
    .segment_size = stitch_segment_size,
    .fits = stitch_fits,
    .should_split = stitch_should_split,
    .fit_rule = stitch_fit_rule,
    .oversize = stitch_oversize,
    .expandable_page = stitch_page,
    .stitch = stitch_stitch,
    .blind_to_limit = stitch_blind_to_limit,
};
