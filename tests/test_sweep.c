/* test_sweep.c - the sweep (brace-list grids: order, parameter names, errors; cells run in
 * parallel give exactly the serial results, in grid order) and the plots' recorder (timeline
 * maxima, retry and OOM markers, the address map at peak reserved and at the first OOM, its
 * JSON round trip).
 *
 * Usage: test_sweep TRACE_DATA_DIR (traces/data). */
#include <string.h>

#include <glib/gstdio.h>

#include "plot.h"
#include "report.h"
#include "testutil.h"

static const char *data_dir;

static gs_sweep *sweep_of(const char *p1, const char *p2, const char *cap)
{
    const char *pols[] = {p1, p2, NULL};
    GError *err = NULL;
    gs_sweep *s = gs_sweep_new(p1 ? pols : NULL, cap, &err);
    ck_assert_msg(s != NULL, "%s", err ? err->message : "?");
    return s;
}

static const gs_sweep_cell *cell(const gs_sweep *s, guint i)
{
    return &g_array_index(s->cells, gs_sweep_cell, i);
}

START_TEST(grid_is_the_product_first_list_outermost)
{
    gs_sweep *s = sweep_of("pytorch:max_split_size_mb:{64,128},garbage_collection_threshold:{0.6,0.8}",
                           NULL, "{5.75,6.25}GiB");
    ck_assert_uint_eq(s->cells->len, 8);
    ck_assert_uint_eq(s->params->len, 3);
    ck_assert_str_eq(s->params->pdata[0], "max_split_size_mb");
    ck_assert_str_eq(s->params->pdata[1], "garbage_collection_threshold");
    ck_assert_str_eq(s->params->pdata[2], "capacity");
    ck_assert_str_eq(cell(s, 0)->policy, "pytorch:max_split_size_mb:64,garbage_collection_threshold:0.6");
    ck_assert_str_eq(cell(s, 1)->policy, "pytorch:max_split_size_mb:64,garbage_collection_threshold:0.6");
    ck_assert_str_eq(cell(s, 2)->policy, "pytorch:max_split_size_mb:64,garbage_collection_threshold:0.8");
    ck_assert_str_eq(cell(s, 7)->policy, "pytorch:max_split_size_mb:128,garbage_collection_threshold:0.8");
    ck_assert_uint_eq(cell(s, 0)->capacity, 23 * GiB / 4);
    ck_assert_uint_eq(cell(s, 1)->capacity, 25 * GiB / 4);
    ck_assert_str_eq(cell(s, 5)->values[0], "128");
    ck_assert_str_eq(cell(s, 5)->values[1], "0.6");
    ck_assert_str_eq(cell(s, 5)->values[2], "6.25GiB");
    for (guint i = 0; i < 8; i++) ck_assert_ptr_nonnull(cell(s, i)->pol);
    gs_sweep_free(s);
}
END_TEST

START_TEST(several_templates_add_a_template_parameter)
{
    gs_sweep *s = sweep_of("pytorch:max_split_size_mb:{64,128}", "pytorch:expandable_segments:True", NULL);
    ck_assert_uint_eq(s->cells->len, 3);
    ck_assert_uint_eq(s->params->len, 2);
    ck_assert_str_eq(s->params->pdata[1], "template"); /* not "policy": the CSV has that column */
    ck_assert_str_eq(cell(s, 2)->values[0], ""); /* max_split_size_mb does not apply */
    ck_assert_str_eq(cell(s, 2)->values[1], "pytorch:expandable_segments:True");
    ck_assert_uint_eq(cell(s, 2)->capacity, 0);
    gs_sweep_free(s);
    /* no lists at all: one cell, no parameters; no policy: pytorch */
    s = sweep_of(NULL, NULL, NULL);
    ck_assert_uint_eq(s->cells->len, 1);
    ck_assert_uint_eq(s->params->len, 0);
    ck_assert_str_eq(cell(s, 0)->policy, "pytorch");
    gs_sweep_free(s);
}
END_TEST

