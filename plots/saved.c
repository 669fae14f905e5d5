/* saved.c - gpusim plot RESULT: the plots of a saved report, read back.
 *
 * The format is told by the content: JSON (replay --format json) is an array of documents, each
 * a trace with its results (a lone document, as replay wrote for one trace before the rough-edges
 * review, is
 * still read, so older saved reports keep plotting), and a result saved with --plot carries its series, so
 * every plot comes back identical; CSV is a replay's (the bars of each trace) or a sweep's (its
 * first column "cell": the sweep plot, and the matrix when it has a capacity list). The CSV parser is RFC 4180's.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "plot-int.h"

static gboolean saved_bad(GError **err, const char *path, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean saved_bad(GError **err, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    /* escaped whole, as gs_located_printf does: what it quotes (a trace's name, a column's) is
     * the file's, and a line break there made the message two lines (a fuzzer's input) */
    char *full = g_strdup_printf("%s: %s (want a report of 'gpusim replay --format json|csv' or "
                                 "of 'gpusim sweep')",
                                 path, m);
    char *safe = gs_printable(full);
    g_set_error_literal(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, safe);
    g_free(safe);
    g_free(m);
    g_free(full);
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
    /* Byte counts are not negative (the waste is their difference) and times are finite. */
    if (pr->peak_allocated < 0 || pr->peak_reserved < 0 || !(pr->device_us >= 0) ||
        !isfinite(pr->frag_peak))
        return saved_bad(err, path, "a result's peak_allocated_bytes or peak_reserved_bytes is "
                                    "negative, or its frag_peak or device_time_us is not a number");
    pr->policy = g_strdup(pol->str);
    pr->outcome = g_strdup(oc->str);
    const gs_json *client = gs_json_get(gs_json_get(r, "first_oom"), "client");
    if (client && client->type == GS_JSON_STRING) pr->oom_client = g_strdup(client->str);
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
        if (!tr || tr->type != GS_JSON_STRING || !rs || rs->type != GS_JSON_ARRAY) {
            ok = saved_bad(err, path, "no \"trace\" and \"results\"");
            break;
        }
        if (rs->n == 0) {
            ok = saved_bad(err, path, "trace '%s' has no results to plot", tr->str);
            break;
        }
        gs_plot_run *runs = g_new0(gs_plot_run, rs->n);
        for (size_t i = 0; ok && i < rs->n; i++) ok = run_from_json(&runs[i], rs->items[i], path, err);
        if (ok && p) ok = gs_plot_trace(p, tr->str, runs, rs->n, err);
        runs_free(runs, rs->n);
    }
    gs_json_free(root);
    return ok;
}

/* The columns a CSV report must have, in this order in col[]. */
static const char *const need[] = {"trace", "policy", "capacity_bytes", "outcome",
                                   "peak_allocated_bytes", "peak_reserved_bytes", "frag_peak",
                                   "num_alloc_retries", "num_ooms", "device_time_us"};
enum { C_TRACE, C_POLICY, C_CAPACITY, C_OUTCOME, C_PEAK_ALLOC, C_PEAK_RESERVED, C_FRAG,
       C_RETRIES, C_OOMS, C_DEVICE_US, N_NEED };
_Static_assert(N_NEED == G_N_ELEMENTS(need), "a column index per needed column");

/* A count or byte count as gpusim writes it: digits, at most max. */
static bool csv_count(const char *s, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    if (!g_ascii_isdigit(*s)) return false;
    *out = g_ascii_strtoull(s, &end, 10);
    return !*end && errno == 0 && *out <= max;
}

/* A finite number (at least 0 when nonneg). */
static bool csv_number(const char *s, bool nonneg, double *out)
{
    char *end = NULL;
    *out = g_ascii_strtod(s, &end);
    return *s && !*end && isfinite(*out) && (!nonneg || *out >= 0);
}

/* One CSV row as a run. A report someone sent can hold anything: each number is checked as
 * the JSON reader checks it (byte counts not negative, times finite). NULL, or the name of
 * the first column that is not a number of its kind. */
static const char *run_from_csv(gs_plot_run *pr, char **r, const int col[N_NEED])
{
    uint64_t alloc, reserved;
    if (!csv_count(r[col[C_CAPACITY]], UINT64_MAX, &pr->capacity)) return need[C_CAPACITY];
    if (!csv_count(r[col[C_PEAK_ALLOC]], INT64_MAX, &alloc)) return need[C_PEAK_ALLOC];
    if (!csv_count(r[col[C_PEAK_RESERVED]], INT64_MAX, &reserved)) return need[C_PEAK_RESERVED];
    if (!csv_number(r[col[C_FRAG]], false, &pr->frag_peak)) return need[C_FRAG];
    if (!csv_count(r[col[C_RETRIES]], UINT64_MAX, &pr->retries)) return need[C_RETRIES];
    if (!csv_count(r[col[C_OOMS]], UINT64_MAX, &pr->ooms)) return need[C_OOMS];
    if (!csv_number(r[col[C_DEVICE_US]], true, &pr->device_us)) return need[C_DEVICE_US];
    pr->peak_allocated = (int64_t)alloc;
    pr->peak_reserved = (int64_t)reserved;
    pr->policy = g_strdup(r[col[C_POLICY]]);
    pr->outcome = g_strdup(r[col[C_OUTCOME]]);
    return NULL;
}

/* A replay's CSV: the plots of each trace, from its runs (whose traces, trace_of, come in
 * runs of one name). */
