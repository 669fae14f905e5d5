/* csv.c - RFC 4180 CSV fields, for the reports and the plots' data. */
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
