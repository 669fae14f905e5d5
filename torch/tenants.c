/* tenants.c - the library's clients and their arrangement on each device (tenants.h).
 *
 * The replay's arrangements (sim/clients.c) route the events of a trace whose allocations are
 * numbered in advance; here requests arrive one by one, each naming its client, and a free
 * names the block. The charges of the shared arrangement are the replay's rules for a program
 * whose frees complete at once (the library's: a pluggable allocator gets no record_stream):
 * allocations and allocated/requested bytes to the client that asked, a segment's reserved
 * bytes to the client whose request made it (the heap's tag), retries, OOMs, synchronisations
 * and device calls to the client whose request caused them.
 */
#include <string.h>

#include "clients.h"
#include "tenants.h"

typedef struct {
    gs_tenants *t;
    int device;
    gs_heap *heap[GS_TENANTS_MAX_CLIENTS]; /* shared: every entry is heap[0] */
    gs_client_result cr[GS_TENANTS_MAX_CLIENTS];
    gs_stats_sums sums; /* separate, cooperative: the device's peaks */
    gs_heap_counters before; /* shared: the heap before the current request */
    bool have_oom;
} device;

struct gs_tenants {
    gs_clients_mode mode;
    uint64_t capacity;
    size_t n;
    char name[GS_TENANTS_MAX_CLIENTS][GS_TENANTS_NAME_MAX + 1];
    const gs_policy *policy[GS_TENANTS_MAX_CLIENTS]; /* shared: every entry is `shared` */
    device *dev[GS_TENANTS_MAX_DEVICES];
    gs_backend *be[GS_TENANTS_MAX_DEVICES];
    uint64_t total[GS_TENANTS_MAX_DEVICES];
    const gs_policy *shared;
    uint64_t requests; /* every client's mallocs and frees so far */
};

gs_tenants *gs_tenants_new(gs_clients_mode mode, uint64_t capacity, const gs_policy *shared)
{
    gs_tenants *t = g_new0(gs_tenants, 1);
    t->mode = mode;
    t->capacity = capacity;
    t->shared = shared;
    return t;
}

size_t gs_tenants_count(const gs_tenants *t)
{
    return t->n;
}
const char *gs_tenants_name(const gs_tenants *t, int k)
{
    return t->name[k];
}
gboolean gs_tenants_has(const gs_tenants *t, int d)
{
    return t->dev[d] != NULL;
}

/* gs_heap_config.on_reserve, shared: a segment's bytes belong to the client that made it. */
static void on_reserve(void *ud, const gs_segment *s, uint64_t addr, int64_t bytes)
{
    device *dv = ud;
    (void)addr;
    gs_stats_charge_reserve(&dv->cr[s->tag].stats, dv->heap[0], s, bytes);
}

/* gs_heap_config.reclaim, cooperative: every other client's heap releases what it caches. */
static bool reclaim(void *ud, gs_heap *h, uint64_t bytes, gs_status *st)
{
    device *dv = ud;
    (void)bytes;
    gs_stats_sums_dirty(&dv->sums);
    return gs_clients_release_others(dv->heap, dv->t->n, h, dv->cr, st);
}

/* Client k's heap on dv (shared: the one heap, made for client 0). */
static gboolean make_heap(gs_tenants *t, device *dv, size_t k, GError **err)
{
    if (t->mode == GS_CLIENTS_SHARED && k > 0) {
        dv->heap[k] = dv->heap[0];
        return TRUE;
    }
    gs_heap_config hc = {.limit = t->capacity, .device_total = t->total[dv->device], .ud = dv};
    if (t->mode == GS_CLIENTS_SHARED) hc.on_reserve = on_reserve;
    if (t->mode == GS_CLIENTS_COOPERATIVE) hc.reclaim = reclaim;
    dv->heap[k] = gs_heap_new(t->policy[k], t->be[dv->device], &hc);
    if (!dv->heap[k]) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                    "policy %s needs the driver's virtual-memory calls, which device %d lacks",
                    t->policy[k]->spec, dv->device);
        return FALSE;
    }
    return TRUE;
}

static gboolean valid_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > GS_TENANTS_NAME_MAX) return FALSE;
    for (size_t i = 0; i < n; i++)
        if (!g_ascii_islower(name[i]) && !g_ascii_isdigit(name[i]) && name[i] != '_') return FALSE;
    return TRUE;
}

