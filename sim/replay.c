/* replay.c - the replay engine: drive a trace's events through one allocator (the reference
 * file's reader is traces/reference.c, the result's ownership and metrics sim/result.c).
 */
#include <string.h>

#include "clients.h"
#include "devices.h"
#include "replay.h"

/* The trace reader's limits are the core's input limits: a trace that loads always replays. */
G_STATIC_ASSERT(GS_TRACE_MAX_STREAMS <= GS_MAX_STREAMS);

/* ---- the replay ---- */

/* The heap as the first OOM left it (gs_oom_report). A walk over the free blocks, once: the
 * ordinary pools' and every private pool's. */
static gs_oom_report *oom_report(const gs_heap *h, const gs_trace *t, const gs_event *e,
                                 size_t i)
{
    gs_oom_report *o = g_new0(gs_oom_report, 1);
    o->frame = g_strdup(gs_trace_frame(t, i)); /* the failed alloc's or oom's own frame */
    const gs_policy *p = gs_heap_policy(h);
    const gs_stats *s = gs_heap_stats(h);
    o->request = e->size;
    o->rounded = gs_policy_rounded(p, e->size);
    o->pool = p->ops->pool_of(p->cfg, o->rounded);
    /* the heap's pool the request went to: within its private pool when a route took it */
    unsigned route = gs_heap_route_of(h, e->stream);
    o->private_pool = gs_heap_pool_id(h, route);
    unsigned target = route * GS_MAX_POOLS + o->pool;
    o->stream = e->stream < t->streams->len ? g_array_index(t->streams, uint64_t, e->stream) : 0;
    o->allocated = (uint64_t)s->allocated_bytes[GS_STAT_ALL].current;
    o->reserved = (uint64_t)s->reserved_bytes[GS_STAT_ALL].current;
    o->limit = gs_heap_limit(h);
    for (unsigned k = 0; k <= GS_MAX_PRIVATE_POOLS; k++) {
        if (k && !gs_heap_pool_id(h, k)) continue; /* no private pool k */
        for (unsigned q = 0; q < p->ops->npools; q++) {
            unsigned pool = k * GS_MAX_POOLS + q;
            for (gs_block *b = gs_pool_first(h, pool); b; b = gs_pool_next(h, b)) {
                o->free_total += b->size;
                if (b->size < o->rounded) o->free_too_small += b->size;
                o->largest_free = MAX(o->largest_free, b->size);
                if (pool != target) continue;
                o->largest_in_pool = MAX(o->largest_in_pool, b->size);
                if (b->stream == e->stream)
                    o->largest_on_stream = MAX(o->largest_on_stream, b->size);
            }
        }
    }
    return o;
}

/* ---- per-pool results (gs_pool_result) ----
 * The core calls on_reserve at every change of a segment's reserved bytes (a device call); the
 * tally attributes it to the segment's pool by the trace's id, and notes every pool's reserved
 * bytes each time the allocator's sum reaches a new peak (at most as often as it grows). */
typedef struct {
    const gs_heap *h;        /* set once the heap is made */
    gs_pool_result *rows;
    size_t n;                /* 0: no private pools, no rows */
    uint64_t total, peak;    /* the allocator's reserved bytes, as the calls add them up */
    const gs_replay_opts *o; /* its observe_reserve is told first (the export) */
} pool_tally;

static gs_pool_result *tally_row(pool_tally *pt, uint32_t id)
{
    for (size_t k = 0; k < pt->n; k++)
        if (pt->rows[k].id == id) return &pt->rows[k];
    /* a pool the trace's events did not list (none in practice): a row of its own */
    pt->rows = g_renew(gs_pool_result, pt->rows, pt->n + 1);
    pt->rows[pt->n] = (gs_pool_result){.id = id};
    return &pt->rows[pt->n++];
}

