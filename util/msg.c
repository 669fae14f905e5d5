/* msg.c - "FILE:LINE: message", the one shape of every error about input. */
#include "util.h"

#include <string.h>

bool gs_unichar_hidden(gunichar c)
{
    return c < 0x20 || (c >= 0x7f && c <= 0x9f) ||   /* C0, DEL, C1 (0x9b is CSI) */
           c == 0x061c || c == 0x200e || c == 0x200f || /* the marks: ALM, LRM, RLM */
           (c >= 0x2028 && c <= 0x202e) ||             /* line and paragraph separators, embeddings */
           (c >= 0x2066 && c <= 0x2069);               /* isolates */
}

char *gs_printable(const char *s)
{
    size_t n = strlen(s);
    GString *g = g_string_sized_new(n);
    for (const char *end = s + n; s < end;) {
        /* a character at a time: a byte of no valid UTF-8 sequence is written \xNN alone (a raw
         * 0x9b is a terminal's CSI too), and the valid text around it is kept */
        gunichar c = g_utf8_get_char_validated(s, end - s);
        if (c == (gunichar)-1 || c == (gunichar)-2) {
            g_string_append_printf(g, "\\x%02x", (unsigned char)*s++);
            continue;
        }
        const char *next = g_utf8_next_char(s);
        if (c < 0x100 && gs_unichar_hidden(c)) g_string_append_printf(g, "\\x%02x", (unsigned)c);
        else if (gs_unichar_hidden(c)) g_string_append_printf(g, "\\u%04x", (unsigned)c);
        else g_string_append_len(g, s, next - s);
        s = next;
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