int gs_tenants_client(gs_tenants *t, const char *name, const gs_policy *p, GError **err)
{
    for (size_t k = 0; k < t->n; k++)
        if (strcmp(t->name[k], name) == 0) return (int)k;
    if (!valid_name(name)) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP,
                    "client name '%s': expected 1 to %d of a-z, 0-9 and _", name ? name : "",
                    GS_TENANTS_NAME_MAX);
        return -1;
    }
    if (t->n == GS_TENANTS_MAX_CLIENTS) {
        g_set_error(err, GS_REPLAY_ERROR, GS_REPLAY_ERROR_SETUP, "client '%s': at most %d clients",
                    name, GS_TENANTS_MAX_CLIENTS);
        return -1;
    }
    size_t k = t->n++;
    g_strlcpy(t->name[k], name, sizeof t->name[k]);
    t->policy[k] = t->mode == GS_CLIENTS_SHARED ? t->shared : p;
    /* devices already in use get this client's heap now: every device keeps a heap per client */
    for (int d = 0; d < GS_TENANTS_MAX_DEVICES; d++) {
        if (!t->dev[d]) continue;
        t->dev[d]->cr[k].name = g_strdup(name);
        t->dev[d]->cr[k].policy = g_strdup(t->policy[k]->spec);
        gs_stats_sums_dirty(&t->dev[d]->sums);
        if (!make_heap(t, t->dev[d], k, err)) {
            t->n--;
            return -1;
        }
    }
    return (int)k;
}

gboolean gs_tenants_open(gs_tenants *t, int d, gs_backend *be, uint64_t device_total, GError **err)
{
    device *dv = g_new0(device, 1);
    dv->t = t;
    dv->device = d;
    gs_stats_sums_init(&dv->sums);
    t->be[d] = be;
    t->total[d] = device_total;
    for (size_t k = 0; k < t->n; k++) {
        dv->cr[k].name = g_strdup(t->name[k]);
        dv->cr[k].policy = g_strdup(t->policy[k]->spec);
        if (!make_heap(t, dv, k, err)) return FALSE; /* (the library stops the program) */
    }
    t->dev[d] = dv;
    return TRUE;
}

/* Shared: client k's request is about to run on the one heap. */
static void begin(device *dv, int k)
{
    if (dv->t->mode != GS_CLIENTS_SHARED) return;
    gs_heap_set_tag(dv->heap[0], (uint32_t)k);
    gs_heap_counters_read(dv->heap[0], &dv->before);
}

/* Client k's request ended: shared, charge what it caused; else the device's peaks. */
static void end(device *dv, int k)
{
    gs_tenants *t = dv->t;
    if (t->mode != GS_CLIENTS_SHARED) {
        gs_stats_sums_after(&dv->sums, dv->heap, t->n, (size_t)k);
        return;
    }
    gs_heap_counters now;
    gs_heap_counters_read(dv->heap[0], &now);
    gs_client_charge(&dv->cr[k], &dv->before, &now);
}

/* Shared: charge client k the allocation (+1) or free (-1) of b. */
static void charge_block(device *dv, int k, const gs_block *b, int sign)
{
    if (dv->t->mode != GS_CLIENTS_SHARED) return;
    gs_stats *c = &dv->cr[k].stats;
    int type = gs_heap_pool_stat_type(dv->heap[0], b->pool);
    gs_stat_charge(c->allocation, type, sign);
    gs_stat_charge(c->allocated_bytes, type, sign * (int64_t)b->size);
    gs_stat_charge(c->requested_bytes, type, sign * (int64_t)b->requested);
}

/* What client j holds now. */
static void holdings(const device *dv, size_t j, uint64_t *reserved, uint64_t *allocated)
{
    const gs_stats *s = dv->t->mode == GS_CLIENTS_SHARED ? &dv->cr[j].stats
                                                         : gs_heap_stats_now(dv->heap[j]);
    *reserved = (uint64_t)s->reserved_bytes[GS_STAT_ALL].current;
    *allocated = (uint64_t)s->allocated_bytes[GS_STAT_ALL].current;
}

gs_status gs_tenants_malloc(gs_tenants *t, int d, int k, uint64_t size, uint32_t stream,
                            gs_block **b)
{
    device *dv = t->dev[d];
    begin(dv, k);
    gs_status st = gs_heap_malloc(dv->heap[k], size, stream, b);
    if (st == GS_OK) charge_block(dv, k, *b, +1);
    end(dv, k);
    if (st == GS_ERR_OOM) {
        gs_client_result *cr = &dv->cr[k];
        if (!cr->oom) {
            cr->oom = true;
            cr->first_oom_event = t->requests;
            cr->first_oom_size = size;
        }
        if (!dv->have_oom) { /* what every client held at the device's first OOM */
            dv->have_oom = true;
            for (size_t j = 0; j < t->n; j++)
                holdings(dv, j, &dv->cr[j].reserved_at_oom, &dv->cr[j].allocated_at_oom);
        }
    }
    t->requests++;
    return st;
}

