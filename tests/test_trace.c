/* test_trace.c - Check suite for the trace reader, writer and builder (traces/).
 *
 * Every error the reader can report has a named test that checks the error domain, the code
 * and the "FILE:LINE:" prefix, because users find bad lines in multi-gigabyte traces by that
 * prefix alone. Files are written into a fresh temporary directory per test, so no fixture
 * files are needed and the tests can run in parallel.
 */
#include "trace.h"

#include "testutil.h"
#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define NAME "t.gstrace"
#define HDR "# gpusim-trace 1\n" GS_TRACE_COLUMNS "\n"

/* ---- helpers ------------------------------------------------------------------------------ */

static gs_trace *parse(const char *text, unsigned flags, GError **err)
{
    return gs_trace_parse(NAME, text, strlen(text), flags, NULL, NULL, err);
}

static gs_trace *parse_ok(const char *text)
{
    GError *err = NULL;
    gs_trace *t = parse(text, 0, &err);
    ck_assert_msg(t != NULL, "unexpected error: %s", err ? err->message : "?");
    ck_assert_uint_eq(t->n_warnings, 0);
    return t;
}

/* The reader must fail with GS_TRACE_ERROR_FORMAT, "t.gstrace:LINE: ..." and the given text. */
static void expect_error_at(const char *text, size_t line, const char *what)
{
    GError *err = NULL;
    gs_trace *t = parse(text, 0, &err);
    ck_assert_ptr_null(t);
    ck_assert_ptr_nonnull(err);
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    char *prefix = line ? g_strdup_printf(NAME ":%zu: ", line) : g_strdup(NAME ": ");
    ck_assert_msg(g_str_has_prefix(err->message, prefix), "message '%s' lacks prefix '%s'",
                  err->message, prefix);
    ck_assert_msg(strstr(err->message, what) != NULL, "message '%s' lacks '%s'", err->message,
                  what);
    g_free(prefix);
    g_error_free(err);
}

typedef struct {
    GPtrArray *msgs;
} warn_log;

static void collect_warning(const char *msg, void *ud)
{
    warn_log *w = ud;
    g_ptr_array_add(w->msgs, g_strdup(msg));
}

static char *make_tmpdir(void)
{
    GError *err = NULL;
    char *dir = g_dir_make_tmp("gs-test-trace-XXXXXX", &err);
    ck_assert_msg(dir != NULL, "%s", err ? err->message : "?");
    return dir;
}

/* Removes a test directory and the plain files in it. */
static void remove_tmpdir(char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (d) {
        const char *name;
        while ((name = g_dir_read_name(d))) {
            char *p = g_build_filename(dir, name, NULL);
            g_unlink(p);
            g_free(p);
        }
        g_dir_close(d);
    }
    g_rmdir(dir);
    g_free(dir);
}

static guint count_entries(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    ck_assert_ptr_nonnull(d);
    guint n = 0;
    while (g_dir_read_name(d))
        n++;
    g_dir_close(d);
    return n;
}

static void write_file(const char *path, const char *data, gssize len)
{
    GError *err = NULL;
    ck_assert_msg(g_file_set_contents(path, data, len, &err), "%s", err ? err->message : "?");
}

/* Compresses data as one gzip member. */
static GBytes *gzip_bytes(const char *data, size_t len)
{
    GConverter *z = G_CONVERTER(g_zlib_compressor_new(G_ZLIB_COMPRESSOR_FORMAT_GZIP, -1));
    GOutputStream *mem = g_memory_output_stream_new_resizable();
    GOutputStream *out = g_converter_output_stream_new(mem, z);
    ck_assert(g_output_stream_write_all(out, data, len, NULL, NULL, NULL));
    ck_assert(g_output_stream_close(out, NULL, NULL));
    GBytes *b = g_memory_output_stream_steal_as_bytes(G_MEMORY_OUTPUT_STREAM(mem));
    g_object_unref(out);
    g_object_unref(mem);
    g_object_unref(z);
    return b;
}

static void assert_same_trace(const gs_trace *a, const gs_trace *b)
{
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const gs_event *x = &a->ev[i], *y = &b->ev[i];
        ck_assert_msg(x->time_us == y->time_us && x->size == y->size && x->slot == y->slot &&
                      x->stream == y->stream && x->client == y->client && x->op == y->op &&
                      x->flags == y->flags && x->device == y->device,
                      "event %zu differs", i);
    }
    ck_assert_uint_eq(a->n_slots, b->n_slots);
    for (size_t i = 0; i < a->n_slots; i++)
        ck_assert_uint_eq(a->slot_id[i], b->slot_id[i]);
    ck_assert_uint_eq(a->clients->len, b->clients->len);
    for (guint i = 0; i < a->clients->len; i++)
        ck_assert_str_eq(g_ptr_array_index(a->clients, i), g_ptr_array_index(b->clients, i));
    ck_assert_uint_eq(a->streams->len, b->streams->len);
    for (guint i = 0; i < a->streams->len; i++)
        ck_assert_uint_eq(g_array_index(a->streams, uint64_t, i),
                          g_array_index(b->streams, uint64_t, i));
    ck_assert_uint_eq(a->meta->len, b->meta->len);
    for (guint i = 0; i < a->meta->len; i++) {
        ck_assert_str_eq(g_array_index(a->meta, gs_trace_meta, i).key,
                         g_array_index(b->meta, gs_trace_meta, i).key);
        ck_assert_str_eq(g_array_index(a->meta, gs_trace_meta, i).value,
                         g_array_index(b->meta, gs_trace_meta, i).value);
    }
    ck_assert_uint_eq(a->device_total, b->device_total);
}

/* ---- well-formed input ---------------------------------------------------------------------- */

START_TEST(test_basic)
{
    gs_trace *t = parse_ok("# gpusim-trace 1\n"
                           "# source: pytorch-snapshot resnet50 torch-2.11.0 H100\n"
                           "# device_total_bytes: 85017493504\n"
                           GS_TRACE_COLUMNS "\n"
                           "0,0,alloc,torch,0,0,1,37632\n"
                           "1,12,alloc,cupy,1,7,2,100\n"
                           "2,12,free,torch,0,0,1,37632\n"
                           "3,20,free,cupy,1,7,2,0\n");
    ck_assert_str_eq(t->path, NAME);
    ck_assert_uint_eq(t->n, 4);
    ck_assert_uint_eq(t->n_slots, 2);
    ck_assert_uint_eq(t->slot_id[0], 1);
    ck_assert_uint_eq(t->slot_id[1], 2);
    ck_assert_uint_eq(t->device_total, 85017493504ull);
    ck_assert_str_eq(gs_trace_get_meta(t, "source"),
                     "pytorch-snapshot resnet50 torch-2.11.0 H100");
    ck_assert_str_eq(gs_trace_get_meta(t, "device_total_bytes"), "85017493504");
    ck_assert_ptr_null(gs_trace_get_meta(t, "nope"));
    ck_assert_uint_eq(t->clients->len, 2);
    ck_assert_str_eq(g_ptr_array_index(t->clients, 0), "torch");
    ck_assert_str_eq(g_ptr_array_index(t->clients, 1), "cupy");
    ck_assert_uint_eq(t->streams->len, 2);
    ck_assert_uint_eq(g_array_index(t->streams, uint64_t, 1), 7);

    const gs_event *e = t->ev;
    ck_assert_uint_eq(e[0].op, GS_OP_ALLOC);
    ck_assert_uint_eq(e[0].size, 37632);
    ck_assert_uint_eq(e[0].slot, 0);
    ck_assert_uint_eq(e[1].time_us, 12);
    ck_assert_uint_eq(e[1].client, 1);
    ck_assert_uint_eq(e[1].device, 1);
    ck_assert_uint_eq(e[1].stream, 1);
    ck_assert_uint_eq(e[2].op, GS_OP_FREE);
    ck_assert_uint_eq(e[2].slot, 0);
    ck_assert_uint_eq(e[2].flags, 0);
    /* A free with size 0 gets the allocation's size. */
    ck_assert_uint_eq(e[3].size, 100);
    ck_assert_uint_eq(e[3].slot, 1);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_empty_trace_ok)
{
    gs_trace *t = parse_ok(HDR);
    ck_assert_uint_eq(t->n, 0);
    ck_assert_uint_eq(t->n_slots, 0);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_zero_size_alloc)
{
    /* PyTorch returns a null pointer for a zero-byte request: legal, and it must be freed. */
    gs_trace *t = parse_ok(HDR "0,0,alloc,torch,0,0,1,0\n1,1,free,torch,0,0,1,0\n");
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->ev[0].size, 0);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_empty_cache_and_mark)
{
    gs_trace *t = parse_ok(HDR "0,0,mark,torch,0,0,0,3\n1,5,empty_cache,torch,0,0,9,0\n");
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->ev[0].op, GS_OP_MARK);
    ck_assert_uint_eq(t->ev[0].size, 3);
    ck_assert_uint_eq(t->ev[0].slot, UINT32_MAX);
    ck_assert_uint_eq(t->ev[1].op, GS_OP_EMPTY_CACHE);
    ck_assert_uint_eq(t->ev[1].slot, UINT32_MAX);
    ck_assert_uint_eq(t->n_slots, 0);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_max_values)
{
    gs_trace *t = parse_ok(HDR "0,18446744073709551615,alloc,a.b-c_9,4294967295,"
                               "18446744073709551615,18446744073709551615,18446744073709551615\n"
                               "1,0,free,a.b-c_9,0,0,018446744073709551615,0\n");
    ck_assert_uint_eq(t->ev[0].time_us, UINT64_MAX);
    ck_assert_uint_eq(t->ev[0].device, UINT32_MAX);
    ck_assert_uint_eq(t->ev[0].size, UINT64_MAX);
    ck_assert_uint_eq(t->slot_id[0], UINT64_MAX);
    ck_assert_uint_eq(g_array_index(t->streams, uint64_t, 0), UINT64_MAX);
    /* Leading zeros are still the same number. */
    ck_assert_uint_eq(t->ev[1].slot, 0);
    gs_trace_free(t);
}
END_TEST

/* The fast path reads numbers 8 bytes at a time where it can (traces/read.c, digits8): numbers
 * of every length from 1 to 20 digits, leading zeros and the largest values, in each numeric
 * column, with the line followed by more lines (the 8-byte path) and as the last line (the
 * byte loop near the buffer's end); every byte but a digit ends a number. The buffer is the
 * text's exact length, so a read past it shows under ASan. */
