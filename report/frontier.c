/* frontier.c - gpusim frontier's report: a row per setting and trace, memory over the bound
 * against device time over the default's, the front marked (sim/frontier.h).
 */
#include <string.h>

#include "report.h"

static const char *const csv_header =
    "trace,policy,family,ours,uncapped_outcome,min_capacity_bytes,lower_bound_bytes,"
    "memory_over_bound,device_time_us,time_over_default,pareto,replays,"
    "uncapped_peak_reserved_bytes\n";

/* What gpusim's own policy is against the front, in words ("on the front", "behind it: SPEC
 * needs no more memory and less time"); NULL when no point is ours. g_free it. */
static char *ours_words(const gs_frontier *f)
{
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *a = &f->pts[i];
        if (!a->ours) continue;
        if (a->pareto)
            return g_strdup_printf("%s, gpusim's own policy, is on the front", a->row->pol->spec);
        if (!a->found || !a->completes)
            return g_strdup_printf("%s, gpusim's own policy, is off the chart: %s",
                                   a->row->pol->spec,
                                   !a->completes ? "it fails with no cap" : "no minimum capacity");
        for (size_t j = 0; j < f->n; j++) {
            const gs_frontier_point *b = &f->pts[j];
            if (!b->pareto || b->min_capacity > a->min_capacity || b->device_us > a->device_us)
                continue;
            return g_strdup_printf("%s, gpusim's own policy, is behind the front: %s needs %s "
                                   "memory and %s device time",
                                   a->row->pol->spec, b->row->pol->spec,
                                   b->min_capacity < a->min_capacity ? "less" : "no more",
                                   b->device_us < a->device_us ? "less" : "no more");
        }
    }
    return NULL;
}

static void table(FILE *out, const char *name, const gs_trace *t, const gs_frontier *f)
{
    char *b = gs_format_size(f->bound);
    char *pn = gs_printable(name); /* a name is data: nothing in it reaches the terminal raw */
    const char *clients = f->n ? gs_report_bound_of_clients(&f->pts[0].row->at_cap) : NULL;
    fprintf(
        out,
        "frontier %s: %zu events; the bound %s (the largest device's peak live requests%s%s%s)\n",
        pn, t->n, b, clients ? ", " : "", clients ? clients : "",
        clients ? ", and x bound be below 1" : "");
    g_free(pn);
    g_free(b);
    fprintf(out, "%-42s %14s %9s %11s %10s %s\n", "setting", "min capacity", "x bound", "device ms",
            "x default", "front");
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *p = &f->pts[i];
        char *spec = gs_printable(p->row->pol->spec);
        char *m = p->found ? gs_format_size(p->min_capacity) : g_strdup("none");
        fprintf(out, "%-42s %14s ", spec, m);
        if (p->found && f->bound) fprintf(out, "%9.4f ", p->memory);
        else fprintf(out, "%9s ", "-");
        fprintf(out, "%11.2f ", p->device_us / 1000.0);
        if (p->time > 0) fprintf(out, "%10.3f ", p->time);
        else fprintf(out, "%10s ", "-");
        fprintf(out, "%s%s\n", p->pareto ? "*" : (p->completes ? "" : "fails uncapped"),
                p->ours ? (p->pareto ? " (gpusim's own)" : "  (gpusim's own)") : "");
        g_free(m);
        g_free(spec);
    }
    char *w = ours_words(f);
    if (w) {
        char *pw = gs_printable(w);
        fprintf(out, "%s.\n", pw);
        g_free(pw);
    }
    g_free(w);
    fputs("(min capacity: the least memory each setting completes the trace with; x bound: over "
          "the bound; device ms: modelled device time with no cap; x default: over PyTorch "
          "default's; *: on the Pareto front, no other setting needs less of both)\n",
          out);
}

