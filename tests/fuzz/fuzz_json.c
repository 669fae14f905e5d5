/* fuzz_json.c - the JSON reader (util/json.c) and, through it, the JSON writer (util/jsonw.c).
 *
 * Promises checked for every input:
 *   - gs_json_parse either gives a document or fails with one line "fuzz.json:LINE: ...";
 *   - a document it gives is well formed: strings valid UTF-8, numbers in JSON's grammar (and
 *     gs_json_int/uint/double agree with each other on them), objects with a key per item, a
 *     key's lookup finding its last occurrence;
 *   - the writer's text for a document (nested 63 deep at most: the writer's limit) parses
 *     back to the same document.
 */
#include "fuzz.h"

#include <math.h>
#include <string.h>

#include "util.h"

#define NAME "fuzz.json"

static void check_number(const gs_json *j)
{
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    gboolean is_i = gs_json_int(j, &i), is_u = gs_json_uint(j, &u), is_d = gs_json_double(j, &d);
    /* A literal that is an int64 and a uint64 is the same number both ways. */
    if (is_i && is_u) GS_FUZZ_CHECK(i >= 0 && (uint64_t)i == u, "'%s': %lld and %llu", j->str,
                                    (long long)i, (unsigned long long)u);
    if (is_i && i < 0) GS_FUZZ_CHECK(!is_u || (i == 0), "'%s' negative and unsigned", j->str);
    /* An integer literal is a finite double close to it. */
    if (is_i || is_u) GS_FUZZ_CHECK(is_d && isfinite(d), "'%s': an integer but no double", j->str);
    if (is_d) GS_FUZZ_CHECK(isfinite(d), "'%s' read as %g", j->str, d);
    if (is_u) GS_FUZZ_CHECK(fabs(d - (double)u) <= (double)u * 1e-15 + 1e-300, "'%s': %g", j->str, d);
}

static unsigned check_doc(const gs_json *j, unsigned depth)
{
    unsigned deepest = depth;
    switch (j->type) {
    case GS_JSON_NULL:
    case GS_JSON_BOOL:
        break;
    case GS_JSON_NUMBER:
        GS_FUZZ_CHECK(j->str && *j->str, "number without text");
        check_number(j);
        break;
    case GS_JSON_STRING:
        GS_FUZZ_CHECK(j->str && g_utf8_validate(j->str, -1, NULL), "string not UTF-8");
        break;
    case GS_JSON_ARRAY:
    case GS_JSON_OBJECT:
        GS_FUZZ_CHECK((j->n == 0) == (j->items == NULL), "%zu items, items %p", j->n,
                      (void *)j->items);
        for (size_t k = 0; k < j->n; k++) {
            unsigned d = check_doc(j->items[k], depth + 1);
            if (d > deepest) deepest = d;
            if (j->type == GS_JSON_OBJECT) {
                GS_FUZZ_CHECK(j->keys && j->keys[k] && g_utf8_validate(j->keys[k], -1, NULL),
                              "key %zu", k);
                /* the last item under that key */
                size_t last = k;
                for (size_t m = k + 1; m < j->n; m++)
                    if (strcmp(j->keys[m], j->keys[k]) == 0) last = m;
                GS_FUZZ_CHECK(gs_json_get(j, j->keys[k]) == j->items[last], "lookup of key %zu", k);
            }
        }
        if (j->type == GS_JSON_ARRAY) GS_FUZZ_CHECK(j->keys == NULL, "keys on an array");
        break;
    default:
        GS_FUZZ_CHECK(0, "type %d", (int)j->type);
    }
    return deepest;
}

static void write_doc(gs_jw *w, const gs_json *j)
{
    switch (j->type) {
    case GS_JSON_NULL: gs_jw_null(w); break;
    case GS_JSON_BOOL: gs_jw_bool(w, j->b); break;
    case GS_JSON_NUMBER: gs_jw_raw(w, j->str); break;
    case GS_JSON_STRING: gs_jw_str(w, j->str); break;
    case GS_JSON_ARRAY:
        gs_jw_array(w);
        for (size_t k = 0; k < j->n; k++) write_doc(w, j->items[k]);
        gs_jw_array_end(w);
        break;
    case GS_JSON_OBJECT:
        gs_jw_object(w);
        for (size_t k = 0; k < j->n; k++) {
            gs_jw_key(w, j->keys[k]);
            write_doc(w, j->items[k]);
        }
        gs_jw_object_end(w);
        break;
    }
}

static void check_equal(const gs_json *a, const gs_json *b)
{
    GS_FUZZ_CHECK(a->type == b->type && a->n == b->n, "types %d/%d", (int)a->type, (int)b->type);
    if (a->type == GS_JSON_BOOL) GS_FUZZ_CHECK(!a->b == !b->b, "bool");
    if (a->type == GS_JSON_NUMBER || a->type == GS_JSON_STRING)
        GS_FUZZ_CHECK(strcmp(a->str, b->str) == 0, "'%s' came back '%s'", a->str, b->str);
    for (size_t k = 0; k < a->n; k++) {
        if (a->type == GS_JSON_OBJECT)
            GS_FUZZ_CHECK(strcmp(a->keys[k], b->keys[k]) == 0, "key '%s' came back '%s'",
                          a->keys[k], b->keys[k]);
        check_equal(a->items[k], b->items[k]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *e = NULL;
    gs_json *j = gs_json_parse(NAME, (const char *)data, size, &e);
    if (!j) {
        gs_fuzz_check_error(e, GS_JSON_ERROR, NAME);
        g_error_free(e);
        return 0;
    }
    GS_FUZZ_CHECK(e == NULL, "a document and an error");
    unsigned depth = check_doc(j, 0);
    if (depth < 63) {
        GString *out = g_string_new(NULL);
        gs_jw w;
        gs_jw_init(&w, out);
        write_doc(&w, j);
        gs_json *back = gs_json_parse("written", out->str, out->len, &e);
        GS_FUZZ_CHECK(back != NULL, "the writer's text does not parse: %s: %s",
                      e ? e->message : "?", out->str);
        check_equal(j, back);
        gs_json_free(back);
        g_string_free(out, TRUE);
    }
    gs_json_free(j);
    return 0;
}
