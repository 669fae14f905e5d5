/* sweep.c - NAME-sweep (gpusim sweep --plot, or a sweep's saved CSV): peak reserved, waste,
 * retries and modelled device time against the first swept parameter, a line per combination
 * of the others, the cells that met an OOM crossed out.
 *
 * NAME-sweep.dat holds a block per line, a row per cell in the panels' units, then a block of
 * the OOM cells.
 */
#include <string.h>

#include "plot-int.h"

/* The panels, a metric each: its title and gs_plot_bar_value's number for it. */
static const struct {
    const char *title;
    int metric;
} panels[] = {
    {"peak reserved (GiB)", 0}, {"waste: peak reserved - peak allocated (GiB)", 1},
    {"allocation retries (cache flushes)", 3}, {"modelled device time (ms)", 5},
};
#define N_PANELS G_N_ELEMENTS(panels)

/* x: the first parameter's values, in order of appearance; a line per combination of the
 * others. Without parameters every cell is its own x. */
typedef struct {
    const char *name;       /* x's: the first parameter, or "policy" */
    GPtrArray *xs, *lines;  /* char*: the x values; the lines' names */
    guint *xi, *li;         /* per cell: its x, its line */
} sweep_axes;

/* s's index in a; s is added (taken) when new, freed when not. */
static guint intern(GPtrArray *a, char *s)
{
    guint i;
    for (i = 0; i < a->len && strcmp(a->pdata[i], s) != 0; i++) {}
    if (i == a->len) g_ptr_array_add(a, s);
    else g_free(s);
    return i;
}

static void axes_init(sweep_axes *ax, const char *const *params, size_t n_params,
                      const char *const *values, const gs_plot_run *cells, size_t n_cells)
{
    ax->name = n_params ? params[0] : "policy";
    ax->xs = g_ptr_array_new_with_free_func(g_free);
    ax->lines = g_ptr_array_new_with_free_func(g_free);
    ax->xi = g_new0(guint, n_cells);
    ax->li = g_new0(guint, n_cells);
    for (size_t c = 0; c < n_cells; c++) {
        GString *line = g_string_new(NULL);
        for (size_t k = 1; k < n_params; k++) {
            const char *v = values[c * n_params + k];
            if (!*v) continue;
            g_string_append_printf(line, "%s%s %s", line->len ? ", " : "", params[k], v);
        }
        if (!line->len) g_string_append(line, n_params ? cells[c].policy : "cells");
        ax->xi[c] = intern(ax->xs, g_strdup(n_params ? values[c * n_params] : cells[c].policy));
        ax->li[c] = intern(ax->lines, g_string_free(line, FALSE));
    }
}

static void axes_clear(sweep_axes *ax)
{
    g_ptr_array_free(ax->xs, TRUE);
    g_ptr_array_free(ax->lines, TRUE);
    g_free(ax->xi);
    g_free(ax->li);
}

/* NAME-sweep.dat: a block per line, its cells in x order so lines run left to right, then the
 * cells that met an OOM as one more block. maxv: each panel's largest value. Returns whether
 * any cell met an OOM. */
static bool sweep_dat(GString *dat, const char *trace, const sweep_axes *ax,
                      const gs_plot_run *cells, size_t n_cells, double maxv[N_PANELS])
{
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, ": the sweep, a block per line (named below); x is the position of ");
    gs_dat_text(dat, ax->name);
    g_string_append(dat, "'s value on the axis\n"
                         "# x cell peak_reserved_GiB waste_GiB retries device_ms oom\n");
    GString *oom = g_string_new(NULL), *row = g_string_new(NULL);
    for (guint l = 0; l < ax->lines->len; l++) {
        g_string_append(dat, "# ");
        gs_dat_text(dat, ax->lines->pdata[l]);
        g_string_append_c(dat, '\n');
        for (guint x = 0; x < ax->xs->len; x++)
            for (size_t c = 0; c < n_cells; c++) {
                if (ax->li[c] != l || ax->xi[c] != x) continue;
                g_string_printf(row, "%u %zu", x, c);
                for (size_t m = 0; m < N_PANELS; m++) {
                    double v = gs_plot_bar_value(&cells[c], panels[m].metric);
                    maxv[m] = MAX(maxv[m], v);
                    g_string_append_printf(row, " %.6f", v);
                }
                bool is_oom = strcmp(cells[c].outcome, "ok") != 0;
                g_string_append_printf(row, " %d\n", is_oom);
                g_string_append(dat, row->str);
                if (is_oom) g_string_append(oom, row->str);
            }
        g_string_append(dat, "\n\n");
    }
    bool any_oom = oom->len > 0;
    if (any_oom) g_string_append_printf(dat, "# cells that met an OOM\n%s\n\n", oom->str);
    g_string_free(row, TRUE);
    g_string_free(oom, TRUE);
    return any_oom;
}

