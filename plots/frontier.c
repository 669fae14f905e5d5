/* frontier.c - NAME-frontier (gpusim frontier --plot): every setting as a point of memory over
 * the bound against device time over the default's, the Pareto front drawn through the points
 * on it, gpusim's own policy marked. Points are numbered; the numbers are keyed beside the
 * chart (with each setting's two figures), so that settings with the same figures (PyTorch's
 * often share a point) never overprint each other's names.
 *
 * NAME-frontier.dat holds a row per point that has a minimum (then, as a block of its own, the
 * front's points in the order of their device time, for the staircase).
 */
#include <math.h>
#include <string.h>

#include "plot-int.h"

/* An axis around [a, b] with a margin, never below 0. */
static void axis(double a, double b, double *lo, double *hi)
{
    double span = b - a > 1e-9 ? b - a : MAX(b * 0.05, 0.01);
    *lo = MAX(0.0, a - 0.12 * span);
    *hi = b + 0.12 * span;
}

static gint by_time(gconstpointer pa, gconstpointer pb)
{
    const gs_plot_frontier_point *a = *(const gs_plot_frontier_point *const *)pa;
    const gs_plot_frontier_point *b = *(const gs_plot_frontier_point *const *)pb;
    return (a->time > b->time) - (a->time < b->time);
}

static void frontier_dat(GString *dat, const char *trace, const gs_plot_frontier_point *pts,
                         size_t n)
{
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, ": each setting's minimum capacity over the bound against its device "
                         "time over PyTorch default's\n"
                         "# number time_over_default memory_over_bound on_front ours policy\n");
    GPtrArray *front = g_ptr_array_new();
    for (size_t i = 0; i < n; i++) {
        const gs_plot_frontier_point *p = &pts[i];
        if (!p->drawn) continue;
        g_string_append_printf(dat, "%zu %.6f %.6f %d %d ", i + 1, p->time, p->memory, p->pareto,
                               p->ours);
        gs_dat_text(dat, p->policy);
        g_string_append_c(dat, '\n');
        if (p->pareto) g_ptr_array_add(front, (gpointer)p);
    }
    g_ptr_array_sort(front, by_time);
    g_string_append(dat, "\n\n# the front, by device time\n");
    for (guint i = 0; i < front->len; i++) {
        const gs_plot_frontier_point *p = front->pdata[i];
        g_string_append_printf(dat, "%.6f %.6f\n", p->time, p->memory);
    }
    if (!front->len) g_string_append(dat, "NaN NaN\n");
    g_ptr_array_free(front, TRUE);
}

/* The key's line for point i: "3  rmm-pool: 1.0213 x bound, 1.18 x default" (or why it is not
 * drawn), fitted to fit characters. */
static char *key_line(const gs_plot_frontier_point *p, size_t i, long fit)
{
    char *what = p->drawn ? g_strdup_printf("%.4f x bound, %.2f x default%s", p->memory, p->time,
                                            p->pareto ? ", on the front" : "")
                          : g_strdup(p->why_not);
    long room = fit - (long)gs_plot_text_chars(what) - 6;
    char *name = gs_plot_fit_text(p->policy, MAX(room, 12));
    char *l = g_strdup_printf("%2zu  %s: %s", i + 1, name, what);
    char *fitted = gs_plot_fit_text(l, fit);
    g_free(l);
    g_free(name);
    g_free(what);
    return fitted;
}

