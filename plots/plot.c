/* plot.c - record what a replay's plots need, write their data and gnuplot scripts, run gnuplot.
 *
 * See plot.h for the four plots. Everything an image shows is in the .dat files beside its .gp
 * script, in the units of its axes (GiB, MiB, ms), so a user can re-plot or restyle them; the
 * scripts name their data by relative path and are run with the plot directory as the working
 * directory.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "plot.h"

G_DEFINE_QUARK(gs-plot-error-quark, gs_plot_error)

/* Okabe and Ito's colour-blind-safe palette, the yellow left out (unreadable on white). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000"};
#define N_PALETTE G_N_ELEMENTS(palette)

/* Markers beyond these are counted, not kept: a --continue-on-oom replay of a long trace can
 * meet millions of OOMs, and a plot cannot show more anyway. */
#define MAX_MARKERS 10000

static double gib(int64_t b) { return (double)b / (double)GS_GiB; }

/* ---- recording ---- */

typedef struct {
    uint64_t event, time_us;
    int64_t allocated, reserved;
} point;

typedef struct {
    uint64_t addr, size;
    uint32_t first, n; /* its blocks: blocks[first .. first + n) */
    uint8_t pool;
    bool expandable;
} map_seg;

typedef struct {
    uint64_t off, size; /* offset in its segment */
    uint8_t state;      /* gs_block_state */
} map_block;

struct gs_plot_series {
    size_t width;             /* events per timeline bucket */
    GArray *points;           /* point: per bucket, the maxima of allocated and reserved */
    GArray *retries, *ooms;   /* point: the moment of each (at most MAX_MARKERS) */
    uint64_t n_retries, n_ooms;
    /* the address map: the heap after the event where reserved bytes reached their maximum */
    int64_t max_reserved;
    bool have_map;
    point map_at;
    GArray *segs, *blocks;    /* map_seg, map_block */
};

gs_plot_series *gs_plot_series_new(size_t n_events)
{
    gs_plot_series *s = g_new0(gs_plot_series, 1);
    s->width = n_events > GS_PLOT_POINTS ? (n_events + GS_PLOT_POINTS - 1) / GS_PLOT_POINTS : 1;
    s->points = g_array_new(FALSE, FALSE, sizeof(point));
    s->retries = g_array_new(FALSE, FALSE, sizeof(point));
    s->ooms = g_array_new(FALSE, FALSE, sizeof(point));
    s->segs = g_array_new(FALSE, FALSE, sizeof(map_seg));
    s->blocks = g_array_new(FALSE, FALSE, sizeof(map_block));
    return s;
}

void gs_plot_series_free(gs_plot_series *s)
{
    if (!s) return;
    g_array_free(s->points, TRUE);
    g_array_free(s->retries, TRUE);
    g_array_free(s->ooms, TRUE);
    g_array_free(s->segs, TRUE);
    g_array_free(s->blocks, TRUE);
    g_free(s);
}

static void snapshot(gs_plot_series *s, const gs_heap *h)
{
    g_array_set_size(s->segs, 0);
    g_array_set_size(s->blocks, 0);
    for (const gs_segment *g = gs_heap_segments(h); g; g = g->next) {
        map_seg ms = {.addr = g->addr, .size = g->size, .first = s->blocks->len,
                      .pool = g->pool, .expandable = g->expandable};
        for (const gs_block *b = g->head; b; b = b->next) {
            map_block mb = {.off = b->addr - g->addr, .size = b->size, .state = b->state};
            g_array_append_val(s->blocks, mb);
            ms.n++;
        }
        g_array_append_val(s->segs, ms);
    }
    s->have_map = true;
}

void gs_plot_observe(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    gs_plot_series *s = ud;
    const gs_stats *st = gs_heap_stats(h);
    point p = {.event = index, .time_us = e->time_us,
               .allocated = st->allocated_bytes[GS_STAT_ALL].current,
               .reserved = st->reserved_bytes[GS_STAT_ALL].current};
    if (index / s->width >= s->points->len) {
        g_array_append_val(s->points, p);
    } else {
        point *last = &g_array_index(s->points, point, s->points->len - 1);
        last->allocated = MAX(last->allocated, p.allocated);
        last->reserved = MAX(last->reserved, p.reserved);
    }
    if (st->num_alloc_retries != s->n_retries) {
        s->n_retries = st->num_alloc_retries;
        if (s->retries->len < MAX_MARKERS) g_array_append_val(s->retries, p);
    }
    if (st->num_ooms != s->n_ooms) {
        s->n_ooms = st->num_ooms;
        if (s->ooms->len < MAX_MARKERS) g_array_append_val(s->ooms, p);
    }
    /* Reserved bytes only grow by device allocations, so this walks the heap at most once per
     * cudaMalloc or mapping, not once per event. */
    if (p.reserved > s->max_reserved) {
        s->max_reserved = p.reserved;
        s->map_at = p;
        snapshot(s, h);
    }
}

static const char *const state_names[] = {"free", "allocated", "pending", "unmapped"};

static void json_points(GString *j, const char *name, const GArray *a)
{
    g_string_append_printf(j, "\"%s\": [", name);
    for (guint i = 0; i < a->len; i++) {
        const point *p = &g_array_index(a, point, i);
        g_string_append_printf(j, "%s[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT ", %" G_GINT64_FORMAT
                                  ", %" G_GINT64_FORMAT "]",
                               i ? ", " : "", p->event, p->time_us, p->allocated, p->reserved);
    }
    g_string_append_c(j, ']');
}

char *gs_plot_series_json(const gs_plot_series *s)
{
    GString *j = g_string_new(",\n   \"timeline\": {\"columns\": [\"event\", \"time_us\", "
                              "\"allocated_bytes\", \"reserved_bytes\"], ");
    g_string_append_printf(j, "\"bucket_events\": %zu, ", s->width);
    json_points(j, "points", s->points);
    g_string_append(j, ",\n     ");
    json_points(j, "retries", s->retries);
    g_string_append(j, ", ");
    json_points(j, "ooms", s->ooms);
    g_string_append(j, "}");
    if (s->have_map) {
        g_string_append_printf(j, ",\n   \"address_map\": {\"event\": %" G_GUINT64_FORMAT
                                  ", \"time_us\": %" G_GUINT64_FORMAT ", \"allocated_bytes\": %" G_GINT64_FORMAT
                                  ", \"reserved_bytes\": %" G_GINT64_FORMAT ", \"segments\": [",
                               s->map_at.event, s->map_at.time_us, s->map_at.allocated,
                               s->map_at.reserved);
        for (guint i = 0; i < s->segs->len; i++) {
            const map_seg *g = &g_array_index(s->segs, map_seg, i);
            g_string_append_printf(j, "%s\n     {\"addr\": %" G_GUINT64_FORMAT ", \"size\": %" G_GUINT64_FORMAT
                                      ", \"pool\": %u, \"expandable\": %s, \"blocks\": [",
                                   i ? "," : "", g->addr, g->size, g->pool,
                                   g->expandable ? "true" : "false");
            for (guint k = 0; k < g->n; k++) {
                const map_block *b = &g_array_index(s->blocks, map_block, g->first + k);
                g_string_append_printf(j, "%s[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT ", \"%s\"]",
                                       k ? ", " : "", b->off, b->size,
                                       b->state < G_N_ELEMENTS(state_names) ? state_names[b->state] : "?");
            }
            g_string_append(j, "]}");
        }
        g_string_append(j, "]}");
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
        point pt;
        if (p->type != GS_JSON_ARRAY || p->n != 4 || !gs_json_uint(p->items[0], &pt.event) ||
            !gs_json_uint(p->items[1], &pt.time_us) || !gs_json_int(p->items[2], &pt.allocated) ||
            !gs_json_int(p->items[3], &pt.reserved))
            return FALSE;
        g_array_append_val(out, pt);
    }
    return TRUE;
}