static void expect_error(const char *pol, const char *cap, const char *want)
{
    const char *pols[] = {pol, NULL};
    GError *err = NULL;
    gs_sweep *s = gs_sweep_new(pols, cap, &err);
    ck_assert_ptr_null(s);
    ck_assert_msg(err && strstr(err->message, want), "%s / %s: got '%s', want '%s'", pol,
                  cap ? cap : "", err ? err->message : "(no error)", want);
    g_error_free(err);
}

START_TEST(bad_grids_are_errors)
{
    expect_error("pytorch:max_split_size_mb:{64,128", NULL, "without its '}'");
    expect_error("pytorch:max_split_size_mb:64}", NULL, "without its '{'");
    expect_error("pytorch:max_split_size_mb:{64,{1,2}}", NULL, "inside braces");
    expect_error("pytorch:max_split_size_mb:{}", NULL, "empty");
    expect_error("pytorch:max_split_size_mb:{64,,128}", NULL, "empty choice");
    expect_error("pytorch:max_split_sise_mb:{64,128}", NULL, "max_split_sise_mb");
    expect_error("pytorch", "{5.75,lots}GiB", "--capacity");
}
END_TEST

/* A list of n values, "{100,101,...}" (with a unit: "{100,...}GiB"). */
static char *list_of(unsigned n, const char *unit)
{
    GString *g = g_string_new("{");
    for (unsigned i = 0; i < n; i++) g_string_append_printf(g, "%s%u", i ? "," : "", 100 + i);
    g_string_append_printf(g, "}%s", unit);
    return g_string_free(g, FALSE);
}

/* GS_SWEEP_MAX_CELLS, checked when the grid is expanded (10^6 cells took 2.5 GB):
 * one template's lists, lists times capacities, and several templates together. */
START_TEST(grid_past_the_cell_limit_is_an_error)
{
    char *l100 = list_of(100, ""), *l101 = list_of(101, ""), *c100 = list_of(100, "GiB");
    char *t1 = g_strdup_printf("pytorch:max_split_size_mb:%s,roundup_power2_divisions:%s", l100, l101);
    expect_error(t1, NULL, "more than 10000 cells");
    char *t2 = g_strdup_printf("pytorch:max_split_size_mb:%s", l101);
    expect_error(t2, c100, "the grid has 10100 cells, more than the 10000");
    char *t3 = g_strdup_printf("pytorch:max_split_size_mb:%s", l100);
    gs_sweep *s = sweep_of(t3, NULL, c100); /* exactly the limit */
    ck_assert_uint_eq(s->cells->len, GS_SWEEP_MAX_CELLS);
    gs_sweep_free(s);
    const char *pols[] = {t3, t2, NULL};
    GError *err = NULL;
    ck_assert_ptr_null(gs_sweep_new(pols, c100, &err));
    ck_assert_msg(strstr(err->message, "the grid has 20100 cells"), "%s", err->message);
    g_error_free(err);
    g_free(t1);
    g_free(t2);
    g_free(t3);
    g_free(l100);
    g_free(l101);
    g_free(c100);
}
END_TEST

static gs_trace *load(const char *name)
{
    char *path = g_build_filename(data_dir, name, NULL);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "?");
    g_free(path);
    return t;
}

