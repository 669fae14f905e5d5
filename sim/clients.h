/* clients.h - private to sim/: the allocators of a replay whose trace has several clients
 * (libraries on one GPU), how events are routed to them, and what each client is charged.
 * The replay loop (replay.c) calls these around each event; nothing here runs for a trace
 * with one client.
 */
#ifndef GS_CLIENTS_H
#define GS_CLIENTS_H

#include "opts.h"
#include "result.h"

G_BEGIN_DECLS

typedef struct gs_clients gs_clients;

/* The pieces of the arrangements that another owner of several heaps (the library's clients,
 * torch/tenants.c) uses as the replay does: */
/* The counters of a heap that the shared arrangement charges to the client whose request
 * caused them. */
typedef struct {
    uint64_t retries, ooms, syncs, dev_alloc, dev_free, rejections;
    gs_devcalls calls;
} gs_heap_counters;
void gs_heap_counters_read(const gs_heap *h, gs_heap_counters *k);
/* cr is charged what the counters grew by from before to now. */
void gs_client_charge(gs_client_result *cr, const gs_heap_counters *before,
                      const gs_heap_counters *now);
/* Cooperative: every heap of heaps[0..n) but h releases its cached segments, each counted in
 * cr[k].released_for_others. Whether any gave something back; *st: a device error (then
 * false), else GS_OK. */
bool gs_clients_release_others(gs_heap *const *heaps, size_t n, const gs_heap *h,
                               gs_client_result *cr, gs_status *st);

/* The allocators for t's clients under o->clients on be, each with hc's limit and device
 * total. NULL when a policy cannot run on be; *failed is then that policy. */
gs_clients *gs_clients_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           gs_backend *be, const gs_heap_config *hc, const gs_policy **failed);
/* Before event e: the allocator that serves it (an allocation's client; a free goes to the
 * allocator of its allocation). slots: the replay's live blocks. */
gs_heap *gs_clients_route(gs_clients *c, const gs_event *e, gs_block *const *slots);
/* After event e (also after one that failed): charge the client, track the device's peaks. */
void gs_clients_after(gs_clients *c, const gs_event *e, gs_block *const *slots);
/* Event e, index i, met an OOM the ladder could not recover from. */
void gs_clients_oom(gs_clients *c, const gs_event *e, size_t i);
/* The device's reserved bytes now: every allocator's. */
uint64_t gs_clients_reserved(const gs_clients *c);
/* Free the live block of slot (between repetitions of the trace). */
void gs_clients_free_slot(gs_clients *c, uint32_t slot, gs_block *b);
/* Fill r's device-wide stats and calls and its clients, then free everything. */
void gs_clients_finish(gs_clients *c, gs_result *r);
/* Each allocator under the replay's limit, every one of a policy blind to it: the limits that
 * would have decided every allocator's checks as this one did, [*lo, *hi) (gs_heap_same_limits
 * of each, intersected); false where a policy reads the limit otherwise. Before
 * gs_clients_finish. */
bool gs_clients_same_limits(const gs_clients *c, uint64_t *lo, uint64_t *hi);

G_END_DECLS

#endif
