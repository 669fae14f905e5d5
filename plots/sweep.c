/* sweep.c - NAME-sweep (gpusim sweep --plot, or a sweep's saved CSV): peak reserved, waste,
 * retries and modelled device time against one swept parameter, a line per combination of the
 * others, the cells that met an OOM crossed out.
 *
 * The x parameter is the first numeric one that every cell has (a capacity list, in a grid of
 * several --policy templates), else the first. A numeric x is drawn to scale (base-2 logarithmic
 * when its values span a factor of 8 or more, as max_split_size_mb's do), its values as the
 * tics; any other is drawn as categories (points, not joined). A cell without the x parameter (a template that does
 * not set it) is a dashed line across the panel: its setting does not vary with x. The legend
 * is a panel of its own right of the plots, a line per entry; the y axes fit the values (they
 * are not forced to start at 0).
 *
 * NAME-sweep.dat holds a block per line, a row per cell in the panels' units (a line without x:
 * its cell at both ends of the x axis), then a block of the OOM cells.
 */
#include <math.h>
#include <string.h>

#include "plot-int.h"

/* The panels, a metric each: its title, gs_plot_bar_value's number for it, and whether it
 * counts events (its axis never goes below 0 then). */
static const struct {
    const char *title;
    int metric;
    bool count;
} panels[] = {
    {"peak reserved (GiB)", 0, false}, {"waste: peak reserved - peak allocated (GiB)", 1, false},
    {"allocation retries (cache flushes)", 3, true}, {"modelled device time (ms)", 5, false},
};
#define N_PANELS G_N_ELEMENTS(panels)

/* Distinct tics labelled with the values as written, up to this many; more get gnuplot's. */
#define MAX_VALUE_TICS 12

