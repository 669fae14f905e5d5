/* tenants.h - the libraries one process runs on libgpusim_torch.so (PyTorch, CuPy, ...), each a
 * named client, and how they share each device: the arrangements of `gpusim replay --clients`
 * (sim/opts.h), on real memory.
 *
 *   separate     a heap per client and device, each under its client's policy: what one caches
 *                the others cannot have, as two libraries' own pools;
 *   shared       one heap per device serves every client (as RMM's hooks for PyTorch and CuPy);
 *                each client is charged what its requests made, as the replay charges it;
 *   cooperative  a heap per client, and one the device refuses asks the others to release their
 *                cached segments, then tries once more (gs_heap_config.reclaim).
 *
 * Every heap of a device has the same limit (GPUSIM_CAPACITY, as --capacity limits each
 * allocator of a replay); what they compete for is the device's memory. The results (one per
 * device) are the replay's: with one client exactly what a lone allocator reports, with several
 * the device's sums and peaks and each client's part (gs_client_result), so that the statistics
 * of a real run and of the replay of its trace (`gpusim replay --clients MODE`) compare field by
 * field.
 *
 * Not thread-safe: the library calls it under its one lock.
 */
#ifndef GS_TENANTS_H
#define GS_TENANTS_H

#include "report.h"

#define GS_TENANTS_MAX_CLIENTS 8
#define GS_TENANTS_MAX_DEVICES 64
#define GS_TENANTS_NAME_MAX 32

typedef struct gs_tenants gs_tenants;

/* shared: the shared arrangement's one heap's policy (borrowed), as the replay's --policy. */
gs_tenants *gs_tenants_new(gs_clients_mode mode, uint64_t capacity, const gs_policy *shared);
/* Client name (1 to GS_TENANTS_NAME_MAX of [a-z0-9_]) under policy p (borrowed: it must outlive
 * the tenants): its number, the same for the same name; -1 and *err when the name is bad, the
 * table full, or p cannot run on a device already in use. */
int gs_tenants_client(gs_tenants *t, const char *name, const gs_policy *p, GError **err);
const char *gs_tenants_name(const gs_tenants *t, int k);
size_t gs_tenants_count(const gs_tenants *t);
/* Device d's heaps on backend be (borrowed), made at its first request; device_total as
 * gs_heap_config's. FALSE and *err when a client's policy cannot run on it. */
gboolean gs_tenants_open(gs_tenants *t, int d, gs_backend *be, uint64_t device_total, GError **err);
gboolean gs_tenants_has(const gs_tenants *t, int d);

/* Client k's requests on device d (opened): a malloc (*b set when GS_OK), a free of a block it
 * got from gs_tenants_malloc with the same k and d, an empty_cache of its own heap (shared:
 * the one heap). */
gs_status gs_tenants_malloc(gs_tenants *t, int d, int k, uint64_t size, uint32_t stream,
                            gs_block **b);
void gs_tenants_free(gs_tenants *t, int d, int k, gs_block *b);
gs_status gs_tenants_empty_cache(gs_tenants *t, int d, int k);

/* A private pool call of client k on device d: GS_OP_POOL_BEGIN (a route for stream to pool
 * id, which gains a use), GS_OP_POOL_END (the newest route to id closes) or GS_OP_POOL_RELEASE
 * (id loses a use): the core's gs_heap_pool_* (shared: on the one heap). flag is the trace
 * event's size: a begin's route for every stream, a release's cache emptied at once. */
gs_status gs_tenants_pool(gs_tenants *t, int d, int k, gs_op op, uint32_t id, uint32_t stream,
                          bool flag);

/* Client k's heap on device d (shared: the one heap): what its last failed request met, for
 * the OOM message, and whose statistics its program sees. */
const gs_heap *gs_tenants_heap(const gs_tenants *t, int d, int k);
/* Every heap's reserved bytes on device d. */
uint64_t gs_tenants_reserved(const gs_tenants *t, int d);

/* Device d's result into r (zeroed by the caller; r->policy and the strings it points to stay
 * the tenants'): the heap's statistics and calls with one client, else the device's sums and
 * peaks, the arrangement and each client's part (r->clients, owned by r: gs_result_clear). */
void gs_tenants_result(gs_tenants *t, int d, gs_result *r);

#endif
