/* fuzz_calibration.c - the latency table reader (backends/calibration.c, --calibration FILE).
 *
 * Promises checked for every input:
 *   - gs_calibration_load either gives a table or fails with one line "FILE:LINE: message";
 *   - every latency the table models, for every call kind and any size (0, each measured size
 *     and its neighbours, 2^64 - 1), is finite and not negative: a device clock is never NaN;
 *   - the table written back (gs_calibration_save with the table as its base) loads again.
 */
#include "fuzz.h"

#include <math.h>
#include <string.h>

#include "backend.h"

static void check_us(const gs_calibration *c, gs_call_kind k, uint64_t size)
{
    double us = gs_calibration_us(c, k, size);
    GS_FUZZ_CHECK(isfinite(us) && us >= 0, "%s of %llu bytes: %g us", gs_call_name(k),
                  (unsigned long long)size, us);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = gs_fuzz_file(data, size);
    char *msg = NULL;
    gs_calibration *c = gs_calibration_load(path, &msg);
    if (!c) {
        GS_FUZZ_CHECK(msg != NULL, "no table and no message");
        GError *e = g_error_new_literal(G_FILE_ERROR, 0, msg);
        gs_fuzz_check_error(e, G_FILE_ERROR, path);
        g_error_free(e);
        g_free(msg);
        return 0;
    }
    GS_FUZZ_CHECK(msg == NULL, "a table and a message");
    /* Sizes worth asking: the ends, and around every number the input holds. */
    const uint64_t fixed[] = {0, 1, 512, 2097152, 20971520, UINT64_C(1) << 40, UINT64_MAX - 1,
                              UINT64_MAX};
    for (int k = 0; k < GS_CALL_COUNT; k++)
        for (size_t i = 0; i < G_N_ELEMENTS(fixed); i++) check_us(c, (gs_call_kind)k, fixed[i]);
    char *text = g_strndup((const char *)data, size);
    for (char *p = text; *p; p++) {
        if (!g_ascii_isdigit(*p) || (p > text && g_ascii_isdigit(p[-1]))) continue;
        uint64_t v = g_ascii_strtoull(p, NULL, 10);
        for (int k = 0; k < GS_CALL_COUNT; k++)
            for (int d = -1; d <= 1; d++) check_us(c, (gs_call_kind)k, v + (uint64_t)(int64_t)d);
    }
    g_free(text);

    char *out = gs_fuzz_path("written.csv");
    gs_call_sample none[1];
    GS_FUZZ_CHECK(gs_calibration_save(out, none, 0, c, &msg), "save: %s", msg);
    gs_calibration *back = gs_calibration_load(out, &msg);
    GS_FUZZ_CHECK(back != NULL, "the written table does not load: %s", msg);
    gs_calibration_free(back);
    g_free(out);
    gs_calibration_free(c);
    return 0;
}
