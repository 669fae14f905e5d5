/* fuzz_trace.c - the trace reader (traces/read.c), text and gzip, from memory and from a file.
 *
 * Promises checked for every input:
 *   - gs_trace_parse (strict) either gives a trace or fails with one line "fuzz.gstrace:...";
 *   - a trace it gives is well formed: every event's client, stream and slot exist, a free or
 *     free_done carries its allocation's size, a free_done follows a free marked deferred, ids
 *     in the order of the allocs;
 *   - gs_trace_load of the same bytes from a file (the chunked reader and its gzip path), in
 *     lenient mode, gives the same trace whenever the strict parse did, with no warning, and a
 *     well-formed one (warnings counted) whenever it gives one;
 *   - a trace read back from gs_trace_save (text or gzip) is the same trace.
 */
#include "fuzz.h"

#include <string.h>

#include "trace.h"

#define NAME "fuzz.gstrace"

typedef struct {
    const char *path;
    size_t n;
} warnings;

/* A lenient-mode warning is "FILE:LINE: message" too. */
static void count_warning(const char *msg, void *ud)
{
    warnings *w = ud;
    size_t len = strlen(w->path);
    GS_FUZZ_CHECK(strncmp(msg, w->path, len) == 0 && msg[len] == ':', "warning '%s'", msg);
    for (const char *c = msg; *c; c++)
        GS_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "warning with byte 0x%02x: '%s'",
                      (unsigned char)*c, msg);
    w->n++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    GError *e = NULL;
    gs_trace *strict = gs_trace_parse(NAME, (const char *)data, size, 0, NULL, NULL, &e);
    if (strict) {
        GS_FUZZ_CHECK(e == NULL, "a trace and an error");
        GS_FUZZ_CHECK(strict->n_warnings == 0, "warnings in strict mode");
        gs_fuzz_check_trace(strict);
    } else {
        gs_fuzz_check_error(e, GS_TRACE_ERROR, NAME);
        g_clear_error(&e);
    }

    /* The same bytes from a file, lenient. */
    const char *path = gs_fuzz_file(data, size);
    warnings w = {path, 0};
    gs_trace *lenient = gs_trace_load(path, GS_TRACE_LENIENT, count_warning, &w, &e);
    if (lenient) {
        GS_FUZZ_CHECK(e == NULL, "a trace and an error");
        GS_FUZZ_CHECK(lenient->n_warnings == w.n, "%zu warnings counted, %zu said",
                      lenient->n_warnings, w.n);
        gs_fuzz_check_trace(lenient);
        if (strict) {
            GS_FUZZ_CHECK(w.n == 0, "lenient warns where strict accepts");
            gs_fuzz_check_same(strict, lenient, "lenient from a file");
        }
    } else {
        GS_FUZZ_CHECK(!strict, "strict parse accepts what the lenient load refuses: %s",
                      e ? e->message : "?");
        gs_fuzz_check_error(e, GS_TRACE_ERROR, path);
        g_clear_error(&e);
    }

    /* What the writer makes of a trace reads back as that trace, plain or compressed. */
    if (strict) {
        char *out = gs_fuzz_path(size % 2 ? "rt.gstrace.gz" : "rt.gstrace");
        GS_FUZZ_CHECK(gs_trace_save(strict, out, &e), "save: %s", e ? e->message : "?");
        gs_trace *back = gs_trace_load(out, 0, NULL, NULL, &e);
        GS_FUZZ_CHECK(back != NULL, "written trace does not read back: %s", e ? e->message : "?");
        gs_fuzz_check_same(strict, back, "written and read back");
        gs_trace_free(back);
        g_free(out);
    }
    gs_trace_free(strict);
    gs_trace_free(lenient);
    return 0;
}