typedef struct {
    const char *name;       /* x's parameter, or "policy" */
    size_t k;               /* its index in params (n_params: none, x is the policy) */
    bool numeric, logx;     /* x to scale (numbers; capacities in GiB), base-2 logarithmic */
    bool is_capacity;
    GPtrArray *xs;          /* char*: x's distinct values as written, in order of appearance */
    double *xv;             /* numeric: each one's number */
    double xlo, xhi;        /* the x axis */
    GPtrArray *lines;       /* char*: the lines' keys (a combination of the other values) */
    GPtrArray *labels;      /* char*: their legend entries */
    bool *flat;             /* per line: its cells lack x (drawn across) */
    guint *xi, *li;         /* per cell: its x (G_MAXUINT: none), its line */
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

/* A parameter's value as a number: a capacity in GiB ("5.75GiB"), anything else a plain
 * number ("128", "0.8"). FALSE when it is not one. */
static gboolean value_number(const char *param, const char *v, double *out)
{
    if (strcmp(param, "capacity") == 0) {
        uint64_t b;
        if (!gs_parse_size(v, &b, NULL)) return FALSE;
        *out = gib((int64_t)b);
        return TRUE;
    }
    char *end = NULL;
    double d = g_ascii_strtod(v, &end);
    if (!*v || !end || *end || !isfinite(d)) return FALSE;
    *out = d;
    return TRUE;
}

/* Whether every cell has parameter k, and whether each value it has is a number. */
static void param_kind(const char *const *params, size_t n_params, const char *const *values,
                       size_t n_cells, size_t k, bool *all, bool *numeric)
{
    *all = *numeric = true;
    for (size_t c = 0; c < n_cells; c++) {
        const char *v = values[c * n_params + k];
        double d;
        if (!*v) *all = false;
        else if (!value_number(params[k], v, &d)) *numeric = false;
    }
}

/* The first numeric parameter every cell has, else the first parameter. */
static size_t choose_x(const char *const *params, size_t n_params, const char *const *values,
                       size_t n_cells, bool *numeric)
{
    bool all, num;
    for (size_t k = 0; k < n_params; k++) {
        param_kind(params, n_params, values, n_cells, k, &all, &num);
        if (all && num) {
            *numeric = true;
            return k;
        }
    }
    param_kind(params, n_params, values, n_cells, 0, &all, &num);
    *numeric = num;
    return 0;
}

/* The column of the template that made a cell, where a sweep has several (sim/sweep.c). */
static bool is_template(const char *param)
{
    return strcmp(param, "template") == 0;
}

/* A line's legend entry: the other parameters' values ("capacity 5.75GiB"), the template only
 * when nothing else tells its lines apart. Against the capacity, a line is a cell's setting:
 * its spec, or where a grid of keys made it, its family and the keys' values ("pytorch:
 * max_split_size_mb 64, roundup_power2_divisions 4"), which a legend cut in its middle kept
 * apart no more (two specs that differ in a middle value). */
static char *line_label(const char *const *params, size_t n_params, const char *const *values,
                        size_t c, size_t xk, const gs_plot_run *cell, bool is_capacity)
{
    GString *l = g_string_new(NULL);
    if (is_capacity) {
        for (size_t k = 0; k < n_params; k++) {
            const char *v = values[c * n_params + k];
            if (k != xk && *v && !is_template(params[k]))
                g_string_append_printf(l, "%s%s %s", l->len ? ", " : "", params[k], v);
        }
        if (!l->len) {
            g_string_free(l, TRUE);
            return g_strdup(cell->policy);
        }
        g_string_prepend(l, ": ");
        g_string_prepend_len(l, cell->policy, (gssize)strcspn(cell->policy, ":@"));
        return g_string_free(l, FALSE);
    }
    const char *tmpl = NULL;
    for (size_t k = 0; k < n_params; k++) {
        const char *v = values[c * n_params + k];
        if (k == xk || !*v) continue;
        if (is_template(params[k])) {
            tmpl = v;
            continue;
        }
        g_string_append_printf(l, "%s%s %s", l->len ? ", " : "", params[k], v);
    }
    if (!l->len && tmpl) g_string_append(l, tmpl);
    return g_string_free(l, !l->len); /* NULL: nothing else varies (named below) */
}

/* policy with its "name:value" (a key of its config, name without a "#2" suffix) written as
 * "name:list": a line's cells as the template that made them. NULL when it has no such key. */
static char *templated(const char *policy, const char *name, const char *value, const char *list)
{
    char *key = g_strndup(name, strcspn(name, "#"));
    char *kv = g_strdup_printf("%s:%s", key, value);
    size_t n = strlen(kv);
    char *out = NULL;
    for (const char *at = strstr(policy, kv); at && !out; at = strstr(at + 1, kv)) {
        bool starts = at > policy && (at[-1] == ':' || at[-1] == ',');
        bool ends = at[n] == '\0' || at[n] == ',';
        if (starts && ends)
            out = g_strdup_printf("%.*s%s:%s%s", (int)(at - policy), policy, key, list, at + n);
    }
    g_free(kv);
    g_free(key);
    return out;
}

/* A line that nothing else tells apart: its template, when its cells' specs differ only in the
 * x value ("pytorch:max_split_size_mb:{64,256}"), else what varies along it. */
static char *sweep_label(const sweep_axes *ax, guint l, const char *const *values, size_t n_params,
                         const gs_plot_run *cells, size_t n_cells)
{
    GString *list = g_string_new("{");
    for (size_t c = 0; c < n_cells; c++)
        if (ax->li[c] == l && ax->xi[c] != G_MAXUINT)
            g_string_append_printf(list, "%s%s", list->len > 1 ? "," : "",
                                   (const char *)ax->xs->pdata[ax->xi[c]]);
    g_string_append_c(list, '}');
    char *label = NULL;
    bool same = n_params > 0;
    for (size_t c = 0; same && c < n_cells; c++) {
        if (ax->li[c] != l) continue;
        char *t = templated(cells[c].policy, ax->name, values[c * n_params + ax->k], list->str);
        same = t && (!label || strcmp(t, label) == 0);
        if (!label) label = t;
        else g_free(t);
    }
    if (!same) {
        g_free(label);
        label = g_strdup_printf("%s swept", ax->name);
    }
    g_string_free(list, TRUE);
    return label;
}

static void axes_init(sweep_axes *ax, const char *const *params, size_t n_params,
                      const char *const *values, const gs_plot_run *cells, size_t n_cells)
{
    memset(ax, 0, sizeof *ax);
    ax->k = n_params ? choose_x(params, n_params, values, n_cells, &ax->numeric) : 0;
    ax->name = n_params ? params[ax->k] : "policy";
    ax->is_capacity = n_params && strcmp(ax->name, "capacity") == 0;
    ax->xs = g_ptr_array_new_with_free_func(g_free);
    ax->lines = g_ptr_array_new_with_free_func(g_free);
    ax->labels = g_ptr_array_new_with_free_func(g_free);
    ax->xi = g_new0(guint, n_cells);
    ax->li = g_new0(guint, n_cells);
    for (size_t c = 0; c < n_cells; c++) {
        GString *key = g_string_new(NULL);
        for (size_t k = 0; k < n_params; k++) {
            if (k == ax->k) continue;
            g_string_append(key, values[c * n_params + k]);
            g_string_append_c(key, '\x1f'); /* the values apart, whatever they hold */
        }
        if (!n_params) g_string_append(key, "cells");
        const char *xv = n_params ? values[c * n_params + ax->k] : cells[c].policy;
        /* against the capacity a line per setting; without x, a line per cell's setting */
        if (ax->is_capacity || !*xv) g_string_append(key, cells[c].policy);
        ax->xi[c] = *xv ? intern(ax->xs, g_strdup(xv)) : G_MAXUINT;
        guint before = ax->lines->len;
        ax->li[c] = intern(ax->lines, g_string_free(key, FALSE));
        if (ax->lines->len > before)
            g_ptr_array_add(ax->labels, line_label(params, n_params, values, c, ax->k, &cells[c],
                                                   ax->is_capacity));
    }
    ax->flat = g_new0(bool, ax->lines->len);
    for (guint l = 0; l < ax->lines->len; l++) {
        ax->flat[l] = true;
        const char *policy = NULL;
        bool one_policy = true;
        for (size_t c = 0; c < n_cells; c++) {
            if (ax->li[c] != l) continue;
            if (ax->xi[c] != G_MAXUINT) ax->flat[l] = false;
            if (policy && strcmp(policy, cells[c].policy) != 0) one_policy = false;
            policy = cells[c].policy;
        }
        /* a line with nothing else to tell it apart: its policy, or its template */
        if (!ax->labels->pdata[l])
            ax->labels->pdata[l] = one_policy && policy ? g_strdup(policy)
                                   : sweep_label(ax, l, values, n_params, cells, n_cells);
    }
    /* the x axis: to scale for numbers (a margin either side), else a position per category */
    if (ax->numeric && ax->xs->len) {
        ax->xv = g_new0(double, ax->xs->len);
        double lo = INFINITY, hi = -INFINITY;
        for (guint i = 0; i < ax->xs->len; i++) {
            value_number(ax->name, ax->xs->pdata[i], &ax->xv[i]);
            lo = MIN(lo, ax->xv[i]);
            hi = MAX(hi, ax->xv[i]);
        }
        ax->logx = lo > 0 && hi / lo >= 8;
        if (ax->logx) {
            ax->xlo = lo / 1.2;
            ax->xhi = hi * 1.2;
        } else {
            double m = hi > lo ? (hi - lo) * 0.06 : MAX(fabs(hi) * 0.1, 0.5);
            ax->xlo = lo - m;
            ax->xhi = hi + m;
        }
    } else {
        ax->numeric = false;
        ax->xlo = -0.5;
        ax->xhi = ax->xs->len ? (double)ax->xs->len - 0.5 : 0.5;
    }
}

static void axes_clear(sweep_axes *ax)
{
    g_ptr_array_free(ax->xs, TRUE);
    g_ptr_array_free(ax->lines, TRUE);
    g_ptr_array_free(ax->labels, TRUE);
    g_free(ax->xv);
    g_free(ax->flat);
    g_free(ax->xi);
    g_free(ax->li);
}

/* A cell's x: its value to scale, or its category's position. */
static double cell_x(const sweep_axes *ax, guint xi)
{
    return ax->numeric ? ax->xv[xi] : (double)xi;
}

/* One .dat row: x cell metrics... oom; lo and hi get each panel's extremes. */
static void dat_row(GString *row, double x, size_t c, const gs_plot_run *cell, double lo[N_PANELS],
                    double hi[N_PANELS])
{
    g_string_printf(row, "%.6g %zu", x, c);
    for (size_t m = 0; m < N_PANELS; m++) {
        double v = gs_plot_bar_value(cell, panels[m].metric);
        lo[m] = MIN(lo[m], v);
        hi[m] = MAX(hi[m], v);
        g_string_append_printf(row, " %.6f", v);
    }
    g_string_append_printf(row, " %d\n", !gs_plot_outcome_through(cell->outcome));
}

/* NAME-sweep.dat: a block per line, its cells in x order so lines run left to right (a line
 * without x: its cell at both ends), then the cells that met an OOM as one more block. lo, hi:
 * each panel's extremes. Returns whether any cell met an OOM. */
static bool sweep_dat(GString *dat, const char *trace, const sweep_axes *ax,
                      const gs_plot_run *cells, size_t n_cells, double lo[N_PANELS],
                      double hi[N_PANELS])
{
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, ": the sweep, a block per line (named below); x is ");
    gs_dat_text(dat, ax->name);
    g_string_append(dat, ax->numeric ? (ax->is_capacity ? " in GiB" : "'s value")
                                     : "'s position on the axis");
    g_string_append(dat, "; a line without it is its cell at both ends of the axis\n"
                         "# x cell peak_reserved_GiB waste_GiB retries device_ms oom\n");
    GString *oom = g_string_new(NULL), *row = g_string_new(NULL);
    for (guint l = 0; l < ax->lines->len; l++) {
        g_string_append(dat, "# ");
        gs_dat_text(dat, ax->labels->pdata[l]);
        g_string_append(dat, ax->flat[l] ? " (without x: drawn across)\n" : "\n");
        if (ax->flat[l]) {
            for (size_t c = 0; c < n_cells; c++) {
                if (ax->li[c] != l) continue;
                for (int end = 0; end < 2; end++) {
                    dat_row(row, end ? ax->xhi : ax->xlo, c, &cells[c], lo, hi);
                    g_string_append(dat, row->str);
                    if (!gs_plot_outcome_through(cells[c].outcome)) g_string_append(oom, row->str);
                }
                break; /* one cell per line without x */
            }
        } else {
            /* in x order: by value, or by category */
            GArray *order = g_array_new(FALSE, FALSE, sizeof(size_t));
            for (size_t c = 0; c < n_cells; c++)
                if (ax->li[c] == l && ax->xi[c] != G_MAXUINT) g_array_append_val(order, c);
            for (guint a = 1; a < order->len; a++)
                for (guint b = a; b > 0; b--) {
                    size_t *o = (size_t *)order->data;
                    if (cell_x(ax, ax->xi[o[b - 1]]) <= cell_x(ax, ax->xi[o[b]])) break;
                    size_t t = o[b - 1];
                    o[b - 1] = o[b];
                    o[b] = t;
                }
            for (guint a = 0; a < order->len; a++) {
                size_t c = g_array_index(order, size_t, a);
                dat_row(row, cell_x(ax, ax->xi[c]), c, &cells[c], lo, hi);
                g_string_append(dat, row->str);
                if (!gs_plot_outcome_through(cells[c].outcome)) g_string_append(oom, row->str);
            }
            g_array_free(order, TRUE);
        }
        g_string_append(dat, "\n\n");
    }
    bool any_oom = oom->len > 0;
    if (any_oom) g_string_append_printf(dat, "# cells that met an OOM\n%s\n\n", oom->str);
    g_string_free(row, TRUE);
    g_string_free(oom, TRUE);
    return any_oom;
}

