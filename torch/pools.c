/* pools.c - CUDA graphs' and MemPools' private pools in libgpusim_torch.so: PyTorch's pool
 * hooks turned into the core's routes (pools.h says how). */
#include "pools.h"

enum { MAX_POOLS = 64, MAX_OPEN = 16, MAX_STREAM_ROUTES = 16 };

typedef struct {
    int device;
    uint64_t graph, user; /* PyTorch's MempoolId_t */
    uint32_t id;          /* the heap's */
    int uses;             /* PyTorch's: begins less releases */
    int core_uses;        /* the heap's: routes opened less releases made */
    bool known;
} pool;

typedef struct {
    pool *pool;
    gs_pool_filter filter;
    void *ctx;
    int nroutes;
    void *stream[MAX_STREAM_ROUTES]; /* the streams a route was opened for */
} open_begin;

struct gs_pools {
    pool pools[MAX_POOLS];
    open_begin open[MAX_OPEN]; /* in the order begun */
    int nopen;
    uint32_t next_id;
    int open_on[GS_TENANTS_MAX_DEVICES]; /* open begins per device: none, no filter asked */
};

gs_pools *gs_pools_new(void)
{
    gs_pools *p = g_new0(gs_pools, 1);
    p->next_id = 1;
    return p;
}

void gs_pools_free(gs_pools *p)
{
    g_free(p);
}

static pool *find(gs_pools *p, int d, uint64_t graph, uint64_t user)
{
    for (int i = 0; i < MAX_POOLS; i++) {
        pool *q = &p->pools[i];
        if (q->known && q->device == d && q->graph == graph && q->user == user) return q;
    }
    return NULL;
}

static gs_status call(const gs_pools_site *s, int d, gs_op op, void *stream, uint32_t id)
{
    uint32_t si = op == GS_OP_POOL_BEGIN ? s->stream_index(s->ud, stream) : 0;
    gs_status st = gs_tenants_pool(s->tenants, d, s->client, op, id, si);
    if (st == GS_OK && s->record) s->record(s->ud, d, op, stream, id);
    return st;
}

/* The heap keeps a use while PyTorch's count has one (once a route made its pool), no more
 * than PyTorch's count, and none once that has none. */
static void settle(const gs_pools_site *s, pool *q)
{
    while (q->core_uses > 0 && (q->uses == 0 || q->core_uses > q->uses)) {
        (void)call(s, q->device, GS_OP_POOL_RELEASE, NULL, q->id);
        q->core_uses--;
    }
    if (q->uses == 0 && q->core_uses == 0) q->known = false;
}

gs_status gs_pools_begin(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user,
                         gs_pool_filter filter, void *ctx)
{
    if ((!graph && !user) || !filter || p->nopen == MAX_OPEN || d < 0 ||
        d >= GS_TENANTS_MAX_DEVICES)
        return GS_ERR_INVALID;
    pool *q = find(p, d, graph, user);
    for (int i = 0; !q && i < MAX_POOLS; i++) {
        if (p->pools[i].known) continue;
        q = &p->pools[i];
        *q = (pool){.device = d, .graph = graph, .user = user, .id = p->next_id++, .known = true};
    }
    if (!q) return GS_ERR_INVALID;
    q->uses++;
    p->open[p->nopen++] = (open_begin){.pool = q, .filter = filter, .ctx = ctx};
    p->open_on[d]++;
    return GS_OK;
}

void gs_pools_end(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user)
{
    for (int i = p->nopen - 1; i >= 0; i--) {
        open_begin *o = &p->open[i];
        if (o->pool->device != d || o->pool->graph != graph || o->pool->user != user) continue;
        for (int r = 0; r < o->nroutes; r++) call(s, d, GS_OP_POOL_END, o->stream[r], o->pool->id);
        p->open_on[d]--;
        memmove(o, o + 1, (size_t)(p->nopen - i - 1) * sizeof *o);
        p->nopen--;
        return;
    }
}

void gs_pools_release(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user)
{
    pool *q = find(p, d, graph, user);
    if (!q || q->uses == 0) return;
    q->uses--;
    settle(s, q);
}

void gs_pools_route(gs_pools *p, const gs_pools_site *s, int d, void *stream)
{
    if (!p->open_on[d]) return;
    for (int i = 0; i < p->nopen; i++) {
        open_begin *o = &p->open[i];
        if (o->pool->device != d) continue;
        bool routed = false;
        for (int r = 0; r < o->nroutes && !routed; r++) routed = o->stream[r] == stream;
        /* a stream with a route: the heap sends it there; the first begin that takes it wins */
        if (routed) return;
        if (o->nroutes == MAX_STREAM_ROUTES || !o->filter(o->ctx, stream)) continue;
        /* (the heap refuses a 16th pool or a 17th route: the request goes to the ordinary
         * pools, as it did before the hooks) */
        if (call(s, d, GS_OP_POOL_BEGIN, stream, o->pool->id) != GS_OK) return;
        o->stream[o->nroutes++] = stream;
        o->pool->core_uses++;
        settle(s, o->pool);
        return;
    }
}