gboolean gs_plot_frontier(gs_plotter *p, const char *trace, const gs_plot_frontier_point *pts,
                          size_t n, GError **err)
{
    if (n == 0) return TRUE;
    double x0 = INFINITY, x1 = 0, y0 = INFINITY, y1 = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pts[i].drawn) continue;
        x0 = MIN(x0, pts[i].time), x1 = MAX(x1, pts[i].time);
        y0 = MIN(y0, pts[i].memory), y1 = MAX(y1, pts[i].memory);
    }
    if (!isfinite(x0)) x0 = x1 = 1, y0 = y1 = 1; /* nothing to draw: an empty chart, keyed */
    double xlo, xhi, ylo, yhi;
    axis(x0, x1, &xlo, &xhi);
    axis(y0, y1, &ylo, &yhi);

    gs_plot_files f;
    gs_plot_files_begin(&f, p, trace, "frontier");
    GString *dat = f.dat, *g = f.g;
    const char *stem = f.stem, *dat_lit = f.dat_lit;
    frontier_dat(dat, trace, pts, n);

    const int W = 1280, key_px = 18;
    int h = MAX(620, 200 + key_px * (int)n); /* the numbered key, then the legend, under it */
    char *base = g_path_get_basename(trace);
    char *title = g_strdup_printf("%s: each setting's least memory against its device time", base);
    gs_gp_begin(g, stem, "memory against device time per setting (gpusim frontier)", W, h);
    g_string_append(g, "set title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    /* the key: a line per point, right of the chart (0.60 to 0.99 of the width, Sans 10 about 7
     * pixels a character), the legend under it: inside the chart it hid the points beneath */
    long fit = (long)((0.99 - 0.60) * W / 7.0);
    for (size_t i = 0; i < n; i++) {
        char *l = key_line(&pts[i], i, fit);
        g_string_append_printf(g, "set label %zu ", i + 1);
        gs_gp_str(g, l);
        g_string_append_printf(g, " at screen 0.60,screen %.4f left font 'Sans,10'%s\n",
                               1.0 - (70.0 + key_px * (double)i) / h,
                               pts[i].ours ? " tc rgb '#D55E00'" : "");
        g_free(l);
    }
    g_string_append_printf(
        g,
        "set lmargin at screen 0.08\nset rmargin at screen 0.57\nset tmargin at screen %.4f\n"
        "set bmargin at screen %.4f\nset border 3\nset xtics nomirror out\nset ytics nomirror out\n"
        "set grid lc rgb '#DDDDDD'\nset xrange [%.6g:%.6g]\nset yrange [%.6g:%.6g]\n"
        "set xlabel 'modelled device time with no cap, over PyTorch default''s'\n"
        "set ylabel 'minimum capacity, over the bound'\n"
        "set key at screen 0.60,screen %.4f left top Left reverse samplen 2\n",
        1.0 - 60.0 / h, 90.0 / h, xlo, xhi, ylo, yhi, 1.0 - (90.0 + key_px * (double)n) / h);
    /* only the series that have points: gnuplot warns of one with none */
    bool any[3] = {false, false, false}; /* behind the front, on it, ours */
    for (size_t i = 0; i < n; i++)
        if (pts[i].drawn) any[pts[i].ours ? 2 : pts[i].pareto ? 1 : 0] = true;
    static const char *const series[3] = {
        "using 2:($4 == 0 && $5 == 0 ? $3 : NaN) with points pt 7 ps 1.2 lc rgb '#8C8C8C' "
        "title 'behind the front'",
        "using 2:($4 == 1 && $5 == 0 ? $3 : NaN) with points pt 7 ps 1.4 lc rgb '#0072B2' "
        "title 'on the front'",
        "using 2:($5 == 1 ? $3 : NaN) with points pt 3 ps 2.4 lw 2 lc rgb '#D55E00' "
        "title 'gpusim''s own policy'",
    };
    bool has_front = false;
    for (size_t i = 0; i < n; i++) has_front |= pts[i].drawn && pts[i].pareto;
    GPtrArray *els = g_ptr_array_new_with_free_func(g_free);
    if (has_front)
        g_ptr_array_add(els, g_strdup("index 1 using 1:2 with steps lw 2 lc rgb '#0072B2' "
                                      "title 'the front'"));
    for (int k = 0; k < 3; k++)
        if (any[k]) g_ptr_array_add(els, g_strdup_printf("index 0 %s", series[k]));
    if (any[0] || any[1] || any[2])
        g_ptr_array_add(els, g_strdup("index 0 using 2:3:(sprintf('%d', $1)) with labels "
                                      "offset 0.9,0.6 font 'Sans,9' notitle"));
    if (!els->len) g_ptr_array_add(els, g_strdup("NaN notitle")); /* an empty chart, keyed */
    for (guint i = 0; i < els->len; i++) {
        const char *e = els->pdata[i];
        if (i == 0)
            g_string_append_printf(g, "plot %s%s", strncmp(e, "NaN", 3) ? dat_lit : "",
                                   strncmp(e, "NaN", 3) ? " " : "");
        else g_string_append(g, ", \\\n     '' ");
        g_string_append(g, e);
    }
    g_string_append(g, "\n");
    g_ptr_array_free(els, TRUE);
    gs_gp_end(g);

    gboolean ok = gs_plot_files_finish(&f, p, err);
    g_free(title);
    g_free(base);
    return ok;
}
