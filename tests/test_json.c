/* test_json.c - Check suite for the small JSON reader (util/json.c).
 *
 * The reader loads reference answers and saved results, so the tests pin down the details
 * that would silently change numbers: integer literals kept exact beyond 2^53, overflow
 * refused, and every malformed document rejected with the line of the problem.
 */
#include "trace.h"

#include "testutil.h"
#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static gs_json *parse_ok(const char *text)
{
    GError *err = NULL;
    gs_json *j = gs_json_parse("doc.json", text, strlen(text), &err);
    ck_assert_msg(j != NULL, "unexpected error: %s", err ? err->message : "?");
    return j;
}

/* Must fail with GS_JSON_ERROR_FORMAT and "doc.json:LINE: ..." containing what. */
static void expect_error_len(const char *text, size_t len, size_t line, const char *what)
{
    GError *err = NULL;
    gs_json *j = gs_json_parse("doc.json", text, len, &err);
    ck_assert_msg(j == NULL, "accepted: %s", text);
    ck_assert(g_error_matches(err, GS_JSON_ERROR, GS_JSON_ERROR_FORMAT));
    char *prefix = g_strdup_printf("doc.json:%zu: ", line);
    ck_assert_msg(g_str_has_prefix(err->message, prefix), "'%s' lacks '%s'", err->message,
                  prefix);
    ck_assert_msg(strstr(err->message, what) != NULL, "'%s' lacks '%s'", err->message, what);
    g_free(prefix);
    g_error_free(err);
}

static void expect_error(const char *text, size_t line, const char *what)
{
    expect_error_len(text, strlen(text), line, what);
}

START_TEST(test_scalars)
{
    gs_json *j = parse_ok("null");
    ck_assert_int_eq(j->type, GS_JSON_NULL);
    gs_json_free(j);
    j = parse_ok(" true ");
    ck_assert_int_eq(j->type, GS_JSON_BOOL);
    ck_assert(j->b);
    gs_json_free(j);
    j = parse_ok("false");
    ck_assert_int_eq(j->type, GS_JSON_BOOL);
    ck_assert(!j->b);
    gs_json_free(j);
    j = parse_ok("\"hi\"");
    ck_assert_int_eq(j->type, GS_JSON_STRING);
    ck_assert_str_eq(j->str, "hi");
    gs_json_free(j);
    j = parse_ok("\r\n\t -12.5e+3 \n");
    ck_assert_int_eq(j->type, GS_JSON_NUMBER);
    ck_assert_str_eq(j->str, "-12.5e+3");
    gs_json_free(j);
}
END_TEST

START_TEST(test_numbers_kept_as_text)
{
    gs_json *j = parse_ok("[0, -0, 123456789012345678901234567890, 1E2, 0.5, -1.25e-7]");
    ck_assert_uint_eq(j->n, 6);
    ck_assert_str_eq(j->items[0]->str, "0");
    ck_assert_str_eq(j->items[1]->str, "-0");
    ck_assert_str_eq(j->items[2]->str, "123456789012345678901234567890");
    ck_assert_str_eq(j->items[3]->str, "1E2");
    ck_assert_str_eq(j->items[5]->str, "-1.25e-7");
    gs_json_free(j);
}
END_TEST

