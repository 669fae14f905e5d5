/* pytorch_versions.c - the PyTorch releases the pytorch policy emulates, 2.11 to 2.14: how a
 * release is named (pytorch@2.12, a trace's pytorch_version), which release has which key, the
 * keys 2.11 lacks or reads differently, and the policy a trace is replayed under when its spec
 * names no release. docs/pytorch-allocator.md §9 says what differs and where each rule comes
 * from; only 2.11 is measured against real runs.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pytorch-int.h"

unsigned gs_pytorch_release_parse(const char *text)
{
    /* "2.13", "2.13.1", "2.13.0+cu130", "2.14.0a0+4fdf77b": torch.__version__'s forms */
    if (!text || text[0] != '2' || text[1] != '.' || !g_ascii_isdigit(text[2])) return 0;
    unsigned minor = 0;
    const char *p = text + 2;
    for (; g_ascii_isdigit(*p); p++) {
        minor = minor * 10 + (unsigned)(*p - '0');
        if (minor > 999) return 0;
    }
    return minor;
}

unsigned gs_pytorch_release_of_trace(const char *recorded)
{
    unsigned r = gs_pytorch_release_parse(recorded);
    if (!r) return 0;
    /* 2.9 and 2.10 allocate as 2.11 does (§1.13); a release newer than gpusim knows is taken
     * as the newest it knows, which the command line says */
    return CLAMP(r, GS_PYTORCH_FIRST, GS_PYTORCH_LAST);
}

void *gs_pytorch_parse_at(const char *release, const char *conf, GError **err)
{
    unsigned r = gs_pytorch_release_parse(release);
    /* a release is 2.N, or 2.N.P (a patch release allocates as its minor release does) */
    const char *tail = release + (r ? strspn(release + 2, "0123456789") + 2 : 0);
    if (*tail == '.' && g_ascii_isdigit(tail[1])) tail += 1 + strspn(tail + 1, "0123456789");
    if (!r || *tail) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "'@%s' is not a release of PyTorch (write pytorch@2.%d)", release,
                    GS_PYTORCH_FIRST);
        return NULL;
    }
    if (r < GS_PYTORCH_FIRST || r > GS_PYTORCH_LAST) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "'@%s': gpusim emulates PyTorch 2.%d to 2.%d%s", release, GS_PYTORCH_FIRST,
                    GS_PYTORCH_LAST,
                    r < GS_PYTORCH_FIRST ? " (2.9 and 2.10 allocate as 2.11)"
                                         : ", not newer releases");
        return NULL;
    }
    return gs_pytorch_parse_release(r, conf, err);
}

bool gs_pytorch_key_since(pytorch_cfg *cfg, const char *key, unsigned since, GError **err)
{
    if (!cfg->release) {
        /* no release named: the trace's decides, and gs_policy_at_release refuses the key when
         * that release lacks it */
        if (since > cfg->needs) {
            cfg->needs = since;
            cfg->needs_key = key;
        }
        return true;
    }
    if (cfg->release >= since) return true;
    /* PyTorch itself refuses it: "Unrecognized key ... in CUDA allocator config" */
    g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                "%s is a key of PyTorch 2.%u and later; PyTorch 2.%u refuses it", key, since,
                cfg->release);
    return false;
}

/* A whole number of MB, or err naming key */
static bool parse_mb(const char *key, const char *val, uint64_t *mb, GError **err)
{
    char *end;
    errno = 0;
    unsigned long long v = g_ascii_isdigit(*val) ? strtoull(val, &end, 10) : 0;
    if (!g_ascii_isdigit(*val) || errno || *end) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' is not a whole number of MB", key, val);
        return false;
    }
    *mb = v;
    return true;
}

bool gs_pytorch_set_large_segment(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    uint64_t mb;
    if (!gs_pytorch_key_since(cfg, "large_segment_size_mb", 11, err) ||
        !parse_mb(key, val, &mb, err))
        return false;
    /* AcceleratorAllocatorConfig::parseLargeSegmentSize: more than kMinLargeAlloc, so that a
     * request that gets the large segment (under 10 MiB) always fits it */
    if (mb <= kMinLargeAlloc / GS_MiB) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG, "%s: %s must be > %d (MB)", key,
                    val, (int)(kMinLargeAlloc / GS_MiB));
        return false;
    }
    /* as large as the simulator's requests can be: PyTorch saturates at SIZE_MAX / MB */
    cfg->large_segment = MIN(mb, GS_MAX_REQUEST / GS_MiB) * GS_MiB;
    return true;
}

