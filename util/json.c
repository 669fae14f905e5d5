/* json.c - a small strict JSON reader for gpusim's reference files and saved results.
 *
 * Recursive descent over a whole document in memory (RFC 8259, nothing more: no comments, no
 * trailing commas, no NaN). Numbers keep their literal text, so 64-bit byte counts survive
 * exactly and are converted only when asked for. Nesting is limited so a hostile file cannot
 * exhaust the stack, and every error names the line it was found on.
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define JSON_MAX_DEPTH 256

G_DEFINE_QUARK(gs-json-error-quark, gs_json_error)

typedef struct {
    const char *name;
    const char *p, *end;
    size_t line;
    GError **err;
} jparser;

static void jfail(jparser *jp, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void jfail(jparser *jp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *full = gs_located_vprintf(jp->name, jp->line, fmt, ap);
    va_end(ap);
    g_set_error_literal(jp->err, GS_JSON_ERROR, GS_JSON_ERROR_FORMAT, full);
    g_free(full);
}

/* Newlines can only occur in whitespace (a raw newline inside a string is an error), so
 * counting them here keeps the line number exact. */
static void skip_ws(jparser *jp)
{
    while (jp->p < jp->end) {
        char c = *jp->p;
        if (c == '\n')
            jp->line++;
        else if (c != ' ' && c != '\t' && c != '\r')
            return;
        jp->p++;
    }
}

static gs_json *new_node(gs_json_type type)
{
    gs_json *j = g_new0(gs_json, 1);
    j->type = type;
    return j;
}

void gs_json_free(gs_json *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        gs_json_free(j->items[i]);
        if (j->keys)
            g_free(j->keys[i]);
    }
    g_free(j->items);
    g_free(j->keys);
    g_free(j->str);
    g_free(j);
}

static int hex4(const char *s)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        int c = (unsigned char)s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string starting at the opening quote; returns the decoded UTF-8 text (the document was
 * validated as UTF-8 up front, so raw bytes are copied as they are). */
static char *parse_string(jparser *jp)
{
    GString *g = g_string_new(NULL);
    jp->p++; /* opening quote */
    for (;;) {
        const char *run = jp->p;
        while (jp->p < jp->end && *jp->p != '"' && *jp->p != '\\' &&
               (unsigned char)*jp->p >= 0x20)
            jp->p++;
        g_string_append_len(g, run, jp->p - run);
        if (jp->p == jp->end) {
            jfail(jp, "unterminated string");
            goto fail;
        }
        char c = *jp->p;
        if (c == '"') {
            jp->p++;
            return g_string_free(g, FALSE);
        }
        if (c != '\\') {
            jfail(jp, "control character 0x%02x in string", (unsigned char)c);
            goto fail;
        }
        if (jp->end - jp->p < 2) {
            jfail(jp, "unterminated string");
            goto fail;
        }
        char e = jp->p[1];
        jp->p += 2;
        switch (e) {
        case '"': g_string_append_c(g, '"'); break;
        case '\\': g_string_append_c(g, '\\'); break;
        case '/': g_string_append_c(g, '/'); break;
        case 'b': g_string_append_c(g, '\b'); break;
        case 'f': g_string_append_c(g, '\f'); break;
        case 'n': g_string_append_c(g, '\n'); break;
        case 'r': g_string_append_c(g, '\r'); break;
        case 't': g_string_append_c(g, '\t'); break;
        case 'u': {
            int u = jp->end - jp->p >= 4 ? hex4(jp->p) : -1;
            if (u < 0) {
                jfail(jp, "bad \\u escape");
                goto fail;
            }
            jp->p += 4;
            gunichar ch = (gunichar)u;
            if (u >= 0xD800 && u <= 0xDBFF) {
                /* A high surrogate must be followed by an escaped low surrogate. */
                int lo = jp->end - jp->p >= 6 && jp->p[0] == '\\' && jp->p[1] == 'u'
                             ? hex4(jp->p + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    jfail(jp, "unpaired surrogate \\u%04X", (unsigned)u);
                    goto fail;
                }
                jp->p += 6;
                ch = 0x10000 + (((gunichar)u - 0xD800) << 10) + ((gunichar)lo - 0xDC00);
            } else if (u >= 0xDC00 && u <= 0xDFFF) {
                jfail(jp, "unpaired surrogate \\u%04X", (unsigned)u);
                goto fail;
            } else if (u == 0) {
                /* Decoded strings are C strings: a NUL would silently cut them short. */
                jfail(jp, "\\u0000 in string is not supported");
                goto fail;
            }
            g_string_append_unichar(g, ch);
            break;
        }
        default:
            jfail(jp, "bad escape '\\%c'", g_ascii_isprint(e) ? e : '?');
            goto fail;
        }
    }
fail:
    g_string_free(g, TRUE);
    return NULL;
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static gs_json *parse_number(jparser *jp)
{
    const char *s = jp->p, *q = s, *e = jp->end;
    if (q < e && *q == '-')
        q++;
    if (q < e && *q == '0') {
        q++;
    } else if (q < e && *q >= '1' && *q <= '9') {
        while (q < e && g_ascii_isdigit(*q))
            q++;
    } else {
        goto bad;
    }
    if (q < e && *q == '.') {
        q++;
        if (!(q < e && g_ascii_isdigit(*q)))
            goto bad;
        while (q < e && g_ascii_isdigit(*q))
            q++;
    }
    if (q < e && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < e && (*q == '+' || *q == '-'))
            q++;
        if (!(q < e && g_ascii_isdigit(*q)))
            goto bad;
        while (q < e && g_ascii_isdigit(*q))
            q++;
    }
    /* "01" or "1x": the literal must end at a delimiter. */
    if (q < e && (g_ascii_isalnum(*q) || *q == '.' || *q == '-' || *q == '+'))
        goto bad;
    gs_json *j = new_node(GS_JSON_NUMBER);
    j->str = g_strndup(s, (gsize)(q - s));
    jp->p = q;
    return j;
bad:
    jfail(jp, "bad number");
    return NULL;
}

