/* result.c - a replay's result (result.h): its ownership (clear, move) and the metrics drawn
 * from it (docs/metrics.md).
 */
#include <string.h>

#include "result.h"

void gs_result_move(gs_result *dst, gs_result *src)
{
    if (dst == src) return;
    gs_result_clear(dst);
    *dst = *src;
    memset(src, 0, sizeof *src);
}

void gs_result_clear(gs_result *r)
{
    for (size_t k = 0; k < r->n_devices; k++) gs_result_clear(&r->devices[k]);
    g_free(r->devices);
    g_free(r->policy);
    g_free(r->error_msg);
    for (size_t k = 0; k < r->n_clients; k++) {
        g_free(r->clients[k].name);
        g_free(r->clients[k].policy);
    }
    g_free(r->clients);
    g_free(r->json_extra);
    if (r->first_oom_report) g_free(r->first_oom_report->frame);
    g_free(r->first_oom_report);
    g_free(r->pools);
    memset(r, 0, sizeof *r);
}

const char *gs_result_outcome(const gs_result *r)
{
    if (r->error != GS_OK) return "error";
    return r->oom ? "oom" : r->survived ? "survived" : "ok";
}

bool gs_result_capacity_per_client(const gs_result *r)
{
    if (r->n_devices)
        return r->devices[0].n_clients && gs_result_capacity_per_client(&r->devices[0]);
    return r->n_clients > 1 && r->arrangement && strcmp(r->arrangement, "shared") != 0;
}

static int64_t stat_fig(const gs_stats *s, gs_result_fig fig)
{
    return fig == GS_FIG_RESERVED_PEAK ? s->reserved_bytes[GS_STAT_ALL].peak
                                       : s->allocated_bytes[GS_STAT_ALL].peak;
}

/* One device's figure: its allocator's, or its largest client's where each client had one. */
static int64_t fig_of(const gs_result *r, gs_result_fig fig)
{
    switch (fig) {
    case GS_FIG_LOWER_BOUND: return (int64_t)r->lower_bound_bytes;
    case GS_FIG_OFFLINE: return (int64_t)r->offline_bytes;
    case GS_FIG_RESERVED_PEAK:
    case GS_FIG_ALLOCATED_PEAK:
        if (!gs_result_capacity_per_client(r)) return stat_fig(&r->stats, fig);
        int64_t m = 0;
        for (size_t c = 0; c < r->n_clients; c++) m = MAX(m, stat_fig(&r->clients[c].stats, fig));
        return m;
    }
    return 0;
}

int64_t gs_result_per_allocator(const gs_result *r, gs_result_fig fig)
{
    if (!r->n_devices) return fig_of(r, fig);
    int64_t m = 0;
    for (size_t d = 0; d < r->n_devices; d++) m = MAX(m, fig_of(&r->devices[d], fig));
    return m;
}

/* ---- metrics ---- */

double gs_result_frag_peak(const gs_result *r)
{
    int64_t res = r->stats.reserved_bytes[GS_STAT_ALL].peak;
    return res > 0 ? 1.0 - (double)r->stats.allocated_bytes[GS_STAT_ALL].peak / (double)res : 0.0;
}

double gs_result_internal_frag(const gs_result *r)
{
    int64_t q = r->stats.requested_at_peak_allocated;
    int64_t a = r->stats.allocated_bytes[GS_STAT_ALL].peak;
    return q > 0 ? (double)(a - q) / (double)q : 0.0;
}

double gs_result_external_frag(const gs_result *r)
{
    uint64_t tot = r->stats.total_free_at_peak_reserved;
    return tot > 0 ? 1.0 - (double)r->stats.largest_free_at_peak_reserved / (double)tot : 0.0;
}
