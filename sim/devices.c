/* devices.c - several devices in one process: a heap and a simulated device per device of the
 * trace, events routed to their device, and the totals (see devices.h and gs_result.devices in
 * replay.h).
 *
 * The devices share nothing, as in PyTorch: each has its own limit (--capacity DEV=SIZE,...)
 * and its own memory, and an empty_cache event empties the cache of its own device. The run as
 * a whole stops at the first fatal OOM on any device, as the process would.
 */
#include <string.h>

#include "devices.h"

/* Every gs_stat of a gs_stats, for sums and peaks over several heaps (as clients.c). */
#define GS_ONE_ARRAY(name) +GS_STAT_TYPES
enum { NSTATS = 0 GS_STAT_ARRAYS(GS_ONE_ARRAY) + 2 };
#undef GS_ONE_ARRAY

#define GS_LIST(name) for (int k = 0; k < GS_STAT_TYPES; k++) out[n++] = &s->name[k];
#define GS_STAT_LIST_BODY                                                                       \
    size_t n = 0;                                                                               \
    GS_STAT_ARRAYS(GS_LIST)                                                                     \
    out[n++] = &s->oversize_allocations;                                                        \
    out[n++] = &s->oversize_segments;
static void stat_list(gs_stats *s, gs_stat *out[NSTATS]) { GS_STAT_LIST_BODY }
#undef GS_STAT_LIST_BODY
#undef GS_LIST



typedef struct {
    uint32_t id;
    gs_backend *be;
    gs_heap *heap;
    uint64_t capacity;
    gs_result r;             /* its own result, filled as the run goes and at the end */
} device;

struct gs_devices {
    size_t n;
    device *dev;
    uint16_t *slot_dev;      /* the device (index into dev) of each allocation */
    size_t last;             /* the index of the last event's device (events come in runs) */
    gs_heap **heaps;         /* n: each device's */
    gs_stats_sums total;     /* the totals' peaks */
    gs_calibration *own_cal;
};

static size_t index_of(gs_devices *d, uint32_t id)
{
    if (d->dev[d->last].id == id) return d->last;
    size_t lo = 0, hi = d->n; /* ids ascending; every event's device is one of them */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (d->dev[mid].id <= id) lo = mid;
        else hi = mid;
    }
    return d->last = lo;
}

/* Device id's options; k: where they are when o lists every device in order, as gpusim
 * replay's do (a search of the list for each device was quadratic). */
static const gs_device_opts *opts_of(const gs_replay_opts *o, uint32_t id, size_t k)
{
    if (k < o->n_devices && o->devices[k].device == id) return &o->devices[k];
    for (size_t j = 0; j < o->n_devices; j++)
        if (o->devices[j].device == id) return &o->devices[j];
    return NULL;
}

gs_devices *gs_devices_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           const uint32_t *ids, size_t n, GError **err)
{
    if (o->backend) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                    "a trace with several devices (%zu) replays on simulated devices only", n);
        return NULL;
    }
    if (t->clients->len > 1) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                    "a trace with several devices and several clients is not supported");
        return NULL;
    }
    if (n > GS_TRACE_MAX_DEVICES) { /* (the readers refuse more: a trace built in code) */
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                    "a trace with %zu devices: at most %u are supported", n, GS_TRACE_MAX_DEVICES);
        return NULL;
    }
    gs_devices *d = g_new0(gs_devices, 1);
    d->n = n;
    d->dev = g_new0(device, n);
    /* (2 bytes an allocation: a size the host may not have, an error and not an abort) */
    d->slot_dev = g_try_new0(uint16_t, t->n_slots ? t->n_slots : 1);
    d->heaps = g_new0(gs_heap *, n);
    if (!d->slot_dev) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_NOMEM,
                    "%zu bytes for the devices of "
                    "the trace's allocations",
                    (t->n_slots ? t->n_slots : 1) * sizeof(uint16_t));
        d->n = 0;
        gs_devices_finish(d, NULL);
        return NULL;
    }
    gs_stats_sums_init(&d->total);
    if (!o->cal) d->own_cal = gs_calibration_builtin();
    for (size_t k = 0; k < n; k++) {
        device *v = &d->dev[k];
        v->id = ids[k];
        const gs_device_opts *dop = opts_of(o, v->id, k);
        uint64_t total = dop && dop->device_total ? dop->device_total
                         : o->device_total        ? o->device_total
                                                  : GS_DEFAULT_DEVICE_TOTAL;
        v->capacity = dop && dop->capacity ? dop->capacity : o->capacity;
        gs_backend_config bc = {.sim = {.total_bytes = total, .cal = o->cal ? o->cal : d->own_cal,
                                        .align_512m = gs_sim_h200_like(total)}};
        const gs_reference *ref = gs_reference_device(o->ref, v->id);
        if (ref && ref->seg_addrs->len) {
            bc.sim.script_addrs = (const uint64_t *)(void *)ref->seg_addrs->data;
            bc.sim.script_sizes = (const uint64_t *)(void *)ref->seg_sizes->data;
            bc.sim.script_n = ref->seg_addrs->len;
        }
        (void)gs_backend_open("sim", &bc, &v->be, NULL); /* the simulated device always opens */
        gs_heap_config hc = {.limit = v->capacity, .device_total = total};
        v->heap = d->heaps[k] = gs_heap_new(p, v->be, &hc);
        v->r.device = v->id;
        v->r.capacity = v->capacity;
        v->r.backend = v->be->ops->name;
        (void)gs_dev_mem_info(v->be, NULL, &v->r.dev_free_before, &total);
        if (!v->heap) {
            g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                        "policy %s needs the driver's virtual-memory calls, which backend '%s' "
                        "lacks", p->spec, v->be->ops->name);
            d->n = k + 1;
            gs_devices_finish(d, NULL);
            return NULL;
        }
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].op == GS_OP_ALLOC)
            d->slot_dev[t->ev[i].slot] = (uint16_t)index_of(d, t->ev[i].device);
    return d;
}