static gboolean literal(jparser *jp, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(jp->end - jp->p) < n || memcmp(jp->p, word, n) != 0)
        return FALSE;
    const char *q = jp->p + n;
    if (q < jp->end && g_ascii_isalnum(*q))
        return FALSE;
    jp->p = q;
    return TRUE;
}

static gs_json *parse_value(jparser *jp, int depth);

/* Arrays and objects share the loop; keys is NULL for an array. */
static gs_json *parse_container(jparser *jp, int depth, gboolean object)
{
    if (depth >= JSON_MAX_DEPTH) {
        jfail(jp, "nesting deeper than %d levels", JSON_MAX_DEPTH);
        return NULL;
    }
    char close = object ? '}' : ']';
    gs_json *j = new_node(object ? GS_JSON_OBJECT : GS_JSON_ARRAY);
    GPtrArray *items = g_ptr_array_new();
    GPtrArray *keys = object ? g_ptr_array_new() : NULL;
    jp->p++; /* opening bracket */
    skip_ws(jp);
    if (jp->p < jp->end && *jp->p == close) {
        jp->p++;
        goto done;
    }
    for (;;) {
        skip_ws(jp);
        if (object) {
            if (jp->p == jp->end || *jp->p != '"') {
                jfail(jp, jp->p == jp->end ? "unexpected end of input" : "expected string key");
                goto fail;
            }
            char *k = parse_string(jp);
            if (!k)
                goto fail;
            g_ptr_array_add(keys, k);
            skip_ws(jp);
            if (jp->p == jp->end || *jp->p != ':') {
                jfail(jp, "expected ':' after object key");
                goto fail;
            }
            jp->p++;
        }
        gs_json *v = parse_value(jp, depth + 1);
        if (!v)
            goto fail;
        g_ptr_array_add(items, v);
        skip_ws(jp);
        if (jp->p < jp->end && *jp->p == ',') {
            jp->p++;
            continue;
        }
        if (jp->p < jp->end && *jp->p == close) {
            jp->p++;
            break;
        }
        if (jp->p == jp->end)
            jfail(jp, "unexpected end of input");
        else
            jfail(jp, "expected ',' or '%c'", close);
        goto fail;
    }
done:
    j->n = items->len;
    j->items = j->n ? (gs_json **)g_ptr_array_free(items, FALSE) : NULL;
    if (!j->n)
        g_ptr_array_free(items, TRUE);
    if (keys) {
        j->keys = j->n ? (char **)g_ptr_array_free(keys, FALSE) : NULL;
        if (!j->n)
            g_ptr_array_free(keys, TRUE);
    }
    return j;
fail:
    /* On a failed object, keys may hold one more entry than items. */
    for (guint i = 0; i < items->len; i++)
        gs_json_free(items->pdata[i]);
    g_ptr_array_free(items, TRUE);
    if (keys) {
        for (guint i = 0; i < keys->len; i++)
            g_free(keys->pdata[i]);
        g_ptr_array_free(keys, TRUE);
    }
    g_free(j);
    return NULL;
}

