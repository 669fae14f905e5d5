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

gboolean gs_sweep_csv_merge(FILE *out, const char *const *paths, const char *const *texts,
                            const size_t *lens, size_t n, size_t expect_cells, GError **err)
{
    GArray *rows = g_array_new(FALSE, TRUE, sizeof(merge_row)); /* by cell */
    const char *header = NULL;
    size_t header_len = 0;
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
        if (!header) {
            header = s;
            header_len = end;
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
    return ok;
}
