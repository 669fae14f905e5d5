/* family.c - what the policy families beyond PyTorch's and CuPy's share (preallocate.c, tlsf.c,
 * bfc.c): parsers for their config values, each failing with the key and the value named, and
 * the stream-blind best fit and page rounding that several of them use. */
#include <string.h>

#include "policies.h"
#include "util.h"

bool gs_family_fraction(const char *key, const char *val, double *out, GError **err)
{
    char *end;
    double v = g_ascii_strtod(val, &end);
    if (!*val || *end || !(v > 0.0 && v <= 1.0)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a number with 0 < x <= 1", key, val);
        return false;
    }
    *out = v;
    return true;
}

int gs_family_percent(const char *key, const char *val, double *out, GError **err)
{
    size_t n = strlen(val);
    if (n < 2 || val[n - 1] != '%') return 0;
    char *num = g_strndup(val, n - 1), *end;
    double v = g_ascii_strtod(num, &end);
    bool ok = *end == 0 && v > 0 && v <= 100;
    g_free(num);
    if (!ok) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a percentage from 0 to 100 (50%%)", key, val);
        return -1;
    }
    *out = v / 100.0;
    return 1;
}

bool gs_family_size(const char *key, const char *val, uint64_t lo, uint64_t *out, GError **err)
{
    uint64_t v;
    GError *e = NULL;
    if (!gs_parse_size(val, &v, &e) || v < lo || v > GS_MAX_REQUEST) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a size from %" G_GUINT64_FORMAT " bytes to 64 TiB "
                    "(4096, 512MiB, 1.5GiB)", key, val, lo);
        if (e) g_error_free(e);
        return false;
    }
    *out = v;
    return true;
}

bool gs_family_pow2(const char *key, const char *val, uint64_t lo, uint64_t hi, uint64_t *out,
                    GError **err)
{
    uint64_t v;
    if (!gs_family_size(key, val, 1, &v, err)) return false;
    if (v < lo || v > hi || (v & (v - 1))) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a power of two from %" G_GUINT64_FORMAT " to %"
                    G_GUINT64_FORMAT, key, val, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

void gs_family_rule_any_fit(gs_fit_rule *out, uint64_t min_rest)
{
    out->oversize = UINT64_MAX; /* every request is below it, every block too: fits */
    out->oversize_waste = 0;
    for (unsigned k = 0; k < GS_MAX_POOLS; k++) {
        out->split[k].below = UINT64_MAX;
        out->split[k].min_rest = min_rest;
    }
}

bool gs_family_fit_rule_split_any(const void *cfg, gs_fit_rule *out)
{
    gs_family_rule_any_fit(out, 1);
    return true;
}

bool gs_family_bool(const char *key, const char *val, bool *out, GError **err)
{
    /* the spellings of the originals' environment variables (XLA: true/false, 1/0) */
    if (!g_ascii_strcasecmp(val, "true") || !strcmp(val, "1")) *out = true;
    else if (!g_ascii_strcasecmp(val, "false") || !strcmp(val, "0")) *out = false;
    else {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be true or false", key, val);
        return false;
    }
    return true;
}

gs_block *gs_family_best_fit0(gs_heap *h, unsigned pool, uint64_t size)
{
    gs_block *b = gs_pool_lower_bound(h, pool, 0, size);
    return b && b->stream == 0 ? b : NULL;
}

gs_block *gs_family_stream_first(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size,
                                 bool others)
{
    gs_block *b = gs_pool_lower_bound(h, pool, stream, size);
    if (b && b->stream == stream) return b;
    return others ? gs_family_other_stream_first(h, pool, stream, size) : NULL;
}

gs_block *gs_family_other_stream_first(gs_heap *h, unsigned pool, uint32_t stream, uint64_t size)
{
    /* The index is ordered by (stream, size, address): one descent per stream that holds a
     * block of at least size, skipping the streams that hold none. */
    gs_block *b;
    uint32_t t = 0;
    while (t < GS_MAX_STREAMS && (b = gs_pool_lower_bound(h, pool, t, size))) {
        if (b->stream == t) {
            if (t != stream) return b;
            t++;
        } else {
            t = b->stream;
        }
    }
    return NULL;
}