gs_heap *gs_devices_route(gs_devices *d, const gs_event *e)
{
    size_t k = gs_event_is_free(e) ? d->slot_dev[e->slot] : index_of(d, e->device);
    d->last = k;
    d->dev[k].r.events++;
    return d->dev[k].heap;
}

void gs_devices_after(gs_devices *d, const gs_event *e)
{
    /* the event changed its device's heap alone */
    if (gs_event_is_free(e)) gs_stats_sums_after_free(&d->total, d->heaps, d->n, d->last);
    else gs_stats_sums_after(&d->total, d->heaps, d->n, d->last);
}

void gs_devices_oom(gs_devices *d, const gs_event *e, size_t i, bool caught)
{
    gs_result *r = &d->dev[d->last].r;
    if (caught) {
        r->caught_ooms++;
    } else if (!r->oom) {
        r->oom = true;
        r->first_oom_event = i;
        r->first_oom_size = e->size;
    }
}

void gs_devices_free_slot(gs_devices *d, uint32_t slot, gs_block *b)
{
    gs_heap *h = d->dev[d->slot_dev[slot]].heap;
    gs_stats_sums_dirty(&d->total); /* no gs_devices_after follows each of these */
    if (b->state == GS_BLOCK_PENDING) gs_heap_free_complete(h, b);
    else gs_heap_free(h, b);
}

void gs_devices_finish(gs_devices *d, gs_result *r)
{
    if (r) {
        r->n_devices = d->n;
        r->devices = g_new0(gs_result, d->n);
        gs_stats *s = &r->stats;
        *s = d->total.peaks;
        gs_stat *sl[NSTATS];
        stat_list(s, sl);
        memset(&r->calls, 0, sizeof r->calls);
        r->dev_free_before = r->dev_free_after = 0;
        for (size_t k = 0; k < d->n; k++) {
            device *v = &d->dev[k];
            gs_result *dr = &r->devices[k];
            v->r.policy = g_strdup(r->policy);
            v->r.stats = *gs_heap_stats(v->heap);
            v->r.calls = *gs_heap_devcalls(v->heap);
            v->r.host_seconds = r->host_seconds;
            *dr = v->r;
            memset(&v->r, 0, sizeof v->r);
            if (dr->oom && r->oom && dr->first_oom_event == r->first_oom_event)
                r->first_oom_device = dr->device;
            gs_stat *dl[NSTATS];
            stat_list(&dr->stats, dl);
            for (int i = 0; i < NSTATS; i++) {
                sl[i]->current += dl[i]->current;
                sl[i]->allocated += dl[i]->allocated;
                sl[i]->freed += dl[i]->freed;
            }
            s->num_alloc_retries += dr->stats.num_alloc_retries;
            s->num_ooms += dr->stats.num_ooms;
            s->num_sync_all_streams += dr->stats.num_sync_all_streams;
            s->num_device_alloc += dr->stats.num_device_alloc;
            s->num_device_free += dr->stats.num_device_free;
            s->num_reclaim_retries += dr->stats.num_reclaim_retries;
            s->num_oom_rejections += dr->stats.num_oom_rejections;
            gs_devcalls_add(&r->calls, &dr->calls);
        }
        s->max_split_size = r->devices[0].stats.max_split_size;
    }
    for (size_t k = 0; k < d->n; k++) {
        device *v = &d->dev[k];
        if (v->heap) gs_heap_free_all(v->heap);
        if (r) {
            uint64_t total = 0;
            (void)gs_dev_mem_info(v->be, NULL, &r->devices[k].dev_free_after, &total);
            r->devices[k].script_used = gs_sim_script_used(v->be);
            r->dev_free_before += r->devices[k].dev_free_before;
            r->dev_free_after += r->devices[k].dev_free_after;
            r->script_used += r->devices[k].script_used;
        }
        if (v->be) gs_backend_destroy(v->be);
        gs_result_clear(&v->r);
    }
    gs_calibration_free(d->own_cal);
    gs_stats_sums_clear(&d->total);
    g_free(d->dev);
    g_free(d->slot_dev);
    g_free(d->heaps);
    g_free(d);
}
