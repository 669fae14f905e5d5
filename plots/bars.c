/* bars.c - NAME-bars: the policies compared, a panel per metric (peak reserved, waste,
 * fragmentation, retries, OOMs, modelled device time), a bar per policy.
 *
 * NAME-bars.dat holds a row per policy: its colour, the six metrics in the panels' units, its
 * outcome and its spec.
 */
#include <string.h>

#include "plot-int.h"

/* The panels, in gs_plot_bar_value's order: a title, the format of the value over each bar, and
 * whether it counts events (whole-number tics, one apart when the counts are small). */
static const struct {
    const char *title, *fmt;
    bool count;
} metrics[] = {
    {"peak reserved (GiB)", "%.3f", false},
    {"waste: peak reserved - peak allocated (GiB)", "%.3f", false},
    {"fragmentation at peak (%)", "%.1f%%", false},
    {"allocation retries (cache flushes)", "%.0f", true},
    {"OOMs", "%.0f", true},
    {"modelled device time (ms)", "%.2f", false},
};
#define N_METRICS G_N_ELEMENTS(metrics)

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

/* NAME-bars.dat: a row per policy. maxv: each panel's largest value. */
static void bars_dat(GString *dat, const char *trace, const gs_plot_run *runs, size_t n,
                     double maxv[N_METRICS])
{
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, ": per policy\n# n colour peak_reserved_GiB waste_GiB frag_pct "
                         "retries ooms device_ms outcome policy\n");
    for (size_t i = 0; i < n; i++) {
        g_string_append_printf(dat, "%zu 0x%s", i, gs_plot_colour(i) + 1);
        for (size_t m = 0; m < N_METRICS; m++) {
            double v = gs_plot_bar_value(&runs[i], (int)m);
            maxv[m] = MAX(maxv[m], v);
            g_string_append_printf(dat, " %.6f", v);
        }
        /* unquoted: a policy spec never holds a space (one read back from a saved report
         * might: the columns drawn come before it) */
        g_string_append_c(dat, ' ');
        gs_dat_text(dat, runs[i].outcome);
        g_string_append_c(dat, ' ');
        gs_dat_text(dat, runs[i].policy);
        g_string_append_c(dat, '\n');
    }
}

/* The legend's labels: a run's label, and its outcome unless "ok". g_strfreev the result. */
static char **legend_labels(const gs_plot_run *runs, size_t n)
{
    bool cap_same = gs_plot_same_capacity(runs, n);
    char **labels = g_new0(char *, n + 1);
    for (size_t i = 0; i < n; i++) {
        labels[i] = gs_plot_run_label(&runs[i], !cap_same);
        if (strcmp(runs[i].outcome, "ok") != 0) {
            char *l = g_strdup_printf("%s (%s)", labels[i], runs[i].outcome);
            g_free(labels[i]);
            labels[i] = l;
        }
    }
    return labels;
}

/* NAME-bars.gp: the panels in a 3 x 2 grid below a legend strip. */
static void bars_script(GString *g, const char *stem, const char *trace, const gs_plot_run *runs,
                        size_t n, const double maxv[N_METRICS])
{
    char *base = g_path_get_basename(trace);
    char *cw = gs_plot_same_capacity(runs, n) ? gs_plot_cap_words(runs[0].capacity)
                                              : g_strdup("capacities as labelled");
    char *title = g_strdup_printf("%s: policies compared, %s", base, cw);
    gs_gp_begin(g, stem, "the policies compared", 1280, 760);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    double top = 0.84, ph = top / 2, pw = 1.0 / 3;
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    for (size_t m = 0; m < N_METRICS; m++) {
        double x = pw * (double)(m % 3), y = top - ph * (double)(m / 3 + 1);
        double ymax = maxv[m] > 0 ? maxv[m] * 1.25 : 1.0;
        g_string_append_printf(g, "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ", x, y, pw, ph);
        gs_gp_str(g, metrics[m].title);
        g_string_append_printf(g,
            "\nset border 3\nunset xtics\nset ytics nomirror\nset grid ytics\nset xrange [-0.6:%.1f]\n"
            "set yrange [0:%.6g]\nset style fill solid 0.85 noborder\nset boxwidth 0.7\nunset key\n"
            "set lmargin 10\nset format y '%s'\n%s"
            "plot %s using 1:%zu:2 with boxes lc rgb variable, \\\n"
            "     '' using 1:%zu:(sprintf('%s', $%zu)) with labels offset 0,0.8 font 'Sans,11'\n",
            (double)n - 0.4, ymax, metrics[m].count ? "%.0f" : "%g",
            metrics[m].count && maxv[m] < 5 ? "set ytics 1\n" : "set ytics autofreq\n", dat_lit, m + 3, m + 3,
            metrics[m].fmt, m + 3);
    }
    char **labels = legend_labels(runs, n);
    gs_gp_legend_strip(g, top, 0.09, (const char *const *)labels, n, NULL);
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);
    g_strfreev(labels);
    g_free(dat_lit);
    g_free(datname);
    g_free(title);
    g_free(cw);
    g_free(base);
}

gboolean gs_plot_bars(gs_plotter *p, const char *trace, const char *stem,
                      const gs_plot_run *runs, size_t n, GError **err)
{
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    double maxv[N_METRICS] = {0};
    bars_dat(dat, trace, runs, n, maxv);
    bars_script(g, stem, trace, runs, n, maxv);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
    g_free(datname);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    return ok;
}