static void tally_on_reserve(void *ud, const gs_segment *s, uint64_t addr, int64_t bytes)
{
    pool_tally *pt = ud;
    if (pt->o && pt->o->observe_reserve) pt->o->observe_reserve(s, addr, bytes, pt->o->export_ud);
    if (!bytes || !pt->h || !pt->n) return;
    unsigned k = gs_pool_private(s->pool);
    gs_pool_result *row = tally_row(pt, k ? gs_heap_pool_id(pt->h, k) : 0);
    if (bytes > 0) {
        row->device_allocs++;
        row->reserved_end += (uint64_t)bytes;
        row->peak_reserved = MAX(row->peak_reserved, row->reserved_end);
        pt->total += (uint64_t)bytes;
        if (pt->total > pt->peak) {
            pt->peak = pt->total;
            for (size_t j = 0; j < pt->n; j++) pt->rows[j].reserved_at_peak = pt->rows[j].reserved_end;
        }
    } else {
        /* a release, as the heap counts device frees; not a handle stitch moves */
        if (!gs_heap_moving(pt->h)) row->device_frees++;
        row->reserved_end -= (uint64_t)-bytes;
        pt->total -= (uint64_t)-bytes;
    }
}

/* The rows as the heap ends: its segments walked once. */
static void tally_finish(pool_tally *pt, const gs_heap *h, gs_result *r)
{
    for (size_t k = 0; k < pt->n; k++) {
        pt->rows[k].allocated_end = pt->rows[k].segments_end = 0;
        pt->rows[k].released = pt->rows[k].id && pt->rows[k].peak_reserved;
    }
    for (const gs_segment *s = gs_heap_segments(h); s; s = s->next) {
        unsigned k = gs_pool_private(s->pool);
        gs_pool_result *row = tally_row(pt, k ? gs_heap_pool_id(h, k) : 0);
        row->segments_end++;
        for (const gs_block *b = s->head; b; b = b->next)
            if (b->state == GS_BLOCK_ALLOCATED || b->state == GS_BLOCK_PENDING)
                row->allocated_end += b->size;
    }
    for (unsigned k = 1; k <= GS_MAX_PRIVATE_POOLS; k++) {
        uint32_t id = gs_heap_pool_id(h, k);
        if (id) tally_row(pt, id)->released = false;
    }
    r->pools = pt->rows;
    r->n_pools = pt->n;
    pt->rows = NULL;
    pt->n = 0;
    pt->h = NULL; /* the teardown's releases are not the replay's */
}

/* The driver's view at a new peak of reserved memory (opts.probe_driver): the device's reserved
 * bytes, every client's allocator's when there are several. */
static void probe_driver(const gs_heap *h, const gs_clients *mc, gs_backend *be, gs_result *r,
                         uint64_t *probed)
{
    uint64_t res = mc ? gs_clients_reserved(mc) : gs_heap_reserved(h), fr = 0, tot = 0;
    if (res <= *probed) return;
    *probed = res;
    if (be->ops->mem_info(be->state, &fr, &tot) == GS_OK && fr < r->dev_free_before &&
        r->dev_free_before - fr > r->driver_peak_used)
        r->driver_peak_used = r->dev_free_before - fr;
}

/* An OOM the replay cannot go past (an alloc's, or an oom event that is the trace's last: the
 * recorded run died there). */
static void fatal_oom(gs_clients *mc, gs_devices *md, gs_result *r, const gs_heap *h,
                      const gs_trace *t, const gs_event *e, size_t i)
{
    if (!r->oom) {
        r->oom = true;
        r->first_oom_event = i;
        r->first_oom_size = e->size;
        r->first_oom_report = oom_report(h, t, e, i);
    }
    if (mc) gs_clients_oom(mc, e, i);
    if (md) gs_devices_oom(md, e, i, false);
}

/* Prefetching along the trace: the replay knows every future event, so the memory a free
 * will touch is fetched while earlier events run (with 10^6 live blocks, a free's slot, its
 * block and the block's neighbours are each a cache miss otherwise). In three steps, each
 * reading what the one before fetched: the slot of the event PREFETCH_SLOT ahead, the block in
 * the slot of the free PREFETCH_BLOCK ahead, and that block's neighbours (the free's merge
 * reads their state) PREFETCH_NEIGHBOURS ahead. Only a hint: a slot that an event in between
 * changes costs a useless fetch, never a wrong answer (block structs stay allocated while the
 * heap lives, so a stale pointer still points into a slab). */