static void csv_rows(FILE *out, const char *name, const gs_frontier *f)
{
    char *qn = gs_csv_quote(name);
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *p = &f->pts[i];
        char *qs = gs_csv_quote(p->row->pol->spec), *qf = gs_csv_quote(p->family);
        fprintf(out, "%s,%s,%s,%d,%s,", qn, qs, qf, p->ours, gs_result_outcome(&p->row->at_cap));
        if (p->found) fprintf(out, "%" G_GUINT64_FORMAT, p->min_capacity);
        fprintf(out, ",%" G_GUINT64_FORMAT ",", f->bound);
        if (p->found && f->bound) fprintf(out, "%.6f", p->memory);
        fprintf(out, ",%.1f,", p->device_us);
        if (p->time > 0) fprintf(out, "%.6f", p->time);
        fprintf(out, ",%d,%u,%" G_GINT64_FORMAT "\n", p->pareto,
                p->row->replays + p->row->search.probes,
                p->row->at_cap.stats.reserved_bytes[GS_STAT_ALL].peak);
        g_free(qs);
        g_free(qf);
    }
    g_free(qn);
}

static void json_trace(gs_jw *w, const char *name, const gs_trace *t, const gs_frontier *f)
{
    gs_jw_object(w);
    gs_jw_key(w, "trace");
    gs_jw_str(w, name);
    gs_jw_key(w, "events");
    gs_jw_uint(w, t->n);
    gs_jw_key(w, "lower_bound_bytes");
    gs_jw_uint(w, f->bound);
    gs_jw_key(w, "points");
    gs_jw_array(w);
    for (size_t i = 0; i < f->n; i++) {
        const gs_frontier_point *p = &f->pts[i];
        gs_jw_object(w);
        gs_jw_key(w, "policy");
        gs_jw_str(w, p->row->pol->spec);
        gs_jw_key(w, "family");
        gs_jw_str(w, p->family);
        gs_jw_key(w, "ours");
        gs_jw_bool(w, p->ours);
        gs_jw_key(w, "uncapped_outcome");
        gs_jw_str(w, gs_result_outcome(&p->row->at_cap));
        gs_jw_key(w, "min_capacity_bytes");
        if (p->found) gs_jw_uint(w, p->min_capacity);
        else gs_jw_null(w);
        gs_jw_key(w, "memory_over_bound");
        if (p->found && f->bound) gs_jw_num(w, "%.6f", p->memory);
        else gs_jw_null(w);
        gs_jw_key(w, "device_time_us");
        gs_jw_num(w, "%.1f", p->device_us);
        gs_jw_key(w, "time_over_default");
        if (p->time > 0) gs_jw_num(w, "%.6f", p->time);
        else gs_jw_null(w);
        gs_jw_key(w, "pareto");
        gs_jw_bool(w, p->pareto);
        gs_jw_key(w, "replays");
        gs_jw_uint(w, p->row->replays + p->row->search.probes);
        gs_jw_key(w, "uncapped_peak_reserved_bytes");
        gs_jw_int(w, p->row->at_cap.stats.reserved_bytes[GS_STAT_ALL].peak);
        gs_jw_object_end(w);
    }
    gs_jw_array_end(w);
    gs_jw_key(w, "ours");
    char *ow = ours_words(f);
    if (ow) gs_jw_str(w, ow);
    else gs_jw_null(w);
    g_free(ow);
    gs_jw_object_end(w);
}

void gs_frontier_report(FILE *out, gs_format fmt, const char *const *names,
                        const gs_trace *const *traces, gs_frontier *const *fs, size_t n)
{
    if (fmt == GS_FMT_CSV) {
        fputs(csv_header, out);
        for (size_t i = 0; i < n; i++) csv_rows(out, names[i], fs[i]);
        return;
    }
    if (fmt == GS_FMT_JSON) {
        GString *s = g_string_new(NULL);
        gs_jw w;
        gs_jw_init(&w, s);
        gs_jw_array(&w);
        for (size_t i = 0; i < n; i++) json_trace(&w, names[i], traces[i], fs[i]);
        gs_jw_array_end(&w);
        g_string_append_c(s, '\n');
        fwrite(s->str, 1, s->len, out);
        g_string_free(s, TRUE);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (i) fputc('\n', out);
        table(out, names[i], traces[i], fs[i]);
    }
}