START_TEST(parallel_cells_equal_serial_in_grid_order)
{
    gs_trace *t = load("resnet50.gstrace.gz");
    gs_sweep *s = sweep_of("pytorch:max_split_size_mb:{64,128,256}",
                           "pytorch:expandable_segments:{True,False}", "{5.75,6.25}GiB");
    size_t n = s->cells->len;
    ck_assert_uint_eq(n, 10);
    gs_result *serial = g_new0(gs_result, n), *par = g_new0(gs_result, n);
    gs_replay_opts o = {.device_total = t->device_total};
    GError *err = NULL;
    ck_assert(gs_sweep_run(s, t, &o, 1, NULL, NULL, serial, &err));
    ck_assert(gs_sweep_run(s, t, &o, 4, NULL, NULL, par, &err));
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(serial[i].policy, cell(s, (guint)i)->policy);
        ck_assert_str_eq(par[i].policy, serial[i].policy);
        ck_assert_uint_eq(par[i].capacity, serial[i].capacity);
        ck_assert_int_eq(par[i].oom, serial[i].oom);
        ck_assert(memcmp(&par[i].stats, &serial[i].stats, sizeof(gs_stats)) == 0);
        ck_assert_uint_eq(par[i].calls.n[GS_CALL_MALLOC], serial[i].calls.n[GS_CALL_MALLOC]);
    }
    /* the numbers of docs/fidelity.md §5: max_split_size_mb:128 at 6.25 GiB retries 6 times */
    ck_assert_uint_eq(par[3].stats.num_alloc_retries, 6);
    for (size_t i = 0; i < n; i++) {
        gs_result_clear(&serial[i]);
        gs_result_clear(&par[i]);
    }
    g_free(serial);
    g_free(par);
    gs_sweep_free(s);
    gs_trace_free(t);
}
END_TEST

/* A trace whose tables do not fit in memory (its count of allocations made 2^61: the slot
 * table alone would be 2^64 bytes): each replay is an error result, out of host memory, not an
 * abort in g_malloc; a sweep keeps every cell, and its CSV says "error" for each; one device or
 * several. The bound is given: it is the trace's, computed before the count was changed. */
START_TEST(no_memory_is_a_result_not_an_abort)
{
    for (int devices = 1; devices <= 2; devices++) {
        gs_trace *t = gs_trace_new();
        uint32_t a = gs_trace_add_alloc(t, "torch", 0, 4096);
        uint32_t b = gs_trace_add_alloc(t, "torch", 0, 8192);
        gs_trace_add_free(t, a);
        gs_trace_add_free(t, b);
        if (devices == 2) t->ev[1].device = t->ev[3].device = 1;
        gs_bound *bound = gs_bound_compute(t);
        t->n_slots = (size_t)1 << 61;
        gs_sweep *s = sweep_of("pytorch:max_split_size_mb:{64,128}", NULL, NULL);
        gs_result *rs = g_new0(gs_result, s->cells->len);
        gs_replay_opts o = {.device_total = 80 * GiB, .bound = bound};
        GError *err = NULL;
        ck_assert_msg(gs_sweep_run(s, t, &o, 2, NULL, NULL, rs, &err), "%s",
                      err ? err->message : "?");
        for (guint i = 0; i < s->cells->len; i++) {
            ck_assert_int_eq(rs[i].error, GS_ERR_NOMEM);
            ck_assert_str_eq(gs_result_outcome(&rs[i]), "error");
            ck_assert_msg(strstr(rs[i].error_msg, "slot table"), "%s", rs[i].error_msg);
        }
        char *csv = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&csv, &len);
        gs_sweep_csv(f, s, "t.gstrace", t, rs, NULL);
        fclose(f);
        ck_assert_msg(strstr(csv, ",error,") && strstr(strstr(csv, ",error,") + 1, ",error,"), "%s",
                      csv);
        free(csv);
        for (guint i = 0; i < s->cells->len; i++) gs_result_clear(&rs[i]);
        g_free(rs);
        gs_sweep_free(s);
        gs_bound_free(bound);
        t->n_slots = 2;
        gs_trace_free(t);
    }
}
END_TEST

/* Replay with the recorder attached. */
static gs_plot_series *record(const gs_trace *t, const char *spec, uint64_t cap, gs_result *r)
{
    GError *err = NULL;
    gs_policy *p = gs_policy_new(spec, &err);
    ck_assert_ptr_nonnull(p);
    gs_plot_series *s = gs_plot_series_new(t->n);
    gs_replay_opts o = {.capacity = cap, .device_total = 80 * GiB, .observe = gs_plot_observe,
                        .observe_ud = s};
    ck_assert(gs_replay_run(t, p, &o, r, &err));
    gs_policy_free(p);
    return s;
}

