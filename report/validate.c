/* validate.c - gpusim validate's report: the simulator's prediction beside the real device's
 * run, a row per check with its tolerance (sim/validate.h has the tolerances), as a table or
 * JSON.
 */
#include <math.h>
#include <string.h>

#include "report.h"
#include "validate.h"

/* Allocs and frees in the trace (what "host time per alloc/free" divides by). */
static size_t alloc_free_events(const gs_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].op == GS_OP_ALLOC || t->ev[i].op == GS_OP_FREE) n++;
    return n;
}

static double rel_diff(double sim, double real)
{
    return real > 0 ? (sim - real) / real : (sim > 0 ? INFINITY : 0);
}

typedef enum { ROW_BYTES, ROW_COUNT, ROW_MS, ROW_US, ROW_TEXT } row_kind;

typedef struct {
    char what[64];
    row_kind kind;
    double sim, real;      /* numbers; for ROW_TEXT unused */
    const char *sim_text, *real_text;
    bool judged;           /* false: shown, not checked */
    bool ok;
    bool has_sim;          /* false: the simulator has no such number (driver's view) */
    const char *tolerance; /* words for the check column */
} row;

/* Every line of the comparison, in order, with its check. */
static GArray *compare_rows(const gs_trace *t, const gs_validation *v)
{
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(row));
    row r;
#define ADD(...)                                      \
    do {                                              \
        memset(&r, 0, sizeof r);                      \
        r.has_sim = true;                             \
        __VA_ARGS__;                                  \
        g_array_append_val(rows, r);                  \
    } while (0)
    const gs_result *s = &v->sim, *d = &v->real;
    static const char *const outcomes[] = {"ok", "oom", "error"};
    int so = s->error != GS_OK ? 2 : s->oom, ro = d->error != GS_OK ? 2 : d->oom;
    ADD(g_strlcpy(r.what, "outcome", sizeof r.what); r.kind = ROW_TEXT; r.sim_text = outcomes[so];
        r.real_text = outcomes[ro]; r.judged = true; r.ok = so == ro; r.tolerance = "equal");
    double sp = (double)s->stats.reserved_bytes[GS_STAT_ALL].peak;
    double rp = (double)d->stats.reserved_bytes[GS_STAT_ALL].peak;
    ADD(g_strlcpy(r.what, "peak reserved (allocator)", sizeof r.what); r.kind = ROW_BYTES;
        r.sim = sp; r.real = rp; r.judged = true; r.ok = sp == rp; r.tolerance = "equal");
    ADD(g_strlcpy(r.what, "peak reserved (driver)", sizeof r.what); r.kind = ROW_BYTES;
        r.has_sim = false; r.sim = sp; r.real = (double)v->driver_peak; r.judged = true;
        r.ok = fabs(r.real - rp) <= GS_VALIDATE_DRIVER_TOL * rp;
        r.tolerance = "within 2% of the allocator's");
    ADD(g_strlcpy(r.what, "peak allocated", sizeof r.what); r.kind = ROW_BYTES;
        r.sim = (double)s->stats.allocated_bytes[GS_STAT_ALL].peak;
        r.real = (double)d->stats.allocated_bytes[GS_STAT_ALL].peak; r.judged = true;
        r.ok = r.sim == r.real; r.tolerance = "equal");
    ADD(g_strlcpy(r.what, "alloc retries", sizeof r.what); r.kind = ROW_COUNT;
        r.sim = (double)s->stats.num_alloc_retries; r.real = (double)d->stats.num_alloc_retries;
        r.judged = true; r.ok = r.sim == r.real; r.tolerance = "equal");
    double real_total = v->real_total_us;
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        if (!s->calls.n[k] && !d->calls.n[k]) continue;
        const char *name = gs_call_name((gs_call_kind)k);
        ADD(g_snprintf(r.what, sizeof r.what, "%s calls", name); r.kind = ROW_COUNT;
            r.sim = (double)s->calls.n[k]; r.real = (double)d->calls.n[k]; r.judged = true;
            r.ok = r.sim == r.real; r.tolerance = "equal");
        /* A kind is judged on its time only when it matters to the total: a single
         * cuMemAddressReserve is noise beside hundreds of cudaMallocs. */
        bool matters = v->real_us[k] >= GS_VALIDATE_KIND_SHARE * real_total;
        ADD(g_snprintf(r.what, sizeof r.what, "%s ms", name); r.kind = ROW_MS;
            r.sim = s->calls.time_us[k]; r.real = v->real_us[k]; r.judged = matters;
            r.ok = fabs(rel_diff(r.sim, r.real)) <= GS_VALIDATE_TIME_TOL;
            r.tolerance = matters ? "within 25%" : "under 10% of the total: not judged");
    }
    ADD(g_strlcpy(r.what, "device time ms", sizeof r.what); r.kind = ROW_MS;
        r.sim = gs_devcalls_total_us(&s->calls); r.real = real_total; r.judged = true;
        r.ok = fabs(rel_diff(r.sim, r.real)) <= GS_VALIDATE_TIME_TOL; r.tolerance = "within 25%");
    /* Host time of the allocator itself: the replay loop minus the device calls and the
     * touches (the simulated device's time is virtual, so nothing to subtract there). Shown, not judged: the two sides
     * do different host work by design. */
    double ops = (double)alloc_free_events(t);
    bool host_clock = d->backend && strcmp(d->backend, "sim") != 0;
    ADD(g_strlcpy(r.what, "host us per alloc/free", sizeof r.what); r.kind = ROW_US;
        r.sim = ops ? s->host_seconds * 1e6 / ops : 0;
        r.real = ops ? (v->real_host_s * 1e6 - (host_clock ? real_total : 0)) / ops : 0;
        r.tolerance = "allocator only, not judged");