bool gs_pytorch_set_fraction(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    if (!gs_pytorch_key_since(cfg, "per_process_memory_fraction", 11, err)) return false;
    char *end;
    double v = g_ascii_strtod(val, &end);
    /* CUDAAllocatorConfig::parsePerProcessMemoryFraction: [0.0, 1.0] */
    if (!*val || *end || !(v >= 0.0 && v <= 1.0)) {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' must be a number with 0 <= x <= 1", key, val);
        return false;
    }
    cfg->fraction = v;
    return true;
}

bool gs_pytorch_set_throw_on_oom(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    return gs_pytorch_key_since(cfg, "throw_on_cudamalloc_oom", 12, err) &&
           gs_pytorch_parse_bool(key, val, &cfg->throw_on_oom, err);
}

/* CUDAAllocatorConfig::parseReserveSpec's rule: a positive, finite fraction of the device, or
 * a number of GiB with a G (or g) after it. PyTorch warns of any other value and ignores it. */
static bool reserve_ok(const char *val)
{
    size_t n = strlen(val);
    char *num = g_strndup(val, n && (val[n - 1] == 'G' || val[n - 1] == 'g') ? n - 1 : n), *end;
    double v = g_ascii_strtod(num, &end);
    bool ok = *num && !*end && isfinite(v) && v > 0.0;
    g_free(num);
    return ok;
}

bool gs_pytorch_set_es_reserve(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    if (!gs_pytorch_key_since(cfg, "expandable_segments_reserve", 14, err)) return false;
    cfg->es_reserve = true;
    cfg->es_reserve_bad |= !reserve_ok(val);
    return true;
}

bool gs_pytorch_set_es_reserve_by_class(void *cfgv, const char *key, const char *val, GError **err)
{
    pytorch_cfg *cfg = cfgv;
    if (!gs_pytorch_key_since(cfg, "expandable_segments_reserve_by_class", 14, err)) return false;
    size_t n = strlen(val);
    /* the brackets are required (the tokenizer checks them); a bad entry is skipped */
    if (n < 2 || val[0] != '[' || val[n - 1] != ']') {
        g_set_error(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG,
                    "%s: '%s' is not a list [CLASS:X,...]", key, val);
        return false;
    }
    cfg->es_reserve_by_class = true;
    return true;
}

/* f x device_total in bytes, as the release computes it: 2.11 and 2.12 truncate the product;
 * 2.13 rounds it, so that a cap meant to be whole bytes is not one byte short. */
static uint64_t fraction_bytes(const pytorch_cfg *cfg, double f, uint64_t device_total)
{
    double b = f * (double)device_total;
    return cfg->release >= 13 ? (uint64_t)llround(b) : (uint64_t)b;
}

uint64_t gs_pytorch_limit(const void *cfgv, uint64_t device_total)
{
    const pytorch_cfg *cfg = cfgv;
    if (cfg->fraction >= 1.0) return 0; /* 1.0: no limit (2.9+) */
    uint64_t b = fraction_bytes(cfg, cfg->fraction, device_total);
    /* a fraction of 0 leaves no memory: a limit of one byte refuses every segment, as PyTorch's
     * limit of 0 does (gpusim's 0 means none); with device_total 0 (asked whether there is a
     * limit at all), non-zero too */
    return b ? b : 1;
}

uint64_t gs_pytorch_reject_above(const void *cfgv, uint64_t device_total)
{
    const pytorch_cfg *cfg = cfgv;
    if (cfg->release < 12 || !cfg->throw_on_oom) return 0;
    /* the check reads the setting, per_process_memory_fraction x the device's memory (1.0 by
     * default), not a limit set since by set_per_process_memory_fraction (--capacity) */
    uint64_t b = fraction_bytes(cfg, cfg->fraction, device_total);
    return b ? b : 1;
}