START_TEST(test_string_escapes)
{
    gs_json *j = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"");
    ck_assert_str_eq(j->str, "a\"b\\c/d\b\f\n\r\t");
    gs_json_free(j);
    j = parse_ok("\"\\u0041\\u00e9\\u20AC\\uD83D\\uDE00\"");
    ck_assert_str_eq(j->str, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    gs_json_free(j);
    /* Raw UTF-8 passes through unchanged. */
    j = parse_ok("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
    ck_assert_str_eq(j->str, "caf\xc3\xa9 \xf0\x9f\x98\x80");
    gs_json_free(j);
}
END_TEST

START_TEST(test_containers)
{
    gs_json *j = parse_ok("{\n"
                          "  \"trace\": \"x.gstrace\",\n"
                          "  \"results\": [ {\"policy\": \"pytorch\", \"peak\": 18446744073709551615},\n"
                          "                {\"policy\": \"expandable\", \"peak\": 12} ],\n"
                          "  \"empty_a\": [], \"empty_o\": {},\n"
                          "  \"dup\": 1, \"dup\": 2\n"
                          "}\n");
    ck_assert_int_eq(j->type, GS_JSON_OBJECT);
    ck_assert_uint_eq(j->n, 6);
    ck_assert_str_eq(j->keys[0], "trace");
    ck_assert_str_eq(gs_json_get(j, "trace")->str, "x.gstrace");
    const gs_json *r = gs_json_get(j, "results");
    ck_assert_int_eq(r->type, GS_JSON_ARRAY);
    ck_assert_uint_eq(r->n, 2);
    ck_assert_ptr_null(r->keys);
    uint64_t u;
    ck_assert(gs_json_uint(gs_json_get(r->items[0], "peak"), &u));
    ck_assert_uint_eq(u, UINT64_MAX);
    ck_assert_str_eq(gs_json_get(r->items[1], "policy")->str, "expandable");
    const gs_json *ea = gs_json_get(j, "empty_a"), *eo = gs_json_get(j, "empty_o");
    ck_assert_int_eq(ea->type, GS_JSON_ARRAY);
    ck_assert_uint_eq(ea->n, 0);
    ck_assert_int_eq(eo->type, GS_JSON_OBJECT);
    ck_assert_uint_eq(eo->n, 0);
    /* A repeated key: the last one wins, as in Python. */
    int64_t v;
    ck_assert(gs_json_int(gs_json_get(j, "dup"), &v));
    ck_assert_int_eq(v, 2);
    ck_assert_ptr_null(gs_json_get(j, "missing"));
    ck_assert_ptr_null(gs_json_get(r, "policy")); /* not an object */
    ck_assert_ptr_null(gs_json_get(NULL, "x"));
    gs_json_free(j);
    gs_json_free(NULL);
}
END_TEST

START_TEST(test_int)
{
    gs_json *j = parse_ok("[42, -42, 9223372036854775807, -9223372036854775808, "
                          "9223372036854775808, -9223372036854775809, 1.0, 1e3, \"7\", -0, "
                          "99999999999999999999]");
    int64_t v;
    ck_assert(gs_json_int(j->items[0], &v));
    ck_assert_int_eq(v, 42);
    ck_assert(gs_json_int(j->items[1], &v));
    ck_assert_int_eq(v, -42);
    ck_assert(gs_json_int(j->items[2], &v));
    ck_assert_int_eq(v, INT64_MAX);
    ck_assert(gs_json_int(j->items[3], &v));
    ck_assert_int_eq(v, INT64_MIN);
    ck_assert(!gs_json_int(j->items[4], &v)); /* overflow */
    ck_assert(!gs_json_int(j->items[5], &v));
    ck_assert(!gs_json_int(j->items[6], &v)); /* not an integer literal */
    ck_assert(!gs_json_int(j->items[7], &v));
    ck_assert(!gs_json_int(j->items[8], &v)); /* a string */
    ck_assert(gs_json_int(j->items[9], &v));
    ck_assert_int_eq(v, 0);
    ck_assert(!gs_json_int(j->items[10], &v));
    ck_assert(!gs_json_int(NULL, &v));
    gs_json_free(j);
}
END_TEST

START_TEST(test_uint)
{
    gs_json *j = parse_ok("[0, 18446744073709551615, 18446744073709551616, -1, -0, 2.5, true]");
    uint64_t u;
    ck_assert(gs_json_uint(j->items[0], &u));
    ck_assert_uint_eq(u, 0);
    ck_assert(gs_json_uint(j->items[1], &u));
    ck_assert_uint_eq(u, UINT64_MAX);
    ck_assert(!gs_json_uint(j->items[2], &u));
    ck_assert(!gs_json_uint(j->items[3], &u));
    ck_assert(gs_json_uint(j->items[4], &u));
    ck_assert_uint_eq(u, 0);
    ck_assert(!gs_json_uint(j->items[5], &u));
    ck_assert(!gs_json_uint(j->items[6], &u));
    gs_json_free(j);
}
END_TEST

START_TEST(test_double)
{
    gs_json *j = parse_ok("[1.5, -2e-3, 3, 1e999, 1e-400, \"1\", 0.1]");
    double d;
    ck_assert(gs_json_double(j->items[0], &d));
    ck_assert_double_eq(d, 1.5);
    ck_assert(gs_json_double(j->items[1], &d));
    ck_assert_double_eq(d, -2e-3);
    ck_assert(gs_json_double(j->items[2], &d));
    ck_assert_double_eq(d, 3.0);
    ck_assert(!gs_json_double(j->items[3], &d)); /* overflows to infinity */
    ck_assert(gs_json_double(j->items[4], &d));  /* underflow: close enough to zero */
    ck_assert(fabs(d) < 1e-300);
    ck_assert(!gs_json_double(j->items[5], &d));
    ck_assert(gs_json_double(j->items[6], &d));
    ck_assert_double_eq(d, 0.1);
    gs_json_free(j);
}
END_TEST

START_TEST(test_err_structure)
{
    expect_error("", 1, "unexpected end of input");
    expect_error("   \n  ", 2, "unexpected end of input");
    expect_error("[1, 2,]", 1, "unexpected character ']'");
    expect_error("{\"a\": 1,}", 1, "expected string key");
    expect_error("{\"a\" 1}", 1, "expected ':'");
    expect_error("{1: 2}", 1, "expected string key");
    expect_error("[1 2]", 1, "expected ',' or ']'");
    expect_error("{\"a\": 1 \"b\": 2}", 1, "expected ',' or '}'");
    expect_error("[1, 2", 1, "unexpected end of input");
    expect_error("{\"a\":", 1, "unexpected end of input");
    expect_error("{\n\"a\": 1\n}\n[]", 4, "unexpected text after the JSON value");
    expect_error("tru", 1, "unexpected character 't'");
    expect_error("nulll", 1, "unexpected character 'n'");
    expect_error("NaN", 1, "unexpected character 'N'");
    expect_error("[\n\n  @]", 3, "unexpected character '@'");
    expect_error("// comment\n1", 1, "unexpected character '/'");
}
END_TEST

START_TEST(test_err_numbers)
{
    const char *bad[] = { "01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "1.5.2", "--1",
                          "-a", "1ee2" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        expect_error(bad[i], 1, bad[i][0] == '.' || bad[i][0] == '+' ? "unexpected character"
                                                                      : "bad number");
}
END_TEST

START_TEST(test_err_strings)
{
    expect_error("\"abc", 1, "unterminated string");
    expect_error("\"abc\\", 1, "unterminated string");
    expect_error("[\n\"a\nb\"]", 2, "control character 0x0a in string");
    expect_error("\"a\tb\"", 1, "control character 0x09");
    expect_error("\"\\x41\"", 1, "bad escape '\\x'");
    expect_error("\"\\u12G4\"", 1, "bad \\u escape");
    expect_error("\"\\u12\"", 1, "bad \\u escape");
    expect_error("\"\\uD83D\"", 1, "unpaired surrogate \\uD83D");
    expect_error("\"\\uD83Dx\"", 1, "unpaired surrogate");
    expect_error("\"\\uD83D\\u0041\"", 1, "unpaired surrogate");
    expect_error("\"\\uDE00\"", 1, "unpaired surrogate \\uDE00");
    expect_error("\"\\u0000\"", 1, "\\u0000");
    expect_error("{\"k\\q\": 1}", 1, "bad escape");
}
END_TEST

START_TEST(test_err_utf8)
{
    expect_error("\"ok\"\n\"\xc3\x28\"", 2, "invalid UTF-8");
    expect_error("\"\xff\"", 1, "invalid UTF-8");
    expect_error_len("[1,\0 2]", 7, 1, "invalid UTF-8");
}
END_TEST

static char *nested(int depth)
{
    GString *g = g_string_new(NULL);
    for (int i = 0; i < depth; i++)
        g_string_append(g, i % 2 ? "{\"k\":" : "[");
    g_string_append(g, "1");
    for (int i = depth; i-- > 0;)
        g_string_append(g, i % 2 ? "}" : "]");
    return g_string_free(g, FALSE);
}

START_TEST(test_nesting_limit)
{
    char *ok = nested(256);
    gs_json *j = parse_ok(ok);
    gs_json_free(j);
    g_free(ok);
    char *deep = nested(257);
    expect_error(deep, 1, "nesting deeper than 256 levels");
    g_free(deep);
    /* Far deeper than the stack would take: refused, not a crash. */
    char *hostile = g_strnfill(1000000, '[');
    expect_error(hostile, 1, "nesting");
    g_free(hostile);
}
END_TEST

START_TEST(test_large_array)
{
    GString *g = g_string_new("[");
    for (int i = 0; i < 100000; i++)
        g_string_append_printf(g, "%s{\"i\": %d, \"s\": \"v%d\"}", i ? ",\n" : "", i, i);
    g_string_append(g, "]");
    gs_json *j = parse_ok(g->str);
    ck_assert_uint_eq(j->n, 100000);
    int64_t v;
    ck_assert(gs_json_int(gs_json_get(j->items[99999], "i"), &v));
    ck_assert_int_eq(v, 99999);
    ck_assert_str_eq(gs_json_get(j->items[5], "s")->str, "v5");
    gs_json_free(j);
    /* An error on the last line reports that line. */
    g_string_truncate(g, g->len - 1);
    g_string_append(g, "\n,]");
    expect_error(g->str, 100001, "unexpected character ']'");
    g_string_free(g, TRUE);
}
END_TEST

START_TEST(test_load)
{
    GError *err = NULL;
    char *dir = g_dir_make_tmp("gs-test-json-XXXXXX", &err);
    ck_assert_ptr_nonnull(dir);
    char *path = g_build_filename(dir, "ref.json", NULL);
    ck_assert(g_file_set_contents(path, "{\"peak_reserved_bytes\": 123}\n", -1, NULL));
    gs_json *j = gs_json_load(path, &err);
    ck_assert_msg(j != NULL, "%s", err ? err->message : "?");
    uint64_t u;
    ck_assert(gs_json_uint(gs_json_get(j, "peak_reserved_bytes"), &u));
    ck_assert_uint_eq(u, 123);
    gs_json_free(j);

    /* Errors name the file. */
    ck_assert(g_file_set_contents(path, "{\n\"a\": tru\n}\n", -1, NULL));
    ck_assert_ptr_null(gs_json_load(path, &err));
    char *want = g_strdup_printf("%s:2: ", path);
    ck_assert(g_str_has_prefix(err->message, want));
    g_free(want);
    g_clear_error(&err);

    g_unlink(path);
    ck_assert_ptr_null(gs_json_load(path, &err));
    ck_assert(g_error_matches(err, GS_JSON_ERROR, GS_JSON_ERROR_IO));
    want = g_strdup_printf("%s: %s", path, g_strerror(ENOENT));
    ck_assert_str_eq(err->message, want);
    g_free(want);
    g_clear_error(&err);

    g_rmdir(dir);
    g_free(path);
    g_free(dir);
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("parse");
    tcase_set_timeout(tc, 60); /* the large document is slow under valgrind */
    tcase_add_test(tc, test_scalars);
    tcase_add_test(tc, test_numbers_kept_as_text);
    tcase_add_test(tc, test_string_escapes);
    tcase_add_test(tc, test_containers);
    tcase_add_test(tc, test_nesting_limit);
    tcase_add_test(tc, test_large_array);
    tcase_add_test(tc, test_load);
    suite_add_tcase(s, tc);

    tc = tcase_create("numbers");
    tcase_add_test(tc, test_int);
    tcase_add_test(tc, test_uint);
    tcase_add_test(tc, test_double);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_err_structure);
    tcase_add_test(tc, test_err_numbers);
    tcase_add_test(tc, test_err_strings);
    tcase_add_test(tc, test_err_utf8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(json_suite()); }