#undef ADD
    return rows;
}

static void cell(char *buf, size_t n, row_kind kind, double x)
{
    switch (kind) {
    case ROW_BYTES: {
        char *s = gs_format_size((uint64_t)x);
        g_strlcpy(buf, s, n);
        g_free(s);
        break;
    }
    case ROW_COUNT: g_snprintf(buf, n, "%.0f", x); break;
    case ROW_MS: g_snprintf(buf, n, "%.2f", x / 1000); break;
    case ROW_US: g_snprintf(buf, n, "%.3f", x); break;
    case ROW_TEXT: buf[0] = 0; break;
    }
}

/* The difference column: the simulator minus the real device, in bytes or calls, or for times
 * relative to the real device (what the 25% tolerance is measured against). */
static void diff_cell(char *buf, size_t n, const row *r)
{
    buf[0] = 0;
    if (r->kind == ROW_TEXT) return;
    double d = r->sim - r->real;
    if (r->kind == ROW_BYTES) {
        if (d == 0) g_strlcpy(buf, "0", n);
        else {
            char *s = gs_format_size((uint64_t)fabs(d));
            g_snprintf(buf, n, "%c%s", d > 0 ? '+' : '-', s);
            g_free(s);
        }
    } else if (r->kind == ROW_COUNT) {
        g_snprintf(buf, n, "%+.0f", d);
    } else if (r->real > 0) {
        g_snprintf(buf, n, "%+.1f%%", 100 * d / r->real);
    }
}

static bool rows_ok(const gs_validation *v, const GArray *rows)
{
    bool ok = v->runs_agree && v->real.error == GS_OK;
    for (guint i = 0; i < rows->len; i++) {
        const row *r = &g_array_index(rows, row, i);
        if (r->judged && !r->ok) ok = false;
    }
    return ok;
}

bool gs_validation_ok(const gs_trace *t, const gs_validation *v)
{
    GArray *rows = compare_rows(t, v);
    bool ok = rows_ok(v, rows);
    g_array_free(rows, TRUE);
    return ok;
}

