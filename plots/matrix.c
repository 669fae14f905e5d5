/* matrix.c - NAME-matrix (gpusim sweep --plot, or a sweep's saved CSV, when the sweep has a
 * capacity list): a row per policy setting, a column per capacity (smallest first), each cell
 * coloured by its outcome (completes, OOM, device error) with its allocation retries written in
 * it. Where a setting's row turns from OOM to ok is its minimum capacity on the grid.
 *
 * NAME-matrix.dat holds a row per cell: its column and row, capacity, outcome and retries.
 */
#include <stdlib.h>
#include <string.h>

#include "plot-int.h"

static const char *const ok_colour = "#A8DCC3", *const oom_colour = "#F4A582",
                         *const error_colour = "#C8C8C8";

typedef struct {
    uint64_t bytes;
    const char *label; /* the capacity as the sweep wrote it ("5.75GiB") */
} matrix_col;

static int col_cmp(const void *a, const void *b)
{
    const matrix_col *x = a, *y = b;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static guint index_of_str(GPtrArray *a, const char *s)
{
    guint i;
    for (i = 0; i < a->len && strcmp(a->pdata[i], s) != 0; i++) {}
    if (i == a->len) g_ptr_array_add(a, (gpointer)s);
    return i;
}

/* A cell's outcome as the matrix says it (one word: the .dat's column), and its colour. */
static const char *cell_word(const gs_plot_run *c)
{
    if (gs_plot_outcome_through(c->outcome)) return c->outcome; /* ok, survived */
    if (strcmp(c->outcome, "oom") == 0) return "OOM";
    return "error";
}

static const char *cell_colour(const gs_plot_run *c)
{
    const char *w = cell_word(c);
    return gs_plot_outcome_through(w) ? ok_colour : strcmp(w, "OOM") == 0 ? oom_colour : error_colour;
}

/* The left margin, as a share of the width, as wide as the longest setting needs (about 7.6
 * pixels a character at the tics' font), from 0.15 to 0.6: a fixed 0.3 cut a grid's long specs
 * at the picture's edge. *fit: the characters it holds (a longer setting is cut in its middle,
 * gs_plot_fit_text). */
static double label_margin(const GPtrArray *rows, long *fit)
{
    size_t longest = 8;
    for (guint i = 0; i < rows->len; i++)
        longest = MAX(longest, (size_t)gs_plot_text_chars(rows->pdata[i]));
    double lm = CLAMP((7.6 * (double)longest + 60.0) / 1280.0, 0.15, 0.6);
    *fit = (long)((lm * 1280.0 - 60.0) / 7.6);
    return lm;
}

/* The y axis: a row per setting, each named as it fits. */
static void row_tics(GString *g, const GPtrArray *rows, long fit)
{
    g_string_append(g, "set ytics nomirror scale 0 (");
    for (guint i = 0; i < rows->len; i++) {
        if (i) g_string_append(g, ", ");
        char *shown = gs_plot_fit_text(rows->pdata[i], fit);
        gs_gp_str(g, shown);
        g_free(shown);
        g_string_append_printf(g, " %u", i + 1);
    }
}

gboolean gs_plot_matrix(gs_plotter *p, const char *trace, const char *const *params,
                        size_t n_params, const char *const *values, const gs_plot_run *cells,
                        size_t n_cells, GError **err)
{
    size_t cap_k = n_params;
    for (size_t k = 0; k < n_params; k++)
        if (strcmp(params[k], "capacity") == 0) cap_k = k;
    if (cap_k == n_params || n_cells == 0) return TRUE;

    /* rows: the policy settings in the grid's order; columns: the capacities, smallest first */
    GPtrArray *rows = g_ptr_array_new();
    GArray *cols = g_array_new(FALSE, FALSE, sizeof(matrix_col));
    for (size_t c = 0; c < n_cells; c++) {
        index_of_str(rows, cells[c].policy);
        guint j;
        for (j = 0; j < cols->len && g_array_index(cols, matrix_col, j).bytes != cells[c].capacity; j++) {}
        if (j == cols->len) {
            matrix_col mc = {cells[c].capacity, values[c * n_params + cap_k]};
            g_array_append_val(cols, mc);
        }
    }
    qsort(cols->data, cols->len, sizeof(matrix_col), col_cmp);
    /* a row of 44 pixels a setting: beyond this the picture is taller than Cairo draws (32,767
     * pixels), and no reader scrolls through it; the sweep's plot and CSV have every cell */
    if (rows->len > GS_PLOT_MATRIX_MAX_ROWS) {
        char *stem0 = gs_plotter_stem(p, trace);
        gs_plotter_note(p, g_strdup_printf("%s-matrix not drawn: %u settings, more than %d rows "
                                           "(the sweep plot and its data have every cell)",
                                           stem0, rows->len, GS_PLOT_MATRIX_MAX_ROWS));
        g_free(stem0);
        g_ptr_array_free(rows, TRUE);
        g_array_free(cols, TRUE);
        return TRUE;
    }

    gs_plot_files f;
    gs_plot_files_begin(&f, p, trace, "matrix");
    GString *dat = f.dat, *g = f.g;
    const char *stem = f.stem, *dat_lit = f.dat_lit;
    g_string_append(dat, "# ");
    gs_dat_text(dat, trace);
    g_string_append(dat, ": the sweep's cells, a row per policy setting and a column per capacity\n"
                         "# column row capacity_bytes retries ooms colour outcome cell policy\n");
    for (size_t c = 0; c < n_cells; c++) {
        guint j;
        for (j = 0; g_array_index(cols, matrix_col, j).bytes != cells[c].capacity; j++) {}
        guint i = index_of_str(rows, cells[c].policy);
        g_string_append_printf(dat, "%u %u %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT
                                    " 0x%s ",
                               j + 1, i + 1, cells[c].capacity, cells[c].retries, cells[c].ooms,
                               cell_colour(&cells[c]) + 1);
        g_string_append_printf(dat, "%s %zu ", cell_word(&cells[c]), c);
        gs_dat_text(dat, cells[c].policy);
        g_string_append_c(dat, '\n');
    }

    /* pixels: the title and key, a row per setting, the capacity axis; a cell wide enough
     * for "12 retries" says so, a narrow one gives the number alone */
    int top_px = 96, row_px = 44, bottom_px = 64;
    int h = top_px + row_px * (int)rows->len + bottom_px;
    long fit;
    double lm = label_margin(rows, &fit), rm = 0.97;
    double cell_px = 1280.0 * (rm - lm) / (double)cols->len;
    bool wide = cell_px >= 96;
    char *base = g_path_get_basename(trace);
    char *title = g_strdup_printf("%s: which settings complete at which capacity (%s)", base,
                                  wide ? "allocation retries in each cell" :
                                         "the number in a cell: its allocation retries");
    gs_gp_begin(g, stem, "ok or OOM per setting and capacity", 1280, h);
    g_string_append(g, "set label 1 ");
    gs_gp_str(g, title);
    g_string_append_printf(g,
        " at screen 0.5,%.4f center font 'Sans,13'\nset lmargin at screen %.3f\nset rmargin at screen %.3f\n"
        "set tmargin at screen %.4f\nset bmargin at screen %.4f\n"
        "set key at screen 0.5,%.4f center center horizontal Left reverse samplen 2\n"
        "set style fill solid 1.0 border lc rgb '#FFFFFF'\nset border 0\nset xrange [0.5:%u.5]\n"
        "set yrange [%u.5:0.5]\nset xlabel 'capacity'\nset xtics nomirror scale 0 (",
        1.0 - 24.0 / h, lm, rm, 1.0 - (double)top_px / h, (double)bottom_px / h, 1.0 - 62.0 / h, cols->len,
        rows->len);
    for (guint j = 0; j < cols->len; j++) {
        if (j) g_string_append(g, ", ");
        gs_gp_str(g, g_array_index(cols, matrix_col, j).label);
        g_string_append_printf(g, " %u", j + 1);
    }
    g_string_append(g, ")\n");
    row_tics(g, rows, fit);
    g_string_append_printf(g,
        ")\nplot %s using 1:2:($1-0.5):($1+0.5):($2-0.5):($2+0.5):6 with boxxyerror lc rgb variable "
        "notitle, \\\n"
        "     '' using 1:2:7 "
        "with labels offset 0,0.55 font 'Sans,10' notitle, \\\n",
        dat_lit);
    if (wide)
        g_string_append(g, "     '' using 1:2:($4 == 1 ? '1 retry' : sprintf('%d retries', $4)) "
                           "with labels offset 0,-0.55 font 'Sans,10' notitle, \\\n");
    else
        g_string_append(g, "     '' using 1:2:(sprintf('%d', $4)) with labels offset 0,-0.55 "
                           "font 'Sans,10' notitle, \\\n");
    g_string_append_printf(g, "     NaN with boxes lc rgb '%s' title 'completes', \\\n"
                              "     NaN with boxes lc rgb '%s' title 'OOM'",
                           ok_colour, oom_colour);
    bool any_error = false;
    for (size_t c = 0; c < n_cells; c++)
        any_error |= strcmp(cell_word(&cells[c]), "error") == 0;
    if (any_error)
        g_string_append_printf(g, ", \\\n     NaN with boxes lc rgb '%s' title 'device error'", error_colour);
    g_string_append_c(g, '\n');
    gs_gp_end(g);

    gboolean ok = gs_plot_files_finish(&f, p, err);
    g_free(title);
    g_free(base);
    g_ptr_array_free(rows, TRUE);
    g_array_free(cols, TRUE);
    return ok;
}
