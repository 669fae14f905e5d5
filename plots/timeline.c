/* timeline.c - NAME-timeline: allocated (dotted) and reserved (solid) memory over the trace's
 * time, one colour per policy, a marker at each retry and OOM, each capacity dashed.
 *
 * NAME-timeline.dat holds the buckets (a gnuplot index block per policy), NAME-timeline-events.dat
 * the retries and OOMs (a block per policy and kind), both in seconds and GiB.
 */
#include "plot-int.h"

/* "pytorch: 4 retries" */
static char *count_label(const char *who, uint64_t n, const char *one, const char *many)
{
    return g_strdup_printf("%s: %" G_GUINT64_FORMAT " %s", who, n, n == 1 ? one : many);
}

gboolean gs_plot_timeline(gs_plotter *p, const char *trace, const char *stem,
                          const gs_plot_run *runs, size_t n, GError **err)
{
    /* Trace time when the trace has it; synthetic traces may not. */
    bool use_time = false;
    uint64_t span_us = 0;
    double xmax = 0, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        const gs_plot_point *last = &g_array_index(s->points, gs_plot_point, s->points->len - 1);
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
    bool cap_same = gs_plot_same_capacity(runs, n);
    char *title_cap = cap_same ? gs_plot_cap_words(runs[0].capacity) : g_strdup("capacities as labelled");
    char *base = g_path_get_basename(trace);
    gs_gp_begin(g, stem, "allocated and reserved memory over the trace", 1280, 640);
    GString *plots = g_string_new(NULL);
    int block = 0, evblock = 0;
    for (size_t i = 0; i < n; i++) {
        const gs_plot_series *s = runs[i].series;
        if (!s || !s->points->len) continue;
        const char *c = gs_plot_colour(i);
        char *label = gs_plot_run_label(&runs[i], !cap_same);
        g_string_append_printf(dat, "# %s\n", label);
        for (guint k = 0; k < s->points->len; k++) {
            const gs_plot_point *pt = &g_array_index(s->points, gs_plot_point, k);
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
        gs_gp_str(plots, t);
        g_free(t);
        g_string_append_printf(plots, ", \\\n     '%s.dat' index %d using %s:3 with lines lw 1 dt 3 lc rgb '%s' title ",
                               stem, block, xexpr, c);
        t = g_strdup_printf("%s: allocated", label);
        gs_gp_str(plots, t);
        g_free(t);
        block++;
        const GArray *marks[2] = {s->retries, s->ooms};
        for (int m = 0; m < 2; m++) {
            if (!marks[m]->len) continue;
            g_string_append_printf(ev, "# %s: %s\n", label, m ? "OOMs" : "retries");
            for (guint k = 0; k < marks[m]->len; k++) {
                const gs_plot_point *pt = &g_array_index(marks[m], gs_plot_point, k);
                g_string_append_printf(ev, "%" G_GUINT64_FORMAT " %.6f %.6f %.6f\n", pt->event,
                                       (double)pt->time_us / 1e6, gib(pt->allocated), gib(pt->reserved));
            }
            g_string_append(ev, "\n\n");
            g_string_append_printf(plots, ", \\\n     '%s-events.dat' index %d using %s:4 with points %s lc rgb '%s' title ",
                                   stem, evblock++, xexpr, m ? "pt 2 ps 2.6 lw 3" : "pt 8 ps 1.8 lw 2", c);
            t = m ? count_label(label, s->n_ooms, "OOM", "OOMs")
                  : count_label(label, s->n_retries, "retry (cache flushed)", "retries (cache flushed)");
            gs_gp_str(plots, t);
            g_free(t);
        }
        g_free(label);
    }
    /* the capacity: one dashed line per distinct limit */
    for (size_t i = 0; i < n; i++) {
        bool seen = runs[i].capacity == 0 || !runs[i].series;
        for (size_t k = 0; k < i && !seen; k++) seen = runs[k].series && runs[k].capacity == runs[i].capacity;
        if (seen) continue;
        char *w = gs_plot_cap_words(runs[i].capacity);
        g_string_append_printf(plots, ", \\\n     %.6f with lines dt 2 lw 1.5 lc rgb '#333333' title ",
                               gib((int64_t)runs[i].capacity));
        gs_gp_str(plots, w);
        g_free(w);
        ymax = MAX(ymax, gib((int64_t)runs[i].capacity));
    }
    g_string_append(g, "set title ");
    char *title = g_strdup_printf("%s: allocated and reserved memory, %s", base, title_cap);
    gs_gp_str(g, title);
    g_free(title);
    g_string_append_printf(g, "\nset xlabel '%s'\nset ylabel 'memory (GiB)'\n"
                              "set grid\nset key below left Left reverse maxcols 3 spacing 1.2\n"
                              "set xrange [0:%.6g]\nset yrange [0:%.6g]\nset format y '%%.1f'\n",
                           !use_time ? "event" : in_ms ? "trace time (ms)" : "trace time (s)", xmax > 0 ? xmax : 1.0, ymax > 0 ? ymax * 1.1 : 1.0);
    g_string_append_len(g, plots->str, (gssize)plots->len);
    g_string_append_c(g, '\n');
    gs_gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem), *evname = g_strdup_printf("%s-events.dat", stem);
    gboolean ok = block == 0 || (gs_plotter_write(p, datname, dat, err) && gs_plotter_write(p, evname, ev, err) &&
                                 gs_plotter_add_script(p, stem, g, err));
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
