/* pools.h - the private pools of CUDA graphs and torch.cuda.MemPool, in libgpusim_torch.so.
 *
 * PyTorch tells an allocator of a private pool through three hooks (CUDAPluggableAllocator's
 * set_begin_allocate_to_pool, set_end_allocate_to_pool_fn and set_release_pool): begin (a pool,
 * named by a pair of numbers, and a filter that says which requests go to it: those of the
 * capture's stream for a CUDA graph, the thread's for a MemPool), end (the capture or the
 * context is over) and release (the graph or the MemPool is gone: the pool loses a use).
 * PyTorch's own allocator asks every begun filter at each malloc, and routes the request to the
 * pool of the first that takes it. Without the hooks a capture's freed blocks went back to the
 * ordinary pools, where eager code could get them while the graph's replays still write there.
 *
 * The core routes by stream (gs_heap_pool_begin). So a begin opens the pool's route at once,
 * on a stream no request names: the pool gains its use there, as PyTorch's begin gives it one,
 * and the heap knows a recording is underway before the capture's first request (no full flush
 * from then; a release the heap owes is made before the capture starts). Before each malloc,
 * the filters of the begins open on the device are asked, in the order begun, unless a
 * recording took the request's stream already; the first that takes it adds the stream to its
 * recording (a capture's own stream, and a side stream it forked onto), and the end closes
 * them all. A capture's requests are its streams' (exact); a MemPool's route, once its thread's
 * first request on a stream opened it, takes every thread's requests on that stream until the
 * end. PyTorch 2.11's CUDAPluggableAllocator refuses to make a MemPool (createOrIncrefPool),
 * so gpusim run's hook stands in for torch.cuda.MemPool and makes the pool here
 * (gs_pools_create; torch/run/gpusim_mempool.py).
 *
 * Not thread-safe: the library calls it under its lock.
 */
#ifndef GS_TORCH_POOLS_H
#define GS_TORCH_POOLS_H

#include "tenants.h"

/* A begin's filter: nonzero when a request on stream goes to its pool. */
typedef int (*gs_pool_filter)(void *ctx, void *stream);

typedef struct {
    gs_tenants *tenants;
    int client; /* whose heap: PyTorch's */
    /* each call made to the heap, for the trace: op (GS_OP_POOL_*), the stream, the pool's
     * id, the flag (gs_tenants_pool's); NULL for none */
    void (*record)(void *ud, int device, gs_op op, void *stream, uint32_t id, bool flag);
    void *ud;
    /* the stream's index, as the library numbers streams for the heap */
    uint32_t (*stream_index)(void *ud, void *stream);
} gs_pools_site;

typedef struct gs_pools gs_pools;

gs_pools *gs_pools_new(void);
void gs_pools_free(gs_pools *p);
/* Pool (graph, user) of device d gains a use, and filter(ctx, stream) says from now on which
 * requests go to it. GS_ERR_INVALID (nothing done) for the pair (0, 0), when 16 begins are
 * open, or when the heap refuses the route (15 pools, 16 routes, the pool being recorded to). */
gs_status gs_pools_begin(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user,
                         gs_pool_filter filter, void *ctx);
/* The newest begin of pool (graph, user) on d ends: its routes close; its filter and ctx are
 * not asked again. */
void gs_pools_end(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user);
/* Pool (graph, user) of d loses a use; at none its cached segments go at the next
 * empty_cache, or at once with empty_now (torch.cuda.MemPool's destructor; a MemPool whose
 * making was refused and still owes its use gives up that debt instead). An unknown pool, or
 * one with no use left: nothing. */
void gs_pools_release(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user,
                      bool empty_now);
/* Pool (graph, user) of d is made if new and gains a use, with no route: a MemPool's
 * construction (PyTorch's createOrIncrefPool), which its destructor's release takes back. In
 * the trace, a begin and an end with no request between. GS_ERR_INVALID as gs_pools_begin:
 * when the heap holds its 15 private pools already, the use is owed and made at the pool's
 * next begin that finds a slot (until then its requests go to the ordinary pools). */
gs_status gs_pools_create(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph,
                          uint64_t user);
/* The uses of pool (graph, user) of d (PyTorch's getPoolUseCount), an owed one counted: 0 for
 * one unknown or gone, and under a policy with no private pools (gs_policy_ops.grow). */
int gs_pools_uses(gs_pools *p, const gs_pools_site *s, int d, uint64_t graph, uint64_t user);
/* Before a malloc on stream of device d (opened): routes for the begins whose filter takes it. */
void gs_pools_route(gs_pools *p, const gs_pools_site *s, int d, void *stream);

#endif
