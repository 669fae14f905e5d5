/* reference.c - the reference file's reader (reference.h): a gpusim-reference 1 JSON object,
 * one per device for a several-device run.
 */
#include <string.h>

#include "reference.h"
#include "trace.h"
#include "util.h"

static gboolean ref_bad(GError **err, const char *path, const char *what)
{
    g_set_error(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT,
                "%s: not a gpusim reference file (%s); make one with traces/convert.py --reference",
                path, what);
    return FALSE;
}

/* A reference from its JSON object (the file's top level, or one of its "devices"). NULL (and
 * *why) when device_events is bad or missing or its device larger than gpusim simulates. */
static gs_reference *ref_from_json(const char *path, const gs_json *j, const char **why)
{
    gs_reference *r = g_new0(gs_reference, 1);
    r->path = g_strdup(path);
    r->seg_addrs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    r->seg_sizes = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    const gs_json *v;
    if ((v = gs_json_get(j, "allocator_conf")) && v->type == GS_JSON_STRING)
        r->allocator_conf = g_strdup(v->str);
    if ((v = gs_json_get(j, "outcome")) && v->type == GS_JSON_STRING) r->outcome = g_strdup(v->str);
    const gs_json *kind = gs_json_get(j, "source_kind");
    if ((v = gs_json_get(j, "source")) && v->type == GS_JSON_STRING)
        r->source = kind && kind->type == GS_JSON_STRING
                        ? g_strdup_printf("%s %s", kind->str, v->str)
                        : g_strdup(v->str);
    if ((v = gs_json_get(j, "device_total_bytes"))) gs_json_uint(v, &r->device_total);
    if ((v = gs_json_get(j, "cap_bytes"))) gs_json_uint(v, &r->cap_bytes);
    if ((v = gs_json_get(j, "limit_bytes"))) gs_json_uint(v, &r->limit_bytes);
    if ((v = gs_json_get(j, "limit_source")) && v->type == GS_JSON_STRING)
        r->limit_source = g_strdup(v->str);
    if ((v = gs_json_get(j, "limit_min_bytes"))) gs_json_uint(v, &r->limit_min);
    if ((v = gs_json_get(j, "limit_max_bytes"))) gs_json_uint(v, &r->limit_max);
    if (r->limit_max < r->limit_min) r->limit_min = r->limit_max = 0; /* no range, then */
    if (r->limit_bytes > GS_MAX_DEVICE_BYTES) r->limit_bytes = 0;
    uint64_t ev;
    if ((v = gs_json_get(j, "outcome_event")) && gs_json_uint(v, &ev)) {
        r->has_outcome_event = true;
        r->outcome_event = (size_t)ev;
    }

    const gs_json *evs = gs_json_get(j, "device_events");
    gboolean ok = evs && evs->type == GS_JSON_ARRAY;
    uint64_t reserved = 0;
    for (size_t i = 0; ok && i < evs->n; i++) {
        const gs_json *e = evs->items[i];
        uint64_t addr, size;
        ok = e->type == GS_JSON_ARRAY && e->n >= 3 && e->items[0]->type == GS_JSON_STRING &&
             gs_json_uint(e->items[1], &addr) && gs_json_uint(e->items[2], &size);
        if (!ok) break;
        const char *a = e->items[0]->str;
        if (strcmp(a, "segment_alloc") == 0) {
            g_array_append_val(r->seg_addrs, addr);
            g_array_append_val(r->seg_sizes, size);
            r->n_segment_alloc++;
        }
        if (strcmp(a, "segment_alloc") == 0 || strcmp(a, "segment_map") == 0) reserved += size;
        else if (strcmp(a, "segment_free") == 0 || strcmp(a, "segment_unmap") == 0) {
            reserved -= size;
            r->n_device_free++;
        }
        if (reserved > r->peak_reserved) r->peak_reserved = reserved;
    }
    if (ok && r->device_total > GS_MAX_DEVICE_BYTES) {
        *why = "\"device_total_bytes\" more than gpusim simulates (16 TiB)";
        gs_reference_free(r);
        return NULL;
    }
    if (!ok) {
        *why = "bad or missing \"device_events\"";
        gs_reference_free(r);
        return NULL;
    }
    const gs_json *ms = gs_json_get(j, "memory_stats");
    if (ms && ms->type == GS_JSON_OBJECT) {
        r->stats = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        for (size_t i = 0; i < ms->n; i++) {
            int64_t x;
            if (!gs_json_int(ms->items[i], &x)) continue;
            g_hash_table_insert(r->stats, g_strdup(ms->keys[i]), g_memdup2(&x, sizeof x));
        }
    }
    return r;
}

