/* series.c - what a replay hands its plots: the recorder (gs_plot_observe, a replay's observer)
 * with its JSON out and back in, so a saved report can be plotted again, and a result's numbers
 * as a gs_plot_run.
 *
 * The recorder keeps, per bucket of events, the maxima of allocated and reserved bytes (no peak
 * is lost to downsampling), each retry and OOM, and a copy of the heap's segments and blocks
 * taken whenever reserved bytes reach a new maximum (at the end, the address map at peak) and
 * once more at the first OOM, with the request that failed and its pool's free blocks. With
 * several clients in separate allocators (one heap each, on one device), the bytes are the sums
 * over the heaps and the maps show every heap's segments: the device's, as the program saw it.
 */
#include <string.h>

#include "plot-int.h"

/* Markers beyond these are counted, not kept: a --continue-on-oom replay of a long trace can
 * meet millions of OOMs, and a plot cannot show more anyway. */
#define MAX_MARKERS 10000

/* ---- recording ---- */

static void heapmap_init(gs_plot_heapmap *m)
{
    memset(m, 0, sizeof *m);
    m->segs = g_array_new(FALSE, FALSE, sizeof(gs_plot_seg));
    m->blocks = g_array_new(FALSE, FALSE, sizeof(gs_plot_block));
}

static void heapmap_clear(gs_plot_heapmap *m)
{
    g_array_free(m->segs, TRUE);
    g_array_free(m->blocks, TRUE);
}

/* A heap's retries, OOMs and bytes as the recorder last saw them: an event's new retries and
 * OOMs are its heap's counts less these (one heap's count against another's would make a client
 * switch look like an OOM), and the device's bytes move by its heap's change. A heap is seen from
 * its first event: the replay hands the recorder only the heap that served each event. */
typedef struct {
    const gs_heap *h;
    uint64_t retries, ooms;
    int64_t allocated, reserved;
} heap_seen;

gs_plot_series *gs_plot_series_new(size_t n_events)
{
    gs_plot_series *s = g_new0(gs_plot_series, 1);
    s->width = n_events > GS_PLOT_POINTS ? (n_events + GS_PLOT_POINTS - 1) / GS_PLOT_POINTS : 1;
    s->n_events = n_events;
    s->points = g_array_new(FALSE, FALSE, sizeof(gs_plot_point));
    s->retries = g_array_new(FALSE, FALSE, sizeof(gs_plot_point));
    s->ooms = g_array_new(FALSE, FALSE, sizeof(gs_plot_point));
    heapmap_init(&s->peak);
    heapmap_init(&s->oom);
    s->seen = g_array_new(FALSE, FALSE, sizeof(heap_seen));
    return s;
}

void gs_plot_series_free(gs_plot_series *s)
{
    if (!s) return;
    g_array_free(s->points, TRUE);
    g_array_free(s->retries, TRUE);
    g_array_free(s->ooms, TRUE);
    g_array_free(s->seen, TRUE);
    heapmap_clear(&s->peak);
    heapmap_clear(&s->oom);
    g_free(s);
}

/* The segments and blocks of every heap seen, in the order first seen. */
static void snapshot(gs_plot_heapmap *m, const gs_plot_series *s, const gs_plot_point *at)
{
    g_array_set_size(m->segs, 0);
    g_array_set_size(m->blocks, 0);
    for (guint i = 0; i < s->seen->len; i++) {
        const gs_heap *h = g_array_index(s->seen, heap_seen, i).h;
        for (const gs_segment *g = gs_heap_segments(h); g; g = g->next) {
            gs_plot_seg ms = {.addr = g->addr, .size = g->size, .first = m->blocks->len,
                              .pool = g->pool, .expandable = g->expandable,
                              .pool_id = gs_heap_pool_id(h, gs_pool_private(g->pool))};
            for (const gs_block *b = g->head; b; b = b->next) {
                gs_plot_block mb = {.off = b->addr - g->addr, .size = b->size, .state = b->state};
                g_array_append_val(m->blocks, mb);
                ms.n++;
            }
            g_array_append_val(m->segs, ms);
        }
    }
    m->at = *at;
    m->have = true;
}