static gboolean map_from_json(gs_plot_series *s, const gs_json *m)
{
    const gs_json *segs = gs_json_get(m, "segments");
    if (!gs_json_uint(gs_json_get(m, "event"), &s->map_at.event) ||
        !gs_json_uint(gs_json_get(m, "time_us"), &s->map_at.time_us) ||
        !gs_json_int(gs_json_get(m, "allocated_bytes"), &s->map_at.allocated) ||
        !gs_json_int(gs_json_get(m, "reserved_bytes"), &s->map_at.reserved) || !segs ||
        segs->type != GS_JSON_ARRAY)
        return FALSE;
    for (size_t i = 0; i < segs->n; i++) {
        const gs_json *g = segs->items[i], *bl = gs_json_get(g, "blocks"),
                      *ex = gs_json_get(g, "expandable");
        uint64_t pool;
        map_seg ms = {.first = s->blocks->len};
        if (!gs_json_uint(gs_json_get(g, "addr"), &ms.addr) ||
            !gs_json_uint(gs_json_get(g, "size"), &ms.size) ||
            !gs_json_uint(gs_json_get(g, "pool"), &pool) || !ex || ex->type != GS_JSON_BOOL ||
            !bl || bl->type != GS_JSON_ARRAY)
            return FALSE;
        ms.pool = (uint8_t)pool;
        ms.expandable = ex->b;
        for (size_t k = 0; k < bl->n; k++) {
            const gs_json *b = bl->items[k];
            map_block mb = {0};
            if (b->type != GS_JSON_ARRAY || b->n != 3 || !gs_json_uint(b->items[0], &mb.off) ||
                !gs_json_uint(b->items[1], &mb.size) || b->items[2]->type != GS_JSON_STRING)
                return FALSE;
            guint st = 0;
            while (st < G_N_ELEMENTS(state_names) && strcmp(state_names[st], b->items[2]->str) != 0)
                st++;
            if (st == G_N_ELEMENTS(state_names)) return FALSE;
            mb.state = (uint8_t)st;
            g_array_append_val(s->blocks, mb);
            ms.n++;
        }
        g_array_append_val(s->segs, ms);
    }
    s->have_map = true;
    s->max_reserved = s->map_at.reserved;
    return TRUE;
}

gs_plot_series *gs_plot_series_from_json(const gs_json *result, GError **err)
{
    const gs_json *tl = gs_json_get(result, "timeline"), *m = gs_json_get(result, "address_map");
    if (!tl) return NULL;
    gs_plot_series *s = gs_plot_series_new(0);
    uint64_t w = 1;
    gboolean ok = gs_json_uint(gs_json_get(tl, "bucket_events"), &w) &&
                  points_from_json(gs_json_get(tl, "points"), s->points) &&
                  points_from_json(gs_json_get(tl, "retries"), s->retries) &&
                  points_from_json(gs_json_get(tl, "ooms"), s->ooms) &&
                  (!m || map_from_json(s, m));
    if (!ok) {
        gs_plot_series_free(s);
        bad_input(err, "a result's \"timeline\" or \"address_map\" is malformed");
        return NULL;
    }
    s->width = (size_t)w;
    s->n_retries = s->retries->len;
    s->n_ooms = s->ooms->len;
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
    pr->outcome = g_strdup(r->error != GS_OK ? "error" : r->oom ? "oom" : "ok");
    pr->peak_allocated = r->stats.allocated_bytes[GS_STAT_ALL].peak;
    pr->peak_reserved = r->stats.reserved_bytes[GS_STAT_ALL].peak;
    pr->frag_peak = as_printed("%.6f", gs_result_frag_peak(r));
    pr->retries = r->stats.num_alloc_retries;
    pr->ooms = r->stats.num_ooms;
    pr->device_us = as_printed("%.1f", gs_devcalls_total_us(&r->calls));
    pr->series = series;
}

void gs_plot_run_clear(gs_plot_run *pr)
{
    g_free(pr->policy);
    g_free(pr->outcome);
    gs_plot_series_free(pr->series);
    memset(pr, 0, sizeof *pr);
}

/* ---- writing ---- */

struct gs_plotter {
    char *dir;
    GPtrArray *scripts; /* char*: stems of the scripts written, in order */
};

gs_plotter *gs_plotter_new(const char *dir, GError **err)
{
    if (g_mkdir_with_parents(dir, 0777) != 0) {
        int e = errno;
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot create: %s", dir, g_strerror(e));
        return NULL;
    }
    gs_plotter *p = g_new0(gs_plotter, 1);
    p->dir = g_strdup(dir);
    p->scripts = g_ptr_array_new_with_free_func(g_free);
    return p;
}

void gs_plotter_free(gs_plotter *p)
{
    if (!p) return;
    g_free(p->dir);
    g_ptr_array_free(p->scripts, TRUE);
    g_free(p);
}

const char *gs_plotter_dir(const gs_plotter *p) { return p->dir; }

/* g_file_set_contents writes a temporary file beside the target and renames it: whole. */
static gboolean write_file(gs_plotter *p, const char *name, GString *text, GError **err)
{
    char *path = g_build_filename(p->dir, name, NULL);
    GError *e = NULL;
    gboolean ok = g_file_set_contents(path, text->str, (gssize)text->len, &e);
    if (!ok) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s", e->message);
        g_error_free(e);
    }
    g_free(path);
    return ok;
}

char *gs_plot_stem(const char *trace)
{
    char *base = g_path_get_basename(trace);
    static const char *const exts[] = {".gz", ".gstrace", ".trace", ".csv", ".json", ".txt"};
    for (bool cut = true; cut;) {
        cut = false;
        for (size_t i = 0; i < G_N_ELEMENTS(exts); i++) {
            size_t n = strlen(base), k = strlen(exts[i]);
            if (n > k && strcmp(base + n - k, exts[i]) == 0) {
                base[n - k] = '\0';
                cut = true;
            }
        }
    }
    return base;
}

