/* jsonw.c - the one JSON writer: separators, string escapes and numbers in one place.
 *
 * Every JSON gpusim prints (replay and validate reports, the plots' series, the pluggable
 * library's stats) goes through it, so what makes JSON valid is decided once: a string is
 * escaped and, where its bytes are not UTF-8 (a file name can be anything), the bad bytes become
 * U+FFFD; a number that is not finite (a NaN from a calibration table, say) is written as null.
 * The layout stays the caller's: members are separated by ", " unless gs_jw_break() asked for a
 * line break before the next one, so reports keep lines a person can read.
 */
#include <math.h>
#include <string.h>

#include "util.h"

void gs_jw_init(gs_jw *w, GString *out)
{
    memset(w, 0, sizeof *w);
    w->out = out;
}

/* Before a value or a key: a separator unless it is the first item of its container, or the
 * value of the key just written. */
static void item(gs_jw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    uint64_t bit = UINT64_C(1) << (w->depth & 63);
    if (w->nonempty & bit) g_string_append(w->out, w->brk ? w->brk : ", ");
    w->nonempty |= bit;
    w->brk = NULL;
}

static void open_container(gs_jw *w, char c)
{
    item(w);
    g_string_append_c(w->out, c);
    w->depth++;
    g_return_if_fail(w->depth < 64);
    w->nonempty &= ~(UINT64_C(1) << w->depth);
    w->brk = NULL;
}

static void close_container(gs_jw *w, char c)
{
    g_return_if_fail(w->depth > 0);
    w->depth--;
    w->brk = NULL;
    g_string_append_c(w->out, c);
}

void gs_jw_object(gs_jw *w) { open_container(w, '{'); }
void gs_jw_object_end(gs_jw *w) { close_container(w, '}'); }
void gs_jw_array(gs_jw *w) { open_container(w, '['); }
void gs_jw_array_end(gs_jw *w) { close_container(w, ']'); }

void gs_jw_break(gs_jw *w, const char *sep) { w->brk = sep; }

void gs_jw_key(gs_jw *w, const char *key)
{
    item(w);
    gs_json_escape(w->out, key);
    g_string_append(w->out, ": ");
    w->after_key = true;
}

void gs_jw_str(gs_jw *w, const char *s)
{
    item(w);
    gs_json_escape(w->out, s ? s : "");
}

void gs_jw_int(gs_jw *w, int64_t v)
{
    item(w);
    g_string_append_printf(w->out, "%" G_GINT64_FORMAT, v);
}

void gs_jw_uint(gs_jw *w, uint64_t v)
{
    item(w);
    g_string_append_printf(w->out, "%" G_GUINT64_FORMAT, v);
}

void gs_jw_num(gs_jw *w, const char *fmt, double v)
{
    item(w);
    if (!isfinite(v)) {
        g_string_append(w->out, "null");
        return;
    }
    /* g_ascii_formatd, not printf: a host process with a decimal-comma locale (the PyTorch
     * library's GPUSIM_STATS is written inside the user's program) would write 1,5 */
    char buf[512];
    g_string_append(w->out, g_ascii_formatd(buf, sizeof buf, fmt, v));
}

void gs_jw_bool(gs_jw *w, bool v)
{
    item(w);
    g_string_append(w->out, v ? "true" : "false");
}

void gs_jw_null(gs_jw *w)
{
    item(w);
    g_string_append(w->out, "null");
}

void gs_jw_raw(gs_jw *w, const char *json)
{
    item(w);
    g_string_append(w->out, json);
}

void gs_jw_text(gs_jw *w, const char *text) { g_string_append(w->out, text); }

void gs_jw_finish_list(gs_jw *w, FILE *out)
{
    gs_jw_text(w, "\n");
    gs_jw_array_end(w);
    gs_jw_object_end(w);
    g_string_append_c(w->out, '\n');
    fwrite(w->out->str, 1, w->out->len, out);
    g_string_free(w->out, TRUE);
    w->out = NULL;
}

void gs_json_escape(GString *out, const char *s)
{
    g_string_append_c(out, '"');
    const char *end = s + strlen(s);
    while (s < end) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x80) {
            /* A whole UTF-8 sequence as it is (one a terminal would act on as \uNNNN, as
             * gs_printable shows it); a byte that starts none becomes U+FFFD alone, so a stray
             * byte after a character does not take the character with it. */
            gunichar c = g_utf8_get_char_validated(s, end - s);
            if (c == (gunichar)-1 || c == (gunichar)-2) {
                g_string_append(out, "\\ufffd");
                s++;
            } else {
                const char *next = g_utf8_next_char(s);
                if (gs_unichar_hidden(c)) g_string_append_printf(out, "\\u%04x", (unsigned)c);
                else g_string_append_len(out, s, next - s);
                s = next;
            }
            continue;
        }
        if (ch == '"' || ch == '\\') g_string_append_printf(out, "\\%c", ch);
        else if (ch < 0x20) g_string_append_printf(out, "\\u%04x", ch);
        else g_string_append_c(out, (char)ch);
        s++;
    }
    g_string_append_c(out, '"');
}

void gs_json_str(FILE *out, const char *s)
{
    GString *g = g_string_new(NULL);
    gs_json_escape(g, s);
    fwrite(g->str, 1, g->len, out);
    g_string_free(g, TRUE);
}