static void check_number(const char *digits, gboolean more_lines)
{
    errno = 0;
    char *endp;
    uint64_t want = g_ascii_strtoull(digits, &endp, 10);
    gboolean fits = errno == 0;
    const char *cols[] = {"time_us", "stream", "id", "size"};
    for (int c = 0; c < 4; c++) {
        const char *f[4] = {"7", "3", "5", "4096"};
        f[c] = digits;
        GString *g = g_string_new(HDR);
        g_string_append_printf(g, "0,%s,alloc,torch,0,%s,%s,%s\n", f[0], f[1], f[2], f[3]);
        if (more_lines)
            for (int k = 1; k < 4; k++)
                g_string_append_printf(g, "%d,1,mark,torch,0,%s,0,%d\n", k, f[1], k);
        GError *err = NULL;
        char *text = g_memdup2(g->str, g->len);
        gs_trace *t = gs_trace_parse(NAME, text, g->len, 0, NULL, NULL, &err);
        if (fits && !(c == 2 && want == 0)) {
            ck_assert_msg(t != NULL, "%s in %s: %s", digits, cols[c], err ? err->message : "");
            uint64_t got[4] = {t->ev[0].time_us, g_array_index(t->streams, uint64_t, 0),
                               t->slot_id[0], t->ev[0].size};
            ck_assert_msg(got[c] == want, "%s in %s: got %" PRIu64, digits, cols[c], got[c]);
            ck_assert_uint_eq(t->n, more_lines ? 4 : 1);
            gs_trace_free(t);
        } else if (!fits) {
            ck_assert_ptr_null(t);
            char *msg = g_strdup_printf(NAME ":3: bad number in column '%s'", cols[c]);
            ck_assert_msg(g_str_has_prefix(err->message, msg), "%s", err->message);
            g_free(msg);
        }
        g_clear_error(&err);
        if (t && !fits) gs_trace_free(t);
        g_free(text);
        g_string_free(g, TRUE);
    }
}

START_TEST(test_numbers_of_every_length)
{
    const char *pattern = "98765432101234567890";
    for (int more = 0; more < 2; more++)
        for (size_t len = 1; len <= 21; len++) {
            char d[32];
            memset(d, '9', len), d[len] = 0;
            check_number(d, more);
            memset(d, '0', len), d[0] = '1';
            check_number(d, more);
            memset(d, '0', len), d[len - 1] = '7';
            check_number(d, more);
            for (size_t i = 0; i < len; i++) d[i] = pattern[(i + len) % 20];
            check_number(d, more);
        }
    check_number("18446744073709551615", TRUE);
    check_number("18446744073709551616", TRUE);
    check_number("00000000000000000000000000000000000042", TRUE);
    /* any byte but a digit after some digits: a bad number, in the middle and the last column */
    for (int more = 0; more < 2; more++)
        for (unsigned b = 1; b < 256; b++) {
            if (b == ',' || b == '\n' || b == '\r')
                continue;
            for (int col = 0; col < 2; col++) {
                GString *g = g_string_new(HDR);
                if (col == 0)
                    g_string_append_printf(g, "0,1234%c567,alloc,torch,0,0,1,4096\n", (char)b);
                else
                    g_string_append_printf(g, "0,1,alloc,torch,0,0,1,1234%c567\n", (char)b);
                for (int k = 1; more && k < 4; k++)
                    g_string_append_printf(g, "%d,1,mark,torch,0,0,0,%d\n", k, k);
                GError *err = NULL;
                char *text = g_memdup2(g->str, g->len);
                gs_trace *t = gs_trace_parse(NAME, text, g->len, 0, NULL, NULL, &err);
                if (b >= '0' && b <= '9') {
                    ck_assert_ptr_nonnull(t);
                    ck_assert_uint_eq((col ? t->ev[0].size : t->ev[0].time_us),
                                      12340000 + (b - (unsigned)'0') * 1000 + 567);
                    gs_trace_free(t);
                } else {
                    ck_assert_msg(t == NULL, "byte 0x%02x", b);
                    const char *want = col ? NAME ":3: bad number in column 'size'"
                                           : NAME ":3: bad number in column 'time_us'";
                    ck_assert_msg(g_str_has_prefix(err->message, want), "byte 0x%02x: %s", b,
                                  err->message);
                    g_error_free(err);
                }
                g_free(text);
                g_string_free(g, TRUE);
            }
        }
}
END_TEST

START_TEST(test_time_may_decrease)
{
    gs_trace *t = parse_ok(HDR "0,50,mark,torch,0,0,0,1\n1,10,mark,torch,0,0,0,2\n");
    ck_assert_uint_eq(t->ev[1].time_us, 10);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_crlf)
{
    gs_trace *t = parse_ok("# gpusim-trace 1\r\n# source: win\r\n# device_total_bytes: 42\r\n"
                           GS_TRACE_COLUMNS "\r\n\r\n"
                           "0,0,alloc,torch,0,0,1,10\r\n1,0,free,torch,0,0,1,10\r\n");
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->ev[1].op, GS_OP_FREE);
    ck_assert_str_eq(gs_trace_get_meta(t, "source"), "win");
    ck_assert_uint_eq(t->device_total, 42);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_comments_and_blank_lines)
{
    gs_trace *t = parse_ok("# gpusim-trace 1\n"
                           "#\n"
                           "# just a comment\n"
                           "#key: no space after the hash, a comment\n"
                           "# not a key: spaces in the key make this a comment\n"
                           "\n"
                           "# model: gpt2\n"
                           GS_TRACE_COLUMNS "\n"
                           "# a comment among events\n"
                           "# after: the column line this is only a comment\n"
                           "\n"
                           "0,0,alloc,torch,0,0,1,10\n"
                           "#\n"
                           "1,0,free,torch,0,0,1,10\n");
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->meta->len, 1);
    ck_assert_str_eq(gs_trace_get_meta(t, "model"), "gpt2");
    ck_assert_ptr_null(gs_trace_get_meta(t, "after"));
    gs_trace_free(t);
}
END_TEST

START_TEST(test_deferred_flag)
{
    gs_trace *t = parse_ok(HDR "0,0,alloc,torch,0,0,1,10\n"
                               "1,0,alloc,torch,0,1,2,20\n"
                               "2,1,free,torch,0,1,2,20\n"
                               "3,2,free,torch,0,0,1,10\n"
                               "4,3,free_done,torch,0,1,2,0\n");
    ck_assert_uint_eq(t->n, 5);
    ck_assert_uint_eq(t->ev[2].flags & GS_EV_DEFERRED, GS_EV_DEFERRED); /* completed later */
    ck_assert_uint_eq(t->ev[3].flags & GS_EV_DEFERRED, 0);              /* immediate */
    ck_assert_uint_eq(t->ev[4].op, GS_OP_FREE_DONE);
    ck_assert_uint_eq(t->ev[4].slot, 1);
    ck_assert_uint_eq(t->ev[4].size, 20);
    ck_assert_uint_eq(t->ev[4].flags, 0);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_id_reuse)
{
    /* An id is reusable after its free (no free_done follows) or after its free_done. */
    gs_trace *t = parse_ok(HDR "0,0,alloc,torch,0,0,1,10\n"
                               "1,0,free,torch,0,0,1,10\n"
                               "2,0,alloc,torch,0,0,1,20\n"
                               "3,0,free,torch,0,0,1,20\n"
                               "4,0,free_done,torch,0,0,1,20\n"
                               "5,0,alloc,torch,0,0,1,30\n"
                               "6,0,free,torch,0,0,1,0\n");
    ck_assert_uint_eq(t->n_slots, 3);
    for (int i = 0; i < 3; i++)
        ck_assert_uint_eq(t->slot_id[i], 1);
    ck_assert_uint_eq(t->ev[1].slot, 0);
    ck_assert_uint_eq(t->ev[1].flags, 0);
    ck_assert_uint_eq(t->ev[3].slot, 1);
    ck_assert_uint_eq(t->ev[3].flags, GS_EV_DEFERRED);
    ck_assert_uint_eq(t->ev[4].slot, 1);
    ck_assert_uint_eq(t->ev[6].slot, 2);
    ck_assert_uint_eq(t->ev[6].size, 30);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_free_done_after_reuse_is_error)
{
    /* The reuse proves the first free was immediate: the free_done then has nothing to finish. */
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,10\n"
                        "1,0,free,torch,0,0,1,10\n"
                        "2,0,alloc,torch,0,0,1,20\n"
                        "3,0,free_done,torch,0,0,1,0\n",
                    6, "free_done of id 1 without a pending free");
}
END_TEST

/* ---- header and structure errors ------------------------------------------------------------ */

START_TEST(test_err_empty_file)
{
    expect_error_at("", 0, "empty file, expected '# gpusim-trace 1'");
}
END_TEST

START_TEST(test_err_version)
{
    expect_error_at("# gpusim-trace 4\n" GS_TRACE_COLUMNS "\n", 1, "unsupported trace version 4");
}
END_TEST

START_TEST(test_err_not_a_trace)
{
    expect_error_at("hello\n", 1, "expected '# gpusim-trace 1'");
    expect_error_at(GS_TRACE_COLUMNS "\n", 1, "expected '# gpusim-trace 1'");
    expect_error_at("# gpusim-trace 1 \n" GS_TRACE_COLUMNS "\n", 1, "expected");
    expect_error_at("\n# gpusim-trace 1\n", 1, "expected '# gpusim-trace 1'");
}
END_TEST

START_TEST(test_err_missing_columns)
{
    expect_error_at("# gpusim-trace 1\n# a: b\n", 2, "missing column line");
    expect_error_at("# gpusim-trace 1\n", 1, "missing column line");
}
END_TEST

START_TEST(test_err_wrong_columns)
{
    expect_error_at("# gpusim-trace 1\nseq,time_us,op\n", 2, "expected column line");
    expect_error_at("# gpusim-trace 1\n0,0,alloc,torch,0,0,1,10\n", 2, "expected column line");
    expect_error_at("# gpusim-trace 1\n" GS_TRACE_COLUMNS " \n", 2, "expected column line");
}
END_TEST

START_TEST(test_err_truncated_line)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,10", 4,
                    "truncated line (no newline at end of file)");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,10\n1,0,fr", 4, "truncated line");
    expect_error_at("# gpusim-trace 1", 1, "truncated line");
}
END_TEST

START_TEST(test_err_device_total)
{
    expect_error_at("# gpusim-trace 1\n# device_total_bytes: 12a\n" GS_TRACE_COLUMNS "\n", 2,
                    "bad number in header 'device_total_bytes'");
    expect_error_at("# gpusim-trace 1\n# device_total_bytes: 18446744073709551616\n"
                    GS_TRACE_COLUMNS "\n", 2, "device_total_bytes");
}
END_TEST

/* ---- event syntax errors -------------------------------------------------------------------- */

