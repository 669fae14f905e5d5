/* clients.c - several libraries on one GPU: the allocators of a replay whose trace has several
 * clients, the routing of events to them, the cooperative release, and the bookkeeping that
 * says what each client held (see clients.h and gs_client_result in replay.h).
 *
 * All allocators share one backend, the simulated device, so its physical memory is what they
 * compete for; each also has the replay's limit (--capacity), as each library has its own cap.
 *
 * The arrangements:
 *   separate     one heap per client, each under its client's policy;
 *   shared       one heap serves every client; what each client is charged is worked out
 *                here, per request and per segment (its tag names the client that made it);
 *   cooperative  one heap per client, and each heap's config has a reclaim callback: when the
 *                device refuses it, the other heaps release every cached segment they can
 *                (gs_heap_release_cached, which is also CuPy's free_all_blocks) and it tries
 *                once more.
 */
#include <string.h>

#include "clients.h"

struct gs_clients {
    gs_clients_mode mode;
    size_t n;                /* clients */
    gs_heap **heap;          /* per client; shared: every entry is the one heap */
    const gs_policy **pol;   /* per client */
    uint16_t *slot_client;   /* the client of each allocation */
    gs_client_result *cr;    /* per client; stats only filled as the run goes for shared */
    uint64_t *pending_req;   /* shared: requested bytes of the client's pending frees, per
                              * client and pool type: [2k] large, [2k+1] small */
    gs_heap_counters before; /* shared: the heap's counters before the current event */
    uint16_t cur;            /* the client of the current event */
    gs_stats_sums dev;       /* separate, cooperative: the device's peaks (of the sums) */
    bool have_oom;
};

/* ---- statistics charged by hand (shared), with the core's Stat semantics (gs_stat_inc/dec) ---- */

/* gs_heap_config.on_reserve, shared: a segment's bytes belong to the client that made it. */
static void on_reserve(void *ud, const gs_segment *s, uint64_t addr, int64_t bytes)
{
    gs_clients *c = ud;
    (void)addr;
    g_assert(s->tag < c->n);
    gs_stats_charge_reserve(&c->cr[s->tag].stats, c->heap[0], s, bytes);
}

bool gs_clients_release_others(gs_heap *const *heaps, size_t n, const gs_heap *h,
                               gs_client_result *cr, gs_status *st)
{
    bool any = false;
    *st = GS_OK;
    for (size_t k = 0; k < n; k++) {
        gs_heap *o = heaps[k];
        if (o == h) continue;
        uint64_t before = gs_heap_reserved(o);
        *st = gs_heap_release_cached(o);
        uint64_t after = gs_heap_reserved(o);
        cr[k].released_for_others += before - after;
        any |= after < before;
        if (*st != GS_OK) return false;
    }
    return any;
}

/* gs_heap_config.reclaim, cooperative: every other allocator releases what it has cached. */
static bool reclaim(void *ud, gs_heap *h, uint64_t bytes, gs_status *st)
{
    gs_clients *c = ud;
    (void)bytes;
    gs_stats_sums_dirty(&c->dev); /* the other heaps change in h's event */
    return gs_clients_release_others(c->heap, c->n, h, c->cr, st);
}

void gs_heap_counters_read(const gs_heap *h, gs_heap_counters *k)
{
    const gs_stats *s = gs_heap_stats(h);
    k->retries = s->num_alloc_retries;
    k->ooms = s->num_ooms;
    k->syncs = s->num_sync_all_streams;
    k->rejections = s->num_oom_rejections;
    k->dev_alloc = s->num_device_alloc;
    k->dev_free = s->num_device_free;
    k->calls = *gs_heap_devcalls(h);
}

