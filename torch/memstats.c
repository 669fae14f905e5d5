/* memstats.c - the program's view of its statistics under gpusim run (memstats.h says why). */
#include "memstats.h"

typedef struct {
    bool peaks_reset, acc_reset;
    gs_stats peaks; /* after a reset of the peaks: each gs_stat's peak since (its peak field) */
    gs_stats seen;  /* the run's peaks when last looked at (a new one was reached since) */
    gs_stats base;  /* after a reset of the counts: their values then */
} device_view;

struct gs_memstats {
    device_view dev[GS_TENANTS_MAX_DEVICES];
};

gs_memstats *gs_memstats_new(void)
{
    return g_new0(gs_memstats, 1);
}

void gs_memstats_free(gs_memstats *m)
{
    g_free(m);
}

static bool valid(int d)
{
    return d >= 0 && d < GS_TENANTS_MAX_DEVICES;
}

void gs_memstats_view(const gs_memstats *m, int d, const gs_stats *run, gs_stats *out)
{
    *out = *run;
    if (!valid(d)) return;
    const device_view *v = &m->dev[d];
    gs_stat *o[GS_STATS_N], *p[GS_STATS_N], *b[GS_STATS_N];
    gs_stats_each(out, o);
    gs_stats_each((gs_stats *)&v->peaks, p); /* (read only) */
    gs_stats_each((gs_stats *)&v->base, b);
    for (int i = 0; i < GS_STATS_N; i++) {
        if (v->peaks_reset) o[i]->peak = p[i]->peak;
        if (v->acc_reset) {
            o[i]->allocated -= b[i]->allocated;
            o[i]->freed -= b[i]->freed;
        }
    }
    if (v->acc_reset) {
        out->num_alloc_retries -= v->base.num_alloc_retries;
        out->num_ooms -= v->base.num_ooms;
        out->num_sync_all_streams -= v->base.num_sync_all_streams;
        out->num_device_alloc -= v->base.num_device_alloc;
        out->num_device_free -= v->base.num_device_free;
        out->num_oom_rejections -= v->base.num_oom_rejections;
    }
}

void gs_memstats_reset_peaks(gs_memstats *m, int d, const gs_stats *now)
{
    if (!valid(d)) return;
    device_view *v = &m->dev[d];
    gs_stat *p[GS_STATS_N], *c[GS_STATS_N];
    gs_stats_each(&v->peaks, p);
    gs_stats_each((gs_stats *)now, c);
    for (int i = 0; i < GS_STATS_N; i++) p[i]->peak = c[i]->current;
    v->seen = *now;
    v->peaks_reset = true;
}

void gs_memstats_reset_accumulated(gs_memstats *m, int d, const gs_stats *full)
{
    if (!valid(d)) return;
    m->dev[d].base = *full;
    m->dev[d].acc_reset = true;
}

bool gs_memstats_following(const gs_memstats *m, int d)
{
    return valid(d) && m->dev[d].peaks_reset;
}

void gs_memstats_after(gs_memstats *m, int d, const gs_stats *now)
{
    if (!gs_memstats_following(m, d)) return;
    gs_stat *p[GS_STATS_N], *c[GS_STATS_N], *s[GS_STATS_N];
    gs_stats_each(&m->dev[d].peaks, p);
    gs_stats_each((gs_stats *)now, c);
    gs_stats_each(&m->dev[d].seen, s);
    for (int i = 0; i < GS_STATS_N; i++) {
        /* a new peak of the run's was reached inside the request (a growth that maps before it
         * unmaps, say), after the reset: it is the program's too; else the current after it */
        int64_t top = c[i]->peak > s[i]->peak ? c[i]->peak : c[i]->current;
        p[i]->peak = MAX(p[i]->peak, top);
        s[i]->peak = c[i]->peak;
    }
}