/* One object of validate's JSON array; first: no separating comma before it. */
static void validation_json(FILE *out, const char *name, const gs_validation *v, const GArray *rows,
                            bool first)
{
    GString *g = g_string_new(first ? "  " : ",\n  ");
    gs_jw w;
    gs_jw_init(&w, g);
    gs_jw_object(&w);
    gs_jw_key(&w, "trace");
    gs_jw_str(&w, name);
    gs_jw_key(&w, "policy");
    gs_jw_str(&w, v->sim.policy);
    gs_jw_key(&w, "capacity_bytes");
    gs_jw_uint(&w, v->sim.capacity);
    gs_jw_key(&w, "timed_runs");
    gs_jw_uint(&w, v->runs);
    gs_jw_key(&w, "runs_agree");
    gs_jw_bool(&w, v->runs_agree);
    gs_jw_key(&w, "ok");
    gs_jw_bool(&w, rows_ok(v, rows));
    gs_jw_break(&w, ",\n   ");
    gs_jw_key(&w, "checks");
    gs_jw_array(&w);
    for (guint i = 0; i < rows->len; i++) {
        const row *r = &g_array_index(rows, row, i);
        gs_jw_break(&w, ",\n    ");
        if (i == 0) gs_jw_text(&w, "\n    ");
        gs_jw_object(&w);
        gs_jw_key(&w, "what");
        gs_jw_str(&w, r->what);
        if (r->kind == ROW_TEXT) {
            gs_jw_key(&w, "sim");
            gs_jw_str(&w, r->sim_text);
            gs_jw_key(&w, "real");
            gs_jw_str(&w, r->real_text);
        } else {
            /* a time row holds microseconds; its name says ms, and so does its number here,
             * as in the table */
            double unit = r->kind == ROW_MS ? 1000 : 1;
            if (r->has_sim) {
                gs_jw_key(&w, "sim");
                gs_jw_num(&w, "%.17g", r->sim / unit);
            }
            gs_jw_key(&w, "real");
            gs_jw_num(&w, "%.17g", r->real / unit);
        }
        gs_jw_key(&w, "judged");
        gs_jw_bool(&w, r->judged);
        gs_jw_key(&w, "ok");
        gs_jw_bool(&w, r->ok);
        gs_jw_key(&w, "tolerance");
        gs_jw_str(&w, r->tolerance);
        gs_jw_object_end(&w);
    }
    gs_jw_array_end(&w);
    gs_jw_object_end(&w);
    fwrite(g->str, 1, g->len, out);
    g_string_free(g, TRUE);
}

void gs_validation_report(FILE *out, gs_format fmt, const char *name, const gs_trace *t,
                          const gs_validation *v, bool first)
{
    GArray *rows = compare_rows(t, v);
    if (fmt == GS_FMT_JSON) {
        validation_json(out, name, v, rows, first);
        g_array_free(rows, TRUE);
        return;
    }
    if (!first) fputc('\n', out);
    char cap[48] = "";
    if (v->sim.capacity) {
        char *c = gs_format_capacity(v->sim.capacity, "");
        g_snprintf(cap, sizeof cap, " @%s", c);
        g_free(c);
    }
    /* --backend sim: a second simulated device stands in for the GPU; the table says so rather
     * than call it a real device */
    bool stand_in = v->real.backend && strcmp(v->real.backend, "sim") == 0;
    fprintf(out,
            "validate %s under %s%s: simulator vs %s (%u timed runs after a warm-up, "
            "medians)\n",
            name, v->sim.policy, cap,
            stand_in ? "a simulated stand-in for the device (--backend sim)" : "real device",
            v->runs);
    fprintf(out, "%-30s %14s %14s %12s  %s\n", "", "simulator",
            stand_in ? "stand-in" : "real device", "sim - real", "check");
    for (guint i = 0; i < rows->len; i++) {
        const row *r = &g_array_index(rows, row, i);
        char a[40], b[40], d[40];
        if (r->kind == ROW_TEXT) {
            g_strlcpy(a, r->sim_text, sizeof a);
            g_strlcpy(b, r->real_text, sizeof b);
        } else {
            cell(a, sizeof a, r->kind, r->sim);
            cell(b, sizeof b, r->kind, r->real);
        }
        if (!r->has_sim) a[0] = 0;
        diff_cell(d, sizeof d, r);
        const char *verdict = !r->judged ? "" : r->ok ? "ok" : "DIFFERS";
        fprintf(out, "%-30s %14s %14s %12s  %s%s(%s)\n", r->what, a, b, d, verdict,
                *verdict ? " " : "", r->tolerance);
    }
    if (!v->runs_agree) fprintf(out, "the timed runs did not all make the same calls: DIFFERS\n");
    if (v->real.error != GS_OK)
        fprintf(out, "the %s failed: %s\n", stand_in ? "stand-in" : "real device",
                v->real.error_msg ? v->real.error_msg : gs_strerror(v->real.error));
    fprintf(out, "verdict: %s\n", rows_ok(v, rows) ? "agrees within tolerance" : "DIFFERS");
    g_array_free(rows, TRUE);
}