/* A line's style: the palette's colours, then again with other point types. */
static const int point_types[] = {7, 5, 9, 11, 13, 15};

static void line_style(GString *g, const sweep_axes *ax, guint l)
{
    if (ax->flat[l])
        g_string_append_printf(g, "with lines dt 2 lw 2 lc rgb '%s'", gs_plot_colour(l));
    else /* categories are not joined: nothing lies between them */
        g_string_append_printf(g, "with %s lw 2 pt %d ps %s lc rgb '%s'",
                               ax->numeric ? "linespoints" : "points",
                               point_types[(l / 7) % G_N_ELEMENTS(point_types)],
                               ax->numeric ? "1.2" : "1.6", gs_plot_colour(l));
}

/* Tick labels, as the plot tests measure them: 8 pixels a character at the terminal's Sans 11,
 * and 8 pixels between two labels. */
#define TIC_CHAR_PX 8.0
#define TIC_GAP_PX 8.0

/* Where value x falls across the panel's plot area, 0 to 1. */
static double x_frac(const sweep_axes *ax, double x)
{
    if (ax->logx) return (log2(x) - log2(ax->xlo)) / (log2(ax->xhi) - log2(ax->xlo));
    return (x - ax->xlo) / (ax->xhi - ax->xlo);
}

/* The x axis of a panel whose plot area is plot_px wide: to scale with the values as tics, or
 * the categories. A value whose label would run into the last one labelled keeps its tick mark
 * and loses its label (close values on a logarithmic axis overprinted each other). */