void gs_client_charge(gs_client_result *cr, const gs_heap_counters *before,
                      const gs_heap_counters *now)
{
    gs_stats *st = &cr->stats;
    st->num_alloc_retries += now->retries - before->retries;
    st->num_ooms += now->ooms - before->ooms;
    st->num_sync_all_streams += now->syncs - before->syncs;
    st->num_oom_rejections += now->rejections - before->rejections;
    st->num_device_alloc += now->dev_alloc - before->dev_alloc;
    st->num_device_free += now->dev_free - before->dev_free;
    for (int i = 0; i < GS_CALL_COUNT; i++) {
        cr->calls.n[i] += now->calls.n[i] - before->calls.n[i];
        cr->calls.failed[i] += now->calls.failed[i] - before->calls.failed[i];
        cr->calls.time_us[i] += now->calls.time_us[i] - before->calls.time_us[i];
    }
}

gs_clients *gs_clients_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           gs_backend *be, const gs_heap_config *hc, const gs_policy **failed)
{
    gs_clients *c = g_new0(gs_clients, 1);
    c->mode = o->clients;
    c->n = t->clients->len;
    c->heap = g_new0(gs_heap *, c->n);
    gs_stats_sums_init(&c->dev);
    c->pol = g_new0(const gs_policy *, c->n);
    c->cr = g_new0(gs_client_result, c->n);
    c->pending_req = g_new0(uint64_t, 2 * c->n);
    /* (2 bytes an allocation: a size the host may not have, an error and not an abort) */
    c->slot_client = g_try_new0(uint16_t, t->n_slots ? t->n_slots : 1);
    if (!c->slot_client) {
        *failed = NULL;
        gs_result r;
        memset(&r, 0, sizeof r);
        gs_clients_finish(c, &r);
        gs_result_clear(&r);
        return NULL;
    }
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].op == GS_OP_ALLOC) c->slot_client[t->ev[i].slot] = t->ev[i].client;

    gs_heap_config cfg = *hc;
    cfg.ud = c;
    if (c->mode == GS_CLIENTS_SHARED) cfg.on_reserve = on_reserve;
    if (c->mode == GS_CLIENTS_COOPERATIVE) cfg.reclaim = reclaim;
    for (size_t k = 0; k < c->n; k++) {
        c->pol[k] = c->mode != GS_CLIENTS_SHARED && o->client_policy && o->client_policy[k]
                        ? o->client_policy[k] : p;
        c->cr[k].name = g_strdup(g_ptr_array_index(t->clients, k));
        c->cr[k].policy = g_strdup(c->pol[k]->spec);
        if (c->mode == GS_CLIENTS_SHARED && k > 0) {
            c->heap[k] = c->heap[0];
            continue;
        }
        c->heap[k] = gs_heap_new(c->pol[k], be, &cfg);
        if (!c->heap[k]) {
            *failed = c->pol[k];
            gs_result r;
            memset(&r, 0, sizeof r);
            gs_clients_finish(c, &r);
            gs_result_clear(&r);
            return NULL;
        }
    }
    if (c->mode == GS_CLIENTS_SHARED) {
        c->cr[0].stats.max_split_size = gs_heap_stats(c->heap[0])->max_split_size;
        for (size_t k = 1; k < c->n; k++) c->cr[k].stats.max_split_size = c->cr[0].stats.max_split_size;
    }
    return c;
}

static uint16_t client_of(const gs_clients *c, const gs_event *e)
{
    return gs_event_is_free(e) ? c->slot_client[e->slot] : e->client;
}

/* Client k's event begins: shared, note the heap's counters to charge their growth to k. */
static gs_heap *begin_event(gs_clients *c, uint16_t k)
{
    c->cur = k;
    gs_heap *h = c->heap[k];
    if (c->mode == GS_CLIENTS_SHARED) {
        gs_heap_set_tag(h, k);
        gs_heap_counters_read(h, &c->before);
    }
    return h;
}

/* Shared: charge client k for the free (op GS_OP_FREE, deferred or not) or the completion
 * (GS_OP_FREE_DONE) of live block b, before the heap does it. Allocation counts drop at the
 * free, requested bytes at its completion, as the core counts them (free_request, free_block). */