START_TEST(test_err_unknown_op)
{
    expect_error_at(HDR "0,0,foo,torch,0,0,1,10\n", 3, "unknown op 'foo'");
    expect_error_at(HDR "0,0,,torch,0,0,1,10\n", 3, "unknown op ''");
    expect_error_at(HDR "0,0,Alloc,torch,0,0,1,10\n", 3, "unknown op 'Alloc'");
}
END_TEST

START_TEST(test_err_bad_number)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,12x\n", 3, "bad number in column 'size': '12x'");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,-5\n", 3, "bad number in column 'size': '-5'");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,+5\n", 3, "bad number in column 'size'");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,\n", 3, "bad number in column 'size': ''");
    expect_error_at(HDR "0,0,alloc,torch,0,0, 1,5\n", 3, "bad number in column 'id': ' 1'");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5 \n", 3, "bad number in column 'size'");
    expect_error_at(HDR "x,0,alloc,torch,0,0,1,5\n", 3, "bad number in column 'seq'");
    expect_error_at(HDR "0,1.5,alloc,torch,0,0,1,5\n", 3, "bad number in column 'time_us'");
    expect_error_at(HDR "0,0,alloc,torch,0,0x1,1,5\n", 3, "bad number in column 'stream'");
}
END_TEST

START_TEST(test_err_number_overflow)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,18446744073709551616\n", 3,
                    "bad number in column 'size': '18446744073709551616'");
    expect_error_at(HDR "0,0,alloc,torch,0,0,99999999999999999999999,1\n", 3,
                    "bad number in column 'id'");
    expect_error_at(HDR "0,0,alloc,torch,4294967296,0,1,1\n", 3,
                    "bad number in column 'device': '4294967296'");
}
END_TEST

START_TEST(test_err_columns)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1\n", 3, "expected 8 columns, got 7");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5,6\n", 3, "expected 8 columns, got 9");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5,\n", 3, "expected 8 columns, got 9");
    expect_error_at(HDR "garbage\n", 3, "expected 8 columns, got 1");
}
END_TEST

START_TEST(test_err_client_name)
{
    expect_error_at(HDR "0,0,alloc,to rch,0,0,1,5\n", 3, "bad client name");
    expect_error_at(HDR "0,0,alloc,,0,0,1,5\n", 3, "bad client name in column 'client': ''");
}
END_TEST

START_TEST(test_err_seq)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n2,0,free,torch,0,0,1,5\n", 4,
                    "expected seq 1, got 2");
    expect_error_at(HDR "1,0,alloc,torch,0,0,1,5\n", 3, "expected seq 0, got 1");
}
END_TEST

START_TEST(test_err_binary_garbage)
{
    static const char text[] = HDR "0,0,alloc,tor\0ch,0,0,1,5\n1,\x01\xff,x\n";
    GError *err = NULL;
    gs_trace *t = gs_trace_parse(NAME, text, sizeof text - 1, 0, NULL, NULL, &err);
    ck_assert_ptr_null(t);
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    ck_assert(g_str_has_prefix(err->message, NAME ":3: bad client name"));
    ck_assert_ptr_nonnull(strstr(err->message, "\\x00"));
    g_error_free(err);
}
END_TEST

START_TEST(test_err_line_numbers_count_comments)
{
    /* Comments and blank lines count as lines: the message points at the file's real line. */
    expect_error_at("# gpusim-trace 1\n# a: b\n\n# c\n" GS_TRACE_COLUMNS "\n\n# x\n"
                    "0,0,alloc,torch,0,0,1,5\n\n1,0,bogus,torch,0,0,1,5\n",
                    10, "unknown op 'bogus'");
}
END_TEST

/* ---- semantic errors ------------------------------------------------------------------------ */

START_TEST(test_err_alloc_live)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n1,0,alloc,torch,0,0,1,6\n", 4,
                    "alloc of live id 1 (allocated at line 3)");
}
END_TEST

START_TEST(test_err_free_unknown)
{
    expect_error_at(HDR "0,0,free,torch,0,0,7,5\n", 3, "free of unknown id 7");
    /* After free_done the id is gone. */
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n1,0,free,torch,0,0,1,5\n"
                        "2,0,free_done,torch,0,0,1,5\n3,0,free,torch,0,0,1,5\n",
                    6, "free of unknown id 1");
}
END_TEST

START_TEST(test_err_double_free)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n1,0,free,torch,0,0,1,5\n"
                        "2,0,free,torch,0,0,1,5\n",
                    5, "double free of id 1 (freed at line 4)");
}
END_TEST

START_TEST(test_err_free_done_without_free)
{
    expect_error_at(HDR "0,0,free_done,torch,0,0,1,5\n", 3,
                    "free_done of id 1 without a pending free");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n1,0,free_done,torch,0,0,1,5\n", 4,
                    "free_done of id 1 without a pending free");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,5\n1,0,free,torch,0,0,1,5\n"
                        "2,0,free_done,torch,0,0,1,5\n3,0,free_done,torch,0,0,1,5\n",
                    6, "free_done of id 1 without a pending free");
}
END_TEST

START_TEST(test_err_size_mismatch)
{
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,5\n", 4,
                    "free of id 1 with size 5, allocated with size 10");
    expect_error_at(HDR "0,0,alloc,torch,0,0,1,10\n1,0,free,torch,0,0,1,10\n"
                        "2,0,free_done,torch,0,0,1,11\n",
                    5, "free_done of id 1 with size 11, allocated with size 10");
}
END_TEST

START_TEST(test_lenient)
{
    const char *text = HDR "0,0,alloc,torch,0,0,1,10\n"     /* line 3 */
                           "1,0,alloc,torch,0,0,1,99\n"     /* 4: alloc of live id, dropped */
                           "2,0,free,torch,0,0,7,10\n"      /* 5: unknown id, dropped */
                           "3,0,free_done,torch,0,0,1,0\n"  /* 6: no pending free, dropped */
                           "4,0,free,torch,0,0,1,5\n"       /* 7: size mismatch, kept */
                           "5,0,free,torch,0,0,1,10\n"      /* 8: double free, dropped */
                           "6,0,free_done,torch,0,0,1,10\n" /* 9: fine */
                           "7,0,mark,torch,0,0,0,1\n";
    warn_log w = { g_ptr_array_new_with_free_func(g_free) };
    GError *err = NULL;
    gs_trace *t = gs_trace_parse(NAME, text, strlen(text), GS_TRACE_LENIENT, collect_warning, &w,
                                 &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "?");
    ck_assert_uint_eq(t->n_warnings, 5);
    ck_assert_uint_eq(w.msgs->len, 5);
    ck_assert_str_eq(g_ptr_array_index(w.msgs, 0), NAME ":4: alloc of live id 1 (allocated at line 3)");
    ck_assert_str_eq(g_ptr_array_index(w.msgs, 1), NAME ":5: free of unknown id 7");
    ck_assert_str_eq(g_ptr_array_index(w.msgs, 2),
                     NAME ":6: free_done of id 1 without a pending free");
    ck_assert_str_eq(g_ptr_array_index(w.msgs, 3),
                     NAME ":7: free of id 1 with size 5, allocated with size 10");
    ck_assert_str_eq(g_ptr_array_index(w.msgs, 4), NAME ":8: double free of id 1 (freed at line 7)");

    ck_assert_uint_eq(t->n, 4); /* alloc, free (kept despite its size), free_done, mark */
    ck_assert_uint_eq(t->n_slots, 1);
    ck_assert_uint_eq(t->ev[0].size, 10);
    ck_assert_uint_eq(t->ev[1].op, GS_OP_FREE);
    ck_assert_uint_eq(t->ev[1].size, 10);
    ck_assert_uint_eq(t->ev[1].flags, GS_EV_DEFERRED);
    ck_assert_uint_eq(t->ev[2].op, GS_OP_FREE_DONE);
    ck_assert_uint_eq(t->ev[3].op, GS_OP_MARK);
    gs_trace_free(t);
    g_ptr_array_unref(w.msgs);

    /* No callback: still counted. */
    t = gs_trace_parse(NAME, text, strlen(text), GS_TRACE_LENIENT, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n_warnings, 5);
    gs_trace_free(t);
}
END_TEST

/* A dropped event names no client and no stream: a one-client trace with a bad event of
 * another client's stays a one-client trace (its client and stream were kept). */
START_TEST(test_lenient_dropped_event_adds_no_client_or_stream)
{
    const char *text = HDR "0,0,alloc,torch,0,0,1,10\n"
                           "1,0,free,cupy,0,9,7,10\n"      /* unknown id: dropped */
                           "2,0,free_done,other,0,8,1,0\n" /* no pending free: dropped */
                           "3,0,free,torch,0,0,1,10\n";
    gs_trace *t = gs_trace_parse(NAME, text, strlen(text), GS_TRACE_LENIENT, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->n_warnings, 2);
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->clients->len, 1);
    ck_assert_str_eq(g_ptr_array_index(t->clients, 0), "torch");
    ck_assert_uint_eq(t->streams->len, 1);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_lenient_syntax_still_fatal)
{
    GError *err = NULL;
    const char *text = HDR "0,0,alloc,torch,0,0,1,1x\n";
    gs_trace *t = gs_trace_parse(NAME, text, strlen(text), GS_TRACE_LENIENT, NULL, NULL, &err);
    ck_assert_ptr_null(t);
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    ck_assert(g_str_has_prefix(err->message, NAME ":3: bad number"));
    g_error_free(err);
}
END_TEST

/* ---- files, gzip, writer -------------------------------------------------------------------- */

START_TEST(test_load_missing_file)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "nope.gstrace", NULL);
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_load(path, 0, NULL, NULL, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO));
    char *want = g_strdup_printf("%s: %s", path, g_strerror(ENOENT));
    ck_assert_str_eq(err->message, want);
    g_free(want);
    g_clear_error(&err);

    /* A directory reads as EISDIR. */
    ck_assert_ptr_null(gs_trace_load(dir, 0, NULL, NULL, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO));
    g_error_free(err);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_load_file_errors_name_path)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "bad.gstrace", NULL);
    write_file(path, HDR "0,0,alloc,torch,0,0,1,10\n1,0,nope,torch,0,0,1,10\n", -1);
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_load(path, 0, NULL, NULL, &err));
    char *prefix = g_strdup_printf("%s:4: unknown op 'nope'", path);
    ck_assert_str_eq(err->message, prefix);
    g_free(prefix);
    g_error_free(err);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