/* The words naming a private pool's pool (a number: nothing from the trace but its id). */
static void oom_req_words(gs_plot_oom_req *q)
{
    if (!q->private_pool) return;
    g_snprintf(q->private_words, sizeof q->private_words, "private pool %" G_GUINT32_FORMAT "%s",
               q->private_pool,
               q->npools <= 1 ? "" : q->pool_small ? "'s small pool" : "'s large pool");
}

/* The request e that met the first OOM, and its pool's free blocks as the failure left them
 * (the numbers of replay.c's gs_oom_report, with where the largest block lies). */
static void oom_request(gs_plot_oom_req *q, const gs_heap *h, const gs_event *e)
{
    const gs_policy *p = gs_heap_policy(h);
    memset(q, 0, sizeof *q);
    q->request = e->size;
    q->rounded = gs_policy_rounded(p, e->size);
    q->pool = p->ops->pool_of(p->cfg, q->rounded);
    q->npools = p->ops->npools;
    q->pool_small = p->ops->pools && q->pool < q->npools && p->ops->pools[q->pool].is_small;
    q->limit = gs_heap_limit(h);
    /* a request routed to a private pool could use only that pool's blocks */
    unsigned route = gs_heap_route_of(h, e->stream), target = route * GS_MAX_POOLS + q->pool;
    q->private_pool = gs_heap_pool_id(h, route);
    oom_req_words(q);
    for (const gs_segment *g = gs_heap_segments(h); g; g = g->next)
        for (const gs_block *b = g->head; b; b = b->next) {
            if (b->state != GS_BLOCK_FREE || b->pool != target) continue;
            q->free_in_pool += b->size;
            q->n_free_in_pool++;
            if (b->stream == e->stream) q->largest_on_stream = MAX(q->largest_on_stream, b->size);
            if (b->size > q->largest_in_pool) {
                q->largest_in_pool = b->size;
                q->largest_seg = g->addr;
                q->largest_off = b->addr - g->addr;
            }
        }
}

void gs_plot_observe(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    gs_plot_series *s = ud;
    const gs_stats *st = gs_heap_stats(h);
    heap_seen *seen = NULL;
    for (guint i = 0; i < s->seen->len && !seen; i++)
        if (g_array_index(s->seen, heap_seen, i).h == h) seen = &g_array_index(s->seen, heap_seen, i);
    if (!seen) {
        heap_seen z = {.h = h};
        g_array_append_val(s->seen, z);
        seen = &g_array_index(s->seen, heap_seen, s->seen->len - 1);
    }
    int64_t allocated = st->allocated_bytes[GS_STAT_ALL].current;
    int64_t reserved = st->reserved_bytes[GS_STAT_ALL].current;
    s->allocated += allocated - seen->allocated;
    s->reserved += reserved - seen->reserved;
    seen->allocated = allocated;
    seen->reserved = reserved;
    gs_plot_point p = {.event = index, .time_us = e->time_us, .allocated = s->allocated,
                       .reserved = s->reserved};
    if (index / s->width >= s->points->len) {
        g_array_append_val(s->points, p);
    } else {
        gs_plot_point *last = &g_array_index(s->points, gs_plot_point, s->points->len - 1);
        last->allocated = MAX(last->allocated, p.allocated);
        last->reserved = MAX(last->reserved, p.reserved);
    }
    if (st->num_alloc_retries != seen->retries) {
        s->n_retries += st->num_alloc_retries - seen->retries;
        seen->retries = st->num_alloc_retries;
        if (s->retries->len < MAX_MARKERS) g_array_append_val(s->retries, p);
    }
    if (st->num_ooms != seen->ooms) {
        s->n_ooms += st->num_ooms - seen->ooms;
        seen->ooms = st->num_ooms;
        if (s->ooms->len < MAX_MARKERS) g_array_append_val(s->ooms, p);
        /* The first OOM the replay could not serve (its result's first OOM report): an
         * allocation's, or a recorded oom event that ends the trace (the run died of it; an
         * earlier one the program caught). Once per replay, so it costs one walk of the heap. */
        bool fatal = e->op == GS_OP_ALLOC || (e->op == GS_OP_OOM && index + 1 == s->n_events);
        if (!s->oom.have && fatal) {
            snapshot(&s->oom, s, &p);
            oom_request(&s->oom_req, h, e);
        }
    }
    /* Reserved bytes only grow by device allocations, so this walks the heap at most once per
     * cudaMalloc or mapping, not once per event. */
    if (p.reserved > s->max_reserved) {
        s->max_reserved = p.reserved;
        snapshot(&s->peak, s, &p);
    }
}

