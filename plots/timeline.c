/* timeline.c - NAME-timeline: allocated (dotted) and reserved (solid) memory over the trace's
 * time, one colour per policy, a marker at each retry and OOM, each capacity dashed.
 *
 * NAME-timeline.dat holds the buckets (a gnuplot index block per policy), NAME-timeline-events.dat
 * the retries and OOMs (a block per policy and kind), both in seconds and GiB.
 */
#include "plot-int.h"

/* The timeline being built: its two data files and the plot command's clauses. */
typedef struct {
    const char *stem;
    char *dat_lit, *ev_lit; /* the data files' names as gnuplot literals */
    bool use_time, in_ms;   /* x: trace time (in ms), or the event number */
    const char *xexpr;      /* x as gnuplot's "using" reads it from the .dat */
    GString *dat, *ev;      /* NAME-timeline.dat, NAME-timeline-events.dat */
    GString *plots;         /* "plot ..., ..." */
    int block, evblock;     /* the next index block of each */
    double xmax, ymax;      /* the largest x and GiB drawn */
} timeline;

/* x is trace time when the trace has it (synthetic traces may not), in milliseconds for a trace
 * shorter than 10 s (the .dat keeps seconds); else the event number. */
static void choose_x(timeline *t, const gs_plot_run *runs, size_t n)
{
    uint64_t span_us = 0;
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        const gs_plot_point *last = &g_array_index(s->points, gs_plot_point, s->points->len - 1);
        t->use_time |= last->time_us > 0;
        span_us = MAX(span_us, last->time_us);
    }
    t->in_ms = t->use_time && span_us < 10 * G_USEC_PER_SEC;
    t->xexpr = !t->use_time ? "1" : t->in_ms ? "($2*1000)" : "2";
}

/* A .dat row per point: event time_s allocated_GiB reserved_GiB. */
static void dat_rows(GString *out, const GArray *pts)
{
    for (guint k = 0; k < pts->len; k++) {
        const gs_plot_point *pt = &g_array_index(pts, gs_plot_point, k);
        g_string_append_printf(out, "%" G_GUINT64_FORMAT " %.6f %.6f %.6f\n", pt->event,
                               (double)pt->time_us / 1e6, gib(pt->allocated), gib(pt->reserved));
    }
    g_string_append(out, "\n\n");
}

/* A clause's title: "LABEL: WHAT". */
static void clause_title(GString *plots, const char *label, const char *what)
{
    char *t = g_strdup_printf("%s: %s", label, what);
    gs_gp_str(plots, t);
    g_free(t);
}

/* "pytorch: 4 retries" */
static char *count_label(const char *who, uint64_t n, const char *one, const char *many)
{
    return g_strdup_printf("%s: %" G_GUINT64_FORMAT " %s", who, n, n == 1 ? one : many);
}

/* A policy's reserved (solid) and allocated (dotted) lines. */
static void add_lines(timeline *t, const gs_plot_series *s, const char *label, const char *colour)
{
    g_string_append(t->dat, "# ");
    gs_dat_text(t->dat, label);
    g_string_append_c(t->dat, '\n');
    dat_rows(t->dat, s->points);
    for (guint k = 0; k < s->points->len; k++) {
        const gs_plot_point *pt = &g_array_index(s->points, gs_plot_point, k);
        t->xmax = MAX(t->xmax, !t->use_time ? (double)pt->event
                                            : (double)pt->time_us / (t->in_ms ? 1e3 : 1e6));
        t->ymax = MAX(t->ymax, gib(pt->reserved));
    }
    g_string_append_printf(t->plots, "%s%s index %d using %s:4 with lines lw 2.5 lc rgb '%s' title ",
                           t->plots->len ? ", \\\n     " : "plot ", t->dat_lit, t->block, t->xexpr, colour);
    clause_title(t->plots, label, "reserved");
    g_string_append_printf(t->plots, ", \\\n     %s index %d using %s:3 with lines lw 1 dt 3 lc rgb '%s' title ",
                           t->dat_lit, t->block, t->xexpr, colour);
    clause_title(t->plots, label, "allocated");
    t->block++;
}

/* A policy's retries (triangles) and OOMs (crosses), at the reserved memory of their moment. */
static void add_markers(timeline *t, const gs_plot_series *s, const char *label, const char *colour)
{
    const GArray *marks[2] = {s->retries, s->ooms};
    for (int m = 0; m < 2; m++) {
        if (!marks[m]->len) continue;
        g_string_append(t->ev, "# ");
        gs_dat_text(t->ev, label);
        g_string_append_printf(t->ev, ": %s\n", m ? "OOMs" : "retries");
        dat_rows(t->ev, marks[m]);
        g_string_append_printf(t->plots, ", \\\n     %s index %d using %s:4 with points %s lc rgb '%s' title ",
                               t->ev_lit, t->evblock++, t->xexpr, m ? "pt 2 ps 2.6 lw 3" : "pt 8 ps 1.8 lw 2",
                               colour);
        char *title = m ? count_label(label, s->n_ooms, "OOM", "OOMs")
                        : count_label(label, s->n_retries, "retry (cache flushed)", "retries (cache flushed)");
        gs_gp_str(t->plots, title);
        g_free(title);
    }
}