static gs_trace *build_sample(void)
{
    gs_trace *t = gs_trace_new();
    gs_trace_set_meta(t, "source", "unit test: built");
    gs_trace_set_meta(t, "device_total_bytes", "1000000");
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100);
    uint32_t b = gs_trace_add_alloc(t, "torch", 7, 200);
    uint32_t c = gs_trace_add_alloc(t, "cupy", 0, 0);
    gs_trace_add_op(t, GS_OP_MARK, 1);
    gs_trace_add_free_deferred(t, b);
    gs_trace_add_free(t, a);
    gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0);
    gs_trace_add_free_done(t, b);
    gs_trace_add_free(t, c);
    for (int i = 0; i < 1000; i++) {
        uint32_t s = gs_trace_add_alloc(t, i % 3 ? "torch" : "cupy", (uint64_t)i % 5,
                                        (uint64_t)i * 512);
        if (i % 4 == 0) {
            gs_trace_add_free_deferred(t, s);
            gs_trace_add_free_done(t, s);
        } else if (i % 4 != 3) {
            gs_trace_add_free(t, s);
        }
    }
    return t;
}

START_TEST(test_builder)
{
    gs_trace *t = build_sample();
    ck_assert_uint_eq(t->device_total, 1000000);
    ck_assert_str_eq(gs_trace_get_meta(t, "source"), "unit test: built");
    gs_trace_set_meta(t, "source", "replaced");
    ck_assert_str_eq(gs_trace_get_meta(t, "source"), "replaced");
    ck_assert_uint_eq(t->meta->len, 2);
    ck_assert_uint_eq(t->n_slots, 1003);
    ck_assert_uint_eq(t->slot_id[2], 3); /* id = slot + 1 */
    ck_assert_uint_eq(t->ev[0].time_us, 0);
    ck_assert_uint_eq(t->ev[3].op, GS_OP_MARK);
    ck_assert_uint_eq(t->ev[3].slot, UINT32_MAX);
    ck_assert_uint_eq(t->ev[4].op, GS_OP_FREE);
    ck_assert_uint_eq(t->ev[4].flags, GS_EV_DEFERRED);
    ck_assert_uint_eq(t->ev[4].size, 200);
    ck_assert_uint_eq(t->ev[4].stream, t->ev[1].stream);
    ck_assert_uint_eq(t->ev[5].flags, 0);
    ck_assert_uint_eq(t->ev[7].op, GS_OP_FREE_DONE);
    ck_assert_uint_eq(t->ev[8].client, 1);
    for (size_t i = 0; i < t->n; i++)
        ck_assert_uint_eq(t->ev[i].time_us, i);
    ck_assert_str_eq(gs_op_name(GS_OP_ALLOC), "alloc");
    ck_assert_str_eq(gs_op_name(GS_OP_FREE), "free");
    ck_assert_str_eq(gs_op_name(GS_OP_FREE_DONE), "free_done");
    ck_assert_str_eq(gs_op_name(GS_OP_EMPTY_CACHE), "empty_cache");
    ck_assert_str_eq(gs_op_name(GS_OP_MARK), "mark");
    ck_assert_str_eq(gs_op_name(GS_OP_COUNT), "unknown");
    gs_trace_free(t);
}
END_TEST

START_TEST(test_builder_op_on_empty_trace)
{
    gs_trace *t = gs_trace_new();
    gs_trace_add_op(t, GS_OP_MARK, 5);
    ck_assert_uint_eq(t->n, 1);
    ck_assert_uint_eq(t->clients->len, 1);
    ck_assert_uint_eq(t->streams->len, 1);
    gs_trace_free(t);
}
END_TEST

static void save_load_compare(gs_trace *t, const char *file, gboolean expect_gzip)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, file, NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
    ck_assert_uint_eq(count_entries(dir), 1); /* no temporary file left behind */

    char *data;
    gsize len;
    ck_assert(g_file_get_contents(path, &data, &len, NULL));
    ck_assert(len > 2);
    ck_assert_int_eq((unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b,
                     expect_gzip);
    g_free(data);

    gs_trace *u = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    assert_same_trace(t, u);
    ck_assert_str_eq(u->path, path);
    gs_trace_free(u);
    g_free(path);
    remove_tmpdir(dir);
}

START_TEST(test_roundtrip_built)
{
    gs_trace *t = build_sample();
    save_load_compare(t, "built.gstrace", FALSE);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_roundtrip_gzip)
{
    gs_trace *t = build_sample();
    save_load_compare(t, "built.gstrace.gz", TRUE);
    gs_trace_free(t);
}
END_TEST

/* ---- the binary format ---- */

START_TEST(test_binary_roundtrip_built)
{
    gs_trace *t = build_sample();
    save_load_compare(t, "built.gsbin", FALSE);
    gs_trace_free(t);
}
END_TEST

/* The bytes of t written as a binary trace (g_free them). */
static char *binary_bytes(const gs_trace *t, gsize *len)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "t.gsbin", NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
    char *data;
    ck_assert(g_file_get_contents(path, &data, len, NULL));
    ck_assert(*len >= 64 && memcmp(data, "\x89GSBIN\r\n", 8) == 0);
    g_free(path);
    remove_tmpdir(dir);
    return data;
}

/* A binary trace from memory and from a file is the trace it was written from, and a loaded one
 * can be built on (events read into a mapping of their own leave it: test_replay's
 * replay_binary_file_changed_after_loading loads one that large). */
START_TEST(test_binary_memory_and_file)
{
    gs_trace *t = build_sample();
    gsize len;
    char *data = binary_bytes(t, &len);
    GError *err = NULL;
    gs_trace *u = gs_trace_parse("m.gsbin", data, len, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    assert_same_trace(t, u);
    ck_assert_ptr_null(u->map);
    gs_trace_free(u);

    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "f.gsbin", NULL);
    ck_assert(g_file_set_contents(path, data, (gssize)len, NULL));
    u = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    assert_same_trace(t, u);
    size_t n = u->n;
    uint32_t s = gs_trace_add_alloc(u, "torch", 0, 4096);
    gs_trace_add_free(u, s);
    ck_assert_uint_eq(u->n, n + 2);
    ck_assert_ptr_null(u->map);
    ck_assert_uint_eq(u->ev[n].size, 4096);
    gs_trace_free(u);
    g_free(path);
    remove_tmpdir(dir);
    g_free(data);
    gs_trace_free(t);
}
END_TEST

/* A binary trace of 32 MB of events, loaded with 16 MB of address space to spare: one error,
 * "out of host memory", where g_malloc aborted the program. (Skipped under AddressSanitizer,
 * whose shadow memory no address-space limit allows; the soft limit only, put back after.) */
START_TEST(test_binary_past_memory_is_an_error)
{
#ifndef __SANITIZE_ADDRESS__
    gs_trace *t = gs_trace_new();
    for (int k = 0; k < 500000; k++) gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, 512));
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "big.gsbin", NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
    gs_trace_free(t);
    char *statm = NULL;
    ck_assert(g_file_get_contents("/proc/self/statm", &statm, NULL, NULL));
    rlim_t vm = (rlim_t)g_ascii_strtoull(statm, NULL, 10) * (rlim_t)sysconf(_SC_PAGESIZE);
    g_free(statm);
    struct rlimit was, now;
    ck_assert(getrlimit(RLIMIT_AS, &was) == 0);
    now = was;
    now.rlim_cur = vm + (16u << 20);
    ck_assert(setrlimit(RLIMIT_AS, &now) == 0);
    gs_trace *u = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert(setrlimit(RLIMIT_AS, &was) == 0);
    ck_assert_ptr_null(u);
    ck_assert_msg(strstr(err->message, "big.gsbin: byte ") &&
                      strstr(err->message, ": out of host memory for the "),
                  "%s", err->message);
    g_error_free(err);
    g_unlink(path);
    g_free(path);
    remove_tmpdir(dir);
#endif
}
END_TEST

/* Rules the text reader enforces, broken in a binary file: one message with the byte and the
 * event. The sample's slot ids are 1, 2, 3, ...; its first events alloc slots 0, 1, 2. */
START_TEST(test_binary_errors)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100);
    uint32_t b = gs_trace_add_alloc(t, "torch", 0, 200);
    gs_trace_add_free_deferred(t, a);
    gs_trace_add_free_done(t, a);
    gs_trace_add_free(t, b);
    gsize len;
    char *data = binary_bytes(t, &len);
    size_t ids = 64 + 8 * 1;          /* after the header and one stream */
    size_t ev = len - 5 * 32;         /* the first event */
    struct {
        size_t at;
        uint8_t value;
        const char *want;
    } cases[] = {
        /* slot 1's id made slot 0's, while slot 0 is live */
        {ids + 8, 1, "event 1: alloc of live id 1 (slot 0)"},
        {ev + 26, GS_OP_COUNT, "event 0: unknown op 9"},
        {ev + 26, GS_OP_POOL_END, "event 0: pool_end: private pool events"},
        {ev + 2 * 32 + 27, 0, "event 3: free_done of id 1 without a pending free"},
        {ev + 4 * 32 + 27, 1, "deferred free of id 2 never completed"},
        {ev + 24, 1, "event 0: client 1 before client 0"},
        {ev + 16, 1, "event 0: alloc of slot 1, expected slot 0"},
        {ev + 2 * 32 + 8, 99, "event 2: free of id 1 with size 99, allocated with size 100"},
        {12, 63, "bad binary header"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        char *bad = g_memdup2(data, len);
        bad[cases[i].at] = (char)cases[i].value;
        GError *err = NULL;
        ck_assert_ptr_null(gs_trace_parse("b.gsbin", bad, len, 0, NULL, NULL, &err));
        ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
        ck_assert_msg(g_str_has_prefix(err->message, "b.gsbin: byte ") &&
                          strstr(err->message, cases[i].want),
                      "case %zu: %s", i, err->message);
        g_error_free(err);
        g_free(bad);
    }
    /* Cut short, and one byte too many. */
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_parse("b.gsbin", data, len - 1, 0, NULL, NULL, &err));
    ck_assert_msg(strstr(err->message, "the header's counts make"), "%s", err->message);
    g_clear_error(&err);
    g_free(data);
    gs_trace_free(t);
}
END_TEST