const char *gs_plot_pool_words(const gs_plot_oom_req *q)
{
    if (q->private_pool) return q->private_words;
    if (q->npools <= 1) return "its pool";
    return q->pool_small ? "the small pool" : "the large pool";
}

/* ---- the series as JSON (a saved report's "timeline" and "address_map"), and back ---- */

static const char *const state_names[] = {"free", "allocated", "pending", "unmapped"};

const char *gs_plot_state_name(unsigned state)
{
    return state < G_N_ELEMENTS(state_names) ? state_names[state] : "?";
}

/* [event, time_us, allocated_bytes, reserved_bytes] per point: the timeline's "columns". */
static void json_points(gs_jw *w, const char *name, const GArray *a)
{
    gs_jw_key(w, name);
    gs_jw_array(w);
    for (guint i = 0; i < a->len; i++) {
        const gs_plot_point *p = &g_array_index(a, gs_plot_point, i);
        gs_jw_array(w);
        gs_jw_uint(w, p->event);
        gs_jw_uint(w, p->time_us);
        gs_jw_int(w, p->allocated);
        gs_jw_int(w, p->reserved);
        gs_jw_array_end(w);
    }
    gs_jw_array_end(w);
}

static void json_timeline(gs_jw *w, const gs_plot_series *s)
{
    static const char *const columns[] = {"event", "time_us", "allocated_bytes", "reserved_bytes"};
    gs_jw_key(w, "timeline");
    gs_jw_object(w);
    gs_jw_key(w, "columns");
    gs_jw_array(w);
    for (size_t i = 0; i < G_N_ELEMENTS(columns); i++) gs_jw_str(w, columns[i]);
    gs_jw_array_end(w);
    gs_jw_key(w, "bucket_events");
    gs_jw_uint(w, s->width);
    json_points(w, "points", s->points);
    gs_jw_break(w, ",\n     ");
    json_points(w, "retries", s->retries);
    json_points(w, "ooms", s->ooms);
    gs_jw_object_end(w);
}

/* The OOM map's request: what failed and its pool's free blocks then. */
static void json_oom_req(gs_jw *w, const gs_plot_oom_req *q)
{
    gs_jw_key(w, "request_bytes");
    gs_jw_uint(w, q->request);
    gs_jw_key(w, "rounded_bytes");
    gs_jw_uint(w, q->rounded);
    gs_jw_key(w, "pool");
    gs_jw_uint(w, q->pool);
    if (q->private_pool) {
        gs_jw_key(w, "private_pool");
        gs_jw_uint(w, q->private_pool);
    }
    gs_jw_key(w, "pool_small");
    gs_jw_bool(w, q->pool_small);
    gs_jw_key(w, "npools");
    gs_jw_uint(w, q->npools);
    gs_jw_key(w, "limit_bytes");
    gs_jw_uint(w, q->limit);
    gs_jw_break(w, ",\n     ");
    gs_jw_key(w, "largest_free_in_pool_bytes");
    gs_jw_uint(w, q->largest_in_pool);
    gs_jw_key(w, "largest_free_on_stream_bytes");
    gs_jw_uint(w, q->largest_on_stream);
    gs_jw_key(w, "free_in_pool_bytes");
    gs_jw_uint(w, q->free_in_pool);
    gs_jw_key(w, "free_blocks_in_pool");
    gs_jw_uint(w, q->n_free_in_pool);
    gs_jw_key(w, "largest_free_segment_addr");
    gs_jw_uint(w, q->largest_seg);
    gs_jw_key(w, "largest_free_offset");
    gs_jw_uint(w, q->largest_off);
}