static void x_axis(GString *g, const sweep_axes *ax, double plot_px)
{
    g_string_append(g, ax->logx ? "set logscale x 2\n" : "unset logscale x\n");
    if (ax->xs->len == 0) {
        g_string_append(g, "unset xtics\n"); /* no cell has x: every line is across */
    } else if (ax->numeric && ax->xs->len > MAX_VALUE_TICS) {
        g_string_append(g, "set xtics autofreq nomirror\n");
    } else {
        g_string_append(g, "set xtics (");
        double right = -G_MAXDOUBLE; /* the right end of the last label, in pixels */
        for (guint x = 0; x < ax->xs->len; x++) {
            if (x) g_string_append(g, ", ");
            const char *label = ax->xs->pdata[x];
            double half = TIC_CHAR_PX * (double)gs_plot_text_chars(label) / 2;
            double at = plot_px * x_frac(ax, cell_x(ax, x));
            bool room = ax->xhi <= ax->xlo || at - half >= right + TIC_GAP_PX;
            if (room) right = at + half;
            gs_gp_str(g, room ? label : "");
            g_string_append_printf(g, " %.6g", cell_x(ax, x));
        }
        g_string_append(g, ") nomirror\n");
    }
    g_string_append_printf(g, "set xrange [%.6g:%.6g]\nset xlabel ", ax->xlo, ax->xhi);
    char *xl = ax->is_capacity ? g_strdup("capacity (GiB)") : g_strdup(ax->name);
    gs_gp_str(g, xl);
    g_free(xl);
    g_string_append_c(g, '\n');
}