/* A policy spec as a file-name part: pytorch:max_split_size_mb:128 -> pytorch-max_split_size_mb-128 */
static char *file_part(const char *s)
{
    char *f = g_strdup(s);
    for (char *c = f; *c; c++)
        if (!g_ascii_isalnum(*c) && *c != '_' && *c != '.') *c = '-';
    return f;
}

/* A gnuplot string literal: double-quoted, so a title can hold a line break. */
static void gp_str(GString *g, const char *s)
{
    g_string_append_c(g, '"');
    for (; *s; s++) {
        if (*s == '\n') g_string_append(g, "\\n");
        else if (*s == '"' || *s == '\\') g_string_append_printf(g, "\\%c", *s);
        else g_string_append_c(g, *s);
    }
    g_string_append_c(g, '"');
}

/* "5.75 GiB", as people type capacities; else gs_format_size's. */
static char *size_words(uint64_t b)
{
    if (b >= GS_GiB && b % (GS_MiB / 4) == 0) return g_strdup_printf("%g GiB", (double)b / (double)GS_GiB);
    return gs_format_size(b);
}

/* "5.75 GiB" as a title shows it; "no capacity limit" for 0. */
static char *cap_words(uint64_t cap)
{
    if (!cap) return g_strdup("no capacity limit");
    char *s = size_words(cap);
    char *w = g_strdup_printf("capacity %s", s);
    g_free(s);
    return w;
}

/* A policy's label in legends: its spec, and its capacity when runs differ in it. */
static char *run_label(const gs_plot_run *r, bool with_cap)
{
    if (!with_cap) return g_strdup(r->policy);
    if (!r->capacity) return g_strdup_printf("%s, no limit", r->policy);
    char *s = size_words(r->capacity);
    char *l = g_strdup_printf("%s @%s", r->policy, s);
    g_free(s);
    return l;
}

static bool same_capacity(const gs_plot_run *runs, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (runs[i].capacity != runs[0].capacity) return false;
    return true;
}

/* The script's frame: draw once as PNG and once as SVG; gpusim passes out='.STEM.tmpPID' so
 * the images, too, are written whole and renamed. */
static void gp_begin(GString *g, const char *stem, const char *what, int w, int h)
{
    g_string_append_printf(g,
        "# %s.gp - %s, written by gpusim.\n"
        "# Draw it again (PNG and SVG): cd into this directory, then: gnuplot %s.gp\n"
        "if (!exists(\"out\")) out = '%s'\n"
        "do for [fmt in \"png svg\"] {\n"
        "reset\n"
        "if (fmt eq \"png\") { set terminal pngcairo size %d,%d noenhanced font 'Sans,11' background '#ffffff' }\n"
        "if (fmt eq \"svg\") { set terminal svg size %d,%d noenhanced font 'Sans,11' background '#ffffff' }\n"
        "set output out.'.'.fmt\n",
        stem, what, stem, stem, w, h, w, h);
}

static void gp_end(GString *g)
{
    g_string_append(g, "set output\n}\n");
}

static gboolean add_script(gs_plotter *p, const char *stem, GString *g, GError **err)
{
    char *name = g_strdup_printf("%s.gp", stem);
    gboolean ok = write_file(p, name, g, err);
    g_free(name);
    if (ok) g_ptr_array_add(p->scripts, g_strdup(stem));
    return ok;
}

/* "pytorch: 4 retries" */
static char *count_label(const char *who, uint64_t n, const char *one, const char *many)
{
    return g_strdup_printf("%s: %" G_GUINT64_FORMAT " %s", who, n, n == 1 ? one : many);
}

/* ---- the timeline ---- */

static gboolean plot_timeline(gs_plotter *p, const char *trace, const char *stem,
                              const gs_plot_run *runs, size_t n, GError **err)
{
    /* Trace time when the trace has it; synthetic traces may not. */
    bool use_time = false;
    uint64_t span_us = 0;
    double xmax = 0, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        const point *last = &g_array_index(s->points, point, s->points->len - 1);
        use_time |= last->time_us > 0;
        span_us = MAX(span_us, last->time_us);
    }
    /* milliseconds for a trace shorter than 10 s (the .dat keeps seconds) */
    bool in_ms = use_time && span_us < 10 * G_USEC_PER_SEC;
    const char *xexpr = !use_time ? "1" : in_ms ? "($2*1000)" : "2";
    GString *dat = g_string_new(NULL), *ev = g_string_new(NULL), *g = g_string_new(NULL);
    g_string_append_printf(dat, "# %s: memory over the trace, per policy (gnuplot index blocks, in "
                                "this order); each row is the maxima over a bucket of events\n"
                                "# event time_s allocated_GiB reserved_GiB\n", trace);
    g_string_append(ev, "# the events where a retry or an OOM happened (index blocks named below)\n"
                        "# event time_s allocated_GiB reserved_GiB\n");
    bool cap_same = same_capacity(runs, n);
    char *title_cap = cap_same ? cap_words(runs[0].capacity) : g_strdup("capacities as labelled");
    char *base = g_path_get_basename(trace);
    gp_begin(g, stem, "allocated and reserved memory over the trace", 1280, 640);
    GString *plots = g_string_new(NULL);
    int block = 0, evblock = 0;
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        const char *c = palette[i % N_PALETTE];
        char *label = run_label(&runs[i], !cap_same);
        g_string_append_printf(dat, "# %s\n", label);
        for (guint k = 0; k < s->points->len; k++) {
            const point *pt = &g_array_index(s->points, point, k);
            g_string_append_printf(dat, "%" G_GUINT64_FORMAT " %.6f %.6f %.6f\n", pt->event,
                                   (double)pt->time_us / 1e6, gib(pt->allocated), gib(pt->reserved));
            xmax = MAX(xmax, !use_time ? (double)pt->event
                             : (double)pt->time_us / (in_ms ? 1e3 : 1e6));
            ymax = MAX(ymax, gib(pt->reserved));
        }
        g_string_append(dat, "\n\n");
        g_string_append_printf(plots, "%s'%s.dat' index %d using %s:4 with lines lw 2.5 lc rgb '%s' title ",
                               plots->len ? ", \\\n     " : "plot ", stem, block, xexpr, c);
        char *t = g_strdup_printf("%s: reserved", label);
        gp_str(plots, t);
        g_free(t);
        g_string_append_printf(plots, ", \\\n     '%s.dat' index %d using %s:3 with lines lw 1 dt 3 lc rgb '%s' title ",
                               stem, block, xexpr, c);
        t = g_strdup_printf("%s: allocated", label);
        gp_str(plots, t);
        g_free(t);
        block++;
        const GArray *marks[2] = {s->retries, s->ooms};
        for (int m = 0; m < 2; m++) {
            if (!marks[m]->len) continue;
            g_string_append_printf(ev, "# %s: %s\n", label, m ? "OOMs" : "retries");
            for (guint k = 0; k < marks[m]->len; k++) {
                const point *pt = &g_array_index(marks[m], point, k);
                g_string_append_printf(ev, "%" G_GUINT64_FORMAT " %.6f %.6f %.6f\n", pt->event,
                                       (double)pt->time_us / 1e6, gib(pt->allocated), gib(pt->reserved));
            }
            g_string_append(ev, "\n\n");
            g_string_append_printf(plots, ", \\\n     '%s-events.dat' index %d using %s:4 with points %s lc rgb '%s' title ",
                                   stem, evblock++, xexpr, m ? "pt 2 ps 2.6 lw 3" : "pt 8 ps 1.8 lw 2", c);
            t = m ? count_label(label, s->n_ooms, "OOM", "OOMs")
                  : count_label(label, s->n_retries, "retry (cache flushed)", "retries (cache flushed)");
            gp_str(plots, t);
            g_free(t);
        }
        g_free(label);
    }
    /* the capacity: one dashed line per distinct limit */
    for (size_t i = 0; i < n; i++) {
        bool seen = runs[i].capacity == 0 || !runs[i].series;
        for (size_t k = 0; k < i && !seen; k++) seen = runs[k].series && runs[k].capacity == runs[i].capacity;
        if (seen) continue;
        char *w = cap_words(runs[i].capacity);
        g_string_append_printf(plots, ", \\\n     %.6f with lines dt 2 lw 1.5 lc rgb '#333333' title ",
                               gib((int64_t)runs[i].capacity));
        gp_str(plots, w);
        g_free(w);
        ymax = MAX(ymax, gib((int64_t)runs[i].capacity));
    }
    g_string_append(g, "set title ");
    char *title = g_strdup_printf("%s: allocated and reserved memory, %s", base, title_cap);
    gp_str(g, title);
    g_free(title);
    g_string_append_printf(g, "\nset xlabel '%s'\nset ylabel 'memory (GiB)'\n"
                              "set grid\nset key below left Left reverse maxcols 3 spacing 1.2\n"
                              "set xrange [0:%.6g]\nset yrange [0:%.6g]\nset format y '%%.1f'\n",
                           !use_time ? "event" : in_ms ? "trace time (ms)" : "trace time (s)", xmax > 0 ? xmax : 1.0, ymax > 0 ? ymax * 1.1 : 1.0);
    g_string_append_len(g, plots->str, (gssize)plots->len);
    g_string_append_c(g, '\n');
    gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem), *evname = g_strdup_printf("%s-events.dat", stem);
    gboolean ok = block == 0 || (write_file(p, datname, dat, err) && write_file(p, evname, ev, err) &&
                                 add_script(p, stem, g, err));
    g_free(datname);
    g_free(evname);
    g_free(title_cap);
    g_free(base);
    g_string_free(plots, TRUE);
    g_string_free(dat, TRUE);
    g_string_free(ev, TRUE);
    g_string_free(g, TRUE);
    return ok;
}