/* The writer refuses what the reader would: a client no event names. */
START_TEST(test_binary_writer_refuses)
{
    gs_trace *t = gs_trace_new();
    gs_trace_add_alloc(t, "torch", 0, 100);
    g_ptr_array_add(t->clients, g_strdup("unused"));
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "r.gsbin", NULL);
    GError *err = NULL;
    ck_assert(!gs_trace_save(t, path, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    ck_assert_msg(strstr(err->message, "cannot be written as a binary trace: 2 clients, but "
                                       "the events name 1"), "%s", err->message);
    g_error_free(err);
    ck_assert_uint_eq(count_entries(dir), 0);
    g_free(path);
    remove_tmpdir(dir);
    gs_trace_free(t);
}
END_TEST

/* An interrupt that comes while a trace is written (the stop signals held back meanwhile)
 * leaves the file it was to replace as it was, and no temporary file: it was written in full
 * and renamed over it, then the run exited 130 (gpusim convert of 786k events, Ctrl-C after a
 * second). Here the signal is made pending before the save, with the mask already holding it,
 * so the save meets it as it would mid-write and the test process goes on. */
START_TEST(test_interrupted_save_keeps_the_old_file)
{
    gs_trace *t = gs_trace_new();
    for (int i = 0; i < 20000; i++) gs_trace_add_alloc(t, "torch", 0, 512 + (uint64_t)i);
    char *dir = make_tmpdir();
    const char *names[] = {"t.gstrace.gz", "t.gstrace", "t.gsbin"};
    sigset_t intr, before;
    sigemptyset(&intr);
    sigaddset(&intr, SIGINT);
    pthread_sigmask(SIG_BLOCK, &intr, &before);
    for (size_t k = 0; k < G_N_ELEMENTS(names); k++) {
        char *path = g_build_filename(dir, names[k], NULL);
        ck_assert(g_file_set_contents(path, "OLD\n", -1, NULL));
        raise(SIGINT); /* pending: held back */
        GError *err = NULL;
        ck_assert_msg(!gs_trace_save(t, path, &err), "%s: saved though interrupted", names[k]);
        ck_assert_msg(strstr(err->message, g_strerror(EINTR)), "%s", err->message);
        g_clear_error(&err);
        char *text = NULL;
        ck_assert(g_file_get_contents(path, &text, NULL, NULL));
        ck_assert_str_eq(text, "OLD\n");
        g_free(text);
        ck_assert_uint_eq(count_entries(dir), 1); /* no temporary file left */
        int got = 0;
        ck_assert_int_eq(sigwait(&intr, &got), 0); /* taken: the next save meets none */
        ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
        g_unlink(path);
        g_free(path);
    }
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    remove_tmpdir(dir);
    gs_trace_free(t);
}
END_TEST

static const char canonical[] =
    "# gpusim-trace 1\n"
    "# source: pytorch-snapshot resnet50 torch-2.11.0 H100\n"
    "# device_total_bytes: 85017493504\n"
    "# empty: \n"
    GS_TRACE_COLUMNS "\n"
    "0,0,alloc,torch,0,0,1,37632\n"
    "1,3,alloc,cupy,2,94823749234,18446744073709551615,5\n"
    "2,12,free,torch,0,0,1,37632\n"
    "3,12,mark,torch,0,0,0,1\n"
    "4,13,free,cupy,2,94823749234,18446744073709551615,5\n"
    "5,14,empty_cache,cupy,0,0,0,0\n"
    "6,15,free_done,cupy,2,94823749234,18446744073709551615,5\n"
    "7,16,alloc,torch,0,0,1,0\n";

START_TEST(test_roundtrip_text_exact)
{
    /* A trace in canonical form is written back byte for byte. */
    gs_trace *t = parse_ok(canonical);
    ck_assert_uint_eq(t->ev[4].flags, GS_EV_DEFERRED);
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, path, &err), "%s", err ? err->message : "?");
    char *data;
    ck_assert(g_file_get_contents(path, &data, NULL, NULL));
    ck_assert_str_eq(data, canonical);
    g_free(data);
    save_load_compare(t, "again.gstrace.gz", TRUE);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_roundtrip_device_total_set_directly)
{
    gs_trace *t = parse_ok(HDR "0,0,mark,torch,0,0,0,1\n");
    t->device_total = 12345;
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    gs_trace *u = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->device_total, 12345);
    ck_assert_str_eq(gs_trace_get_meta(u, "device_total_bytes"), "12345");
    gs_trace_free(u);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_gzip_truncated)
{
    gs_trace *t = build_sample();
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "t.gstrace.gz", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    char *data;
    gsize len;
    ck_assert(g_file_get_contents(path, &data, &len, NULL));

    /* Cut at several points, including inside the 8-byte trailer. */
    gsize cuts[] = { 2, 10, len / 2, len - 8, len - 1 };
    for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
        write_file(path, data, (gssize)cuts[i]);
        GError *err = NULL;
        ck_assert_ptr_null(gs_trace_load(path, 0, NULL, NULL, &err));
        ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
        char *want = g_strdup_printf("%s: truncated or corrupt gzip data", path);
        ck_assert_str_eq(err->message, want);
        g_free(want);
        g_error_free(err);
    }

    /* A flipped byte in the middle: the CRC or the inflater catches it. */
    data[len / 2] ^= 0x55;
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_parse("c.gz", data, len, 0, NULL, NULL, &err));
    ck_assert_str_eq(err->message, "c.gz: truncated or corrupt gzip data");
    g_clear_error(&err);
    data[len / 2] ^= 0x55;

    /* Garbage after a complete member is refused too. */
    char *more = g_malloc(len + 3);
    memcpy(more, data, len);
    memcpy(more + len, "xyz", 3);
    ck_assert_ptr_null(gs_trace_parse("g.gz", more, len + 3, 0, NULL, NULL, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    g_clear_error(&err);
    g_free(more);

    g_free(data);
    g_free(path);
    remove_tmpdir(dir);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_gzip_concatenated_members)
{
    /* `cat a.gz b.gz` is a valid gzip file. Split the text mid-line, compress the halves
     * apart, and read the result from memory and from a file. */
    size_t len = strlen(canonical), cut = 123;
    GBytes *m1 = gzip_bytes(canonical, cut), *m2 = gzip_bytes(canonical + cut, len - cut);
    gsize l1 = g_bytes_get_size(m1), l2 = g_bytes_get_size(m2);
    char *both = g_malloc(l1 + l2);
    memcpy(both, g_bytes_get_data(m1, NULL), l1);
    memcpy(both + l1, g_bytes_get_data(m2, NULL), l2);
    g_bytes_unref(m1);
    g_bytes_unref(m2);

    gs_trace *t = parse_ok(canonical);
    GError *err = NULL;
    gs_trace *u = gs_trace_parse("cat.gz", both, l1 + l2, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    assert_same_trace(t, u);
    gs_trace_free(u);

    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "cat.gstrace.gz", NULL);
    write_file(path, both, (gssize)(l1 + l2));
    u = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(u != NULL, "%s", err ? err->message : "?");
    assert_same_trace(t, u);
    gs_trace_free(u);

    /* Only the first member, whose text stops mid-line: a truncated line, not gzip damage. */
    ck_assert_ptr_null(gs_trace_parse("one.gz", both, l1, 0, NULL, NULL, &err));
    ck_assert(g_str_has_suffix(err->message, "truncated line (no newline at end of file)"));
    g_error_free(err);

    gs_trace_free(t);
    g_free(both);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_gzip_empty_content)
{
    GBytes *z = gzip_bytes("", 0);
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_parse("e.gz", g_bytes_get_data(z, NULL), g_bytes_get_size(z), 0,
                                      NULL, NULL, &err));
    ck_assert_str_eq(err->message, "e.gz: empty file, expected '# gpusim-trace 1'");
    g_error_free(err);
    g_bytes_unref(z);
}
END_TEST

START_TEST(test_save_missing_dir)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "no", "such", "out.gstrace", NULL);
    gs_trace *t = build_sample();
    GError *err = NULL;
    ck_assert(!gs_trace_save(t, path, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO));
    ck_assert(g_str_has_prefix(err->message, path));
    g_error_free(err);
    ck_assert_uint_eq(count_entries(dir), 0);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_save_atomic_failure_keeps_nothing)
{
    /* The target is a directory: the rename fails after the data was written, and the
     * temporary file must not survive. */
    char *dir = make_tmpdir();
    char *target = g_build_filename(dir, "out.gstrace", NULL);
    ck_assert_int_eq(g_mkdir(target, 0700), 0);
    char *inner = g_build_filename(target, "keep", NULL);
    write_file(inner, "x", 1);
    gs_trace *t = build_sample();
    GError *err = NULL;
    ck_assert(!gs_trace_save(t, target, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_IO));
    g_error_free(err);
    ck_assert_uint_eq(count_entries(dir), 1);
    ck_assert_uint_eq(count_entries(target), 1);
    g_unlink(inner);
    g_rmdir(target);
    g_free(inner);
    g_free(target);
    gs_trace_free(t);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_save_replaces_existing)
{
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    write_file(path, "old contents that are longer than nothing\n", -1);
    gs_trace *t = parse_ok(canonical);
    ck_assert(gs_trace_save(t, path, NULL));
    char *data;
    ck_assert(g_file_get_contents(path, &data, NULL, NULL));
    ck_assert_str_eq(data, canonical);
    ck_assert_uint_eq(count_entries(dir), 1);
    g_free(data);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_save_refuses_unwritable)
{
    /* A hand-made meta value with a newline would read back as something else. */
    gs_trace *t = parse_ok(canonical);
    gs_trace_meta *m = &g_array_index(t->meta, gs_trace_meta, 0);
    g_free(m->value);
    m->value = g_strdup("two\nlines");
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    GError *err = NULL;
    ck_assert(!gs_trace_save(t, path, &err));
    ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
    g_error_free(err);
    ck_assert_uint_eq(count_entries(dir), 0);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_builder_continues_loaded)
{
    gs_trace *t = parse_ok(HDR "0,0,alloc,torch,0,5,40,10\n"
                               "1,0,alloc,torch,0,5,41,20\n"
                               "2,0,free,torch,0,5,41,20\n"
                               "3,0,free_done,torch,0,5,41,20\n");
    gs_trace_add_free(t, 0);
    ck_assert_uint_eq(t->n, 5);
    ck_assert_uint_eq(t->ev[4].op, GS_OP_FREE);
    ck_assert_uint_eq(t->ev[4].size, 10);
    ck_assert_uint_eq(t->ev[4].stream, 0);
    uint32_t s = gs_trace_add_alloc(t, "torch", 5, 30);
    ck_assert_uint_eq(s, 2);
    ck_assert_uint_eq(t->slot_id[2], 3);
    gs_trace_free(t);
}
END_TEST

/* Random valid traces over a small id range, checked against a model: exercises id reuse,
 * deferred frees and deletions from the reader's id table. */