enum { PREFETCH_SLOT = 24, PREFETCH_BLOCK = 12, PREFETCH_NEIGHBOURS = 6 };

/* Prefetching costs about 17 instructions an event, and pays only where the slots and blocks
 * do not stay in the cache: a plain replay prefetches when its slot table alone is larger than
 * 1 MiB (a typical L2), which the bundled traces' (at most 13104 events) are far from. */
#define PREFETCH_MIN_SLOTS ((size_t)1 << 17)

static inline void prefetch_ahead(const gs_event *ev, size_t i, gs_block *const *slots)
{
    const gs_event *a = &ev[i + PREFETCH_SLOT], *b = &ev[i + PREFETCH_BLOCK],
                   *c = &ev[i + PREFETCH_NEIGHBOURS];
    if (a->slot != UINT32_MAX) __builtin_prefetch(&slots[a->slot], 1);
    if (gs_event_is_free(b)) {
        const gs_block *blk = slots[b->slot];
        if (blk) __builtin_prefetch(blk, 1);
    }
    if (c->op == GS_OP_FREE) {
        const gs_block *blk = slots[c->slot];
        if (blk) {
            if (blk->prev) __builtin_prefetch(blk->prev, 1);
            if (blk->next) __builtin_prefetch(blk->next, 1);
        }
    }
}

/* The checkpoint hook before event i (done_before: the events of earlier passes): go on, or what
 * ends this pass's loop there: stop (r->events says where) or done (*unhooked says where). */
static inline gs_checkpoint_next call_hook(gs_heap *h, const gs_replay_opts *o, gs_result *r,
                                           size_t done_before, size_t i, size_t *unhooked)
{
    gs_checkpoint_next next = o->checkpoint(h, done_before + i, o->checkpoint_ud);
    if (next == GS_CHECKPOINT_STOP) r->events = done_before + i;
    else if (next == GS_CHECKPOINT_DONE) *unhooked = i;
    return next;
}

/* One pass over the events. Returns FALSE when the replay must stop (first OOM without
 * --continue-on-oom, or a device failure). mc: several clients, md: several devices (NULL: h
 * serves every event; at most one is set). plain: none of the options that act per event
 * (observe, observe_alloc, touch, probe_driver, progress, checkpoint); prefetch: prefetch_ahead.
 * replay_pass calls this with constants (plain, prefetch, and which of mc and md is NULL), so the
 * compiler drops the checks a replay does not need from its loop (about 15 instructions an event). */