/* ---- comparison bars ---- */

typedef struct {
    const char *title, *fmt;
} bar_metric;

static double bar_value(const gs_plot_run *r, int m)
{
    switch (m) {
    case 0: return gib(r->peak_reserved);
    case 1: return gib(r->peak_reserved - r->peak_allocated);
    case 2: return 100.0 * r->frag_peak;
    case 3: return (double)r->retries;
    case 4: return (double)r->ooms;
    default: return r->device_us / 1000.0;
    }
}

/* A legend strip across the top of a multiplot: one filled box per label. */
static void gp_legend_strip(GString *g, double y, double h, const char *const *labels,
                            const char *const *colours, size_t n, const char *extra)
{
    g_string_append_printf(g,
        "set origin 0,%.3f\nset size 1,%.3f\nunset title\nunset border\nunset tics\nunset xlabel\n"
        "unset ylabel\nunset grid\nset xrange [0:1]\nset yrange [0:1]\nset style fill solid 0.9 noborder\n"
        "set key center center horizontal Left reverse maxrows 2 samplen 2 spacing 1.3 width 2\n",
        y, h);
    for (size_t i = 0; i < n; i++) {
        g_string_append_printf(g, "%sNaN with boxes lc rgb '%s' title ", i ? ", \\\n     " : "plot ",
                               colours[i]);
        gp_str(g, labels[i]);
    }
    if (extra) g_string_append(g, extra);
    g_string_append_c(g, '\n');
}

static gboolean plot_bars(gs_plotter *p, const char *trace, const char *stem,
                          const gs_plot_run *runs, size_t n, GError **err)
{
    static const bar_metric metrics[] = {
        {"peak reserved (GiB)", "%.3f"}, {"waste: peak reserved - peak allocated (GiB)", "%.3f"},
        {"fragmentation at peak (%)", "%.1f%%"}, {"allocation retries (cache flushes)", "%.0f"},
        {"OOMs", "%.0f"}, {"modelled device time (ms)", "%.2f"},
    };
    bool cap_same = same_capacity(runs, n);
    char *base = g_path_get_basename(trace);
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    g_string_append_printf(dat, "# %s: per policy\n# n colour peak_reserved_GiB waste_GiB frag_pct "
                                "retries ooms device_ms outcome policy\n", trace);
    const char **labels = g_new0(const char *, n + 1), **colours = g_new0(const char *, n + 1);
    double maxv[G_N_ELEMENTS(metrics)] = {0};
    for (size_t i = 0; i < n; i++) {
        labels[i] = run_label(&runs[i], !cap_same);
        if (strcmp(runs[i].outcome, "ok") != 0) {
            char *l = g_strdup_printf("%s (%s)", labels[i], runs[i].outcome);
            g_free((char *)labels[i]);
            labels[i] = l;
        }
        colours[i] = palette[i % N_PALETTE];
        g_string_append_printf(dat, "%zu 0x%s", i, colours[i] + 1);
        for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++) {
            double v = bar_value(&runs[i], (int)m);
            maxv[m] = MAX(maxv[m], v);
            g_string_append_printf(dat, " %.6f", v);
        }
        g_string_append_printf(dat, " %s ", runs[i].outcome);
        char *q = g_strdup(runs[i].policy); /* a policy spec never holds a space */
        g_string_append(dat, q);
        g_free(q);
        g_string_append_c(dat, '\n');
    }
    int h = 760;
    gp_begin(g, stem, "the policies compared", 1280, h);
    char *cw = cap_same ? cap_words(runs[0].capacity) : g_strdup("capacities as labelled");
    char *title = g_strdup_printf("%s: policies compared, %s", base, cw);
    g_string_append(g, "set multiplot title ");
    gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    /* panels in a 3 x 2 grid below a legend strip */
    double top = 0.84, ph = top / 2, pw = 1.0 / 3;
    for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++) {
        double x = pw * (double)(m % 3), y = top - ph * (double)(m / 3 + 1);
        double ymax = maxv[m] > 0 ? maxv[m] * 1.25 : 1.0;
        g_string_append_printf(g,
            "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ",
            x, y, pw, ph);
        gp_str(g, metrics[m].title);
        g_string_append_printf(g,
            "\nset border 3\nunset xtics\nset ytics nomirror\nset grid ytics\nset xrange [-0.6:%.1f]\n"
            "set yrange [0:%.6g]\nset style fill solid 0.85 noborder\nset boxwidth 0.7\nunset key\n"
            "set lmargin 10\nset format y '%s'\n%s"
            "plot '%s.dat' using 1:%zu:2 with boxes lc rgb variable, \\\n"
            "     '' using 1:%zu:(sprintf('%s', $%zu)) with labels offset 0,0.8 font 'Sans,11'\n",
            (double)n - 0.4, ymax, m >= 3 && m <= 4 ? "%.0f" : "%g",
            m >= 3 && m <= 4 && maxv[m] < 5 ? "set ytics 1\n" : "set ytics autofreq\n", stem, m + 3, m + 3,
            metrics[m].fmt, m + 3);
    }
    gp_legend_strip(g, top, 0.09, labels, colours, n, NULL);
    g_string_append(g, "unset multiplot\n");
    gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = write_file(p, datname, dat, err) && add_script(p, stem, g, err);
    for (size_t i = 0; i < n; i++) g_free((char *)labels[i]);
    g_free(labels);
    g_free(colours);
    g_free(datname);
    g_free(title);
    g_free(cw);
    g_free(base);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    return ok;
}