/* A segment a line: {"addr", "size", "pool", "expandable", "blocks": [[offset, size, state]...]};
 * the map at the first OOM ("oom_map") has its request (q) too. */
static void json_map(gs_jw *w, const char *name, const gs_plot_heapmap *m, const gs_plot_oom_req *q)
{
    gs_jw_key(w, name);
    gs_jw_object(w);
    gs_jw_key(w, "event");
    gs_jw_uint(w, m->at.event);
    gs_jw_key(w, "time_us");
    gs_jw_uint(w, m->at.time_us);
    gs_jw_key(w, "allocated_bytes");
    gs_jw_int(w, m->at.allocated);
    gs_jw_key(w, "reserved_bytes");
    gs_jw_int(w, m->at.reserved);
    if (q) {
        gs_jw_break(w, ",\n     ");
        json_oom_req(w, q);
    }
    gs_jw_key(w, "segments");
    gs_jw_array(w);
    for (guint i = 0; i < m->segs->len; i++) {
        const gs_plot_seg *g = &g_array_index(m->segs, gs_plot_seg, i);
        if (i == 0) gs_jw_text(w, "\n     ");
        else gs_jw_break(w, ",\n     ");
        gs_jw_object(w);
        gs_jw_key(w, "addr");
        gs_jw_uint(w, g->addr);
        gs_jw_key(w, "size");
        gs_jw_uint(w, g->size);
        gs_jw_key(w, "pool");
        gs_jw_uint(w, g->pool);
        if (g->pool_id) {
            gs_jw_key(w, "pool_id");
            gs_jw_uint(w, g->pool_id);
        }
        gs_jw_key(w, "expandable");
        gs_jw_bool(w, g->expandable);
        gs_jw_key(w, "blocks");
        gs_jw_array(w);
        for (guint k = 0; k < g->n; k++) {
            const gs_plot_block *b = &g_array_index(m->blocks, gs_plot_block, g->first + k);
            gs_jw_array(w);
            gs_jw_uint(w, b->off);
            gs_jw_uint(w, b->size);
            gs_jw_str(w, gs_plot_state_name(b->state));
            gs_jw_array_end(w);
        }
        gs_jw_array_end(w);
        gs_jw_object_end(w);
    }
    gs_jw_array_end(w);
    gs_jw_object_end(w);
}

/* The members go into the result's object that report.c writes (gs_result.json_extra follows
 * its last member as text): the fragment opens with the separator, and its members are written
 * at the writer's top level as if inside that object. */
char *gs_plot_series_json(const gs_plot_series *s)
{
    GString *j = g_string_new(NULL);
    gs_jw w;
    gs_jw_init(&w, j);
    gs_jw_text(&w, ",\n   ");
    json_timeline(&w, s);
    if (s->peak.have) {
        gs_jw_break(&w, ",\n   ");
        json_map(&w, "address_map", &s->peak, NULL);
    }
    if (s->oom.have) {
        gs_jw_break(&w, ",\n   ");
        json_map(&w, "oom_map", &s->oom, &s->oom_req);
    }
    return g_string_free(j, FALSE);
}

static gboolean bad_input(GError **err, const char *what)
{
    g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, "%s", what);
    return FALSE;
}