/* The series as a saved report carries it, parsed back. */
static gs_json *series_json(const gs_plot_series *s)
{
    char *j = gs_plot_series_json(s);
    char *doc = g_strdup_printf("{\"x\": 0%s}", j);
    GError *err = NULL;
    gs_json *root = gs_json_parse("series", doc, strlen(doc), &err);
    ck_assert_msg(root != NULL, "%s", err ? err->message : "?");
    g_free(j);
    g_free(doc);
    return root;
}

START_TEST(recorder_keeps_peaks_markers_and_the_map_at_peak)
{
    gs_trace *t = load("batch-alternate.gstrace.gz");
    /* pytorch meets its OOM at 5.875 GiB; max_split_size_mb:128 survives on retries */
    const char *specs[] = {"pytorch", "pytorch:max_split_size_mb:128"};
    for (int k = 0; k < 2; k++) {
        gs_result r;
        gs_plot_series *s = record(t, specs[k], 47 * GiB / 8, &r);
        gs_json *root = series_json(s);
        const gs_json *tl = gs_json_get(root, "timeline"), *m = gs_json_get(root, "address_map");
        ck_assert_ptr_nonnull(tl);
        ck_assert_ptr_nonnull(m);
        const gs_json *pts = gs_json_get(tl, "points");
        ck_assert(pts->n > 0 && pts->n <= GS_PLOT_POINTS);
        int64_t max_res = 0, max_alloc = 0, v;
        for (size_t i = 0; i < pts->n; i++) {
            ck_assert(gs_json_int(pts->items[i]->items[2], &v));
            max_alloc = MAX(max_alloc, v);
            ck_assert(gs_json_int(pts->items[i]->items[3], &v));
            max_res = MAX(max_res, v);
        }
        /* per-bucket maxima: the peaks survive downsampling */
        ck_assert_int_eq(max_res, r.stats.reserved_bytes[GS_STAT_ALL].peak);
        ck_assert_int_eq(max_alloc, r.stats.allocated_bytes[GS_STAT_ALL].peak);
        ck_assert_uint_eq(gs_json_get(tl, "retries")->n, r.stats.num_alloc_retries);
        ck_assert_uint_eq(gs_json_get(tl, "ooms")->n, r.stats.num_ooms);
        /* the map is the heap at peak reserved: its segments add up to it */
        ck_assert(gs_json_int(gs_json_get(m, "reserved_bytes"), &v));
        ck_assert_int_eq(v, r.stats.reserved_bytes[GS_STAT_ALL].peak);
        const gs_json *segs = gs_json_get(m, "segments");
        int64_t sum = 0, alloc = 0;
        for (size_t i = 0; i < segs->n; i++) {
            const gs_json *bl = gs_json_get(segs->items[i], "blocks");
            for (size_t b = 0; b < bl->n; b++) {
                ck_assert(gs_json_int(bl->items[b]->items[1], &v));
                sum += v;
                if (strcmp(bl->items[b]->items[2]->str, "allocated") == 0) alloc += v;
            }
        }
        ck_assert_int_eq(sum, r.stats.reserved_bytes[GS_STAT_ALL].peak);
        ck_assert(gs_json_int(gs_json_get(m, "allocated_bytes"), &v));
        ck_assert_int_eq(alloc, v);
        /* and back: a saved report gives the same series */
        GError *err = NULL;
        gs_plot_series *back = gs_plot_series_from_json(root, &err);
        ck_assert_ptr_nonnull(back);
        char *a = gs_plot_series_json(s), *b = gs_plot_series_json(back);
        ck_assert_str_eq(a, b);
        g_free(a);
        g_free(b);
        gs_plot_series_free(back);
        gs_json_free(root);
        gs_plot_series_free(s);
        if (k == 0) ck_assert(r.oom && r.stats.num_ooms == 1);
        else ck_assert(!r.oom && r.stats.num_alloc_retries == 4);
        gs_result_clear(&r);
    }
    gs_trace_free(t);
}
END_TEST

