/* fuzz_reference.c - the reference file reader (sim/replay.c: gs_reference_load, --reference),
 * and what `gpusim replay --reference` does with one: the real run's setting becomes the policy,
 * its cap and device size the replay's, its segment addresses the simulated device's script.
 *
 * Promises checked for every input:
 *   - gs_reference_load either gives a reference or fails with one line "FILE:...";
 *   - a setting from the reference that is no policy is one line, nothing a terminal acts on;
 *   - with a reference, a small built-in trace replays without a device error: after every event
 *     the heap passes gs_heap_check (on a device above 256 GiB: after the first and the last, and
 *     every OOM), at the end every byte is back on the device, and the
 *     report, table and JSON, is written (the JSON parses).
 */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "policies.h"
#include "replay.h"
#include "report.h"

/* Allocations of the sizes that make each kind of segment (small: 2 MiB; large: 20 MiB; huge:
 * rounded to 2 MiB), on two streams, some freed and some deferred, an empty_cache in the
 * middle so segments go back to the device and scripted addresses come round again. */
static gs_trace *small_trace(void)
{
    static const uint64_t sizes[] = {512, 1048576, 1048577, 3000000, 10485760, 10485761,
                                     25165824, 104857600, 4096, 2097152, 20971520, 8};
    gs_trace *t = gs_trace_new();
    uint32_t s[G_N_ELEMENTS(sizes) * 2];
    size_t n = 0;
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++)
            s[n++] = gs_trace_add_alloc(t, "torch", i % 3 == 2 ? 7 : 0, sizes[i] * (round + 1));
        for (size_t i = n - G_N_ELEMENTS(sizes); i < n; i += 2) {
            if (i % 4 == 0) gs_trace_add_free_deferred(t, s[i]);
            else gs_trace_add_free(t, s[i]);
        }
        for (size_t i = n - G_N_ELEMENTS(sizes); i < n; i += 4) gs_trace_add_free_done(t, s[i]);
        gs_trace_add_op(t, GS_OP_EMPTY_CACHE, 0);
    }
    for (size_t i = 1; i < n; i += 2) gs_trace_add_free(t, s[i]);
    return t;
}

static void check_line(const char *what, const char *msg)
{
    for (const char *c = msg; *c; c++)
        GS_FUZZ_CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "%s with byte 0x%02x: '%s'", what,
                      (unsigned char)*c, msg);
}

/* After every event, on a device up to 256 GiB; on a larger one (gs_heap_check walks every page
 * slot of an expandable segment, 9/8 of the device) after the first and the last, and at
 * every OOM. ud: the number of events, then the OOMs seen. */
typedef struct {
    size_t n;
    bool every;
    uint64_t ooms;
} run_ctx;

static void check_heap(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    run_ctx *c = ud;
    uint64_t ooms = gs_heap_stats(h)->num_ooms;
    if (!c->every && index != 0 && index + 1 != c->n && ooms == c->ooms) return;
    c->ooms = ooms;
    char *why = NULL;
    int bad = gs_heap_check(h, &why);
    GS_FUZZ_CHECK(bad == 0, "heap after event %zu: %s", index, why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gs_trace *trace;
    if (!trace) trace = small_trace();

    const char *path = gs_fuzz_file(data, size);
    GError *e = NULL;
    gs_reference *ref = gs_reference_load(path, &e);
    if (!ref) {
        gs_fuzz_check_error(e, e && e->domain == GS_JSON_ERROR ? GS_JSON_ERROR : GS_TRACE_ERROR,
                            path);
        g_error_free(e);
        return 0;
    }
    GS_FUZZ_CHECK(ref->seg_addrs->len == ref->seg_sizes->len &&
                      ref->seg_addrs->len == ref->n_segment_alloc,
                  "%u addresses, %u sizes, %llu segments", ref->seg_addrs->len,
                  ref->seg_sizes->len, (unsigned long long)ref->n_segment_alloc);
    int64_t v;
    (void)gs_reference_stat(ref, "num_alloc_retries", &v);

    /* As gpusim replay --reference: the run's own setting, cap and device. */
    char *spec = ref->allocator_conf && *ref->allocator_conf
                     ? g_strdup_printf("pytorch:%s", ref->allocator_conf) : g_strdup("pytorch");
    gs_policy *pol = gs_policy_new(spec, &e);
    if (!pol) {
        GS_FUZZ_CHECK(e && e->message, "no policy and no error");
        check_line("policy error", e->message);
        g_error_free(e);
        /* the CLI stops there; the reference's addresses still get a replay, by default */
        pol = gs_policy_new("pytorch", NULL);
    }
    run_ctx rc = {.n = trace->n,
                  .every = !ref->device_total || ref->device_total <= (UINT64_C(1) << 38)};
    gs_replay_opts o = {.capacity = ref->cap_bytes, .device_total = ref->device_total, .ref = ref,
                        .observe = check_heap, .observe_ud = &rc};
    gs_result r;
    if (gs_replay_run(trace, pol, &o, &r, &e)) {
        GS_FUZZ_CHECK(r.error == GS_OK, "device error %s at event %zu: %s", gs_strerror(r.error),
                      r.error_event, r.error_msg ? r.error_msg : "");
        GS_FUZZ_CHECK(r.teardown_failures == 0 && r.dev_free_after == r.dev_free_before,
                      "%zu teardown failures, device free %llu before, %llu after",
                      r.teardown_failures, (unsigned long long)r.dev_free_before,
                      (unsigned long long)r.dev_free_after);
        const gs_reference *refs[1] = {ref};
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        gs_report(out, GS_FMT_TABLE, "t", trace, &r, 1, refs, true);
        gs_report(out, GS_FMT_CSV, "t", trace, &r, 1, refs, true);
        fclose(out);
        free(buf);
        out = open_memstream(&buf, &len);
        gs_report(out, GS_FMT_JSON, "t", trace, &r, 1, refs, true);
        fclose(out);
        gs_json *j = gs_json_parse("report", buf, len, &e);
        GS_FUZZ_CHECK(j != NULL, "the JSON report does not parse: %s", e ? e->message : "?");
        gs_json_free(j);
        free(buf);
        gs_result_clear(&r);
    } else {
        /* a setup error: a policy the device cannot run */
        GS_FUZZ_CHECK(e != NULL, "no replay and no error");
        check_line("replay error", e->message);
        g_error_free(e);
    }
    gs_policy_free(pol);
    g_free(spec);
    gs_reference_free(ref);
    return 0;
}