/* ---- the address-space map at peak reserved ---- */

static const char *const state_colours[] = {"#E8432E", "#3A6FB0", "#9DBFE3", "#D9D9D9"};
static const char *const state_legend[] = {"free (cached)",
                                           "allocated", "freed, awaiting its stream",
                                           "unmapped (expandable: no memory behind it)"};

typedef struct {
    const map_seg *seg;
    uint64_t extent; /* what is drawn: up to the end of the last block with memory behind it */
} map_row;

static int row_cmp(const void *a, const void *b)
{
    const map_row *x = a, *y = b;
    if (x->extent != y->extent) return x->extent > y->extent ? -1 : 1;
    if (x->seg->pool != y->seg->pool) return x->seg->pool < y->seg->pool ? -1 : 1;
    return x->seg->addr < y->seg->addr ? -1 : x->seg->addr > y->seg->addr;
}

static gboolean plot_map(gs_plotter *p, const char *trace, const char *stem, const gs_plot_run *r,
                         GError **err)
{
    const gs_plot_series *s = r->series;
    GArray *rows = g_array_new(FALSE, FALSE, sizeof(map_row));
    uint64_t longest = 1, totals[4] = {0};
    for (guint i = 0; i < s->segs->len; i++) {
        const map_seg *g = &g_array_index(s->segs, map_seg, i);
        map_row row = {.seg = g, .extent = 0};
        for (guint k = 0; k < g->n; k++) {
            const map_block *b = &g_array_index(s->blocks, map_block, g->first + k);
            if (b->state != GS_BLOCK_UNMAPPED) row.extent = b->off + b->size;
        }
        if (!row.extent) continue; /* a reservation with nothing mapped */
        for (guint k = 0; k < g->n; k++) {
            const map_block *b = &g_array_index(s->blocks, map_block, g->first + k);
            if (b->off < row.extent && b->state < 4) totals[b->state] += b->size;
        }
        longest = MAX(longest, row.extent);
        g_array_append_val(rows, row);
    }
    qsort(rows->data, rows->len, sizeof(map_row), row_cmp);
    bool in_gib = longest >= 4 * GS_GiB;
    double unit = in_gib ? (double)GS_GiB : (double)GS_MiB;
    /* A free block narrower than a pixel would vanish, and stranded slivers are what this plot
     * is for: draw every free block at least 1/1000 of the axis wide (the .dat keeps its size). */
    double minw = (double)longest / unit / 1000.0;
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    g_string_append_printf(dat, "# %s under %s: every segment at the peak of reserved memory (after "
                                "event %" G_GUINT64_FORMAT "), largest first\n"
                                "# blocks in index blocks by state (free, allocated, pending, unmapped; "
                                "empty ones left out, named below)\n"
                                "# row x_from_%s x_to_%s size_bytes segment_addr\n",
                           trace, r->policy, s->map_at.event, in_gib ? "GiB" : "MiB", in_gib ? "GiB" : "MiB");
    GString *plots = g_string_new(NULL);
    int block = 0;
    bool any_expandable = false;
    for (int st = 0; st < 4; st++) {
        GString *rows_of_state = g_string_new(NULL);
        for (guint i = 0; i < rows->len; i++) {
            const map_row *row = &g_array_index(rows, map_row, i);
            any_expandable |= row->seg->expandable;
            for (guint k = 0; k < row->seg->n; k++) {
                const map_block *b = &g_array_index(s->blocks, map_block, row->seg->first + k);
                if (b->state != st || b->off >= row->extent) continue;
                double x0 = (double)b->off / unit, x1 = (double)(b->off + b->size) / unit;
                if (st == GS_BLOCK_FREE && x1 - x0 < minw) x1 = x0 + minw;
                g_string_append_printf(rows_of_state, "%u %.6f %.6f %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT "\n",
                                       i + 1, x0, x1, b->size, row->seg->addr);
            }
        }
        if (rows_of_state->len) {
            g_string_append_printf(dat, "# %s\n%s\n\n", state_names[st], rows_of_state->str);
            char *sz = gs_format_size(totals[st]);
            char *t = g_strdup_printf("%s: %s", state_legend[st], sz);
            g_string_append_printf(plots, "%s'%s.dat' index %d using 2:1:2:3:($1-0.42):($1+0.42) "
                                          "with boxxyerror fs solid 1.0 noborder lc rgb '%s' title ",
                                   plots->len ? ", \\\n     " : "plot ", stem, block++, state_colours[st]);
            gp_str(plots, t);
            g_free(t);
            g_free(sz);
        }
        g_string_free(rows_of_state, TRUE);
    }
    char *base = g_path_get_basename(trace);
    char *cw = cap_words(r->capacity);
    char *res = gs_format_size((uint64_t)s->map_at.reserved), *al = gs_format_size((uint64_t)s->map_at.allocated);
    char *title = g_strdup_printf("%s under %s, %s\naddress space at peak reserved (%s reserved, %s "
                                  "allocated, after event %" G_GUINT64_FORMAT ")",
                                  base, r->policy, cw, res, al, s->map_at.event);
    gp_begin(g, stem, "the address space at peak reserved", 1280, 800);
    g_string_append(g, "set title ");
    gp_str(g, title);
    g_string_append_printf(g, "\nset xlabel '%s'\nset ylabel '%u segments, largest first%s'\n"
                              "set xrange [0:%.6g]\nset yrange [%u.5:0.5]\nset key above center horizontal Left reverse\n"
                              "set grid xtics\nset xtics nomirror\nset mxtics\n",
                           any_expandable ? (in_gib ? "offset in the segment or mapped reservation (GiB)"
                                                    : "offset in the segment or mapped reservation (MiB)")
                                          : (in_gib ? "offset in the segment (GiB)" : "offset in the segment (MiB)"),
                           rows->len, any_expandable ? " (unmapped tails not drawn)" : "",
                           (double)longest / unit * 1.01, rows->len ? rows->len : 1);
    if (rows->len <= 40) {
        /* few rows: name each by its size */
        g_string_append(g, "set ytics (");
        for (guint i = 0; i < rows->len; i++) {
            const map_row *row = &g_array_index(rows, map_row, i);
            char *sz = gs_format_size(row->seg->expandable ? row->extent : row->seg->size);
            g_string_append_printf(g, "%s'%s%s' %u", i ? ", " : "", sz, row->seg->expandable ? " mapped" : "", i + 1);
            g_free(sz);
        }
        g_string_append(g, ") nomirror\n");
    } else {
        g_string_append(g, "set ytics nomirror\n");
    }
    if (plots->len) g_string_append_len(g, plots->str, (gssize)plots->len);
    else g_string_append(g, "plot NaN notitle");
    g_string_append_c(g, '\n');
    gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = write_file(p, datname, dat, err) && add_script(p, stem, g, err);
    g_free(datname);
    g_free(title);
    g_free(res);
    g_free(al);
    g_free(cw);
    g_free(base);
    g_array_free(rows, TRUE);
    g_string_free(plots, TRUE);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    return ok;
}

