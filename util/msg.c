/* msg.c - "FILE:LINE: message", the one shape of every error about input. */
#include "util.h"

char *gs_located_vprintf(const char *name, size_t line, const char *fmt, va_list ap)
{
    char *msg = g_strdup_vprintf(fmt, ap);
    char *full = g_strdup_printf("%s:%zu: %s", name, line, msg);
    g_free(msg);
    return full;
}

char *gs_located_printf(const char *name, size_t line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = gs_located_vprintf(name, line, fmt, ap);
    va_end(ap);
    return s;
}