static gboolean points_from_json(const gs_json *a, GArray *out)
{
    if (!a || a->type != GS_JSON_ARRAY) return FALSE;
    for (size_t i = 0; i < a->n; i++) {
        const gs_json *p = a->items[i];
        gs_plot_point pt;
        if (p->type != GS_JSON_ARRAY || p->n != 4 || !gs_json_uint(p->items[0], &pt.event) ||
            !gs_json_uint(p->items[1], &pt.time_us) || !gs_json_int(p->items[2], &pt.allocated) ||
            !gs_json_int(p->items[3], &pt.reserved))
            return FALSE;
        g_array_append_val(out, pt);
    }
    return TRUE;
}

static gboolean oom_req_from_json(gs_plot_oom_req *q, const gs_json *m)
{
    const gs_json *small = gs_json_get(m, "pool_small");
    uint64_t pool = 0, npools = 0;
    if (!gs_json_uint(gs_json_get(m, "request_bytes"), &q->request) ||
        !gs_json_uint(gs_json_get(m, "rounded_bytes"), &q->rounded) ||
        !gs_json_uint(gs_json_get(m, "pool"), &pool) || !small || small->type != GS_JSON_BOOL ||
        !gs_json_uint(gs_json_get(m, "npools"), &npools) ||
        !gs_json_uint(gs_json_get(m, "limit_bytes"), &q->limit) ||
        !gs_json_uint(gs_json_get(m, "largest_free_in_pool_bytes"), &q->largest_in_pool) ||
        !gs_json_uint(gs_json_get(m, "largest_free_on_stream_bytes"), &q->largest_on_stream) ||
        !gs_json_uint(gs_json_get(m, "free_in_pool_bytes"), &q->free_in_pool) ||
        !gs_json_uint(gs_json_get(m, "free_blocks_in_pool"), &q->n_free_in_pool) ||
        !gs_json_uint(gs_json_get(m, "largest_free_segment_addr"), &q->largest_seg) ||
        !gs_json_uint(gs_json_get(m, "largest_free_offset"), &q->largest_off) ||
        pool >= GS_MAX_POOLS || npools > GS_MAX_POOLS)
        return FALSE;
    q->pool = (unsigned)pool;
    q->pool_small = small->b;
    q->npools = (unsigned)npools;
    /* optional: only a request routed to a private pool has it */
    const gs_json *pp = gs_json_get(m, "private_pool");
    uint64_t priv = 0;
    if (pp && (!gs_json_uint(pp, &priv) || priv > UINT32_MAX)) return FALSE;
    q->private_pool = (uint32_t)priv;
    oom_req_words(q);
    return TRUE;
}

static gboolean map_from_json(gs_plot_heapmap *hm, const gs_json *m)
{
    const gs_json *segs = gs_json_get(m, "segments");
    if (!gs_json_uint(gs_json_get(m, "event"), &hm->at.event) ||
        !gs_json_uint(gs_json_get(m, "time_us"), &hm->at.time_us) ||
        !gs_json_int(gs_json_get(m, "allocated_bytes"), &hm->at.allocated) ||
        !gs_json_int(gs_json_get(m, "reserved_bytes"), &hm->at.reserved) || !segs ||
        segs->type != GS_JSON_ARRAY)
        return FALSE;
    for (size_t i = 0; i < segs->n; i++) {
        const gs_json *g = segs->items[i], *bl = gs_json_get(g, "blocks"),
                      *ex = gs_json_get(g, "expandable");
        uint64_t pool;
        gs_plot_seg ms = {.first = hm->blocks->len};
        if (!gs_json_uint(gs_json_get(g, "addr"), &ms.addr) ||
            !gs_json_uint(gs_json_get(g, "size"), &ms.size) ||
            !gs_json_uint(gs_json_get(g, "pool"), &pool) || !ex || ex->type != GS_JSON_BOOL ||
            !bl || bl->type != GS_JSON_ARRAY)
            return FALSE;
        ms.pool = (uint8_t)pool;
        ms.expandable = ex->b;
        const gs_json *pid = gs_json_get(g, "pool_id"); /* optional: a private pool's */
        uint64_t id = 0;
        if (pid && (!gs_json_uint(pid, &id) || id > UINT32_MAX)) return FALSE;
        ms.pool_id = (uint32_t)id;
        for (size_t k = 0; k < bl->n; k++) {
            const gs_json *b = bl->items[k];
            gs_plot_block mb = {0};
            if (b->type != GS_JSON_ARRAY || b->n != 3 || !gs_json_uint(b->items[0], &mb.off) ||
                !gs_json_uint(b->items[1], &mb.size) || b->items[2]->type != GS_JSON_STRING)
                return FALSE;
            guint st = 0;
            while (st < G_N_ELEMENTS(state_names) && strcmp(state_names[st], b->items[2]->str) != 0)
                st++;
            if (st == G_N_ELEMENTS(state_names)) return FALSE;
            mb.state = (uint8_t)st;
            g_array_append_val(hm->blocks, mb);
            ms.n++;
        }
        g_array_append_val(hm->segs, ms);
    }
    hm->have = true;
    return TRUE;
}