void gs_tenants_free(gs_tenants *t, int d, int k, gs_block *b)
{
    device *dv = t->dev[d];
    begin(dv, k);
    charge_block(dv, k, b, -1);
    gs_heap_free(dv->heap[k], b);
    end(dv, k);
    t->requests++;
}

gs_status gs_tenants_empty_cache(gs_tenants *t, int d, int k)
{
    device *dv = t->dev[d];
    begin(dv, k);
    gs_status st = gs_heap_empty_cache(dv->heap[k]);
    end(dv, k);
    return st;
}

gs_status gs_tenants_pool(gs_tenants *t, int d, int k, gs_op op, uint32_t id, uint32_t stream,
                          bool flag)
{
    device *dv = t->dev[d];
    gs_status st = GS_OK;
    begin(dv, k); /* (a capture's begin may release what a move skipped: stitch) */
    if (op == GS_OP_POOL_BEGIN) st = gs_heap_pool_begin(dv->heap[k], id, flag, stream);
    else if (op == GS_OP_POOL_END) gs_heap_pool_end(dv->heap[k], id);
    else if (op == GS_OP_POOL_RELEASE) st = gs_heap_pool_release(dv->heap[k], id, flag);
    else st = GS_ERR_INVALID;
    end(dv, k);
    return st;
}

const gs_heap *gs_tenants_heap(const gs_tenants *t, int d, int k)
{
    return t->dev[d]->heap[k];
}

uint64_t gs_tenants_reserved(const gs_tenants *t, int d)
{
    const device *dv = t->dev[d];
    if (!dv) return 0;
    if (t->mode == GS_CLIENTS_SHARED) return gs_heap_reserved(dv->heap[0]);
    uint64_t sum = 0;
    for (size_t k = 0; k < t->n; k++) sum += gs_heap_reserved(dv->heap[k]);
    return sum;
}

void gs_tenants_result(gs_tenants *t, int d, gs_result *r)
{
    device *dv = t->dev[d];
    r->device = (uint32_t)d;
    /* the limit the heaps had: the cap given, else their settings' own (a memory fraction) */
    r->capacity = t->capacity;
    if (!r->capacity)
        for (size_t k = 0; k < t->n; k++)
            r->capacity = MAX(r->capacity, gs_heap_limit(dv->heap[k]));
    if (t->n == 1 || t->mode == GS_CLIENTS_SHARED) {
        r->stats = *gs_heap_stats(dv->heap[0]);
        r->calls = *gs_heap_devcalls(dv->heap[0]);
    }
    if (t->n == 1) {
        r->policy = g_strdup(t->policy[0]->spec);
        return;
    }
    r->policy = g_strdup(t->mode == GS_CLIENTS_SHARED ? t->policy[0]->spec : "(per client)");
    r->arrangement = gs_clients_mode_name(t->mode);
    r->n_clients = t->n;
    r->clients = g_new0(gs_client_result, t->n);
    if (t->mode != GS_CLIENTS_SHARED) {
        r->stats = dv->sums.peaks; /* the device: peaks of the sums, additive numbers summed */
        memset(&r->calls, 0, sizeof r->calls);
    }
    for (size_t k = 0; k < t->n; k++) {
        gs_client_result *c = &r->clients[k];
        *c = dv->cr[k];
        c->name = g_strdup(dv->cr[k].name);
        c->policy = g_strdup(dv->cr[k].policy);
        if (t->mode == GS_CLIENTS_SHARED) {
            c->stats.max_split_size = r->stats.max_split_size;
        } else {
            c->stats = *gs_heap_stats(dv->heap[k]);
            c->calls = *gs_heap_devcalls(dv->heap[k]);
            gs_devcalls_add(&r->calls, &c->calls);
            gs_stats_add(&r->stats, &c->stats);
        }
        if (c->oom && (!r->oom || c->first_oom_event < r->first_oom_event)) {
            r->oom = true;
            r->first_oom_client = k;
            r->first_oom_event = c->first_oom_event;
            r->first_oom_size = c->first_oom_size;
        }
    }
    if (t->mode != GS_CLIENTS_SHARED) r->stats.max_split_size = r->clients[0].stats.max_split_size;
}