static gs_json *parse_value(jparser *jp, int depth)
{
    skip_ws(jp);
    if (jp->p == jp->end) {
        jfail(jp, "unexpected end of input");
        return NULL;
    }
    char c = *jp->p;
    gs_json *j;
    switch (c) {
    case '{':
        return parse_container(jp, depth, TRUE);
    case '[':
        return parse_container(jp, depth, FALSE);
    case '"': {
        char *s = parse_string(jp);
        if (!s)
            return NULL;
        j = new_node(GS_JSON_STRING);
        j->str = s;
        return j;
    }
    case '-':
    case '0': case '1': case '2': case '3': case '4':
    case '5': case '6': case '7': case '8': case '9':
        return parse_number(jp);
    default:
        if (literal(jp, "true") || literal(jp, "false")) {
            j = new_node(GS_JSON_BOOL);
            j->b = c == 't';
            return j;
        }
        if (literal(jp, "null"))
            return new_node(GS_JSON_NULL);
        if (g_ascii_isprint(c))
            jfail(jp, "unexpected character '%c'", c);
        else
            jfail(jp, "unexpected byte 0x%02x", (unsigned char)c);
        return NULL;
    }
}

gs_json *gs_json_parse(const char *name, const char *text, size_t len, GError **err)
{
    g_return_val_if_fail(text != NULL || len == 0, NULL);
    jparser jp = { name ? name : "(memory)", text, text + len, 1, err };

    /* JSON text is UTF-8; checking it once here lets strings copy raw bytes unchecked. */
    const char *bad;
    if (!g_utf8_validate_len(text, len, &bad)) {
        for (const char *q = text; q < bad; q++)
            if (*q == '\n')
                jp.line++;
        jfail(&jp, "invalid UTF-8");
        return NULL;
    }
    gs_json *j = parse_value(&jp, 0);
    if (!j)
        return NULL;
    skip_ws(&jp);
    if (jp.p != jp.end) {
        jfail(&jp, "unexpected text after the JSON value");
        gs_json_free(j);
        return NULL;
    }
    return j;
}

gs_json *gs_json_load(const char *path, GError **err)
{
    g_return_val_if_fail(path != NULL, NULL);
    char *text = NULL;
    size_t len = 0;
    GError *e = NULL;
    if (!gs_read_text(path, &text, &len, &e)) {
        g_set_error_literal(err, GS_JSON_ERROR, GS_JSON_ERROR_IO, e->message);
        g_error_free(e);
        return NULL;
    }
    gs_json *j = gs_json_parse(path, text, len, err);
    g_free(text);
    return j;
}

const gs_json *gs_json_get(const gs_json *obj, const char *key)
{
    if (!obj || obj->type != GS_JSON_OBJECT || !key)
        return NULL;
    /* A repeated key: the last one wins, as in Python's json module, which writes these files. */
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0)
            return obj->items[i];
    return NULL;
}

/* Integer literals only: "3.0" and "3e0" are refused, since a writer that meant an integer
 * would not have written them (Python writes floats with a '.' or an exponent). The magnitude
 * comes back with its sign; FALSE on anything else or on overflow of 64 bits. */
static gboolean int_literal(const gs_json *j, gboolean *neg, uint64_t *mag)
{
    if (!j || j->type != GS_JSON_NUMBER)
        return FALSE;
    const char *s = j->str;
    *neg = *s == '-';
    if (*neg)
        s++;
    uint64_t v = 0;
    if (!*s)
        return FALSE;
    for (; *s; s++) {
        unsigned d = (unsigned char)*s - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return FALSE;
        v = v * 10 + d;
    }
    *mag = v;
    return TRUE;
}

gboolean gs_json_int(const gs_json *j, int64_t *out)
{
    gboolean neg;
    uint64_t mag;
    if (!int_literal(j, &neg, &mag))
        return FALSE;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return FALSE;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > INT64_MAX)
            return FALSE;
        *out = (int64_t)mag;
    }
    return TRUE;
}

gboolean gs_json_uint(const gs_json *j, uint64_t *out)
{
    gboolean neg;
    uint64_t mag;
    if (!int_literal(j, &neg, &mag) || (neg && mag != 0))
        return FALSE;
    *out = mag;
    return TRUE;
}

gboolean gs_json_double(const gs_json *j, double *out)
{
    if (!j || j->type != GS_JSON_NUMBER)
        return FALSE;
    char *end;
    errno = 0;
    double v = g_ascii_strtod(j->str, &end);
    /* Overflow to infinity loses the value; underflow towards zero is a fine approximation. */
    if (*end != '\0' || (errno == ERANGE && isinf(v)))
        return FALSE;
    *out = v;
    return TRUE;
}
