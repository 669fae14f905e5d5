/* sweep_merge.c - gpusim sweep --merge: the CSVs of a sweep's shards (--shard K/N) put back into
 * the single-machine CSV. Every shard writes the same header and whole rows whose first field is
 * the cell's place in the grid, so merging is checking and reordering records, never re-reading
 * numbers: each row is copied byte for byte, and the merged file equals what one machine writes
 * (but the host-time column, replay_events_per_s).
 */
#include <stdarg.h>
#include <string.h>

#include "report.h"

typedef struct {
    const char *text; /* the record, its line end included */
    size_t len;
    size_t file, line; /* where it came from, for the message about a second copy */
} merge_row;

/* The end of the RFC 4180 record starting at s[i] (after its '\n'), or len when the text ends
 * first. A line break inside quotes (a trace name may hold one) is part of the record;
 * a doubled quote toggles twice, so it needs no case of its own. *lines counts the breaks. */
static size_t record_end(const char *s, size_t len, size_t i, size_t *lines)
{
    bool quoted = false;
    for (; i < len; i++) {
        if (s[i] == '"') quoted = !quoted;
        else if (s[i] == '\n') {
            ++*lines;
            if (!quoted) return i + 1;
        }
    }
    return len;
}

static gboolean merge_bad(GError **err, const char *path, size_t line, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);
static gboolean merge_bad(GError **err, const char *path, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = gs_located_vprintf(path, line, fmt, ap);
    va_end(ap);
    g_set_error_literal(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT, m);
    g_free(m);
    return FALSE;
}

/* The fields of the one record s[0, len) of file path (at line): NULL after merge_bad. */
static char **record_fields(const char *path, size_t line, const char *s, size_t len,
                            GError **err)
{
    GArray *lines = g_array_new(FALSE, FALSE, sizeof(size_t));
    GPtrArray *rows = gs_csv_parse(path, s, len, lines, NULL);
    char **f = rows && rows->len == 1 ? g_strdupv(rows->pdata[0]) : NULL;
    if (rows) g_ptr_array_free(rows, TRUE);
    g_array_free(lines, TRUE);
    if (!f) merge_bad(err, path, line, "not one CSV record");
    return f;
}

/* The shards' header: its fields, and where the trace and outcome are (checked once, at the
 * first row, with the grid's parameters when given). */
typedef struct {
    char **h;
    int tc, oc, cc; /* trace, outcome, capacity_bytes */
    bool checked;
} merge_header;

static gboolean header_fits(merge_header *hd, const char *path, const gs_sweep *grid,
                            GError **err)
{
    char **h = hd->h;
    hd->tc = gs_csv_column(h, "trace");
    hd->oc = gs_csv_column(h, "outcome");
    hd->cc = gs_csv_column(h, "capacity_bytes");
    if (hd->tc < 0 || hd->oc < 0 || hd->cc < 0)
        return merge_bad(err, path, 1,
                         "no column 'trace', 'outcome' and 'capacity_bytes': not a "
                         "sweep's CSV");
    if (grid) { /* the grid given: its parameters are the columns after "cell" */
        guint np = grid->params->len;
        if ((guint)hd->tc != np + 1)
            return merge_bad(err, path, 1, "%d parameter columns, where the grid given has %u",
                             hd->tc - 1, np);
        for (guint k = 0; k < np; k++)
            if (strcmp(h[1 + k], grid->params->pdata[k]) != 0)
                return merge_bad(err, path, 1, "parameter column '%.60s', where the grid given "
                                 "has '%.60s'", h[1 + k], (const char *)grid->params->pdata[k]);
    }
    hd->checked = true;
    return TRUE;
}

/* Record r (fields f, at path:line) against the header, the first row's trace's file name
 * (*trace, taken from it when NULL) and, when given, the grid's cell of its number: the rows
 * of shards of one sweep. */
static gboolean row_fits(char **f, merge_header *hd, const char *path, size_t line, size_t cell,
                         const gs_sweep *grid, char **trace, bool *any_oom, GError **err)
{
    char **h = hd->h;
    guint n = g_strv_length(f), width = g_strv_length(h);
    if (n != width)
        return merge_bad(err, path, line, "%u fields, where the header has %u", n, width);
    if (!hd->checked && !header_fits(hd, path, grid, err)) return FALSE;
    /* by its file name: each machine of a job array may have read its own copy */
    char *base = g_path_get_basename(f[hd->tc]);
    gboolean other = *trace && strcmp(*trace, base) != 0;
    if (other)
        merge_bad(err, path, line, "trace '%.60s', where the first row's is '%.60s' (the shards "
                  "of one sweep replay one trace)", base, *trace);
    if (!*trace) *trace = base;
    else g_free(base);
    if (other) return FALSE;
    if (strcmp(f[hd->oc], "oom") == 0) *any_oom = true;
    if (!grid) return TRUE;
    guint np = grid->params->len;
    if (cell >= grid->cells->len) return TRUE; /* (said below: the grid is smaller) */
    const gs_sweep_cell *c = &g_array_index(grid->cells, gs_sweep_cell, cell);
    for (guint k = 0; k < np; k++)
        if (strcmp(f[1 + k], c->values[k]) != 0)
            return merge_bad(err, path, line, "cell %zu has %s '%.60s', where the grid given has "
                             "'%.60s' (another sweep's shard?)", cell, h[1 + k], f[1 + k],
                             c->values[k]);
    /* the capacity too: a shard run without the -c the others had merged as one sweep */
    char cap[24];
    g_snprintf(cap, sizeof cap, "%" G_GUINT64_FORMAT, c->capacity);
    if (strcmp(f[hd->cc], cap) != 0)
        return merge_bad(err, path, line,
                         "cell %zu has capacity_bytes '%.60s', where the grid "
                         "given has %s (another sweep's shard, or one run with another -c?)",
                         cell, f[hd->cc], cap);
    return TRUE;
}