static inline __attribute__((always_inline)) gboolean
replay_loop(gs_heap *h, gs_clients *mc, gs_devices *md, gs_backend *be, const gs_trace *t,
            gs_block **slots, const gs_replay_opts *o, gs_result *r, size_t done_before,
            size_t total, uint64_t *probed, size_t from, size_t *unhooked, const bool plain,
            const bool prefetch)
{
    const gs_event *ev = t->ev;
    const size_t n = t->n;
    for (size_t i = from; i < n; i++) {
        const gs_event *e = &ev[i];
        if (prefetch && i + PREFETCH_SLOT < n) prefetch_ahead(ev, i, slots);
        gs_checkpoint_next next;
        if (!plain && o->checkpoint && !mc && !md &&
            (next = call_hook(h, o, r, done_before, i, unhooked)) != GS_CHECKPOINT_GO_ON)
            return next == GS_CHECKPOINT_DONE; /* done: run_passes goes on from i without it */
        gs_status st = GS_OK;
        if (mc) h = gs_clients_route(mc, e, slots);
        else if (md) h = gs_devices_route(md, e);
        /* The two ops of nearly every event first, by compares: the switch's jump table cost
         * about 8 instructions an event. */
        const gs_op op = (gs_op)e->op;
        if (op == GS_OP_ALLOC) {
            st = gs_heap_malloc(h, e->size, e->stream, &slots[e->slot]);
            if (st == GS_ERR_OOM) {
                slots[e->slot] = NULL;
                fatal_oom(mc, md, r, h, t, e, i);
                if (!o->continue_on_oom) {
                    if (mc) gs_clients_after(mc, e, slots);
                    if (md) gs_devices_after(md, e);
                    if (!plain && o->observe) o->observe(h, e, done_before + i, o->observe_ud);
                    r->events = done_before + i + 1;
                    return FALSE;
                }
                st = GS_OK;
            } else if (!plain && st == GS_OK && o->observe_alloc && !mc && !md) {
                o->observe_alloc(h, e, slots[e->slot], o->export_ud);
            }
            if (!plain && st == GS_OK && o->touch && slots[e->slot]) {
                gint64 t0 = g_get_monotonic_time();
                st = gs_dev_touch(be, slots[e->slot]->addr, e->size ? e->size : 1);
                r->touch_seconds += (double)(g_get_monotonic_time() - t0) / 1e6;
            }
        } else if (op == GS_OP_FREE) {
            gs_block *b = slots[e->slot];
            if (!b) {
                r->skipped_frees++; /* its allocation failed and was skipped */
            } else if (e->flags & GS_EV_DEFERRED) {
                gs_heap_free_request(h, b, &slots[e->slot]);
            } else {
                gs_heap_free(h, b);
                slots[e->slot] = NULL;
            }
        } else switch (op) {
        case GS_OP_ALLOC:
        case GS_OP_FREE:
            break;
        case GS_OP_OOM: {
            /* The request that failed in the recorded run. Failing here too, it was caught if
             * the program went on (later events), fatal if not; served, it is given back at
             * once: the recorded program never had it. */
            gs_block *b = NULL;
            st = gs_heap_malloc(h, e->size, e->stream, &b);
            if (st == GS_OK) {
                gs_heap_free(h, b);
            } else if (st == GS_ERR_OOM && i + 1 < t->n) {
                r->caught_ooms++;
                if (md) gs_devices_oom(md, e, i, true);
                st = GS_OK;
            } else if (st == GS_ERR_OOM) {
                fatal_oom(mc, md, r, h, t, e, i);
                if (done_before + n < total) {
                    /* The death was the pass's last event; a benchmark's repeat (o->repeat)
                     * starts its next pass from the freed state, as after any pass. */
                    st = GS_OK;
                    break;
                }
                if (mc) gs_clients_after(mc, e, slots);
                if (md) gs_devices_after(md, e);
                if (!plain && o->observe) o->observe(h, e, done_before + i, o->observe_ud);
                r->events = done_before + i + 1;
                return FALSE;
            }
            break;
        }
        case GS_OP_FREE_DONE:
            /* NULL when the allocator already synchronised and completed it */
            if (slots[e->slot]) {
                gs_heap_free_complete(h, slots[e->slot]);
                slots[e->slot] = NULL;
            }
            break;
        case GS_OP_EMPTY_CACHE:
            st = gs_heap_empty_cache(h);
            break;
        case GS_OP_POOL_BEGIN:
            st = gs_heap_pool_begin(h, gs_event_pool(e), e->size != 0, e->stream);
            break;
        case GS_OP_POOL_END:
            gs_heap_pool_end(h, gs_event_pool(e));
            break;
        case GS_OP_POOL_RELEASE:
            st = gs_heap_pool_release(h, gs_event_pool(e), e->size != 0);
            break;
        case GS_OP_MARK:
        case GS_OP_COUNT:
            break;
        }
        if (mc) gs_clients_after(mc, e, slots);
        if (md) gs_devices_after(md, e);
        if (!plain && o->observe) o->observe(h, e, done_before + i, o->observe_ud);
        if (st != GS_OK) {
            r->error = st;
            r->error_event = i;
            r->events = done_before + i + 1;
            return FALSE;
        }
        if (!plain && o->probe_driver && !md) probe_driver(h, mc, be, r, probed);
        if (!plain && o->progress && ((i + 1) & ((1u << 20) - 1)) == 0)
            o->progress(done_before + i + 1, total, o->progress_ud);
    }
    return TRUE;
}