static void charge_free(gs_clients *c, uint16_t k, const gs_block *b, gs_op op, bool deferred)
{
    if (c->mode != GS_CLIENTS_SHARED) return;
    gs_stats *st = &c->cr[k].stats;
    int type = gs_heap_pool_stat_type(c->heap[k], b->pool);
    uint64_t *pend = &c->pending_req[2 * k + (type == GS_STAT_SMALL)];
    if (op == GS_OP_FREE) {
        gs_stat_charge(st->allocation, type, -1);
        gs_stat_charge(st->allocated_bytes, type, -(int64_t)b->size);
        if (deferred) *pend += b->requested;
        else gs_stat_charge(st->requested_bytes, type, -(int64_t)b->requested);
    } else {
        gs_stat_charge(st->requested_bytes, type, -(int64_t)b->requested);
        *pend -= b->requested;
    }
}

/* gs_clients_route's shared arrangement: note the heap's counters, charge a free. Out of
 * line, so that the other arrangements' routing saves no registers. */
static G_GNUC_NO_INLINE gs_heap *route_shared(gs_clients *c, const gs_event *e,
                                              gs_block *const *slots, uint16_t k)
{
    gs_heap *h = begin_event(c, k);
    const gs_block *b = gs_event_is_free(e) ? slots[e->slot] : NULL;
    /* no block: a skipped allocation's free, or a completion the core already did */
    if (b) charge_free(c, k, b, (gs_op)e->op, e->flags & GS_EV_DEFERRED);
    return h;
}

gs_heap *gs_clients_route(gs_clients *c, const gs_event *e, gs_block *const *slots)
{
    uint16_t k = client_of(c, e);
    if (c->mode == GS_CLIENTS_SHARED) return route_shared(c, e, slots, k);
    c->cur = k; /* begin_event's, for the other arrangements */
    return c->heap[k];
}

/* The device's peaks, from the sums over the heaps (separate, cooperative). Taken after each
 * event: within one event reserved and allocated bytes only fall (a release) before they
 * rise, so the peaks of the sums are exact. */
static void track_device(gs_clients *c, bool freed)
{
    /* the event changed its client's heap alone, but for a reclaim (which marks the sums) */
    if (freed) gs_stats_sums_after_free(&c->dev, c->heap, c->n, c->cur);
    else gs_stats_sums_after(&c->dev, c->heap, c->n, c->cur);
}

/* Client c->cur's event ended; b: the block it allocated, if any. */
static void end_event(gs_clients *c, const gs_block *b)
{
    if (c->mode != GS_CLIENTS_SHARED) {
        track_device(c, false);
        return;
    }
    uint16_t k = c->cur;
    gs_heap *h = c->heap[k];
    gs_stats *st = &c->cr[k].stats;
    if (b) {
        int type = gs_heap_pool_stat_type(h, b->pool);
        gs_stat_charge(st->allocation, type, 1);
        gs_stat_charge(st->allocated_bytes, type, (int64_t)b->size);
        gs_stat_charge(st->requested_bytes, type, (int64_t)b->requested);
    }
    gs_heap_counters now;
    gs_heap_counters_read(h, &now);
    gs_client_charge(&c->cr[k], &c->before, &now);
    if (now.syncs != c->before.syncs) {
        /* The heap synchronised: every pending free of every client completed. */
        for (size_t j = 0; j < 2 * c->n; j++) {
            if (!c->pending_req[j]) continue;
            int type = j % 2 ? GS_STAT_SMALL : GS_STAT_LARGE;
            gs_stat_charge(c->cr[j / 2].stats.requested_bytes, type, -(int64_t)c->pending_req[j]);
            c->pending_req[j] = 0;
        }
    }
}

void gs_clients_after(gs_clients *c, const gs_event *e, gs_block *const *slots)
{
    if (c->mode != GS_CLIENTS_SHARED) /* end_event's, without its frame */
        track_device(c, gs_event_is_free(e));
    else end_event(c, e->op == GS_OP_ALLOC ? slots[e->slot] : NULL);
}

/* What client k holds now. */
static void holdings(const gs_clients *c, size_t k, uint64_t *reserved, uint64_t *allocated)
{
    const gs_stats *s =
        c->mode == GS_CLIENTS_SHARED ? &c->cr[k].stats : gs_heap_stats_now(c->heap[k]);
    *reserved = (uint64_t)s->reserved_bytes[GS_STAT_ALL].current;
    *allocated = (uint64_t)s->allocated_bytes[GS_STAT_ALL].current;
}