START_TEST(test_random_against_model)
{
    GRand *rng = g_rand_new_with_seed(12345);
    enum { IDS = 300, LINES = 30000 };
    int state[IDS];        /* 0 dead, 1 live, 2 freed and a free_done will follow */
    int64_t slot_of[IDS];  /* current slot of each id */
    int64_t want_slot[LINES];
    int want_deferred[LINES];
    size_t free_line_of[IDS];
    memset(state, 0, sizeof state);
    GString *g = g_string_new(HDR);
    size_t n_slots = 0;
    for (int i = 0; i < LINES; i++) {
        int id = g_rand_int_range(rng, 0, IDS);
        uint64_t raw_id = (uint64_t)id * 0x100000001ull; /* spread, still collides in hash */
        want_deferred[i] = 0;
        if (state[id] == 0) {
            slot_of[id] = (int64_t)n_slots++;
            state[id] = 1;
            g_string_append_printf(g, "%d,%d,alloc,c%d,0,%d,%" G_GUINT64_FORMAT ",%d\n", i, i,
                                   id % 3, id % 4, raw_id, id + 1);
        } else if (state[id] == 1) {
            gboolean deferred = g_rand_boolean(rng);
            g_string_append_printf(g, "%d,%d,free,c%d,0,%d,%" G_GUINT64_FORMAT ",0\n", i, i,
                                   id % 3, id % 4, raw_id);
            state[id] = deferred ? 2 : 0;
            free_line_of[id] = (size_t)i;
        } else {
            g_string_append_printf(g, "%d,%d,free_done,c%d,0,%d,%" G_GUINT64_FORMAT ",%d\n", i,
                                   i, id % 3, id % 4, raw_id, id + 1);
            want_deferred[free_line_of[id]] = 1;
            state[id] = 0;
        }
        want_slot[i] = slot_of[id];
    }
    gs_trace *t = parse_ok(g->str);
    ck_assert_uint_eq(t->n, LINES);
    ck_assert_uint_eq(t->n_slots, n_slots);
    for (int i = 0; i < LINES; i++) {
        ck_assert_uint_eq(t->ev[i].slot, (uint64_t)want_slot[i]);
        ck_assert_uint_eq(t->ev[i].flags, (unsigned)want_deferred[i]);
        ck_assert_uint_eq(t->ev[i].size, t->slot_id[t->ev[i].slot] / 0x100000001ull + 1);
    }
    /* About 1 MB of text: files are read in chunks, so lines straddle chunk boundaries. */
    save_load_compare(t, "random.gstrace", FALSE);
    save_load_compare(t, "random.gstrace.gz", TRUE);
    gs_trace_free(t);
    g_string_free(g, TRUE);
    g_rand_free(rng);
}
END_TEST

START_TEST(test_error_line_in_large_file)
{
    /* Line numbers keep counting across the chunks a file is read in, plain or gzip. */
    gs_trace *t = gs_trace_new();
    for (int i = 0; i < 50000; i++)
        gs_trace_add_free(t, gs_trace_add_alloc(t, "torch", 0, 4096));
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "big.gstrace", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    char *text;
    ck_assert(g_file_get_contents(path, &text, NULL, NULL));
    char *bad = g_strconcat(text, "100000,0,alloc,torch,0,0,1,x\n", NULL);
    GBytes *gz = gzip_bytes(bad, strlen(bad));
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            write_file(path, bad, -1);
        else
            write_file(path, g_bytes_get_data(gz, NULL), (gssize)g_bytes_get_size(gz));
        GError *err = NULL;
        ck_assert_ptr_null(gs_trace_load(path, 0, NULL, NULL, &err));
        /* 1 magic + 1 column line + 100000 events, then the bad one */
        char *want = g_strdup_printf("%s:100003: bad number in column 'size': 'x'", path);
        ck_assert_str_eq(err->message, want);
        g_free(want);
        g_error_free(err);
    }
    g_bytes_unref(gz);
    g_free(bad);
    g_free(text);
    g_free(path);
    gs_trace_free(t);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_long_line)
{
    /* A comment far longer than a read chunk must not confuse the line splitting. */
    GString *g = g_string_new("# gpusim-trace 1\n# note: ");
    for (int i = 0; i < 700000; i++)
        g_string_append_c(g, (char)('a' + i % 26));
    g_string_append(g, "\n" GS_TRACE_COLUMNS "\n0,0,mark,torch,0,0,0,1\n");
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "long.gstrace", NULL);
    write_file(path, g->str, (gssize)g->len);
    GError *err = NULL;
    gs_trace *t = gs_trace_load(path, 0, NULL, NULL, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "?");
    ck_assert_uint_eq(strlen(gs_trace_get_meta(t, "note")), 700000);
    ck_assert_uint_eq(t->n, 1);
    gs_trace_free(t);

    /* The same long line, cut short at the end of the file. */
    write_file(path, g->str, 300000);
    ck_assert_ptr_null(gs_trace_load(path, 0, NULL, NULL, &err));
    ck_assert(g_str_has_suffix(err->message, ":2: truncated line (no newline at end of file)"));
    g_error_free(err);
    g_free(path);
    remove_tmpdir(dir);
    g_string_free(g, TRUE);
}
END_TEST

/* ---- limits ----------------------------------------------------------------------------- */

/* A trace of n allocations, each on a stream (or, with by_client, a client) of its own, then
 * the free of the first one, on the stream and client it already has: line 3 + i allocates
 * with stream i (client "ci"), and line 3 + n frees. */
static char *distinct_trace(size_t n, gboolean by_client)
{
    GString *g = g_string_new(HDR);
    for (size_t i = 0; i < n; i++)
        g_string_append_printf(g, "%zu,%zu,alloc,c%zu,0,%zu,%zu,512\n", i, i, by_client ? i : 0,
                               by_client ? 0 : i, i + 1);
    g_string_append_printf(g, "%zu,%zu,free,c0,0,0,1,512\n", n, n);
    return g_string_free(g, FALSE);
}

/* Counts what g_return_val_if_fail logs, so a test sees a precondition enforced (and the
 * message stays out of the test log). */
static void count_critical(const char *domain, GLogLevelFlags level, const char *msg, void *ud)
{
    (*(int *)ud)++;
}

/* Loads text from a file in a fresh directory; the file's path is returned in *path. */
static gs_trace *load_text(const char *dir, const char *text, unsigned flags, char **path,
                           GError **err)
{
    *path = g_build_filename(dir, "limit.gstrace", NULL);
    write_file(*path, text, -1);
    return gs_trace_load(*path, flags, NULL, NULL, err);
}

