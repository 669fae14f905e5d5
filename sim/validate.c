/* validate.c - the simulator's prediction beside the real device: the same trace, core and policy
 * replayed on the simulated heap and on the GPU (backends/cuda.c), compared within stated
 * tolerances (gpusim validate).
 *
 * Measured device time varies from run to run (the first replay of a process pays for the
 * driver's warm-up; cudaFree waits for the device), so the real side replays once to warm up and
 * then `runs` times, and its times are medians over those runs. The warm-up run also asks the
 * driver how much memory it has lost at every new peak of reserved memory: the driver's view of
 * peak reserved. The timed runs leave that probe off so it costs them nothing.
 */
#include <math.h>
#include <string.h>

#include "validate.h"

static void keep_sample(void *ud, gs_call_kind k, uint64_t size, double us, gs_status st)
{
    if (st != GS_OK) return; /* a failed call says nothing about a call's cost */
    gs_call_sample s = {k, size, us};
    g_array_append_val((GArray *)ud, s);
}

static bool same_run(const gs_result *a, const gs_result *b)
{
    if (a->oom != b->oom || a->error != b->error ||
        a->stats.reserved_bytes[GS_STAT_ALL].peak != b->stats.reserved_bytes[GS_STAT_ALL].peak)
        return false;
    for (int k = 0; k < GS_CALL_COUNT; k++)
        if (a->calls.n[k] != b->calls.n[k]) return false;
    return true;
}

static gboolean validate_run(const gs_trace *t, const gs_policy *p, const gs_validate_opts *o,
                             const gs_bound *bound, gs_validation *v, GError **err);

gboolean gs_validate_run(const gs_trace *t, const gs_policy *p, const gs_validate_opts *o,
                         gs_validation *v, GError **err)
{
    /* validate reports no bound (report/validate.c), so none is planned: an empty one stands
     * in for every run, and the results carry 0 (planning it cost more than a small trace's
     * simulated run, once per policy) */
    const gs_bound none = {.n_devices = 0};
    return validate_run(t, p, o, &none, v, err);
}

static gboolean validate_run(const gs_trace *t, const gs_policy *p, const gs_validate_opts *o,
                             const gs_bound *bound, gs_validation *v, GError **err)
{
    memset(v, 0, sizeof *v);
    gs_replay_opts so = {
        .capacity = o->capacity,
        .device_total = o->device_total,
        .cal = o->cal,
        .bound = bound,
    };
    if (!gs_replay_run(t, p, &so, &v->sim, err)) return FALSE;

    gs_replay_opts ro = {.capacity = o->capacity, .backend = o->backend, .touch = o->touch,
                         .bound = bound};
    gs_result warm;
    ro.probe_driver = true;
    if (!gs_replay_run(t, p, &ro, &warm, err)) return FALSE;
    v->driver_peak = warm.driver_peak_used;
    size_t lost = warm.teardown_failures; /* every real run's, reported with the first's */
    ro.probe_driver = false;
    if (warm.error != GS_OK) { /* the device failed: report the warm-up run as it is */
        gs_result_move(&v->real, &warm);
        v->runs = 0;
        return TRUE;
    }
    gs_result_clear(&warm);

    unsigned runs = o->runs ? o->runs : 1;
    gs_result *rs = g_new0(gs_result, runs);
    if (o->samples) {
        o->backend->observe = keep_sample;
        o->backend->observe_ud = o->samples;
    }
    v->runs_agree = true;
    unsigned done = 0;
    gboolean ok = TRUE;
    while (done < runs) {
        if (!(ok = gs_replay_run(t, p, &ro, &rs[done], err))) break;
        done++;
        if (done > 1 && !same_run(&rs[0], &rs[done - 1])) v->runs_agree = false;
        if (rs[done - 1].error != GS_OK) { /* the device failed: that run is the one to show */
            if (done > 1) gs_result_move(&rs[0], &rs[done - 1]);
            break;
        }
    }
    o->backend->observe = NULL;
    o->backend->observe_ud = NULL;

    double *x = g_new(double, runs);
    for (int k = 0; k < GS_CALL_COUNT; k++) {
        for (unsigned i = 0; i < done; i++) x[i] = rs[i].calls.time_us[k];
        v->real_us[k] = gs_median(x, done);
    }
    for (unsigned i = 0; i < done; i++) x[i] = gs_devcalls_total_us(&rs[i].calls);
    v->real_total_us = gs_median(x, done);
    for (unsigned i = 0; i < done; i++) x[i] = rs[i].host_seconds - rs[i].touch_seconds;
    v->real_host_s = gs_median(x, done);
    g_free(x);
    v->runs = done;
    for (unsigned i = 0; i < done; i++) lost += rs[i].teardown_failures;
    if (done) gs_result_move(&v->real, &rs[0]);
    v->real.teardown_failures = lost;
    for (unsigned i = 0; i < done; i++) gs_result_clear(&rs[i]);
    g_free(rs);
    return ok;
}

void gs_validation_clear(gs_validation *v)
{
    gs_result_clear(&v->sim);
    gs_result_clear(&v->real);
}

/* ---- a latency table from the calls the real runs made ---- */

GArray *gs_call_samples_new(void)
{
    return g_array_new(FALSE, FALSE, sizeof(gs_call_sample));
}