/* The pass from event `from` on. A checkpoint hook that says it is done (GS_CHECKPOINT_DONE)
 * leaves the rest of the replay to go on without it: *unhooked is then the event it said so
 * before, and run_passes goes on from there, in the plain loop where nothing else acts per
 * event (a whatif probe's copy of a checkpoint replays the rest of the trace so, about 15
 * instructions and a call an event fewer). */
static gboolean replay_pass(gs_heap *h, gs_clients *mc, gs_devices *md, gs_backend *be,
                            const gs_trace *t, gs_block **slots, const gs_replay_opts *o,
                            gs_result *r, size_t done_before, size_t total, uint64_t *probed,
                            size_t from, size_t *unhooked)
{
    if (!o->observe && !o->observe_alloc && !o->touch && !o->probe_driver && !o->progress &&
        !o->checkpoint) {
        /* several devices or clients: a loop each, with the other NULL (about 20 instructions
         * an event fewer) */
        if (md)
            return replay_loop(h, NULL, md, be, t, slots, o, r, done_before, total, probed, from,
                               unhooked, true, false);
        if (mc)
            return replay_loop(h, mc, NULL, be, t, slots, o, r, done_before, total, probed, from,
                               unhooked, true, false);
        if (t->n_slots > PREFETCH_MIN_SLOTS)
            return replay_loop(h, NULL, NULL, be, t, slots, o, r, done_before, total, probed, from,
                               unhooked, true, true);
        return replay_loop(h, NULL, NULL, be, t, slots, o, r, done_before, total, probed, from,
                           unhooked, true, false);
    }
    return replay_loop(h, mc, md, be, t, slots, o, r, done_before, total, probed, from, unhooked,
                       false, false);
}

/* A multi-client result's policy: the one spec, or each client's as NAME=SPEC when they
 * differ (the shared arrangement has one allocator, under p). */
static char *clients_label(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o)
{
    bool same = true;
    for (guint k = 0; o->client_policy && o->clients != GS_CLIENTS_SHARED && k < t->clients->len; k++)
        same &= !o->client_policy[k] || strcmp(o->client_policy[k]->spec, p->spec) == 0;
    if (same) return g_strdup(p->spec);
    GString *s = g_string_new(NULL);
    for (guint k = 0; k < t->clients->len; k++)
        g_string_append_printf(s, "%s%s=%s", k ? " " : "", (const char *)t->clients->pdata[k],
                               o->client_policy[k] ? o->client_policy[k]->spec : p->spec);
    return g_string_free(s, FALSE);
}

/* The simulated device's total memory: the trace's device, else an 80 GiB H100. */
static uint64_t sc_total(const gs_replay_opts *o)
{
    return o->device_total ? o->device_total : GS_DEFAULT_DEVICE_TOTAL;
}

/* Between repetitions of a trace the program "ends": free what is still live so the next pass
 * starts from the same state of the trace (cached segments stay, as in a training loop's next
 * epoch). */
static void free_live(gs_heap *h, gs_clients *mc, gs_devices *md, const gs_trace *t,
                      gs_block **slots)
{
    for (size_t s = 0; s < t->n_slots; s++) {
        if (!slots[s]) continue;
        if (mc) gs_clients_free_slot(mc, (uint32_t)s, slots[s]);
        else if (md) gs_devices_free_slot(md, (uint32_t)s, slots[s]);
        else if (slots[s]->state == GS_BLOCK_PENDING) gs_heap_free_complete(h, slots[s]);
        else gs_heap_free(h, slots[s]);
        slots[s] = NULL;
    }
}

/* The simulated device of a replay without o->backend: o's size and cost model (the built-in
 * one in *own_cal when o has none, freed by the caller), and the reference's segment
 * addresses when it has them. */