static uint64_t json_u(const gs_json *o, const char *key)
{
    uint64_t v = 0;
    ck_assert_msg(gs_json_uint(gs_json_get(o, key), &v), "no %s", key);
    return v;
}

/* The map at the first OOM is the heap as the failed request left it: the event, the request
 * and its pool's largest free block are the result's first OOM report's, the pool's free
 * blocks in the map add up to what it says, and the largest lies where it says. Under the
 * default (two pools, cudaMalloc segments), expandable segments and CuPy's pool (one pool). */
START_TEST(oom_map_is_the_heap_at_the_first_oom)
{
    gs_trace *t = load("batch-alternate.gstrace.gz");
    const struct {
        const char *spec;
        uint64_t cap;
    } runs[] = {{"pytorch", 47 * GiB / 8}, {"pytorch:expandable_segments:True", 11 * GiB / 2},
                {"cupy", 11 * GiB / 2}};
    for (size_t k = 0; k < G_N_ELEMENTS(runs); k++) {
        gs_result r;
        gs_plot_series *s = record(t, runs[k].spec, runs[k].cap, &r);
        ck_assert_msg(r.oom && r.first_oom_report, "%s: no OOM", runs[k].spec);
        const gs_oom_report *o = r.first_oom_report;
        gs_json *root = series_json(s);
        const gs_json *m = gs_json_get(root, "oom_map");
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq(json_u(m, "event"), r.first_oom_event);
        ck_assert_uint_eq(json_u(m, "request_bytes"), r.first_oom_size);
        ck_assert_uint_eq(json_u(m, "rounded_bytes"), o->rounded);
        ck_assert_uint_eq(json_u(m, "pool"), o->pool);
        ck_assert_uint_eq(json_u(m, "limit_bytes"), runs[k].cap);
        ck_assert_uint_eq(json_u(m, "allocated_bytes"), o->allocated);
        ck_assert_uint_eq(json_u(m, "reserved_bytes"), o->reserved);
        ck_assert_uint_eq(json_u(m, "largest_free_in_pool_bytes"), o->largest_in_pool);
        ck_assert_uint_eq(json_u(m, "largest_free_on_stream_bytes"), o->largest_on_stream);
        ck_assert(o->largest_in_pool < o->rounded); /* else the request would have fit */
        uint64_t seg_addr = json_u(m, "largest_free_segment_addr"), off = json_u(m, "largest_free_offset");
        const gs_json *segs = gs_json_get(m, "segments");
        uint64_t free_in_pool = 0, n_free = 0, reserved = 0;
        bool found = false;
        for (size_t i = 0; i < segs->n; i++) {
            const gs_json *g = segs->items[i], *bl = gs_json_get(g, "blocks");
            bool in_pool = json_u(g, "pool") == o->pool;
            for (size_t b = 0; b < bl->n; b++) {
                uint64_t boff, bsize;
                ck_assert(gs_json_uint(bl->items[b]->items[0], &boff));
                ck_assert(gs_json_uint(bl->items[b]->items[1], &bsize));
                const char *st = bl->items[b]->items[2]->str;
                if (strcmp(st, "unmapped") != 0) reserved += bsize;
                if (!in_pool || strcmp(st, "free") != 0) continue;
                free_in_pool += bsize;
                n_free++;
                found |= json_u(g, "addr") == seg_addr && boff == off && bsize == o->largest_in_pool;
            }
        }
        ck_assert_uint_eq(free_in_pool, json_u(m, "free_in_pool_bytes"));
        ck_assert_uint_eq(n_free, json_u(m, "free_blocks_in_pool"));
        ck_assert_uint_eq(reserved, o->reserved);
        ck_assert_msg(found || o->largest_in_pool == 0, "%s: the largest free block is not where "
                      "the map says", runs[k].spec);
        gs_json_free(root);
        gs_plot_series_free(s);
        gs_result_clear(&r);
    }
    /* a run with no OOM has no map of one */
    gs_result r;
    gs_plot_series *s = record(t, "pytorch:max_split_size_mb:128", 47 * GiB / 8, &r);
    gs_json *root = series_json(s);
    ck_assert(!r.oom);
    ck_assert_ptr_null(gs_json_get(root, "oom_map"));
    gs_json_free(root);
    gs_plot_series_free(s);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

START_TEST(expandable_map_shows_unmapped_blocks)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    uint32_t b = gs_trace_add_alloc(t, "torch", 0, 100 * MiB);
    gs_trace_add_free(t, a);
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0); /* unmaps a's pages: a hole below b */
    gs_trace_add_free(t, b);
    gs_result r;
    gs_plot_series *s = record(t, "pytorch:expandable_segments:True", 0, &r);
    gs_json *root = series_json(s);
    const gs_json *segs = gs_json_get(gs_json_get(root, "address_map"), "segments");
    ck_assert_uint_eq(segs->n, 1);
    ck_assert(gs_json_get(segs->items[0], "expandable")->b);
    const gs_json *bl = gs_json_get(segs->items[0], "blocks");
    /* at the peak (after b): a and b allocated, the rest of the reservation unmapped */
    ck_assert_str_eq(bl->items[0]->items[2]->str, "allocated");
    ck_assert_str_eq(bl->items[bl->n - 1]->items[2]->str, "unmapped");
    gs_json_free(root);
    gs_plot_series_free(s);
    gs_result_clear(&r);
    gs_trace_free(t);
}
END_TEST