gs_reference *gs_reference_load(const char *path, GError **err)
{
    gs_json *j = gs_json_load(path, err);
    if (!j) return NULL;
    const gs_json *fmt = gs_json_get(j, "format");
    if (!fmt || fmt->type != GS_JSON_STRING || strcmp(fmt->str, "gpusim-reference 1") != 0) {
        ref_bad(err, path, "no \"format\": \"gpusim-reference 1\"");
        gs_json_free(j);
        return NULL;
    }
    const char *why = NULL;
    gs_reference *r = ref_from_json(path, j, &why);
    /* Several devices: "devices": {"0": {...}, "1": {...}}, each a reference of its own. */
    const gs_json *devs = r ? gs_json_get(j, "devices") : NULL;
    if (devs && devs->type == GS_JSON_OBJECT && devs->n) {
        r->n_devices = devs->n;
        r->device_ids = g_new0(uint32_t, devs->n);
        r->devices = g_new0(gs_reference *, devs->n);
        for (size_t i = 0; r && i < devs->n; i++) {
            uint64_t id;
            if (!g_ascii_string_to_unsigned(devs->keys[i], 10, 0, UINT32_MAX, &id, NULL) || (i && id <= r->device_ids[i - 1])) {
                why = "\"devices\" keys must be device numbers, ascending";
            } else {
                r->device_ids[i] = (uint32_t)id;
                r->devices[i] = ref_from_json(path, devs->items[i], &why);
            }
            if (!r->devices[i]) {
                gs_reference_free(r);
                r = NULL;
            }
        }
    }
    if (!r) ref_bad(err, path, why);
    gs_json_free(j);
    return r;
}

void gs_reference_free(gs_reference *r)
{
    if (!r) return;
    for (size_t i = 0; i < r->n_devices; i++) gs_reference_free(r->devices[i]);
    g_free(r->devices);
    g_free(r->device_ids);
    g_free(r->path);
    g_free(r->source);
    g_free(r->allocator_conf);
    g_free(r->outcome);
    g_free(r->limit_source);
    g_array_free(r->seg_addrs, TRUE);
    g_array_free(r->seg_sizes, TRUE);
    if (r->stats) g_hash_table_destroy(r->stats);
    g_free(r);
}

uint64_t gs_reference_limit(const gs_reference *r, const char **source)
{
    const char *why = NULL;
    uint64_t limit = 0;
    if (r && r->cap_bytes) {
        limit = r->cap_bytes;
        why = "recorded cap";
    }
    /* the limit the snapshot shows the run met (a full device: another process held the rest),
     * where no cap is known or it is below the cap: the run met the lower (a NAME.json's 2 GiB
     * won over a device full at 1.5 GiB, and the recorded setting "got past" its death) */
    if (r && r->limit_bytes && (!limit || r->limit_bytes < limit)) {
        limit = r->limit_bytes;
        why = r->limit_source ? r->limit_source : "the limit the run met";
    }
    if (source) *source = why;
    return limit;
}

const gs_reference *gs_reference_device(const gs_reference *r, uint32_t device)
{
    /* device_ids ascend (the reader refuses them otherwise): a search, not a scan, since a
     * report looks up each of up to 65,536 devices */
    size_t lo = 0, hi = r ? r->n_devices : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->device_ids[mid] < device) lo = mid + 1;
        else hi = mid;
    }
    return r && lo < r->n_devices && r->device_ids[lo] == device ? r->devices[lo] : NULL;
}

char *gs_reference_mismatch(const gs_reference *r, const gs_trace *t, char **warning)
{
    *warning = NULL;
    const char *src = gs_trace_get_meta(t, "source");
    if (r->source && src && strcmp(r->source, src) != 0)
        *warning = g_strdup_printf("%s is of '%s', the trace of '%s'", r->path, r->source, src);
    uint32_t *ids = NULL;
    size_t n = gs_trace_devices(t, &ids);
    bool same = r->n_devices ? n == r->n_devices && memcmp(ids, r->device_ids, n * sizeof *ids) == 0
                             : n <= 1;
    char *why = NULL;
    if (!same) {
        GString *g = g_string_new(NULL);
        for (size_t k = 0; k < n; k++) g_string_append_printf(g, "%s%u", k ? ", " : "", ids[k]);
        why = g_strdup_printf("%s is of a run of %zu device%s, the trace names device%s %s",
                              r->path, r->n_devices ? r->n_devices : 1, r->n_devices > 1 ? "s" : "",
                              n == 1 ? "" : "s", g->str);
        g_string_free(g, TRUE);
    } else if (r->has_outcome_event && r->outcome_event >= t->n) {
        why = g_strdup_printf("%s says its run died at event %zu; the trace has %zu events",
                              r->path, r->outcome_event, t->n);
    }
    g_free(ids);
    return why;
}

gboolean gs_reference_stat(const gs_reference *r, const char *key, int64_t *out)
{
    if (!r || !r->stats) return FALSE;
    const int64_t *v = g_hash_table_lookup(r->stats, key);
    if (!v) return FALSE;
    *out = *v;
    return TRUE;
}