/* NAME-sweep.gp: a 2 x 2 grid of panels below a legend strip of the lines. The title names the
 * capacity unless it is swept (then the first cell's would be a lie). */
static void sweep_script(GString *g, const char *stem, const char *trace, const char *const *params,
                         size_t n_params, const gs_plot_run *cells, const sweep_axes *ax,
                         const double maxv[N_PANELS], bool any_oom)
{
    bool cap_swept = false;
    for (size_t k = 0; k < n_params; k++) cap_swept |= strcmp(params[k], "capacity") == 0;
    char *cap_note = cap_swept ? g_strdup("capacity swept") : gs_plot_cap_words(cells[0].capacity);
    char *base = g_path_get_basename(trace);
    char *title = g_strdup_printf("%s: sweep of %s, %s", base, ax->name, cap_note);
    gs_gp_begin(g, stem, "the sweep", 1280, 800);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    GString *xt = g_string_new("set xtics (");
    for (guint x = 0; x < ax->xs->len; x++) {
        if (x) g_string_append(xt, ", ");
        gs_gp_str(xt, ax->xs->pdata[x]);
        g_string_append_printf(xt, " %u", x);
    }
    g_string_append(xt, ") nomirror\n");
    double top = 0.85, ph = top / 2, pw = 0.5;
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    for (size_t m = 0; m < N_PANELS; m++) {
        double x = pw * (double)(m % 2), y = top - ph * (double)(m / 2 + 1);
        g_string_append_printf(g, "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ", x, y, pw, ph);
        gs_gp_str(g, panels[m].title);
        g_string_append_printf(g, "\n%sset border 3\nset ytics nomirror\nset grid\nunset key\n"
                                  "set xrange [-0.3:%.1f]\nset yrange [0:%.6g]\nset xlabel ",
                               xt->str, (double)ax->xs->len - 0.7, maxv[m] > 0 ? maxv[m] * 1.2 : 1.0);
        gs_gp_str(g, ax->name);
        g_string_append(g, "\nset lmargin 10\n");
        for (guint l = 0; l < ax->lines->len; l++)
            g_string_append_printf(g, "%s%s index %u using 1:%zu with linespoints lw 2 pt 7 ps 1.2 lc rgb '%s'",
                                   l ? ", \\\n     " : "plot ", dat_lit, l, m + 3, gs_plot_colour(l));
        if (any_oom)
            g_string_append_printf(g, ", \\\n     %s index %u using 1:%zu with points pt 2 ps 2.6 lw 3 lc rgb '#CC0000'",
                                   dat_lit, ax->lines->len, m + 3);
        g_string_append_c(g, '\n');
    }
    gs_gp_legend_strip(g, top, 0.08, (const char *const *)ax->lines->pdata, ax->lines->len,
                       any_oom ? ", \\\n     NaN with points pt 2 ps 2 lw 3 lc rgb '#CC0000' title 'OOM'" : NULL);
    g_string_append(g, "unset multiplot\n");
    gs_gp_end(g);
    g_string_free(xt, TRUE);
    g_free(dat_lit);
    g_free(datname);
    g_free(title);
    g_free(base);
    g_free(cap_note);
}

gboolean gs_plot_sweep(gs_plotter *p, const char *trace, const char *const *params,
                       size_t n_params, const char *const *values, const gs_plot_run *cells,
                       size_t n_cells, GError **err)
{
    if (n_cells == 0) return TRUE;
    sweep_axes ax;
    axes_init(&ax, params, n_params, values, cells, n_cells);
    char *stem0 = gs_plot_stem(trace);
    char *stem = g_strdup_printf("%s-sweep", stem0), *datname = g_strdup_printf("%s.dat", stem);
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    double maxv[N_PANELS] = {0};
    bool any_oom = sweep_dat(dat, trace, &ax, cells, n_cells, maxv);
    sweep_script(g, stem, trace, params, n_params, cells, &ax, maxv, any_oom);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    g_free(datname);
    g_free(stem);
    g_free(stem0);
    axes_clear(&ax);
    return ok;
}