void gs_clients_oom(gs_clients *c, const gs_event *e, size_t i)
{
    gs_client_result *cr = &c->cr[c->cur];
    if (!cr->oom) {
        cr->oom = true;
        cr->first_oom_event = i;
        cr->first_oom_size = e->size;
    }
    if (c->have_oom) return;
    c->have_oom = true;
    for (size_t k = 0; k < c->n; k++)
        holdings(c, k, &c->cr[k].reserved_at_oom, &c->cr[k].allocated_at_oom);
}

uint64_t gs_clients_reserved(const gs_clients *c)
{
    if (c->mode == GS_CLIENTS_SHARED) return gs_heap_reserved(c->heap[0]);
    uint64_t sum = 0;
    for (size_t k = 0; k < c->n; k++) sum += gs_heap_reserved(c->heap[k]);
    return sum;
}

void gs_clients_free_slot(gs_clients *c, uint32_t slot, gs_block *b)
{
    /* As the slot's free (or completion) event would, so the shared charges stay right. */
    uint16_t k = c->slot_client[slot];
    gs_heap *h = begin_event(c, k);
    if (b->state == GS_BLOCK_PENDING) {
        charge_free(c, k, b, GS_OP_FREE_DONE, false);
        gs_heap_free_complete(h, b);
    } else {
        charge_free(c, k, b, GS_OP_FREE, false);
        gs_heap_free(h, b);
    }
    end_event(c, NULL);
}

bool gs_clients_same_limits(const gs_clients *c, uint64_t *lo, uint64_t *hi)
{
    *lo = 0, *hi = UINT64_MAX;
    for (size_t k = 0; k < c->n; k++) {
        if (!c->heap[k] || !gs_policy_blind_to_limit(c->pol[k])) return false;
        uint64_t l, h;
        gs_heap_same_limits(c->heap[k], &l, &h);
        *lo = MAX(*lo, l), *hi = MIN(*hi, h);
    }
    return c->n > 0;
}

void gs_clients_finish(gs_clients *c, gs_result *r)
{
    if (r) {
        r->arrangement = gs_clients_mode_name(c->mode);
        r->n_clients = c->n;
        r->clients = c->cr;
        c->cr = NULL;
        for (size_t k = 0; k < r->n_clients; k++) {
            if (r->clients[k].oom && (!r->clients[r->first_oom_client].oom ||
                                      r->clients[k].first_oom_event <
                                          r->clients[r->first_oom_client].first_oom_event))
                r->first_oom_client = k;
        }
        if (c->mode == GS_CLIENTS_SHARED && c->heap[0]) {
            r->stats = *gs_heap_stats(c->heap[0]);
            r->calls = *gs_heap_devcalls(c->heap[0]);
        } else if (c->n && c->heap[c->n - 1]) {
            /* The device: additive numbers summed, peaks of the sums as tracked. */
            gs_stats *d = &r->stats;
            *d = c->dev.peaks;
            memset(&r->calls, 0, sizeof r->calls);
            for (size_t k = 0; k < c->n; k++) {
                r->clients[k].stats = *gs_heap_stats(c->heap[k]);
                r->clients[k].calls = *gs_heap_devcalls(c->heap[k]);
                gs_devcalls_add(&r->calls, gs_heap_devcalls(c->heap[k]));
                gs_stats_add(d, &r->clients[k].stats);
            }
            d->max_split_size = r->clients[0].stats.max_split_size;
        }
    }
    for (size_t k = 0; k < c->n; k++) {
        if (c->mode == GS_CLIENTS_SHARED && k > 0) break;
        r->teardown_failures += gs_heap_free_all(c->heap[k]);
    }
    if (c->cr) {
        for (size_t k = 0; k < c->n; k++) {
            g_free(c->cr[k].name);
            g_free(c->cr[k].policy);
        }
        g_free(c->cr);
    }
    g_free(c->heap);
    g_free(c->pol);
    g_free(c->pending_req);
    g_free(c->slot_client);
    gs_stats_sums_clear(&c->dev);
    g_free(c);
}