void gs_pytorch_release_warnings(const pytorch_cfg *cfg, bool has_limit, GPtrArray *out)
{
    if (cfg->expandable && cfg->large_segment % kSmallBuffer)
        g_ptr_array_add(
            out,
            g_strdup_printf(
                "large_segment_size_mb:%" G_GUINT64_FORMAT
                " with expandable_segments:True: the large "
                "pool's pages are not a multiple of the driver's 2 MiB granularity, which cuMemCreate "
                "refuses (invalid argument): the replay stops at the first such page",
                cfg->large_segment / GS_MiB));
    if (cfg->fraction < 1.0 && has_limit)
        g_ptr_array_add(out, g_strdup("per_process_memory_fraction: --capacity replaces it, as "
                                      "a later torch.cuda.set_per_process_memory_fraction call "
                                      "does"));
    if (cfg->throw_on_oom && cfg->fraction >= 1.0)
        g_ptr_array_add(out, g_strdup("throw_on_cudamalloc_oom without per_process_memory_fraction:"
                                      " its bound is the device's whole memory (PyTorch compares "
                                      "with the setting, which --capacity does not change)"));
    if (cfg->es_reserve_bad)
        g_ptr_array_add(out, g_strdup("expandable_segments_reserve: not a positive fraction or "
                                      "number of GiB (40G); PyTorch ignores it with a warning, "
                                      "and so does the replay"));
    else if (cfg->es_reserve && !cfg->expandable)
        g_ptr_array_add(out, g_strdup("expandable_segments_reserve without "
                                      "expandable_segments:True: there is no expandable segment "
                                      "to reserve for, and it changes nothing"));
    else if (cfg->es_reserve)
        g_ptr_array_add(out, g_strdup("expandable_segments_reserve is not simulated: PyTorch 2.14 "
                                      "reserves that much address space for each expandable "
                                      "segment, gpusim 9/8 of the device as 2.11 does; the "
                                      "replay differs only for a request larger than the "
                                      "reserve, which PyTorch refuses"));
    if (cfg->es_reserve_by_class)
        g_ptr_array_add(out, g_strdup("expandable_segments_reserve_by_class is not simulated: it "
                                      "applies to streams a program tags with "
                                      "setExpandableSegmentReserveClassForStream, which a trace "
                                      "does not record"));
}

static gs_policy *policy_for(const gs_policy *p, unsigned release, GError **err)
{
    const char *colon = strchr(p->spec, ':');
    void *cfg = gs_pytorch_parse_release(release, colon ? colon + 1 : "", err);
    if (!cfg) return NULL;
    gs_policy *q = g_new0(gs_policy, 1);
    q->ops = p->ops;
    q->cfg = cfg;
    q->spec = g_strdup(p->spec); /* reports name it as it was given */
    return q;
}

gs_policy *gs_policy_at_release(const gs_policy *p, const char *recorded, GError **err)
{
    if (p->ops != &gs_policy_pytorch) return NULL;
    const pytorch_cfg *cfg = p->cfg;
    if (cfg->release) return NULL; /* the spec names its release */
    unsigned r = gs_pytorch_release_of_trace(recorded);
    unsigned use = r ? r : GS_PYTORCH_FIRST;
    if (cfg->needs > use) {
        const char *colon = strchr(p->spec, ':');
        char *said = r ? g_strdup_printf("the trace was recorded with PyTorch %s", recorded)
                       : g_strdup("no release is known (a trace's pytorch_version; gpusim run "
                                  "emulates 2.11), so plain pytorch is 2.11");
        char *msg = g_strdup_printf("policy '%s': %s is a key of PyTorch 2.%u and later, and %s; "
                                    "name the release: pytorch@2.%u:%s",
                                    p->spec, cfg->needs_key, cfg->needs, said, cfg->needs,
                                    colon ? colon + 1 : "");
        char *safe = gs_printable(msg);
        g_set_error_literal(err, GS_POLICY_ERROR, GS_POLICY_ERROR_CONFIG, safe);
        g_free(safe);
        g_free(msg);
        g_free(said);
        return NULL;
    }
    /* 2.11's rules are what an unresolved configuration follows already */
    if (use == GS_PYTORCH_FIRST) return NULL;
    return policy_for(p, use, err);
}
