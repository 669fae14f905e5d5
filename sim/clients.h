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

G_END_DECLS

#endif
