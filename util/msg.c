/* msg.c - "FILE:LINE: message", the one shape of every error about input. */
#include "util.h"

#include <string.h>

char *gs_printable(const char *s)
{
    GString *g = g_string_sized_new(strlen(s));
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) g_string_append_printf(g, "\\x%02x", c);
        else g_string_append_c(g, (char)c);
    }
    return g_string_free(g, FALSE);
}

char *gs_located_vprintf(const char *name, size_t line, const char *fmt, va_list ap)
{
    char *msg = g_strdup_vprintf(fmt, ap);
    char *full = g_strdup_printf("%s:%zu: %s", name, line, msg);
    char *safe = gs_printable(full);
    g_free(msg);
    g_free(full);
    return safe;
}

char *gs_located_printf(const char *name, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = gs_located_vprintf(name, line, fmt, ap);
    va_end(ap);
    return s;
}