static gs_backend *open_sim_device(const gs_replay_opts *o, gs_calibration **own_cal)
{
    if (!o->cal) *own_cal = gs_calibration_builtin();
    gs_backend_config bc = {.sim = {
        .total_bytes = sc_total(o),
        .cal = o->cal ? o->cal : *own_cal,
        .align_512m = gs_sim_h200_like(sc_total(o)),
    }};
    if (o->ref && o->ref->seg_addrs->len) {
        bc.sim.script_addrs = (const uint64_t *)(void *)o->ref->seg_addrs->data;
        bc.sim.script_sizes = (const uint64_t *)(void *)o->ref->seg_sizes->data;
        bc.sim.script_n = o->ref->seg_addrs->len;
    }
    gs_backend *be = NULL;
    (void)gs_backend_open("sim", &bc, &be, NULL); /* the simulated device always opens */
    return be;
}

/* The passes of a replay (o->repeat of them) and its host time. */
static void run_passes(gs_heap *h, gs_clients *mc, gs_devices *md, gs_backend *be,
                       const gs_trace *t, gs_block **slots, const gs_replay_opts *o, gs_result *r)
{
    unsigned repeat = o->repeat ? o->repeat : 1;
    size_t total = t->n * repeat;
    gint64 t0 = g_get_monotonic_time();
    gboolean go_on = TRUE;
    uint64_t probed = 0;
    gs_replay_opts rest = *o; /* o once its checkpoint hook is done */
    rest.checkpoint = NULL;
    for (unsigned k = 0; go_on && k < repeat; k++) {
        size_t at = SIZE_MAX;
        go_on = replay_pass(h, mc, md, be, t, slots, o, r, k * t->n, total, &probed, 0, &at);
        if (go_on && at != SIZE_MAX) {
            o = &rest;
            go_on = replay_pass(h, mc, md, be, t, slots, o, r, k * t->n, total, &probed, at, &at);
        }
        if (go_on && k + 1 < repeat) free_live(h, mc, md, t, slots);
    }
    if (go_on) r->events = total;
    r->host_seconds = (double)(g_get_monotonic_time() - t0) / 1e6;
}

/* A replay that cannot have the host memory its trace's tables need (what, bytes): a result
 * whose outcome is "error" (GS_ERR_NOMEM), as a device error is, not an abort in g_malloc: a
 * sweep's other cells and the other policies of a replay are reported all the same. */
static gboolean no_memory(gs_result *r, const gs_replay_opts *o, const char *what)
{
    r->error = GS_ERR_NOMEM;
    r->error_event = 0;
    r->error_msg = g_strdup(what);
    r->backend = o->backend ? o->backend->ops->name : "sim";
    return TRUE;
}

/* The replay's slot table (a block pointer for each allocation of the trace), or NULL when the
 * host has not the memory: r is then that error (no_memory). */
static gs_block **new_slots(const gs_trace *t, const gs_replay_opts *o, gs_result *r)
{
    size_t n = t->n_slots ? t->n_slots : 1;
    gs_block **slots = g_try_new0(gs_block *, n);
    if (!slots) {
        char *what = g_strdup_printf("%zu bytes for the slot table (%zu allocations)",
                                     n * sizeof *slots, t->n_slots);
        no_memory(r, o, what);
        g_free(what);
    }
    return slots;
}

/* A trace whose events name several devices: a heap and a simulated device each (devices.c). */
static gboolean replay_devices(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                               const uint32_t *ids, size_t n, gs_result *r, GError **err)
{
    gs_block **slots = new_slots(t, o, r);
    if (!slots) return TRUE;
    GError *own = NULL;
    gs_devices *md = gs_devices_new(t, p, o, ids, n, &own);
    if (!md) {
        g_free(slots);
        if (g_error_matches(own, GS_REPLAY_ERROR, GS_REPLAY_ERROR_NOMEM)) {
            no_memory(r, o, own->message);
            g_error_free(own);
            return TRUE;
        }
        g_propagate_error(err, own);
        g_free(r->policy);
        r->policy = NULL;
        return FALSE;
    }
    run_passes(NULL, NULL, md, NULL, t, slots, o, r);
    r->backend = "sim";
    gs_devices_finish(md, r);
    g_free(slots);
    return TRUE;
}