gboolean gs_plot_trace(gs_plotter *p, const char *trace, const gs_plot_run *runs, size_t n,
                       GError **err)
{
    char *stem = gs_plot_stem(trace);
    char *ts = g_strdup_printf("%s-timeline", stem), *bs = g_strdup_printf("%s-bars", stem);
    gboolean ok = plot_timeline(p, trace, ts, runs, n, err) && plot_bars(p, trace, bs, runs, n, err);
    for (size_t i = 0; ok && i < n; i++) {
        if (!runs[i].series || !runs[i].series->have_map) continue;
        char *pol = file_part(runs[i].policy);
        char *ms = g_strdup_printf("%s-map-%zu-%s", stem, i + 1, pol);
        ok = plot_map(p, trace, ms, &runs[i], err);
        g_free(ms);
        g_free(pol);
    }
    g_free(ts);
    g_free(bs);
    g_free(stem);
    return ok;
}

/* ---- sweeps ---- */

gboolean gs_plot_sweep(gs_plotter *p, const char *trace, const char *const *params,
                       size_t n_params, const char *const *values, const gs_plot_run *cells,
                       size_t n_cells, GError **err)
{
    static const bar_metric metrics[] = {
        {"peak reserved (GiB)", NULL}, {"waste: peak reserved - peak allocated (GiB)", NULL},
        {"allocation retries (cache flushes)", NULL}, {"modelled device time (ms)", NULL},
    };
    static const int metric_of[] = {0, 1, 3, 5}; /* bar_value's numbering */
    if (n_cells == 0) return TRUE;
    /* x: the first parameter's values, in order of appearance; a line per combination of the
     * others. Without parameters every cell is its own x. */
    GPtrArray *xs = g_ptr_array_new_with_free_func(g_free), *series = g_ptr_array_new_with_free_func(g_free);
    guint *xi = g_new0(guint, n_cells), *si = g_new0(guint, n_cells);
    for (size_t c = 0; c < n_cells; c++) {
        char *x = n_params ? g_strdup(values[c * n_params]) : g_strdup(cells[c].policy);
        GString *sname = g_string_new(NULL);
        for (size_t k = 1; k < n_params; k++) {
            const char *v = values[c * n_params + k];
            if (!*v) continue;
            g_string_append_printf(sname, "%s%s %s", sname->len ? ", " : "", params[k], v);
        }
        if (!sname->len) g_string_append(sname, n_params ? cells[c].policy : "cells");
        guint i;
        for (i = 0; i < xs->len && strcmp(xs->pdata[i], x) != 0; i++) {}
        if (i == xs->len) g_ptr_array_add(xs, x);
        else g_free(x);
        xi[c] = i;
        char *sn = g_string_free(sname, FALSE);
        for (i = 0; i < series->len && strcmp(series->pdata[i], sn) != 0; i++) {}
        if (i == series->len) g_ptr_array_add(series, sn);
        else g_free(sn);
        si[c] = i;
    }
    char *stem0 = gs_plot_stem(trace);
    char *stem = g_strdup_printf("%s-sweep", stem0);
    char *base = g_path_get_basename(trace);
    const char *xname = n_params ? params[0] : "policy";
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    g_string_append_printf(dat, "# %s: the sweep, a block per line (named below); x is the position "
                                "of %s's value on the axis\n"
                                "# x cell peak_reserved_GiB waste_GiB retries device_ms oom\n",
                           trace, xname);
    GString *oom = g_string_new(NULL);
    double maxv[4] = {0};
    for (guint sidx = 0; sidx < series->len; sidx++) {
        g_string_append_printf(dat, "# %s\n", (const char *)series->pdata[sidx]);
        /* in x order, so lines run left to right */
        for (guint x = 0; x < xs->len; x++)
            for (size_t c = 0; c < n_cells; c++) {
                if (si[c] != sidx || xi[c] != x) continue;
                GString *row = g_string_new(NULL);
                g_string_append_printf(row, "%u %zu", x, c);
                for (int m = 0; m < 4; m++) {
                    double v = bar_value(&cells[c], metric_of[m]);
                    maxv[m] = MAX(maxv[m], v);
                    g_string_append_printf(row, " %.6f", v);
                }
                bool is_oom = strcmp(cells[c].outcome, "ok") != 0;
                g_string_append_printf(row, " %d\n", is_oom);
                g_string_append(dat, row->str);
                if (is_oom) g_string_append(oom, row->str);
                g_string_free(row, TRUE);
            }
        g_string_append(dat, "\n\n");
    }
    if (oom->len) g_string_append_printf(dat, "# cells that met an OOM\n%s\n\n", oom->str);
    gp_begin(g, stem, "the sweep", 1280, 800);
    GString *cap_note = g_string_new(NULL);
    bool cap_swept = false;
    for (size_t k = 0; k < n_params; k++) cap_swept |= strcmp(params[k], "capacity") == 0;
    if (!cap_swept) {
        char *cw = cap_words(cells[0].capacity);
        g_string_append(cap_note, cw);
        g_free(cw);
    } else {
        g_string_append(cap_note, "capacity swept");
    }
    char *title = g_strdup_printf("%s: sweep of %s, %s", base, xname, cap_note->str);
    g_string_append(g, "set multiplot title ");
    gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    GString *xt = g_string_new("set xtics (");
    for (guint x = 0; x < xs->len; x++) {
        if (x) g_string_append(xt, ", ");
        gp_str(xt, xs->pdata[x]);
        g_string_append_printf(xt, " %u", x);
    }
    g_string_append(xt, ") nomirror\n");
    double top = 0.85, ph = top / 2, pw = 0.5;
    for (int m = 0; m < 4; m++) {
        double x = pw * (double)(m % 2), y = top - ph * (double)(m / 2 + 1);
        g_string_append_printf(g, "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ", x, y, pw, ph);
        gp_str(g, metrics[m].title);
        g_string_append_printf(g, "\n%sset border 3\nset ytics nomirror\nset grid\nunset key\n"
                                  "set xrange [-0.3:%.1f]\nset yrange [0:%.6g]\nset xlabel ",
                               xt->str, (double)xs->len - 0.7, maxv[m] > 0 ? maxv[m] * 1.2 : 1.0);
        gp_str(g, xname);
        g_string_append(g, "\nset lmargin 10\n");
        for (guint sidx = 0; sidx < series->len; sidx++)
            g_string_append_printf(g, "%s'%s.dat' index %u using 1:%d with linespoints lw 2 pt 7 ps 1.2 lc rgb '%s'",
                                   sidx ? ", \\\n     " : "plot ", stem, sidx, m + 3,
                                   palette[sidx % N_PALETTE]);
        if (oom->len)
            g_string_append_printf(g, ", \\\n     '%s.dat' index %u using 1:%d with points pt 2 ps 2.6 lw 3 lc rgb '#CC0000'",
                                   stem, series->len, m + 3);
        g_string_append_c(g, '\n');
    }
    const char **colours = g_new0(const char *, series->len + 1);
    for (guint i = 0; i < series->len; i++) colours[i] = palette[i % N_PALETTE];
    gp_legend_strip(g, top, 0.08, (const char *const *)series->pdata, colours, series->len,
                    oom->len ? ", \\\n     NaN with points pt 2 ps 2 lw 3 lc rgb '#CC0000' title 'OOM'" : NULL);
    g_string_append(g, "unset multiplot\n");
    gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = write_file(p, datname, dat, err) && add_script(p, stem, g, err);
    g_free(datname);
    g_free(colours);
    g_free(title);
    g_string_free(cap_note, TRUE);
    g_string_free(xt, TRUE);
    g_string_free(oom, TRUE);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    g_free(base);
    g_free(stem);
    g_free(stem0);
    g_free(xi);
    g_free(si);
    g_ptr_array_free(xs, TRUE);
    g_ptr_array_free(series, TRUE);
    return ok;
}