/* The capacity: one dashed line per distinct limit of the runs drawn. */
static void add_capacities(timeline *t, const gs_plot_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bool seen = runs[i].capacity == 0 || !runs[i].series;
        for (size_t k = 0; k < i && !seen; k++) seen = runs[k].series && runs[k].capacity == runs[i].capacity;
        if (seen) continue;
        char *w = gs_plot_cap_words(runs[i].capacity);
        g_string_append_printf(t->plots, ", \\\n     %.6f with lines dt 2 lw 1.5 lc rgb '#333333' title ",
                               gib((int64_t)runs[i].capacity));
        gs_gp_str(t->plots, w);
        g_free(w);
        t->ymax = MAX(t->ymax, gib((int64_t)runs[i].capacity));
    }
}

/* NAME-timeline.gp: the frame, the title and axes, then the clauses. */
static void timeline_script(GString *g, const timeline *t, const char *trace, const char *title_cap)
{
    char *base = g_path_get_basename(trace);
    char *title = g_strdup_printf("%s: allocated and reserved memory, %s", base, title_cap);
    gs_gp_begin(g, t->stem, "allocated and reserved memory over the trace", 1280, 640);
    g_string_append(g, "set title ");
    gs_gp_str(g, title);
    g_string_append_printf(g, "\nset xlabel '%s'\nset ylabel 'memory (GiB)'\n"
                              "set grid\nset key below left Left reverse maxcols 3 spacing 1.2\n"
                              "set xrange [0:%.6g]\nset yrange [0:%.6g]\nset format y '%%.1f'\n",
                           !t->use_time ? "event" : t->in_ms ? "trace time (ms)" : "trace time (s)",
                           t->xmax > 0 ? t->xmax : 1.0, t->ymax > 0 ? t->ymax * 1.1 : 1.0);
    g_string_append_len(g, t->plots->str, (gssize)t->plots->len);
    g_string_append_c(g, '\n');
    gs_gp_end(g);
    g_free(title);
    g_free(base);
}

/* Nothing is written when no run has a series (a saved CSV: the bars only). */
gboolean gs_plot_timeline(gs_plotter *p, const char *trace, const char *stem,
                          const gs_plot_run *runs, size_t n, GError **err)
{
    timeline t = {.stem = stem, .dat = g_string_new(NULL), .ev = g_string_new(NULL),
                  .plots = g_string_new(NULL)};
    choose_x(&t, runs, n);
    char *datname = g_strdup_printf("%s.dat", stem), *evname = g_strdup_printf("%s-events.dat", stem);
    t.dat_lit = gs_gp_lit(datname);
    t.ev_lit = gs_gp_lit(evname);
    g_string_append(t.dat, "# ");
    gs_dat_text(t.dat, trace);
    g_string_append(t.dat, ": memory over the trace, per policy (gnuplot index blocks, in "
                           "this order); each row is the maxima over a bucket of events\n"
                           "# event time_s allocated_GiB reserved_GiB\n");
    g_string_append(t.ev, "# the events where a retry or an OOM happened (index blocks named below)\n"
                          "# event time_s allocated_GiB reserved_GiB\n");
    bool cap_same = gs_plot_same_capacity(runs, n);
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        char *label = gs_plot_run_label(&runs[i], !cap_same);
        add_lines(&t, s, label, gs_plot_colour(i));
        add_markers(&t, s, label, gs_plot_colour(i));
        g_free(label);
    }
    add_capacities(&t, runs, n);
    char *title_cap = cap_same ? gs_plot_cap_words(runs[0].capacity) : g_strdup("capacities as labelled");
    GString *g = g_string_new(NULL);
    timeline_script(g, &t, trace, title_cap);
    gboolean ok = t.block == 0 || (gs_plotter_write(p, datname, t.dat, err) &&
                                   gs_plotter_write(p, evname, t.ev, err) &&
                                   gs_plotter_add_script(p, stem, g, err));
    g_free(datname);
    g_free(evname);
    g_free(t.dat_lit);
    g_free(t.ev_lit);
    g_free(title_cap);
    g_string_free(t.plots, TRUE);
    g_string_free(t.dat, TRUE);
    g_string_free(t.ev, TRUE);
    g_string_free(g, TRUE);
    return ok;
}