static gboolean plot_csv_traces(gs_plotter *p, const char *const *trace_of, const gs_plot_run *runs,
                                size_t n, GError **err)
{
    gboolean ok = TRUE;
    for (size_t i = 0; ok && i < n;) {
        const char *tr = trace_of[i];
        size_t k = i;
        while (k < n && strcmp(trace_of[k], tr) == 0) k++;
        ok = gs_plot_trace(p, tr, runs + i, k - i, err);
        i = k;
    }
    return ok;
}

static gboolean plot_saved_csv(gs_plotter *p, const char *path, const char *text, size_t len,
                               GError **err)
{
    GArray *lines = g_array_new(FALSE, FALSE, sizeof(size_t));
    GError *e = NULL;
    GPtrArray *rows = gs_csv_parse(path, text, len, lines, &e);
    if (!rows) { /* in this module's domain, as every error gs_plot_saved gives */
        g_set_error_literal(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, e->message);
        g_error_free(e);
        g_array_free(lines, TRUE);
        return FALSE;
    }
    if (rows->len < 2) {
        g_array_free(lines, TRUE);
        g_ptr_array_free(rows, TRUE);
        return saved_bad(err, path, "no header and rows");
    }
    char **h = rows->pdata[0];
    int col[N_NEED];
    for (size_t k = 0; k < N_NEED; k++) {
        if ((col[k] = gs_csv_column(h, need[k])) < 0) {
            g_ptr_array_free(rows, TRUE);
            g_array_free(lines, TRUE);
            return saved_bad(err, path, "no column '%s'", need[k]);
        }
    }
    guint width = g_strv_length(h);
    /* a replay's rows of a client, a device or a private pool follow their result's row (docs/
     * cli.md, the CSV): parts of a run, not runs (each drew a bar of its own, a CuPy client's
     * row a "pytorch" bar that completed in a run that died) */
    const int part_col[] = {gs_csv_column(h, "client"), gs_csv_column(h, "device"),
                            gs_csv_column(h, "pool")};
    /* a sweep's CSV: cell, then one column per parameter, then the replay's columns */
    bool sweep = strcmp(h[0], "cell") == 0;
    size_t n_params = sweep ? (size_t)col[C_TRACE] - 1 : 0;
    size_t n = 0;
    gs_plot_run *runs = g_new0(gs_plot_run, rows->len);
    const char **values = g_new0(const char *, rows->len *n_params + 1);
    const char **trace_of = g_new0(const char *, rows->len);
    gboolean ok = TRUE;
    for (size_t i = 0; ok && i + 1 < rows->len; i++) {
        char **r = rows->pdata[i + 1];
        if (g_strv_length(r) != width) {
            char *m = gs_located_printf(path, g_array_index(lines, size_t, i + 1),
                                        "%u fields, where the header has %u", g_strv_length(r), width);
            g_set_error_literal(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, m);
            g_free(m);
            ok = FALSE;
            break;
        }
        bool part = false;
        for (size_t k = 0; k < G_N_ELEMENTS(part_col); k++)
            part |= part_col[k] >= 0 && *r[part_col[k]];
        if (part) continue;
        const char *bad = run_from_csv(&runs[n], r, col);
        if (bad) {
            int k = gs_csv_column(h, bad);
            char *m = gs_located_printf(path, g_array_index(lines, size_t, i + 1),
                                        "bad number in column '%s': '%s'", bad, r[k]);
            g_set_error_literal(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, m);
            g_free(m);
            ok = FALSE;
            break;
        }
        for (size_t k = 0; k < n_params; k++) values[n * n_params + k] = r[1 + k];
        trace_of[n++] = r[col[C_TRACE]];
    }
    if (!ok || !p) {
        /* read and checked only (gs_plot_saved with no plotter) */
    } else if (sweep)
        ok = gs_plot_sweep(p, ((char **)rows->pdata[1])[col[C_TRACE]], (const char *const *)h + 1,
                           n_params, values, runs, n, err) &&
             gs_plot_matrix(p, ((char **)rows->pdata[1])[col[C_TRACE]], (const char *const *)h + 1,
                            n_params, values, runs, n, err);
    else ok = plot_csv_traces(p, trace_of, runs, n, err);
    g_free(values);
    g_free(trace_of);
    runs_free(runs, n);
    g_ptr_array_free(rows, TRUE);
    g_array_free(lines, TRUE);
    return ok;
}

gboolean gs_plot_saved_text(gs_plotter *p, const char *path, const char *text, size_t len,
                            GError **err)
{
    const char *c = text;
    while (c < text + len && g_ascii_isspace(*c)) c++;
    if (p) gs_plotter_set_result(p, path);
    gboolean ok = c < text + len && (*c == '{' || *c == '[')
                      ? plot_saved_json(p, path, text, len, err)
                      : plot_saved_csv(p, path, text, len, err);
    if (p) gs_plotter_set_result(p, NULL);
    return ok;
}

gboolean gs_plot_saved(gs_plotter *p, const char *path, GError **err)
{
    char *text = NULL;
    size_t len = 0;
    GError *e = NULL;
    if (!gs_read_text(path, &text, &len, &e)) {
        g_set_error(err, GS_PLOT_ERROR, GS_PLOT_ERROR_INPUT, "%s", e->message);
        g_error_free(e);
        return FALSE;
    }
    gboolean ok = gs_plot_saved_text(p, path, text, len, err);
    g_free(text);
    return ok;
}
