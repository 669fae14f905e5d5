/* csv.c - RFC 4180 CSV fields, for the reports and the plots' data, and records read back. */
#include <string.h>

#include "util.h"

/* RFC 4180: a field with a comma, quote or newline is quoted, its quotes doubled (policy specs
 * such as max_split_size_mb:128,garbage_collection_threshold:0.6 contain commas). */
char *gs_csv_quote(const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) return g_strdup(s);
    GString *q = g_string_new("\"");
    for (; *s; s++) {
        if (*s == '"') g_string_append_c(q, '"');
        g_string_append_c(q, *s);
    }
    g_string_append_c(q, '"');
    return g_string_free(q, FALSE);
}

void gs_csv_field(GString *out, const char *s)
{
    char *q = gs_csv_quote(s);
    g_string_append(out, q);
    g_free(q);
}

/* (util.h) A quoted field that never ends is an error: it would swallow the rest of the file. */
GPtrArray *gs_csv_parse(const char *path, const char *s, size_t len, GArray *lines, GError **err)
{
    GPtrArray *rows = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    GPtrArray *row = g_ptr_array_new_with_free_func(g_free);
    GString *f = g_string_new(NULL);
    const char *end = s + len;
    bool quoted = false, field_started = false;
    size_t line = 1, row_line = 1, quote_line = 0;
    for (const char *c = s; c <= end; c++) {
        char ch = c < end ? *c : '\n';
        if (quoted) {
            if (c == end) break; /* the file ends inside quotes */
            if (ch == '"' && c + 1 < end && c[1] == '"') {
                g_string_append_c(f, '"');
                c++;
            } else if (ch == '"') {
                quoted = false;
            } else {
                if (ch == '\n') line++;
                g_string_append_c(f, ch);
            }
            continue;
        }
        if (ch == '"') {
            quoted = field_started = true;
            quote_line = line;
        } else if (ch == ',') {
            g_ptr_array_add(row, g_strdup(f->str));
            g_string_truncate(f, 0);
            field_started = true;
        } else if (ch == '\n') {
            if (field_started || f->len) {
                g_ptr_array_add(row, g_strdup(f->str));
                g_ptr_array_add(row, NULL);
                g_ptr_array_set_free_func(row, NULL); /* the strings go to the record */
                g_ptr_array_add(rows, g_ptr_array_free(row, FALSE));
                g_array_append_val(lines, row_line);
                row = g_ptr_array_new_with_free_func(g_free);
            }
            g_string_truncate(f, 0);
            field_started = false;
            row_line = ++line;
        } else if (ch != '\r') {
            g_string_append_c(f, ch);
            field_started = true;
        }
    }
    g_ptr_array_free(row, TRUE);
    g_string_free(f, TRUE);
    if (quoted) {
        char *m = gs_located_printf(path, quote_line, "a quoted field that never ends (no closing "
                                                      "'\"')");
        g_set_error_literal(err, GS_TEXT_ERROR, GS_TEXT_ERROR_FORMAT, m);
        g_free(m);
        g_ptr_array_free(rows, TRUE);
        return NULL;
    }
    return rows;
}

int gs_csv_column(char **header, const char *name)
{
    for (int i = 0; header[i]; i++)
        if (strcmp(header[i], name) == 0) return i;
    return -1;
}