/* A plot directory: $GS_TEST_PLOT_DIR when set (kept, to look at), else a temporary one
 * (removed by rm_dir). */
static char *plot_dir(void)
{
    const char *keep = g_getenv("GS_TEST_PLOT_DIR");
    if (keep && *keep) return g_strdup(keep);
    GError *err = NULL;
    char *d = g_dir_make_tmp("gs-test-plots-XXXXXX", &err);
    ck_assert_msg(d != NULL, "%s", err ? err->message : "?");
    return d;
}

static void rm_dir(char *d)
{
    const char *keep = g_getenv("GS_TEST_PLOT_DIR");
    if (!(keep && *keep)) {
        GDir *dir = g_dir_open(d, 0, NULL);
        for (const char *f; dir && (f = g_dir_read_name(dir));) {
            char *p = g_build_filename(d, f, NULL);
            g_unlink(p);
            g_free(p);
        }
        if (dir) g_dir_close(dir);
        g_rmdir(d);
    }
    g_free(d);
}

static char *read_text(const char *dir, const char *name)
{
    char *p = g_build_filename(dir, name, NULL), *text = NULL;
    ck_assert_msg(g_file_get_contents(p, &text, NULL, NULL), "%s not written", p);
    g_free(p);
    return text;
}

/* Draw what was written, when gnuplot is there: every script gives its PNG and SVG. */
static void render_if_gnuplot(gs_plotter *p, size_t want_images)
{
    char *gp = g_find_program_in_path("gnuplot");
    if (!gp) return;
    g_free(gp);
    GError *err = NULL;
    size_t n = 0;
    ck_assert_msg(gs_plotter_render(p, &n, &err), "%s", err ? err->message : "?");
    ck_assert_uint_eq(n, want_images);
}

/* The survival chart of settings made up to hold every case: one that completes at the cap,
 * one that fails there, one that completes at its minimum but fails at a larger capacity (!),
 * one with no minimum, one stopped by a device error; the recorded one outlined. */