gs_plot_series *gs_plot_series_from_json(const gs_json *result, GError **err)
{
    const gs_json *tl = gs_json_get(result, "timeline"), *m = gs_json_get(result, "address_map"),
                  *om = gs_json_get(result, "oom_map");
    if (!tl) return NULL;
    gs_plot_series *s = gs_plot_series_new(0);
    uint64_t w = 1;
    gboolean ok = gs_json_uint(gs_json_get(tl, "bucket_events"), &w) &&
                  points_from_json(gs_json_get(tl, "points"), s->points) &&
                  points_from_json(gs_json_get(tl, "retries"), s->retries) &&
                  points_from_json(gs_json_get(tl, "ooms"), s->ooms) &&
                  (!m || map_from_json(&s->peak, m)) &&
                  (!om || (map_from_json(&s->oom, om) && oom_req_from_json(&s->oom_req, om)));
    if (!ok) {
        gs_plot_series_free(s);
        bad_input(err, "a result's \"timeline\", \"address_map\" or \"oom_map\" is malformed");
        return NULL;
    }
    s->width = (size_t)w;
    s->n_retries = s->retries->len;
    s->n_ooms = s->ooms->len;
    s->max_reserved = s->peak.have ? s->peak.at.reserved : 0;
    return s;
}

/* ---- runs ---- */

/* x as a report prints it ("%.6f"), so plots drawn now and from the saved report agree. */
static double as_printed(const char *fmt, double x)
{
    char buf[64];
    g_snprintf(buf, sizeof buf, fmt, x);
    return g_ascii_strtod(buf, NULL);
}

void gs_plot_run_from_result(gs_plot_run *pr, const gs_result *r, gs_plot_series *series)
{
    memset(pr, 0, sizeof *pr);
    pr->policy = g_strdup(r->policy);
    pr->capacity = r->capacity;
    pr->outcome = g_strdup(gs_result_outcome(r));
    pr->peak_allocated = r->stats.allocated_bytes[GS_STAT_ALL].peak;
    pr->peak_reserved = r->stats.reserved_bytes[GS_STAT_ALL].peak;
    pr->frag_peak = as_printed("%.6f", gs_result_frag_peak(r));
    pr->retries = r->stats.num_alloc_retries;
    pr->ooms = r->stats.num_ooms;
    pr->device_us = as_printed("%.1f", gs_devcalls_total_us(&r->calls));
    pr->series = series;
    if (r->oom && r->n_clients > 1 && r->first_oom_client < r->n_clients)
        pr->oom_client = g_strdup(r->clients[r->first_oom_client].name);
}

void gs_plot_run_clear(gs_plot_run *pr)
{
    g_free(pr->policy);
    g_free(pr->outcome);
    g_free(pr->oom_client);
    gs_plot_series_free(pr->series);
    memset(pr, 0, sizeof *pr);
}