/* The trace's bound into r and its devices' results. */
static void set_bound(const gs_trace *t, const gs_replay_opts *o, gs_result *r)
{
    gs_bound *own = o->bound ? NULL : gs_bound_compute(t);
    const gs_bound *b = o->bound ? o->bound : own;
    r->lower_bound_bytes = b->lower_bound_bytes;
    r->offline_bytes = b->offline_bytes;
    for (size_t k = 0; k < r->n_devices; k++) {
        const gs_bound_dev *d = gs_bound_device(b, r->devices[k].device);
        if (!d) continue;
        r->devices[k].lower_bound_bytes = d->lower_bound_bytes;
        r->devices[k].offline_bytes = d->offline_bytes;
    }
    gs_bound_free(own);
}

static gboolean replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           gs_result *r, GError **err);

/* The policies for t: a spec that names no release follows the release t was recorded with
 * (gs_policy_at_release), p's and each client's. Each made is added to own; *so is o with the
 * clients' policies replaced (*cp, to g_free). FALSE and err when a key needs a newer release
 * than t's. */
static gboolean for_release(const gs_trace *t, const gs_policy **p, const gs_replay_opts *o,
                            gs_replay_opts *so, GPtrArray *own, const gs_policy ***cp, GError **err)
{
    const char *rec = gs_trace_get_meta(t, "pytorch_version");
    *so = *o;
    GError *perr = NULL;
    gs_policy *q = gs_policy_at_release(*p, rec, &perr);
    if (q) g_ptr_array_add(own, q);
    *p = q ? q : *p;
    if (o->client_policy && !perr) {
        *cp = g_new0(const gs_policy *, t->clients->len);
        for (guint k = 0; k < t->clients->len && !perr; k++) {
            if (!((*cp)[k] = o->client_policy[k])) continue;
            gs_policy *c = gs_policy_at_release((*cp)[k], rec, &perr);
            if (c) g_ptr_array_add(own, c);
            (*cp)[k] = c ? c : (*cp)[k];
        }
        so->client_policy = *cp;
    }
    if (perr) g_propagate_error(err, perr);
    return perr == NULL;
}

uint64_t gs_replay_own_limit(const gs_trace *t, const gs_policy *p, uint64_t device_total)
{
    GPtrArray *own = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    const gs_policy **cp = NULL;
    gs_replay_opts o = {.device_total = device_total}, so;
    uint64_t limit = 0;
    if (for_release(t, &p, &o, &so, own, &cp, NULL) && p->ops->limit)
        limit = p->ops->limit(p->cfg, sc_total(&so));
    g_ptr_array_free(own, TRUE);
    g_free(cp);
    return limit;
}

gboolean gs_replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                       gs_result *r, GError **err)
{
    GPtrArray *own = g_ptr_array_new_with_free_func((GDestroyNotify)gs_policy_free);
    const gs_policy **cp = NULL;
    gs_replay_opts so;
    gboolean ok = for_release(t, &p, o, &so, own, &cp, err);
    /* the limit the policy's own settings set (per_process_memory_fraction) when the caller
     * gives none: the heap applies it, and the report shows it */
    if (ok && !so.capacity && p->ops->limit && !so.devices && !so.backend)
        so.capacity = p->ops->limit(p->cfg, sc_total(&so));
    if (ok) ok = replay_run(t, p, &so, r, err);
    g_ptr_array_free(own, TRUE);
    g_free(cp);
    if (!ok) return FALSE;
    if (r->error != GS_ERR_NOMEM) set_bound(t, o, r); /* (its tables are as large again) */
    gs_trace_caveats cv;
    gs_trace_get_caveats(t, &cv);
    r->survived = cv.dies && !r->oom && r->error == GS_OK;
    return TRUE;
}

