/* bars.c - NAME-bars: the policies compared, a panel per metric (peak reserved, waste,
 * fragmentation, retries, OOMs, modelled device time), a bar per policy.
 *
 * NAME-bars.dat holds a row per policy: its colour, the six metrics in the panels' units, its
 * outcome and its spec.
 */
#include <string.h>

#include "plot-int.h"

double gs_plot_bar_value(const gs_plot_run *r, int m)
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

gboolean gs_plot_bars(gs_plotter *p, const char *trace, const char *stem,
                      const gs_plot_run *runs, size_t n, GError **err)
{
    static const gs_plot_metric metrics[] = {
        {"peak reserved (GiB)", "%.3f"}, {"waste: peak reserved - peak allocated (GiB)", "%.3f"},
        {"fragmentation at peak (%)", "%.1f%%"}, {"allocation retries (cache flushes)", "%.0f"},
        {"OOMs", "%.0f"}, {"modelled device time (ms)", "%.2f"},
    };
    bool cap_same = gs_plot_same_capacity(runs, n);
    char *base = g_path_get_basename(trace);
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    g_string_append_printf(dat, "# %s: per policy\n# n colour peak_reserved_GiB waste_GiB frag_pct "
                                "retries ooms device_ms outcome policy\n", trace);
    const char **labels = g_new0(const char *, n + 1), **colours = g_new0(const char *, n + 1);
    double maxv[G_N_ELEMENTS(metrics)] = {0};
    for (size_t i = 0; i < n; i++) {
        labels[i] = gs_plot_run_label(&runs[i], !cap_same);
        if (strcmp(runs[i].outcome, "ok") != 0) {
            char *l = g_strdup_printf("%s (%s)", labels[i], runs[i].outcome);
            g_free((char *)labels[i]);
            labels[i] = l;
        }
        colours[i] = gs_plot_colour(i);
        g_string_append_printf(dat, "%zu 0x%s", i, colours[i] + 1);
        for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++) {
            double v = gs_plot_bar_value(&runs[i], (int)m);
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
    gs_gp_begin(g, stem, "the policies compared", 1280, h);
    char *cw = cap_same ? gs_plot_cap_words(runs[0].capacity) : g_strdup("capacities as labelled");
    char *title = g_strdup_printf("%s: policies compared, %s", base, cw);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    /* panels in a 3 x 2 grid below a legend strip */
    double top = 0.84, ph = top / 2, pw = 1.0 / 3;
    for (size_t m = 0; m < G_N_ELEMENTS(metrics); m++) {
        double x = pw * (double)(m % 3), y = top - ph * (double)(m / 3 + 1);
        double ymax = maxv[m] > 0 ? maxv[m] * 1.25 : 1.0;
        g_string_append_printf(g,
            "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ",
            x, y, pw, ph);
        gs_gp_str(g, metrics[m].title);
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
    gs_gp_legend_strip(g, top, 0.09, labels, colours, n, NULL);
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
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
