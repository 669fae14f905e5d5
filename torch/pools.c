/* pools.c - CUDA graphs' and MemPools' private pools in libgpusim_torch.so: PyTorch's pool
 * hooks turned into the core's routes (pools.h says how). */
#include "pools.h"

enum { MAX_OPEN = 16, MAX_STREAM_ROUTES = 15 };

/* The stream of the route a begin opens at once: no request names it. It makes the pool (or
 * gives it its use) and tells the heap a recording is underway before the capture's first
 * request, as PyTorch's begin does: no full flush from then, and a release the heap owes is
 * made before the capture starts (gs_heap_pool_begin). The filter's streams join it. */
#define NO_STREAM ((void *)UINTPTR_MAX)

typedef struct {
    int device;
    uint64_t graph, user; /* PyTorch's MempoolId_t */
    uint32_t id;          /* the heap's */
    gs_pool_filter filter;
    void *ctx;
    int nstreams;
    void *stream[MAX_STREAM_ROUTES]; /* the streams the filter took */
} open_begin;

typedef struct {
    int device;
    uint64_t graph, user;
    uint32_t id;
    /* MemPool constructions of this pool that found no slot (16 pools): each owes the pool
     * its use, made at the pool's next begin if a slot is free then, or given up at the
     * MemPool's deletion */
    int owed;
} known_pool;

struct gs_pools {
    open_begin open[MAX_OPEN]; /* in the order begun */
    int nopen;
    GArray *known; /* known_pool: every pool named so far, and its id */
    uint32_t next_id;
    int open_on[GS_TENANTS_MAX_DEVICES]; /* open begins per device: none, no filter asked */
};

gs_pools *gs_pools_new(void)
{
    gs_pools *p = g_new0(gs_pools, 1);
    p->known = g_array_new(FALSE, FALSE, sizeof(known_pool));
    p->next_id = 1;
    return p;
}

void gs_pools_free(gs_pools *p)
{
    if (!p) return;
    g_array_free(p->known, TRUE);
    g_free(p);
}

/* Pool (graph, user) of d among those named so far (its heap id the same for the same pool),
 * named now if new and make; NULL when not known and !make, and for a pair (0, 0) or a device
 * out of range. (A pointer into p->known: good until the next pool is named.) */
static known_pool *known(gs_pools *p, int d, uint64_t graph, uint64_t user, bool make)
{
    if ((!graph && !user) || d < 0 || d >= GS_TENANTS_MAX_DEVICES) return NULL;
    for (guint i = 0; i < p->known->len; i++) {
        known_pool *q = &g_array_index(p->known, known_pool, i);
        if (q->device == d && q->graph == graph && q->user == user) return q;
    }
    if (!make || p->next_id == UINT32_MAX) return NULL;
    known_pool q = {.device = d, .graph = graph, .user = user, .id = p->next_id++};
    g_array_append_val(p->known, q);
    return &g_array_index(p->known, known_pool, p->known->len - 1);
}

static gs_status call(const gs_pools_site *s, int d, gs_op op, void *stream, uint32_t id, bool flag)
{
    uint32_t si = op == GS_OP_POOL_BEGIN ? s->stream_index(s->ud, stream) : 0;
    gs_status st = gs_tenants_pool(s->tenants, d, s->client, op, id, si, flag);
    if (st == GS_OK && s->record) s->record(s->ud, d, op, stream, id, flag);
    return st;
}

/* Pool id gains a use with no route (PyTorch's createOrIncrefPool): in the trace a begin and
 * an end with no request between. A pool being recorded to refuses it, as PyTorch asserts a
 * pool made twice over. */
static gs_status create(const gs_pools_site *s, int d, uint32_t id)
{
    gs_status st = call(s, d, GS_OP_POOL_BEGIN, NO_STREAM, id, false);
    if (st == GS_OK) call(s, d, GS_OP_POOL_END, NO_STREAM, id, false);
    return st;
}

gs_status gs_pools_begin(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user,
                         gs_pool_filter filter, void *ctx)
{
    known_pool *q = filter && p->nopen < MAX_OPEN ? known(p, d, graph, user, true) : NULL;
    if (!q) return GS_ERR_INVALID;
    uint32_t id = q->id;
    while (q->owed && create(s, d, id) == GS_OK) q->owed--; /* a MemPool's use, owed */
    gs_status st = call(s, d, GS_OP_POOL_BEGIN, NO_STREAM, id, false);
    if (st != GS_OK) return st; /* a 16th pool, a 17th route, or one being recorded to */
    p->open[p->nopen++] = (open_begin){.device = d,
                                       .graph = graph,
                                       .user = user,
                                       .id = id,
                                       .filter = filter,
                                       .ctx = ctx};
    p->open_on[d]++;
    return GS_OK;
}

void gs_pools_end(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user)
{
    for (int i = p->nopen - 1; i >= 0; i--) {
        open_begin *o = &p->open[i];
        if (o->device != d || o->graph != graph || o->user != user) continue;
        call(s, d, GS_OP_POOL_END, NO_STREAM, o->id, false); /* every stream of the recording */
        p->open_on[d]--;
        memmove(o, o + 1, (size_t)(p->nopen - i - 1) * sizeof *o);
        p->nopen--;
        return;
    }
}

void gs_pools_release(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user,
                      bool empty_now)
{
    known_pool *q = known(p, d, graph, user, false);
    if (!q) return;
    if (empty_now && q->owed) q->owed--; /* a MemPool never made gone: it held no use */
    else (void)call(s, d, GS_OP_POOL_RELEASE, NO_STREAM, q->id, empty_now); /* (no use: refused) */
}

gs_status gs_pools_create(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user)
{
    known_pool *q = known(p, d, graph, user, true);
    if (!q) return GS_ERR_INVALID;
    gs_status st = create(s, d, q->id);
    if (st != GS_OK) q->owed++;
    return st;
}

int gs_pools_uses(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user)
{
    const known_pool *q = known(p, d, graph, user, false);
    return q ? gs_heap_pool_uses(gs_tenants_heap(s->tenants, d, s->client), q->id) + q->owed : 0;
}

void gs_pools_route(gs_pools *p, const gs_pools_site *s, int d, void *stream)
{
    if (!p->open_on[d]) return;
    /* a stream some recording took already: the heap sends it there (its first route) */
    for (int i = 0; i < p->nopen; i++)
        for (int r = 0; p->open[i].device == d && r < p->open[i].nstreams; r++)
            if (p->open[i].stream[r] == stream) return;
    for (int i = 0; i < p->nopen; i++) { /* else the first begin whose filter takes it */
        open_begin *o = &p->open[i];
        if (o->device != d || !o->filter(o->ctx, stream)) continue;
        /* (a recording of 15 streams, or a heap that refuses a 17th route: the request goes
         * to the ordinary pools, not to another begin's) */
        if (o->nstreams < MAX_STREAM_ROUTES &&
            call(s, d, GS_OP_POOL_BEGIN, stream, o->id, false) == GS_OK)
            o->stream[o->nstreams++] = stream;
        return;
    }
}