/* ---- running gnuplot ---- */

static gboolean render_one(const char *prog, const char *dir, const char *stem, GError **err)
{
    char *tmp = g_strdup_printf(".%s.tmp%d", stem, (int)getpid());
    char *e = g_strdup_printf("out='%s'", tmp);
    char *script = g_strdup_printf("%s.gp", stem);
    char *argv[] = {(char *)prog, (char *)"-e", e, script, NULL};
    char *serr = NULL;
    int status = 0;
    GError *se = NULL;
    gboolean ok = g_spawn_sync(dir, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &serr,
                               &status, &se);
    if (!ok) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_GNUPLOT, "%s: %s", prog, se->message);
        g_error_free(se);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* gnuplot's last line names the problem */
        char *msg = g_strstrip(g_strdup(serr ? serr : ""));
        char *nl = strrchr(msg, '\n');
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_GNUPLOT, "gnuplot failed on %s/%s (exit %d): %s",
                    dir, script, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                    nl ? nl + 1 : *msg ? msg : "no message");
        g_free(msg);
        ok = FALSE;
    }
    static const char *const exts[] = {"png", "svg"};
    for (size_t i = 0; i < G_N_ELEMENTS(exts); i++) {
        char *from = g_strdup_printf("%s/%s.%s", dir, tmp, exts[i]);
        char *to = g_strdup_printf("%s/%s.%s", dir, stem, exts[i]);
        if (ok && g_rename(from, to) != 0) {
            int en = errno;
            g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_IO, "%s: cannot write: %s", to, g_strerror(en));
            ok = FALSE;
        }
        g_unlink(from); /* left behind only on failure */
        g_free(from);
        g_free(to);
    }
    g_free(serr);
    g_free(script);
    g_free(e);
    g_free(tmp);
    return ok;
}

gboolean gs_plotter_render(gs_plotter *p, size_t *n_images, GError **err)
{
    const char *want = g_getenv("GPUSIM_GNUPLOT");
    if (!want || !*want) want = "gnuplot";
    char *prog = g_find_program_in_path(want);
    if (!prog) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_NO_GNUPLOT,
                    "no images: '%s' not found (install gnuplot, e.g. apt-get install gnuplot-nox, "
                    "or name it in GPUSIM_GNUPLOT); the data and gnuplot scripts are in %s",
                    want, p->dir);
        return FALSE;
    }
    gboolean ok = TRUE;
    size_t n = 0;
    for (guint i = 0; ok && i < p->scripts->len; i++) {
        ok = render_one(prog, p->dir, p->scripts->pdata[i], err);
        if (ok) n += 2;
    }
    if (n_images) *n_images = n;
    g_free(prog);
    return ok;
}

/* ---- saved results ---- */

static gboolean saved_bad(GError **err, const char *path, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean saved_bad(GError **err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT,
                "%s: %s (want a report of 'gpusim replay --format json|csv' or of 'gpusim sweep')",
                path, m);
    g_free(m);
    return FALSE;
}

/* One JSON result object as a run. */
static gboolean run_from_json(gs_plot_run *pr, const gs_json *r, const char *path, GError **err)
{
    memset(pr, 0, sizeof *pr);
    const gs_json *pol = gs_json_get(r, "policy"), *oc = gs_json_get(r, "outcome");
    int64_t ret = 0, oom = 0;
    if (!pol || pol->type != GS_JSON_STRING || !oc || oc->type != GS_JSON_STRING ||
        !gs_json_uint(gs_json_get(r, "capacity_bytes"), &pr->capacity) ||
        !gs_json_int(gs_json_get(r, "peak_allocated_bytes"), &pr->peak_allocated) ||
        !gs_json_int(gs_json_get(r, "peak_reserved_bytes"), &pr->peak_reserved) ||
        !gs_json_double(gs_json_get(r, "frag_peak"), &pr->frag_peak) ||
        !gs_json_int(gs_json_get(r, "num_alloc_retries"), &ret) ||
        !gs_json_int(gs_json_get(r, "num_ooms"), &oom) ||
        !gs_json_double(gs_json_get(r, "device_time_us"), &pr->device_us))
        return saved_bad(err, path, "a result lacks one of policy, outcome, capacity_bytes, "
                                    "peak_allocated_bytes, peak_reserved_bytes, frag_peak, "
                                    "num_alloc_retries, num_ooms, device_time_us");
    pr->policy = g_strdup(pol->str);
    pr->outcome = g_strdup(oc->str);
    pr->retries = (uint64_t)ret;
    pr->ooms = (uint64_t)oom;
    GError *e = NULL;
    pr->series = gs_plot_series_from_json(r, &e);
    if (e) {
        saved_bad(err, path, "%s", e->message);
        g_error_free(e);
        return FALSE;
    }
    return TRUE;
}

