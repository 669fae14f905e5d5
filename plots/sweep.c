/* sweep.c - NAME-sweep (gpusim sweep --plot, or a sweep's saved CSV): peak reserved, waste,
 * retries and modelled device time against the first swept parameter, a line per combination
 * of the others, the cells that met an OOM crossed out.
 *
 * NAME-sweep.dat holds a block per line, a row per cell in the panels' units, then a block of
 * the OOM cells.
 */
#include <string.h>

#include "plot-int.h"

gboolean gs_plot_sweep(gs_plotter *p, const char *trace, const char *const *params,
                       size_t n_params, const char *const *values, const gs_plot_run *cells,
                       size_t n_cells, GError **err)
{
    static const gs_plot_metric metrics[] = {
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
                    double v = gs_plot_bar_value(&cells[c], metric_of[m]);
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
    gs_gp_begin(g, stem, "the sweep", 1280, 800);
    GString *cap_note = g_string_new(NULL);
    bool cap_swept = false;
    for (size_t k = 0; k < n_params; k++) cap_swept |= strcmp(params[k], "capacity") == 0;
    if (!cap_swept) {
        char *cw = gs_plot_cap_words(cells[0].capacity);
        g_string_append(cap_note, cw);
        g_free(cw);
    } else {
        g_string_append(cap_note, "capacity swept");
    }
    char *title = g_strdup_printf("%s: sweep of %s, %s", base, xname, cap_note->str);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    GString *xt = g_string_new("set xtics (");
    for (guint x = 0; x < xs->len; x++) {
        if (x) g_string_append(xt, ", ");
        gs_gp_str(xt, xs->pdata[x]);
        g_string_append_printf(xt, " %u", x);
    }
    g_string_append(xt, ") nomirror\n");
    double top = 0.85, ph = top / 2, pw = 0.5;
    for (int m = 0; m < 4; m++) {
        double x = pw * (double)(m % 2), y = top - ph * (double)(m / 2 + 1);
        g_string_append_printf(g, "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ", x, y, pw, ph);
        gs_gp_str(g, metrics[m].title);
        g_string_append_printf(g, "\n%sset border 3\nset ytics nomirror\nset grid\nunset key\n"
                                  "set xrange [-0.3:%.1f]\nset yrange [0:%.6g]\nset xlabel ",
                               xt->str, (double)xs->len - 0.7, maxv[m] > 0 ? maxv[m] * 1.2 : 1.0);
        gs_gp_str(g, xname);
        g_string_append(g, "\nset lmargin 10\n");
        for (guint sidx = 0; sidx < series->len; sidx++)
            g_string_append_printf(g, "%s'%s.dat' index %u using 1:%d with linespoints lw 2 pt 7 ps 1.2 lc rgb '%s'",
                                   sidx ? ", \\\n     " : "plot ", stem, sidx, m + 3,
                                   gs_plot_colour(sidx));
        if (oom->len)
            g_string_append_printf(g, ", \\\n     '%s.dat' index %u using 1:%d with points pt 2 ps 2.6 lw 3 lc rgb '#CC0000'",
                                   stem, series->len, m + 3);
        g_string_append_c(g, '\n');
    }
    const char **colours = g_new0(const char *, series->len + 1);
    for (guint i = 0; i < series->len; i++) colours[i] = gs_plot_colour(i);
    gs_gp_legend_strip(g, top, 0.08, (const char *const *)series->pdata, colours, series->len,
                    oom->len ? ", \\\n     NaN with points pt 2 ps 2 lw 3 lc rgb '#CC0000' title 'OOM'" : NULL);
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);
    char *datname = g_strdup_printf("%s.dat", stem);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
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