START_TEST(test_max_streams_load)
{
    char *dir = make_tmpdir(), *path, *text = distinct_trace(GS_TRACE_MAX_STREAMS, FALSE);
    GError *err = NULL;
    gs_trace *t = load_text(dir, text, 0, &path, &err);
    ck_assert_msg(t != NULL, "%s", err ? err->message : "?");
    ck_assert_uint_eq(t->streams->len, GS_TRACE_MAX_STREAMS);
    ck_assert_uint_eq(t->ev[GS_TRACE_MAX_STREAMS - 1].stream, GS_TRACE_MAX_STREAMS - 1);
    ck_assert_uint_eq(t->ev[GS_TRACE_MAX_STREAMS].op, GS_OP_FREE);

    /* The builder, at the limit: a stream the trace has is fine, one more is refused. */
    int criticals = 0;
    guint h = g_log_set_handler(NULL, G_LOG_LEVEL_CRITICAL, count_critical, &criticals);
    ck_assert_uint_eq(gs_trace_add_alloc(t, "c0", GS_TRACE_MAX_STREAMS - 1, 64),
                      GS_TRACE_MAX_STREAMS);
    ck_assert_int_eq(criticals, 0);
    size_t n = t->n;
    ck_assert_uint_eq(gs_trace_add_alloc(t, "c0", GS_TRACE_MAX_STREAMS, 64), UINT32_MAX);
    ck_assert_int_eq(criticals, 1);
    ck_assert_uint_eq(t->n, n);
    ck_assert_uint_eq(t->streams->len, GS_TRACE_MAX_STREAMS);
    g_log_remove_handler(NULL, h);

    gs_trace_free(t);
    g_free(text);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

/* The regression test of 70,000 streams used to load, then abort in the core. The
 * first event past the limit is refused, with its line, strict or lenient. */
START_TEST(test_too_many_streams)
{
    GString *g = g_string_new(NULL);
    char *dir = make_tmpdir(), *path;
    char *text = distinct_trace(GS_TRACE_MAX_STREAMS, FALSE);
    g_string_append(g, text);
    for (size_t i = GS_TRACE_MAX_STREAMS; i < 70000; i++) /* seq goes on after the free */
        g_string_append_printf(g, "%zu,0,alloc,c0,0,%zu,%zu,512\n", i + 1, i, i + 1);
    /* 2 header lines, 65536 allocations on new streams, the free, then stream 65536 */
    const size_t line = 2 + GS_TRACE_MAX_STREAMS + 1 + 1;
    char *what = g_strdup_printf("too many streams: a trace may have at most %u, and stream %u "
                                 "would be one more", GS_TRACE_MAX_STREAMS, GS_TRACE_MAX_STREAMS);
    expect_error_at(g->str, line, what);
    for (unsigned flags = 0; flags <= GS_TRACE_LENIENT; flags += GS_TRACE_LENIENT) {
        GError *err = NULL;
        ck_assert_ptr_null(load_text(dir, g->str, flags, &path, &err));
        ck_assert(g_error_matches(err, GS_TRACE_ERROR, GS_TRACE_ERROR_FORMAT));
        char *want = g_strdup_printf("%s:%zu: %s", path, line, what);
        ck_assert_str_eq(err->message, want);
        g_free(want);
        g_free(path);
        g_error_free(err);
    }
    g_free(what);
    g_free(text);
    g_string_free(g, TRUE);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_too_many_clients)
{
    char *text = distinct_trace(GS_TRACE_MAX_CLIENTS, TRUE);
    gs_trace *t = parse_ok(text);
    ck_assert_uint_eq(t->clients->len, GS_TRACE_MAX_CLIENTS);
    ck_assert_uint_eq(t->ev[GS_TRACE_MAX_CLIENTS - 1].client, GS_TRACE_MAX_CLIENTS - 1);

    int criticals = 0;
    guint h = g_log_set_handler(NULL, G_LOG_LEVEL_CRITICAL, count_critical, &criticals);
    ck_assert_uint_ne(gs_trace_add_alloc(t, "c65535", 0, 64), UINT32_MAX);
    ck_assert_int_eq(criticals, 0);
    ck_assert_uint_eq(gs_trace_add_alloc(t, "one_more", 0, 64), UINT32_MAX);
    ck_assert_int_eq(criticals, 1);
    ck_assert_uint_eq(t->clients->len, GS_TRACE_MAX_CLIENTS);
    g_log_remove_handler(NULL, h);
    gs_trace_free(t);

    /* One client more, on the line after the free: refused, lenient or not (its id a new one:
     * only the limit is wrong with it, so lenient mode has nothing to drop it for). */
    char *more = g_strdup_printf("%s%u,0,alloc,one_more,0,0,%u,1\n", text,
                                 GS_TRACE_MAX_CLIENTS + 1, GS_TRACE_MAX_CLIENTS + 1);
    const char *what = "too many clients: a trace may have at most 65536, and 'one_more' would "
                       "be one more";
    expect_error_at(more, 2 + GS_TRACE_MAX_CLIENTS + 1 + 1, what);
    GError *err = NULL;
    ck_assert_ptr_null(gs_trace_parse(NAME, more, strlen(more), GS_TRACE_LENIENT, NULL, NULL,
                                      &err));
    ck_assert(strstr(err->message, what) != NULL);
    g_error_free(err);
    g_free(more);
    g_free(text);
}
END_TEST

/* ---- version 2: requests that failed in the recorded run; header keys with a meaning ---- */

#define HDR2 "# gpusim-trace 2\n" GS_TRACE_COLUMNS "\n"

static const char v2_text[] = "# gpusim-trace 2\n"
                              "# fatal_oom_event: 3\n"
                              "# synthesized_allocs: 1\n"
                              GS_TRACE_COLUMNS "\n"
                              "0,0,alloc,torch,0,0,1,4096\n"
                              "1,5,oom,torch,0,7,0,130547712\n"
                              "2,6,free,torch,0,0,1,4096\n"
                              "3,9,oom,torch,0,0,0,2097152\n";

START_TEST(test_v2_oom_events)
{
    gs_trace *t = parse_ok(v2_text);
    ck_assert_uint_eq(t->n, 4);
    ck_assert_uint_eq(t->n_slots, 1); /* an oom names no allocation */
    ck_assert_uint_eq(t->ev[1].op, GS_OP_OOM);
    ck_assert_uint_eq(t->ev[1].slot, UINT32_MAX);
    ck_assert_uint_eq(t->ev[1].size, 130547712);
    ck_assert_uint_eq(g_array_index(t->streams, uint64_t, t->ev[1].stream), 7);
    ck_assert_str_eq(gs_op_name(GS_OP_OOM), "oom");
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    ck_assert(cv.fatal_oom);
    ck_assert_uint_eq(cv.fatal_oom_event, 3);
    ck_assert_uint_eq(cv.synthesized, 1);
    ck_assert(cv.started_mid_run);
    ck_assert_uint_eq(cv.n_oom_events, 2);
    /* written back byte for byte, as version 2 */
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    char *data;
    ck_assert(g_file_get_contents(path, &data, NULL, NULL));
    ck_assert_str_eq(data, v2_text);
    g_free(data);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_v2_reads_version_1)
{
    /* A version-2 reader takes version 1 as it always did, and writes it back as version 1. */
    gs_trace *t = parse_ok(canonical);
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    ck_assert(!cv.fatal_oom && !cv.started_mid_run && cv.n_oom_events == 0);
    gs_trace_free(t);
    t = parse_ok(HDR2 "0,0,alloc,torch,0,0,1,4096\n");
    ck_assert_uint_eq(t->n, 1);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_err_oom_in_version_1)
{
    expect_error_at(HDR "0,0,oom,torch,0,0,0,4096\n", 3, "op 'oom' needs '# gpusim-trace 2'");
}
END_TEST

START_TEST(test_err_fatal_oom_header)
{
    /* the header must name the last event, and it must be an oom */
    expect_error_at("# gpusim-trace 2\n# fatal_oom_event: 0\n" GS_TRACE_COLUMNS "\n"
                    "0,0,oom,torch,0,0,0,4096\n1,0,mark,torch,0,0,0,0\n",
                    0, "'fatal_oom_event' must name the last event, an oom");
    expect_error_at("# gpusim-trace 2\n# fatal_oom_event: 0\n" GS_TRACE_COLUMNS "\n"
                    "0,0,alloc,torch,0,0,1,4096\n",
                    0, "'fatal_oom_event' must name the last event, an oom");
    expect_error_at("# gpusim-trace 2\n# fatal_oom_event: x\n" GS_TRACE_COLUMNS "\n"
                    "0,0,oom,torch,0,0,0,4096\n", 0, "bad number in header 'fatal_oom_event'");
    expect_error_at("# gpusim-trace 2\n# synthesized_allocs: 2\n" GS_TRACE_COLUMNS "\n"
                    "0,0,alloc,torch,0,0,1,4096\n", 0, "'synthesized_allocs' is more");
    expect_error_at("# gpusim-trace 1\n# device_total_bytes_by_device: 0:5\n" GS_TRACE_COLUMNS
                    "\n0,0,alloc,torch,0,0,1,4096\n", 0, "'device_total_bytes_by_device'");
}
END_TEST

START_TEST(test_devices_and_totals)
{
    gs_trace *t = parse_ok("# gpusim-trace 1\n# device_total_bytes: 1000\n"
                           "# device_total_bytes_by_device: 1=2000,3=4000\n" GS_TRACE_COLUMNS "\n"
                           "0,0,alloc,torch,3,0,1,4096\n"
                           "1,0,alloc,torch,1,0,2,4096\n"
                           "2,0,alloc,torch,3,0,3,4096\n"
                           "3,0,free,torch,1,0,2,4096\n");
    uint32_t *ids = NULL;
    ck_assert_uint_eq(gs_trace_devices(t, &ids), 2);
    ck_assert_uint_eq(ids[0], 1);
    ck_assert_uint_eq(ids[1], 3);
    g_free(ids);
    ck_assert_uint_eq(gs_trace_device_total(t, 1), 2000);
    ck_assert_uint_eq(gs_trace_device_total(t, 3), 4000);
    ck_assert_uint_eq(gs_trace_device_total(t, 0), 1000); /* not in the list: every device's */
    gs_trace_free(t);
    t = gs_trace_new(); /* no events: device 0 */
    ck_assert_uint_eq(gs_trace_devices(t, &ids), 1);
    ck_assert_uint_eq(ids[0], 0);
    g_free(ids);
    gs_trace_free(t);
}
END_TEST

START_TEST(test_builder_oom)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100);
    gs_trace_add_oom(t, "torch", 5, 1 << 30);
    gs_trace_add_free(t, a);
    ck_assert_uint_eq(t->n, 3);
    ck_assert_uint_eq(t->n_slots, 1);
    ck_assert_uint_eq(t->ev[1].op, GS_OP_OOM);
    ck_assert_uint_eq(t->ev[1].size, 1 << 30);
    ck_assert_uint_eq(t->ev[1].slot, UINT32_MAX);
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "b.gstrace", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    char *data;
    ck_assert(g_file_get_contents(path, &data, NULL, NULL));
    ck_assert(g_str_has_prefix(data, "# gpusim-trace 2\n"));
    ck_assert_ptr_nonnull(strstr(data, "\n1,1,oom,torch,0,5,0,1073741824\n"));
    g_free(data);
    gs_trace *u = gs_trace_load(path, 0, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->ev[1].op, GS_OP_OOM);
    gs_trace_free(u);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

/* A recording cut at its fatal OOM (the library's, when the program died of it): the events
 * after it, their allocations, and the stream and client only they named go; the text and
 * binary writers take what is left (the binary one refused a table entry no event names, and
 * the library's trace of a death was not written). */
START_TEST(test_truncate_at_a_death)
{
    gs_trace *t = gs_trace_new();
    uint32_t a = gs_trace_add_alloc(t, "torch", 0, 100);
    gs_trace_add_oom(t, "torch", 0, 1 << 30);
    uint32_t b = gs_trace_add_alloc(t, "cupy", 0x5555, 200); /* the unwinding's */
    gs_trace_add_free(t, b);
    gs_trace_add_free(t, a);
    gs_trace_truncate(t, 2);
    ck_assert_uint_eq(t->n, 2);
    ck_assert_uint_eq(t->n_slots, 1);
    ck_assert_uint_eq(t->streams->len, 1);
    ck_assert_uint_eq(t->clients->len, 1);
    char *dir = make_tmpdir();
    char *text = g_build_filename(dir, "d.gstrace", NULL),
         *bin = g_build_filename(dir, "d.gsbin", NULL);
    GError *err = NULL;
    ck_assert_msg(gs_trace_save(t, text, &err), "%s", err ? err->message : "?");
    ck_assert_msg(gs_trace_save(t, bin, &err), "%s", err ? err->message : "?");
    gs_trace *u = gs_trace_load(bin, 0, NULL, NULL, &err);
    ck_assert_msg(u, "%s", err ? err->message : "?");
    ck_assert_uint_eq(u->n, 2);
    ck_assert_uint_eq(u->ev[1].op, GS_OP_OOM);
    gs_trace_free(u);
    gs_trace_add_free(t, a); /* building goes on from the events kept */
    ck_assert_uint_eq(t->n, 3);
    gs_trace_free(t);
    g_free(text);
    g_free(bin);
    remove_tmpdir(dir);
}
END_TEST

/* ---- version 3: private pool events ---- */

static const char v3_text[] = "# gpusim-trace 3\n"
                              GS_TRACE_COLUMNS "\n"
                              "0,0,pool_begin,torch,0,7,2,0\n"
                              "1,1,alloc,torch,0,7,1,4096\n"
                              "2,2,pool_end,torch,0,7,2,0\n"
                              "3,3,free,torch,0,7,1,4096\n"
                              "4,4,pool_begin,torch,0,0,3,1\n"
                              "5,5,pool_end,torch,0,0,3,0\n"
                              "6,6,pool_release,torch,0,0,3,1\n"
                              "7,7,pool_release,torch,0,7,2,0\n";

START_TEST(test_v3_pool_events)
{
    gs_trace *t = parse_ok(v3_text);
    ck_assert_uint_eq(t->n, 8);
    ck_assert_uint_eq(t->n_slots, 1); /* a pool event names no allocation */
    ck_assert_uint_eq(t->ev[0].op, GS_OP_POOL_BEGIN);
    ck_assert(gs_event_is_pool(&t->ev[0]));
    ck_assert(!gs_event_is_pool(&t->ev[1]));
    ck_assert_uint_eq(gs_event_pool(&t->ev[0]), 2);
    ck_assert_uint_eq(t->ev[4].size, 1);
    ck_assert_uint_eq(t->ev[6].op, GS_OP_POOL_RELEASE);
    ck_assert_str_eq(gs_op_name(GS_OP_POOL_END), "pool_end");
    /* written back byte for byte, as version 3 */
    char *dir = make_tmpdir();
    char *path = g_build_filename(dir, "out.gstrace", NULL);
    ck_assert(gs_trace_save(t, path, NULL));
    char *data;
    ck_assert(g_file_get_contents(path, &data, NULL, NULL));
    ck_assert_str_eq(data, v3_text);
    g_free(data);
    /* the binary format refuses them, with a message that says why */
    char *bpath = g_build_filename(dir, "out.gsbin", NULL);
    GError *err = NULL;
    ck_assert(!gs_trace_save(t, bpath, &err));
    ck_assert_ptr_nonnull(strstr(err->message, "private pool events"));
    g_error_free(err);
    g_free(bpath);
    gs_trace_free(t);
    g_free(path);
    remove_tmpdir(dir);
}
END_TEST

