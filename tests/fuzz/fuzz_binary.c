/* fuzz_binary.c - the binary trace reader (traces/binary.c), from memory and from a file.
 *
 * Every input is given to the binary reader: one that does not start with the binary magic gets
 * it put in front, so the fuzzer's mutations all reach the reader's checks. Promises checked:
 *   - gs_trace_parse either gives a trace or fails with one line "fuzz.gsbin: ...";
 *   - a trace it gives is well formed (as fuzz_trace.c checks it);
 *   - gs_trace_load of the same bytes from a file (where the file is mapped, not copied) gives
 *     the same trace, or fails when the parse from memory fails;
 *   - what gs_trace_save writes reads back as the same trace, binary and text: the text reader
 *     and the binary reader agree on every trace the binary reader accepts, and the text it is
 *     written as converts back to the same binary bytes.
 */
#include "fuzz.h"

#include <string.h>

#include "trace.h"

#define NAME "fuzz.gsbin"

static const unsigned char magic[8] = {0x89, 'G', 'S', 'B', 'I', 'N', '\r', '\n'};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = NULL;
    if (size < sizeof magic || memcmp(data, magic, sizeof magic) != 0) {
        buf = g_malloc(size + sizeof magic);
        memcpy(buf, magic, sizeof magic);
        if (size) memcpy(buf + sizeof magic, data, size);
        data = buf;
        size += sizeof magic;
    }
    GError *e = NULL;
    gs_trace *t = gs_trace_parse(NAME, (const char *)data, size, 0, NULL, NULL, &e);
    if (t) {
        GS_FUZZ_CHECK(e == NULL, "a trace and an error");
        gs_fuzz_check_trace(t);
    } else {
        gs_fuzz_check_error(e, GS_TRACE_ERROR, NAME);
        g_clear_error(&e);
    }

    /* The same bytes from a file: mapped, and the same answer. */
    const char *path = gs_fuzz_file(data, size);
    gs_trace *f = gs_trace_load(path, 0, NULL, NULL, &e);
    if (f) {
        GS_FUZZ_CHECK(t != NULL, "the file loads, the memory parse refuses");
        gs_fuzz_check_same(t, f, "from a file");
    } else {
        GS_FUZZ_CHECK(!t, "the memory parse accepts what the file load refuses: %s",
                      e ? e->message : "?");
        gs_fuzz_check_error(e, GS_TRACE_ERROR, path);
        g_clear_error(&e);
    }

    if (t) {
        /* Written as binary and as text, each reads back as the trace; the text, written as
         * binary again, gives the bytes the binary writer wrote the first time. */
        char *bin = gs_fuzz_path("rt.gsbin"), *txt = gs_fuzz_path("rt.gstrace");
        char *bin2 = gs_fuzz_path("rt2.gsbin");
        GS_FUZZ_CHECK(gs_trace_save(t, bin, &e), "save binary: %s", e ? e->message : "?");
        GS_FUZZ_CHECK(gs_trace_save(t, txt, &e), "save text: %s", e ? e->message : "?");
        gs_trace *b = gs_trace_load(bin, 0, NULL, NULL, &e);
        GS_FUZZ_CHECK(b != NULL, "written binary does not read back: %s", e ? e->message : "?");
        gs_fuzz_check_same(t, b, "binary written and read back");
        gs_trace *x = gs_trace_load(txt, 0, NULL, NULL, &e);
        GS_FUZZ_CHECK(x != NULL, "the binary reader accepts what the text reader refuses: %s",
                      e ? e->message : "?");
        gs_fuzz_check_same(t, x, "text written and read back");
        GS_FUZZ_CHECK(gs_trace_save(x, bin2, &e), "save binary from text: %s",
                      e ? e->message : "?");
        gchar *c1 = NULL, *c2 = NULL;
        gsize l1 = 0, l2 = 0;
        GS_FUZZ_CHECK(g_file_get_contents(bin, &c1, &l1, NULL) &&
                          g_file_get_contents(bin2, &c2, &l2, NULL) && l1 == l2 &&
                          memcmp(c1, c2, l1) == 0,
                      "binary -> text -> binary changes the bytes");
        g_free(c1);
        g_free(c2);
        gs_trace_free(b);
        gs_trace_free(x);
        g_free(bin);
        g_free(txt);
        g_free(bin2);
    }
    gs_trace_free(t);
    gs_trace_free(f);
    g_free(buf);
    return 0;
}