static gboolean replay_run(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           gs_result *r, GError **err)
{
    memset(r, 0, sizeof *r);
    r->policy = g_strdup(p->spec);
    r->capacity = o->capacity;
    uint32_t *ids = NULL;
    size_t n_dev = gs_trace_devices(t, &ids);
    if (n_dev > 1) {
        gboolean ok = replay_devices(t, p, o, ids, n_dev, r, err);
        g_free(ids);
        return ok;
    }
    g_free(ids);
    gs_block **slots = new_slots(t, o, r);
    if (!slots) return TRUE;
    gs_calibration *own_cal = NULL;
    gs_backend *be = o->backend ? o->backend : open_sim_device(o, &own_cal);
    uint64_t dev_total = 0;
    (void)gs_dev_mem_info(be, NULL, &r->dev_free_before, &dev_total);
    gs_heap_config hc = {.limit = o->capacity, .device_total = o->backend ? 0 : sc_total(o)};
    /* Several clients: an allocator per client (or one for all), on this one device. */
    gs_clients *mc = NULL;
    gs_heap *h = NULL;
    pool_tally tally = {0};
    const gs_policy *failed = p;
    if (t->clients->len > 1) {
        mc = gs_clients_new(t, p, o, be, &hc, &failed);
        if (mc) {
            g_free(r->policy);
            r->policy = clients_label(t, p, o);
        }
    } else {
        /* a trace with private pools: a row per pool, from the core's reserve callback; none
         * for a policy that has no private pools (a grow hook: its pool events do nothing) */
        uint32_t *pids = NULL;
        size_t npids = p->ops->grow ? 0 : gs_trace_pool_ids(t, &pids);
        if (npids) {
            tally.rows = g_new0(gs_pool_result, npids + 1);
            for (size_t k = 0; k < npids; k++) tally.rows[k + 1].id = pids[k];
            tally.n = npids + 1;
        }
        g_free(pids);
        if (npids || o->observe_reserve) {
            tally.o = o;
            hc.ud = &tally;
            hc.on_reserve = tally_on_reserve;
        }
        h = gs_heap_new(p, be, &hc);
        if (h) tally.h = h;
    }
    if (!h && !mc) {
        if (failed) /* (NULL: the clients' tables did not fit in memory) */
            g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                        "policy %s needs the driver's virtual-memory calls, which backend '%s' "
                        "lacks",
                        failed->spec, be->ops->name);
        else no_memory(r, o, "the clients of the trace's allocations");
        if (!o->backend) gs_backend_destroy(be);
        gs_calibration_free(own_cal);
        g_free(tally.rows);
        g_free(slots);
        if (!failed) return TRUE;
        g_free(r->policy);
        r->policy = NULL;
        return FALSE;
    }
    run_passes(h, mc, NULL, be, t, slots, o, r);

    r->script_used = gs_sim_script_used(be);
    r->backend = be->ops->name;
    if (r->error != GS_OK && gs_dev_last_error(be)) r->error_msg = g_strdup(gs_dev_last_error(be));
    /* (a heap's limit: o's capacity, or one set since, where a checkpoint's copy was capped) */
    bool spans = !o->backend && r->error != GS_ERR_NOMEM;
    if (mc) {
        if (spans && o->capacity && !gs_clients_same_limits(mc, &r->same_lo, &r->same_hi))
            r->same_lo = r->same_hi = 0;
        gs_clients_finish(mc, r);
    } else {
        r->stats = *gs_heap_stats(h);
        r->calls = *gs_heap_devcalls(h);
        if (tally.n) tally_finish(&tally, h, r);
        if (spans && gs_heap_limit(h) && gs_policy_blind_to_limit(p))
            gs_heap_same_limits(h, &r->same_lo, &r->same_hi);
        if (o->observe_end) o->observe_end(h, o->export_ud);
        r->teardown_failures = gs_heap_free_all(h);
    }
    (void)gs_dev_mem_info(be, NULL, &r->dev_free_after, &dev_total);
    g_free(slots);
    if (!o->backend) gs_backend_destroy(be);
    gs_calibration_free(own_cal);
    (void)err;
    return TRUE;
}