/* A panel's y range: its values with a margin. */
static void y_range(GString *g, size_t m, double lo, double hi)
{
    if (!(lo <= hi)) lo = hi = 0; /* no values */
    double pad = hi > lo ? (hi - lo) * 0.12 : MAX(fabs(hi) * 0.1, panels[m].count ? 1.0 : 0.01);
    double a = lo - pad, b = hi + pad;
    /* never below 0 for what cannot be, but a line at 0 a little off the axis, to be seen */
    if (lo >= 0 && a < 0) a = lo > 0 ? 0 : -0.04 * (b - lo);
    g_string_append_printf(g, "set yrange [%.6g:%.6g]\n", a, b);
    g_string_append(g, panels[m].count && hi - lo < 5 ? "set ytics 1 nomirror\n"
                                                      : "set ytics autofreq nomirror\n");
}

/* NAME-sweep.gp: a 2 x 2 grid of panels, and the legend as a panel right of them. The title
 * names the capacity unless it is swept (then the first cell's would be a lie). */
static void sweep_script(GString *g, const char *stem, const char *trace, const char *const *params,
                         size_t n_params, const gs_plot_run *cells, const sweep_axes *ax,
                         const double lo[N_PANELS], const double hi[N_PANELS], bool any_oom)
{
    bool cap_swept = false, any_flat = false;
    for (size_t k = 0; k < n_params; k++) cap_swept |= strcmp(params[k], "capacity") == 0;
    for (guint l = 0; l < ax->lines->len; l++) any_flat |= ax->flat[l];
    char *cap_words = gs_plot_cap_words(cells[0].capacity);
    char *cap_note = !cap_swept ? g_strdup_printf(", %s", cap_words)
                     : ax->is_capacity ? g_strdup("") : g_strdup(", capacity swept");
    g_free(cap_words);
    char *base = g_path_get_basename(trace);
    char *title = g_strdup_printf("%s: the sweep against %s%s", base, ax->name, cap_note);
    /* the legend's entries set the height: at least 800 pixels */
    size_t entries = ax->lines->len + (any_oom ? 1 : 0);
    int h = MAX(800, 110 + 19 * (int)entries);
    /* the legend as wide as its longest entry needs (about 7.4 pixels a character at Sans 10,
     * and the sample), from a sixth to 0.45 of the width (a grid of two keys' values, 60
     * characters, whole); the panels share the rest */
    size_t longest = 10;
    for (guint l = 0; l < ax->lines->len; l++)
        longest = MAX(longest, (size_t)gs_plot_text_chars(ax->labels->pdata[l]));
    double kw = CLAMP((7.4 * (double)longest + 80.0) / 1280.0, 1.0 / 6, 0.45);
    double top = 1.0 - 60.0 / h, ph = top / 2, kx = 1.0 - kw, pw = kx / 2;
    gs_gp_begin(g, stem, "the sweep", 1280, h);
    g_string_append(g, "set multiplot title ");
    gs_gp_str(g, title);
    g_string_append(g, " font 'Sans,13'\n");
    char *datname = g_strdup_printf("%s.dat", stem), *dat_lit = gs_gp_lit(datname);
    for (size_t m = 0; m < N_PANELS; m++) {
        double x = pw * (double)(m % 2), y = top - ph * (double)(m / 2 + 1);
        g_string_append_printf(g, "set origin %.4f,%.4f\nset size %.4f,%.4f\nset title ", x, y, pw, ph);
        gs_gp_str(g, panels[m].title);
        g_string_append(g, "\nset border 3\nset grid\nunset key\nset lmargin 9\nset rmargin 2\n");
        /* the plot area: the panel less its margins (9 and 2 characters) */
        x_axis(g, ax, pw * 1280 - 11 * TIC_CHAR_PX);
        y_range(g, m, lo[m], hi[m]);
        for (guint l = 0; l < ax->lines->len; l++) {
            g_string_append_printf(g, "%s%s index %u using 1:%zu ", l ? ", \\\n     " : "plot ",
                                   dat_lit, l, m + 3);
            line_style(g, ax, l);
        }
        if (any_oom)
            g_string_append_printf(g, ", \\\n     %s index %u using 1:%zu with points pt 2 ps 2.6 lw 3 lc rgb '#CC0000'",
                                   dat_lit, ax->lines->len, m + 3);
        g_string_append_c(g, '\n');
    }
    /* the legend: a panel of its own, an entry a line */
    g_string_append_printf(g,
        "set origin %.4f,0\nset size %.4f,%.4f\nunset title\nunset border\nunset tics\nunset xlabel\n"
        "unset ylabel\nunset grid\nunset logscale x\nset xrange [0:1]\nset yrange [0:1]\n"
        "set key at screen %.4f,%.4f left top vertical Left reverse samplen 2.5 spacing 1.05 "
        "font 'Sans,10' title ",
        kx, 1 - kx, top, kx + 0.01, top - 0.01);
    char *kt = any_flat ? g_strdup_printf("dashed: settings without\n%s", ax->name) : g_strdup("");
    gs_gp_str(g, kt);
    g_free(kt);
    g_string_append(g, " left\n");
    /* an entry longer than the legend's panel holds is cut in its middle (its start names the
     * setting, its end the values): it ran off the picture */
    long fit = MAX(12, (long)((kw * 1280.0 - 80.0) / 7.4));
    for (guint l = 0; l < ax->lines->len; l++) {
        g_string_append(g, l ? ", \\\n     NaN " : "plot NaN ");
        line_style(g, ax, l);
        g_string_append(g, " title ");
        char *entry = gs_plot_fit_text(ax->labels->pdata[l], fit);
        gs_gp_str(g, entry);
        g_free(entry);
    }
    if (any_oom)
        g_string_append(g, ", \\\n     NaN with points pt 2 ps 2 lw 3 lc rgb '#CC0000' title 'met an OOM'");
    g_string_append(g, "\nunset multiplot\n");
    gs_gp_end(g);
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
    char *stem0 = gs_plotter_stem(p, trace);
    char *stem = g_strdup_printf("%s-sweep", stem0), *datname = g_strdup_printf("%s.dat", stem);
    GString *dat = g_string_new(NULL), *g = g_string_new(NULL);
    double lo[N_PANELS], hi[N_PANELS];
    for (size_t m = 0; m < N_PANELS; m++) {
        lo[m] = INFINITY;
        hi[m] = -INFINITY;
    }
    bool any_oom = sweep_dat(dat, trace, &ax, cells, n_cells, lo, hi);
    sweep_script(g, stem, trace, params, n_params, cells, &ax, lo, hi, any_oom);
    gboolean ok = gs_plotter_write(p, datname, dat, err) && gs_plotter_add_script(p, stem, g, err);
    g_string_free(dat, TRUE);
    g_string_free(g, TRUE);
    g_free(datname);
    g_free(stem);
    g_free(stem0);
    axes_clear(&ax);
    return ok;
}