START_TEST(test_v3_pool_errors)
{
    expect_error_at("# gpusim-trace 2\n" GS_TRACE_COLUMNS "\n0,0,pool_begin,torch,0,0,1,0\n", 3,
                    "op 'pool_begin' needs '# gpusim-trace 3'");
    expect_error_at("# gpusim-trace 3\n" GS_TRACE_COLUMNS "\n0,0,pool_end,torch,0,0,0,0\n", 3,
                    "bad pool id in column 'id': 0");
    expect_error_at("# gpusim-trace 3\n" GS_TRACE_COLUMNS "\n0,0,pool_release,torch,0,0,1,2\n",
                    3, "bad flag in column 'size' of 'pool_release': 2");
    expect_error_at("# gpusim-trace 3\n" GS_TRACE_COLUMNS "\n0,0,pool_begin,torch,0,0,4294967295,0\n",
                    3, "bad pool id");
}
END_TEST

/* ---- an assumed continuation (repeat.c) ---- */

/* Weights, then steps of (alloc A, alloc B, free A, free B, a mark), the last one dying at B:
 * a loop of period 5 whose death is the request it repeats. deferred: A's free is completed
 * later (a free_done), to check that a shifted copy completes the shifted free. */
static gs_trace *loop_trace(int steps, bool deferred, bool grow)
{
    gs_trace *t = gs_trace_new();
    (void)gs_trace_add_alloc(t, "torch", 0, 1000);
    for (int k = 0; k <= steps; k++) {
        uint64_t a_size = grow ? 100 + (uint64_t)k : 100;
        uint32_t a = gs_trace_add_alloc(t, "torch", 0, a_size);
        if (k == steps) {
            gs_trace_add_oom(t, "torch", 0, 300);
            break;
        }
        uint32_t b = gs_trace_add_alloc(t, "torch", 0, 300);
        if (deferred) gs_trace_add_free_deferred(t, a);
        else gs_trace_add_free(t, a);
        gs_trace_add_free(t, b);
        if (deferred) gs_trace_add_free_done(t, a);
        gs_trace_add_op(t, GS_OP_MARK, (uint64_t)k);
    }
    char fatal[32];
    g_snprintf(fatal, sizeof fatal, "%zu", t->n - 1);
    gs_trace_set_meta(t, "fatal_oom_event", fatal);
    return t;
}

START_TEST(test_repeat_finds_the_period_and_continues_it)
{
    for (int d = 0; d < 2; d++) {
        gs_trace *t = loop_trace(4, d, false);
        gs_trace_period p;
        const char *why = NULL;
        ck_assert_msg(gs_trace_find_period(t, &p, &why), "%s", why ? why : "");
        size_t per = d ? 6 : 5;
        ck_assert_uint_eq(p.period, per);
        ck_assert_uint_eq(p.death, t->n - 1);
        ck_assert_uint_eq(p.start, p.death - per);
        gs_trace *o = gs_trace_assume_repeat(t, &p, 3, &why);
        ck_assert_ptr_nonnull(o);
        /* the events before the death, then the death's request and 3 periods from it */
        ck_assert_uint_eq(o->n, p.death + 3 * per);
        gs_trace_caveats cv;
        gs_trace_get_caveats(o, &cv);
        ck_assert(!cv.fatal_oom);
        ck_assert_ptr_nonnull(gs_trace_get_meta(o, "assumed_repeat"));
        ck_assert_ptr_null(gs_trace_get_meta(o, "fatal_oom_event"));
        /* the death's request, made as the allocation it was */
        ck_assert_uint_eq(o->ev[p.death].op, GS_OP_ALLOC);
        ck_assert_uint_eq(o->ev[p.death].size, 300);
        /* each generated event is the one a period back, with its own allocations */
        for (size_t i = p.death; i < o->n; i++) {
            ck_assert_uint_eq(o->ev[i].op, o->ev[i - per].op);
            ck_assert_uint_eq(o->ev[i].size, o->ev[i - per].size);
            ck_assert_uint_eq(o->ev[i].flags, o->ev[i - per].flags);
        }
        /* every allocation of the loop is freed (the weights stay): it writes and reads back */
        char *path = g_build_filename(g_get_tmp_dir(), "gs-repeat-XXXXXX.gstrace", NULL);
        int fd = g_mkstemp(path);
        close(fd);
        GError *err = NULL;
        ck_assert(gs_trace_save(o, path, &err));
        gs_trace *back = gs_trace_load(path, 0, NULL, NULL, &err);
        ck_assert_msg(back != NULL, "%s", err ? err->message : "");
        ck_assert_uint_eq(back->n, o->n);
        gs_trace_free(back);
        g_unlink(path);
        g_free(path);
        gs_trace_free(o);
        gs_trace_free(t);
    }
}
END_TEST

START_TEST(test_repeat_refuses_what_it_cannot_see)
{
    const char *why = NULL;
    gs_trace_period p;
    /* steps that grow: no period */
    gs_trace *t = loop_trace(6, false, true);
    ck_assert(!gs_trace_find_period(t, &p, &why));
    ck_assert_ptr_nonnull(strstr(why, "do not repeat"));
    gs_trace_free(t);
    /* too few steps to see two repetitions */
    t = loop_trace(1, false, false);
    ck_assert(!gs_trace_find_period(t, &p, &why));
    gs_trace_free(t);
    /* a trace that did not die */
    t = gs_trace_new();
    (void)gs_trace_add_alloc(t, "torch", 0, 1);
    ck_assert(!gs_trace_find_period(t, &p, &why));
    ck_assert_ptr_nonnull(strstr(why, "does not end where its run died"));
    gs_trace_free(t);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("read");
    tcase_set_timeout(tc, 60); /* the random test is slow under valgrind */
    tcase_add_test(tc, test_basic);
    tcase_add_test(tc, test_empty_trace_ok);
    tcase_add_test(tc, test_zero_size_alloc);
    tcase_add_test(tc, test_empty_cache_and_mark);
    tcase_add_test(tc, test_max_values);
    tcase_add_test(tc, test_numbers_of_every_length);
    tcase_add_test(tc, test_time_may_decrease);
    tcase_add_test(tc, test_crlf);
    tcase_add_test(tc, test_comments_and_blank_lines);
    tcase_add_test(tc, test_deferred_flag);
    tcase_add_test(tc, test_id_reuse);
    tcase_add_test(tc, test_free_done_after_reuse_is_error);
    tcase_add_test(tc, test_random_against_model);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, test_err_empty_file);
    tcase_add_test(tc, test_err_version);
    tcase_add_test(tc, test_v3_pool_events);
    tcase_add_test(tc, test_v3_pool_errors);
    tcase_add_test(tc, test_err_not_a_trace);
    tcase_add_test(tc, test_err_missing_columns);
    tcase_add_test(tc, test_err_wrong_columns);
    tcase_add_test(tc, test_err_truncated_line);
    tcase_add_test(tc, test_err_device_total);
    tcase_add_test(tc, test_err_unknown_op);
    tcase_add_test(tc, test_err_bad_number);
    tcase_add_test(tc, test_err_number_overflow);
    tcase_add_test(tc, test_err_columns);
    tcase_add_test(tc, test_err_client_name);
    tcase_add_test(tc, test_err_seq);
    tcase_add_test(tc, test_err_binary_garbage);
    tcase_add_test(tc, test_err_line_numbers_count_comments);
    tcase_add_test(tc, test_err_alloc_live);
    tcase_add_test(tc, test_err_free_unknown);
    tcase_add_test(tc, test_err_double_free);
    tcase_add_test(tc, test_err_free_done_without_free);
    tcase_add_test(tc, test_err_size_mismatch);
    tcase_add_test(tc, test_lenient);
    tcase_add_test(tc, test_lenient_dropped_event_adds_no_client_or_stream);
    tcase_add_test(tc, test_lenient_syntax_still_fatal);
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_load_missing_file);
    tcase_add_test(tc, test_load_file_errors_name_path);
    tcase_add_test(tc, test_gzip_truncated);
    tcase_add_test(tc, test_gzip_concatenated_members);
    tcase_add_test(tc, test_gzip_empty_content);
    tcase_add_test(tc, test_roundtrip_text_exact);
    tcase_add_test(tc, test_roundtrip_device_total_set_directly);
    tcase_add_test(tc, test_save_missing_dir);
    tcase_add_test(tc, test_save_atomic_failure_keeps_nothing);
    tcase_add_test(tc, test_save_replaces_existing);
    tcase_add_test(tc, test_save_refuses_unwritable);
    tcase_add_test(tc, test_error_line_in_large_file);
    tcase_add_test(tc, test_long_line);
    suite_add_tcase(s, tc);

    tc = tcase_create("limits");
    tcase_set_timeout(tc, 60); /* 70,000-line traces, slow under the sanitizers */
    tcase_add_test(tc, test_max_streams_load);
    tcase_add_test(tc, test_too_many_streams);
    tcase_add_test(tc, test_too_many_clients);
    suite_add_tcase(s, tc);

    tc = tcase_create("build");
    tcase_add_test(tc, test_builder);
    tcase_add_test(tc, test_builder_op_on_empty_trace);
    tcase_add_test(tc, test_builder_continues_loaded);
    tcase_add_test(tc, test_roundtrip_built);
    tcase_add_test(tc, test_roundtrip_gzip);
    tcase_add_test(tc, test_builder_oom);
    tcase_add_test(tc, test_truncate_at_a_death);
    suite_add_tcase(s, tc);

    tc = tcase_create("binary");
    tcase_add_test(tc, test_binary_roundtrip_built);
    tcase_add_test(tc, test_binary_memory_and_file);
    tcase_add_test(tc, test_binary_past_memory_is_an_error);
    tcase_add_test(tc, test_binary_errors);
    tcase_add_test(tc, test_binary_writer_refuses);
    suite_add_tcase(s, tc);

    tc = tcase_create("version 2");
    tcase_add_test(tc, test_v2_oom_events);
    tcase_add_test(tc, test_v2_reads_version_1);
    tcase_add_test(tc, test_err_oom_in_version_1);
    tcase_add_test(tc, test_err_fatal_oom_header);
    tcase_add_test(tc, test_devices_and_totals);
    suite_add_tcase(s, tc);

    tc = tcase_create("assumed repeat");
    tcase_add_test(tc, test_repeat_finds_the_period_and_continues_it);
    tcase_add_test(tc, test_repeat_refuses_what_it_cannot_see);
    tcase_add_test(tc, test_interrupted_save_keeps_the_old_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return run_suite(trace_suite()); }
