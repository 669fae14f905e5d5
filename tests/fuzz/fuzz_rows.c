/* fuzz_rows.c - the converter's rows as gpusim write-rows reads them (traces/rows.c,
 * gs_trace_read_rows), from a stream.
 *
 * Every input is given to the reader: one that does not start with the rows' magic gets it put
 * in front, so the mutations all reach its checks. Promises checked:
 *   - it gives a trace or declines with a reason, never both and never neither;
 *   - a trace it gives is written as write-rows writes it (gs_trace_save) or refused in one
 *     line naming the file; one written is well formed, and read back it is the same trace.
 */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "trace.h"

static const unsigned char magic[8] = {'G', 'S', 'R', 'O', 'W', 'S', '0', '1'};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *buf = g_malloc(size + sizeof magic);
    size_t n = size;
    if (size < sizeof magic || memcmp(data, magic, sizeof magic) != 0) {
        memcpy(buf, magic, sizeof magic);
        n += sizeof magic;
    }
    if (size) memcpy(buf + (n - size), data, size);
    FILE *f = fmemopen(buf, n, "rb");
    GS_FUZZ_CHECK(f != NULL, "fmemopen");
    char *why = NULL;
    gs_trace *t = gs_trace_read_rows(f, &why);
    fclose(f);
    GS_FUZZ_CHECK(!t != !why, "a trace and a reason, or neither (%s)", why ? why : "no reason");
    if (t) {
        GError *e = NULL;
        char *bin = gs_fuzz_path("rows.gsbin");
        if (gs_trace_save(t, bin, &e)) {
            gs_fuzz_check_trace(t);
            gs_trace *b = gs_trace_load(bin, 0, NULL, NULL, &e);
            GS_FUZZ_CHECK(b != NULL, "written binary does not read back: %s", e ? e->message : "?");
            gs_fuzz_check_same(t, b, "binary written and read back");
            gs_trace_free(b);
        } else {
            gs_fuzz_check_error(e, GS_TRACE_ERROR, bin);
            g_clear_error(&e);
        }
        g_free(bin);
        gs_trace_free(t);
    }
    g_free(why);
    g_free(buf);
    return 0;
}