START_TEST(whatif_chart_holds_every_case)
{
    const gs_plot_whatif_row rows[] = {
        {"pytorch:expandable_segments:True", false, "ok", true, 5 * GiB, 0, 12000, 1.6, false},
        {"pytorch", true, "ok", true, 5 * GiB + 512 * MiB, 0, 7500, 1.0, false},
        {"made-up:non-monotonic", false, "ok", true, 5 * GiB + 600 * MiB, 7 * GiB, 9000, 1.2, false},
        {"pytorch:roundup_power2_divisions:4", false, "oom", true, 6 * GiB + 256 * MiB, 0, 4000, 0.53, false},
        {"made-up:never", false, "oom", false, 0, 0, 3000, 0.4, false},
        {"made-up:device-error", false, "error", false, 0, 0, 100, 0, false},
    };
    size_t n = G_N_ELEMENTS(rows);
    char *d = plot_dir();
    GError *err = NULL;
    gs_plotter *p = gs_plotter_new(d, &err);
    ck_assert_ptr_nonnull(p);
    ck_assert(gs_plot_whatif(p, "dir/made-up.gstrace.gz", 23 * GiB / 4, "recorded cap", 80 * GiB,
                             rows, n, NULL, &err));
    char *dat = read_text(d, "made-up-whatif.dat"), *gp = read_text(d, "made-up-whatif.gp");
    /* a row per setting in the order given, then the rows with no minimum again */
    char **lines = g_strsplit(dat, "\n", -1);
    ck_assert(g_str_has_prefix(lines[2], "1 5.000000 12.0000 0x0072B2 ok 0 NaN pytorch:expandable_segments:True"));
    ck_assert(g_str_has_prefix(lines[3], "2 5.500000 7.5000 0x0072B2 ok 1 NaN pytorch"));
    ck_assert(g_str_has_prefix(lines[4], "3 5.585938 9.0000 0x0072B2 ok 0 7.000000 made-up:non-monotonic"));
    ck_assert(g_str_has_prefix(lines[5], "4 6.250000 4.0000 0xD55E00 oom 0 NaN"));
    ck_assert(g_str_has_prefix(lines[6], "5 NaN 3.0000 0xD55E00 oom 0 NaN made-up:never"));
    ck_assert(g_str_has_prefix(lines[7], "6 NaN 0.1000 0x8C8C8C error 0 NaN made-up:device-error"));
    ck_assert_ptr_nonnull(strstr(dat, "# the settings with no minimum capacity\n5 NaN"));
    g_strfreev(lines);
    /* what the picture says: the cap, the marks, the notes, the recorded setting named */
    ck_assert_ptr_nonnull(strstr(gp, "'recorded cap 5.75 GiB'"));
    ck_assert_ptr_nonnull(strstr(gp, "'pytorch (recorded)' 2"));
    ck_assert_ptr_nonnull(strstr(gp, "'5.586 GiB  (!)'"));
    ck_assert_ptr_nonnull(strstr(gp, "'no minimum: fails at every capacity up to 80 GiB'"));
    ck_assert_ptr_nonnull(strstr(gp, "(!) fails at a larger capacity than its minimum: made-up:non-monotonic at 7.000 GiB."));
    ck_assert_ptr_nonnull(strstr(gp, "'7.50 ms (+0%)'"));
    ck_assert_ptr_nonnull(strstr(gp, "'4.00 ms (-47%), to its failure'"));
    ck_assert_ptr_nonnull(strstr(gp, "size 1280,444")); /* 92 + 6 rows of 40 + 72 + 2 notes of 20 */
    render_if_gnuplot(p, 2);
    g_free(dat);
    g_free(gp);
    gs_plotter_free(p);
    rm_dir(d);
}
END_TEST

