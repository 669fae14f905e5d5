/* fuzz_replay.c - a trace someone sent, replayed: the trace reader, then the allocator core under
 * every standard policy (pytorch, max_split_size_mb:128, expandable_segments:True,
 * garbage_collection_threshold:0.6 under a cap, roundup_power2_divisions:4, cupy), without a cap
 * and under a small one, on the simulated device the trace's header sizes, its clients
 * arranged as the input's length picks (separate, shared, cooperative). What
 * `gpusim replay TRACE -p ...` does, without the command line.
 *
 * Promises checked for every input the reader accepts:
 *   - every replay runs to its end, an OOM or nothing else: the simulated device never fails;
 *   - the heap passes gs_heap_check after every event (of the first 256, then every 16th; on a
 *     device above 256 GiB the first 4), every OOM and the last event;
 *   - at the end every byte is back on the device (free memory before == after, no teardown
 *     failure);
 *   - the JSON report parses.
 */
#include "fuzz.h"

#include <stdio.h>
#include <string.h>

#include "faultsweep.h" /* the standard policies: gs_fault_policies */
#include "policies.h"
#include "replay.h"
#include "report.h"

/* Replays of more events than this are not worth a fuzzer's time (and the checks after every
 * event make them quadratic). */
#define MAX_EVENTS 4096

typedef struct {
    const char *spec;
    size_t n;          /* the trace's events */
    bool every;        /* check after every event (else: the first 256, every 16th, the last) */
    uint64_t ooms;
} run_ctx;

/* gs_heap_check costs a walk of the heap, and of every page slot of an expandable segment (a
 * device of 16 EiB has 10^12 of them): after every event where that is cheap, else after the
 * first events, every 16th, each OOM and the last. */
static void check_heap(const gs_heap *h, const gs_event *e, size_t index, void *ud)
{
    run_ctx *c = ud;
    uint64_t ooms = gs_heap_stats(h)->num_ooms;
    bool now = c->every ? index < 256 || index % 16 == 0 : index < 4;
    if (!now && ooms == c->ooms && index + 1 != c->n) return;
    c->ooms = ooms;
    char *why = NULL;
    int bad = gs_heap_check(h, &why);
    GS_FUZZ_CHECK(bad == 0, "%s: heap after event %zu: %s", c->spec, index, why);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gs_policy **pol;
    if (!pol) {
        pol = g_new(gs_policy *, gs_fault_n_policies);
        for (size_t i = 0; i < gs_fault_n_policies; i++)
            pol[i] = gs_policy_new(gs_fault_policies[i], NULL);
    }

    gs_trace *t = gs_trace_parse("fuzz.gstrace", (const char *)data, size, GS_TRACE_LENIENT, NULL,
                                 NULL, NULL);
    if (!t) return 0;
    if (t->n > MAX_EVENTS) {
        gs_trace_free(t);
        return 0;
    }
    static const uint64_t caps[] = {0, 64ull << 20};
    for (size_t c = 0; c < G_N_ELEMENTS(caps); c++) {
        for (size_t i = 0; i < gs_fault_n_policies; i++) {
            const char *spec = gs_fault_policies[i];
            run_ctx rc = {.spec = spec, .n = t->n,
                          .every = !t->device_total || t->device_total <= (UINT64_C(1) << 38)};
            gs_replay_opts o = {.capacity = caps[c], .device_total = t->device_total,
                                .clients = (gs_clients_mode)(size % GS_CLIENTS_COUNT),
                                .continue_on_oom = (size / 3) % 2,
                                .observe = check_heap, .observe_ud = &rc};
            gs_result r;
            GError *e = NULL;
            if (!gs_replay_run(t, pol[i], &o, &r, &e)) {
                /* The one refusal a simulated replay makes (sim/devices.c): several devices
                 * and several clients in one trace. Anything else is a broken promise. */
                GS_FUZZ_CHECK(e && e->code == GS_REPLAY_ERROR_SETUP && t->clients->len > 1,
                              "%s: replay did not start: %s", spec, e ? e->message : "?");
                g_clear_error(&e);
                continue;
            }
            GS_FUZZ_CHECK(r.error == GS_OK, "%s: device error %s at event %zu: %s", spec,
                          gs_strerror(r.error), r.error_event, r.error_msg ? r.error_msg : "");
            GS_FUZZ_CHECK(r.teardown_failures == 0 && r.dev_free_after == r.dev_free_before,
                          "%s: %zu teardown failures, device free %llu before, %llu after",
                          spec, r.teardown_failures, (unsigned long long)r.dev_free_before,
                          (unsigned long long)r.dev_free_after);
            GS_FUZZ_CHECK(r.oom || r.events == t->n, "%s: %zu of %zu events replayed", spec,
                          r.events, t->n);
            char *buf = NULL;
            size_t len = 0;
            FILE *out = open_memstream(&buf, &len);
            gs_report(out, GS_FMT_JSON, "t", t, &r, 1, NULL, true);
            fclose(out);
            gs_json *j = gs_json_parse("report", buf, len, &e);
            GS_FUZZ_CHECK(j != NULL, "%s: the JSON report does not parse: %s", spec,
                          e ? e->message : "?");
            gs_json_free(j);
            free(buf);
            gs_result_clear(&r);
        }
    }
    gs_trace_free(t);
    return 0;
}