static void runs_free(gs_plot_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) gs_plot_run_clear(&runs[i]);
    g_free(runs);
}

static gboolean plot_saved_json(gs_plotter *p, const char *path, const char *text, size_t len,
                                GError **err)
{
    gs_json *root = gs_json_parse(path, text, len, err);
    if (!root) return FALSE;
    const gs_json *const *docs = (const gs_json *const *)&root;
    size_t n_docs = 1;
    if (root->type == GS_JSON_ARRAY) {
        docs = (const gs_json *const *)root->items;
        n_docs = root->n;
    }
    gboolean ok = n_docs > 0 || saved_bad(err, path, "no results");
    for (size_t d = 0; ok && d < n_docs; d++) {
        const gs_json *tr = gs_json_get(docs[d], "trace"), *rs = gs_json_get(docs[d], "results");
        if (!tr || tr->type != GS_JSON_STRING || !rs || rs->type != GS_JSON_ARRAY || rs->n == 0) {
            ok = saved_bad(err, path, "no \"trace\" and \"results\"");
            break;
        }
        gs_plot_run *runs = g_new0(gs_plot_run, rs->n);
        for (size_t i = 0; ok && i < rs->n; i++) ok = run_from_json(&runs[i], rs->items[i], path, err);
        if (ok) ok = gs_plot_trace(p, tr->str, runs, rs->n, err);
        runs_free(runs, rs->n);
    }
    gs_json_free(root);
    return ok;
}

/* RFC 4180 records: a GPtrArray of NULL-terminated string vectors. */
static GPtrArray *csv_parse(const char *s, size_t len)
{
    GPtrArray *rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    GPtrArray *row = g_ptr_array_new();
    GString *f = g_string_new(NULL);
    const char *end = s + len;
    bool quoted = false, field_started = false;
    for (const char *c = s; c <= end; c++) {
        char ch = c < end ? *c : '\n';
        if (quoted) {
            if (ch == '"' && c + 1 < end && c[1] == '"') {
                g_string_append_c(f, '"');
                c++;
            } else if (ch == '"') {
                quoted = false;
            } else {
                g_string_append_c(f, ch);
            }
            continue;
        }
        if (ch == '"') {
            quoted = field_started = true;
        } else if (ch == ',') {
            g_ptr_array_add(row, g_strdup(f->str));
            g_string_truncate(f, 0);
            field_started = true;
        } else if (ch == '\n') {
            if (field_started || f->len) {
                g_ptr_array_add(row, g_strdup(f->str));
                g_ptr_array_add(row, NULL);
                g_ptr_array_add(rows, g_ptr_array_free(row, FALSE));
                row = g_ptr_array_new();
            }
            g_string_truncate(f, 0);
            field_started = false;
        } else if (ch != '\r') {
            g_string_append_c(f, ch);
            field_started = true;
        }
    }
    g_ptr_array_free(row, TRUE);
    g_string_free(f, TRUE);
    return rows;
}

static int col_of(char **header, const char *name)
{
    for (int i = 0; header[i]; i++)
        if (strcmp(header[i], name) == 0) return i;
    return -1;
}

static gboolean plot_saved_csv(gs_plotter *p, const char *path, const char *text, size_t len,
                               GError **err)
{
    static const char *const need[] = {"trace", "policy", "capacity_bytes", "outcome",
                                       "peak_allocated_bytes", "peak_reserved_bytes", "frag_peak",
                                       "num_alloc_retries", "num_ooms", "device_time_us"};
    GPtrArray *rows = csv_parse(text, len);
    if (rows->len < 2) {
        g_ptr_array_free(rows, TRUE);
        return saved_bad(err, path, "no header and rows");
    }
    char **h = rows->pdata[0];
    int col[G_N_ELEMENTS(need)];
    for (size_t k = 0; k < G_N_ELEMENTS(need); k++) {
        if ((col[k] = col_of(h, need[k])) < 0) {
            g_ptr_array_free(rows, TRUE);
            return saved_bad(err, path, "no column '%s'", need[k]);
        }
    }
    guint width = g_strv_length(h);
    /* a sweep's CSV: cell, then one column per parameter, then the replay's columns */
    bool sweep = strcmp(h[0], "cell") == 0;
    size_t n_params = sweep ? (size_t)col[0] - 1 : 0;
    size_t n = rows->len - 1;
    gs_plot_run *runs = g_new0(gs_plot_run, n);
    const char **values = g_new0(const char *, n * n_params + 1);
    gboolean ok = TRUE;
    for (size_t i = 0; ok && i < n; i++) {
        char **r = rows->pdata[i + 1];
        if (g_strv_length(r) != width) {
            ok = saved_bad(err, path, "row %zu has %u fields, the header %u", i + 2, g_strv_length(r), width);
            break;
        }
        gs_plot_run *pr = &runs[i];
        pr->policy = g_strdup(r[col[1]]);
        pr->capacity = g_ascii_strtoull(r[col[2]], NULL, 10);
        pr->outcome = g_strdup(r[col[3]]);
        pr->peak_allocated = g_ascii_strtoll(r[col[4]], NULL, 10);
        pr->peak_reserved = g_ascii_strtoll(r[col[5]], NULL, 10);
        pr->frag_peak = g_ascii_strtod(r[col[6]], NULL);
        pr->retries = g_ascii_strtoull(r[col[7]], NULL, 10);
        pr->ooms = g_ascii_strtoull(r[col[8]], NULL, 10);
        pr->device_us = g_ascii_strtod(r[col[9]], NULL);
        for (size_t k = 0; k < n_params; k++) values[i * n_params + k] = r[1 + k];
    }
    if (ok && sweep) {
        ok = gs_plot_sweep(p, ((char **)rows->pdata[1])[col[0]], (const char *const *)h + 1,
                           n_params, values, runs, n, err);
    } else if (ok) {
        /* a replay's CSV: the rows of each trace, in order */
        for (size_t i = 0; ok && i < n;) {
            const char *tr = ((char **)rows->pdata[i + 1])[col[0]];
            size_t k = i;
            while (k < n && strcmp(((char **)rows->pdata[k + 1])[col[0]], tr) == 0) k++;
            ok = gs_plot_trace(p, tr, runs + i, k - i, err);
            i = k;
        }
    }
    g_free(values);
    runs_free(runs, n);
    g_ptr_array_free(rows, TRUE);
    return ok;
}

gboolean gs_plot_saved(gs_plotter *p, const char *path, GError **err)
{
    char *text = NULL;
    gsize len = 0;
    GError *e = NULL;
    if (!g_file_get_contents(path, &text, &len, &e)) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, "%s", e->message);
        g_error_free(e);
        return FALSE;
    }
    const char *c = text;
    while (c < text + len && g_ascii_isspace(*c)) c++;
    gboolean ok = c < text + len && (*c == '{' || *c == '[')
                      ? plot_saved_json(p, path, text, len, err)
                      : plot_saved_csv(p, path, text, len, err);
    g_free(text);
    return ok;
}