START_TEST(stems_and_csv_fields)
{
    char *s = gs_plot_stem("traces/data/resnet50.gstrace.gz");
    ck_assert_str_eq(s, "resnet50");
    g_free(s);
    s = gs_plot_stem("run.json");
    ck_assert_str_eq(s, "run");
    g_free(s);
    s = gs_plot_stem("dir/resnet50.gsbin"); /* the binary form names its plots alike */
    ck_assert_str_eq(s, "resnet50");
    g_free(s);
    GString *f = g_string_new(NULL);
    gs_csv_field(f, "pytorch:max_split_size_mb:128,garbage_collection_threshold:0.6");
    ck_assert_str_eq(f->str, "\"pytorch:max_split_size_mb:128,garbage_collection_threshold:0.6\"");
    g_string_free(f, TRUE);
}
END_TEST

/* Ranges in braces: A..B..STEP, step 1 by default, decimals as written, mixed with
 * plain choices; a range that goes down, has no step above 0 or no numbers is refused. */
START_TEST(brace_ranges)
{
    gs_sweep *s = sweep_of("pytorch:max_split_size_mb:{32,64..256..64}", NULL, "{5.5..6..0.25}GiB");
    ck_assert_uint_eq(s->cells->len, 5 * 3);
    ck_assert_str_eq(cell(s, 3)->values[0], "64");
    ck_assert_str_eq(cell(s, 14)->values[0], "256");
    ck_assert_str_eq(cell(s, 1)->values[1], "5.75GiB");
    ck_assert_uint_eq(cell(s, 2)->capacity, 6 * GiB);
    gs_sweep_free(s);
    s = sweep_of("pytorch:max_split_size_mb:{20..23}", NULL, NULL);
    ck_assert_uint_eq(s->cells->len, 4);
    ck_assert_str_eq(cell(s, 3)->values[0], "23");
    gs_sweep_free(s);
    expect_error("pytorch:max_split_size_mb:{64..32}", NULL, "goes up");
    expect_error("pytorch:max_split_size_mb:{32..64..0}", NULL, "above 0");
    expect_error("pytorch:max_split_size_mb:{a..b}", NULL, "in numbers");
    expect_error("pytorch:max_split_size_mb:{1..100000}", NULL, "more values");
}
END_TEST

/* A choice may be a bracketed list of its own: its commas do not split the braces' choices. */
START_TEST(brace_choices_keep_bracketed_lists)
{
    gs_sweep *s = sweep_of("pytorch:roundup_power2_divisions:{[256:1,>:4],2}", NULL, NULL);
    ck_assert_uint_eq(s->cells->len, 2);
    ck_assert_str_eq(cell(s, 0)->values[0], "[256:1,>:4]");
    ck_assert_str_eq(cell(s, 1)->values[0], "2");
    gs_sweep_free(s);
}
END_TEST

static Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep and plots");
    TCase *tc = tcase_create("grid");
    tcase_add_test(tc, grid_is_the_product_first_list_outermost);
    tcase_add_test(tc, several_templates_add_a_template_parameter);
    tcase_add_test(tc, brace_ranges);
    tcase_add_test(tc, brace_choices_keep_bracketed_lists);
    tcase_add_test(tc, bad_grids_are_errors);
    tcase_add_test(tc, grid_past_the_cell_limit_is_an_error);
    tcase_add_test(tc, stems_and_csv_fields);
    tcase_add_test(tc, whatif_chart_holds_every_case);
    suite_add_tcase(s, tc);
    tc = tcase_create("runs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, parallel_cells_equal_serial_in_grid_order);
    tcase_add_test(tc, no_memory_is_a_result_not_an_abort);
    tcase_add_test(tc, recorder_keeps_peaks_markers_and_the_map_at_peak);
    tcase_add_test(tc, expandable_map_shows_unmapped_blocks);
    tcase_add_test(tc, oom_map_is_the_heap_at_the_first_oom);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    data_dir = argc > 1 ? argv[1] : "traces/data";
    return run_suite(sweep_suite());
}