gboolean gs_sweep_csv_merge(FILE *out, const char *const *paths, const char *const *texts,
                            const size_t *lens, size_t n, const gs_sweep *grid, bool *any_oom,
                            GError **err)
{
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(merge_row)); /* by cell */
    const char *header = NULL;
    size_t header_len = 0, expect_cells = grid ? grid->cells->len : 0;
    merge_header hd = {0};
    char *trace = NULL;
    *any_oom = false;
    gboolean ok = TRUE;
    for (size_t f = 0; ok && f < n; f++) {
        const char *s = texts[f];
        size_t len = lens[f], line = 1, breaks = 0;
        if (memchr(s, '\0', len)) {
            ok = merge_bad(err, paths[f], 1, "a NUL byte: not a sweep's CSV");
            break;
        }
        size_t end = record_end(s, len, 0, &breaks);
        if (len < 5 || memcmp(s, "cell,", 5) != 0) {
            ok = merge_bad(err, paths[f], 1, "not a sweep's CSV (its first column is not 'cell')");
            break;
        }
        if (end == len && s[len - 1] != '\n') {
            ok = merge_bad(err, paths[f], 1, "the header has no line end (a cut file?)");
            break;
        }
        if (end >= 2 && s[end - 2] == '\r') {
            ok = merge_bad(err, paths[f], 1, "CRLF line ends (rewritten on another system?): "
                           "gpusim writes LF; convert it back, with dos2unix say");
            break;
        }
        if (!header) {
            header = s;
            header_len = end;
            if (!(hd.h = record_fields(paths[f], 1, s, end, err))) ok = FALSE;
        } else if (end != header_len || memcmp(s, header, end) != 0) {
            ok = merge_bad(err, paths[f], 1,
                           "its columns differ from %s's (the shards of one sweep, of one trace, "
                           "have the same header)", paths[0]);
            break;
        }
        line += breaks;
        for (size_t i = end; ok && i < len; i = end, line += breaks) {
            breaks = 0;
            end = record_end(s, len, i, &breaks);
            if (s[end - 1] != '\n') {
                ok = merge_bad(err, paths[f], line, "the last row has no line end (a cut file?)");
                break;
            }
            if (end - i >= 2 && s[end - 2] == '\r') { /* every row's, not the header's alone */
                ok = merge_bad(err, paths[f], line, "a CRLF line end (rewritten on another "
                               "system?): gpusim writes LF; convert it back, with dos2unix say");
                break;
            }
            size_t cell = 0, k = i;
            while (k < end && s[k] >= '0' && s[k] <= '9' && cell <= GS_SWEEP_MAX_CELLS)
                cell = cell * 10 + (size_t)(s[k++] - '0');
            if (k == i || s[k] != ',' || cell >= GS_SWEEP_MAX_CELLS) {
                char *field = g_strndup(s + i, MIN((size_t)(end - i - 1), (size_t)40));
                ok = merge_bad(err, paths[f], line, "'%s' does not start with a cell number "
                               "below %u", field, GS_SWEEP_MAX_CELLS);
                g_free(field);
                break;
            }
            char **fields = record_fields(paths[f], line, s + i, end - i, err);
            ok = fields && row_fits(fields, &hd, paths[f], line, cell, grid, &trace, any_oom, err);
            g_strfreev(fields);
            if (!ok) break;
            if (cell >= rows->len) g_array_set_size(rows, cell + 1);
            merge_row *r = &g_array_index(rows, merge_row, cell);
            if (r->text) {
                ok = merge_bad(err, paths[f], line, "cell %zu again (it is also at %s:%zu)", cell,
                               paths[r->file], r->line);
                break;
            }
            *r = (merge_row){.text = s + i, .len = end - i, .file = f, .line = line};
        }
    }
    if (ok && expect_cells && rows->len > expect_cells)
        ok = merge_bad(err, paths[g_array_index(rows, merge_row, rows->len - 1).file],
                       g_array_index(rows, merge_row, rows->len - 1).line,
                       "cell %zu: the grid given has %zu cells", (size_t)rows->len - 1,
                       expect_cells);
    size_t want = MAX(rows->len, expect_cells), missing = 0, first_missing = 0;
    for (size_t c = 0; ok && c < want; c++)
        if (c >= rows->len || !g_array_index(rows, merge_row, c).text)
            if (missing++ == 0) first_missing = c;
    if (ok && missing) {
        g_set_error(err, GS_SWEEP_ERROR, GS_SWEEP_ERROR_INPUT,
                    "sweep --merge: %zu of %zu cells are in none of the files, the first cell %zu "
                    "(a shard missing or failed?)", missing, want, first_missing);
        ok = FALSE;
    }
    if (ok) {
        fwrite(header, 1, header_len, out);
        for (guint c = 0; c < rows->len; c++) {
            const merge_row *r = &g_array_index(rows, merge_row, c);
            fwrite(r->text, 1, r->len, out);
        }
    }
    g_array_free(rows, TRUE);
    g_strfreev(hd.h);
    g_free(trace);
    return ok;
}
