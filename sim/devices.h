/* devices.h - private to sim/: the allocators of a replay whose trace names several devices
 * (model or pipeline parallel in one process). As PyTorch keeps one DeviceCachingAllocator per
 * device, each device here has its own heap on its own simulated device, with its own limit and
 * memory; events go to their device's heap. The replay loop (replay.c) calls these around each
 * event; nothing here runs for a trace with one device.
 */
#ifndef GS_DEVICES_H
#define GS_DEVICES_H

#include "opts.h"
#include "result.h"

G_BEGIN_DECLS

typedef struct gs_devices gs_devices;

/* A heap and a simulated device per device of t (ids: ascending, n of them) under p, with
 * o's settings and o->devices' per-device ones. NULL and err set when the replay cannot run
 * that way (a backend given in o, several clients, or a policy the device cannot run). */
gs_devices *gs_devices_new(const gs_trace *t, const gs_policy *p, const gs_replay_opts *o,
                           const uint32_t *ids, size_t n, GError **err);
/* Before event e: the heap that serves it (its device's; a free goes to its allocation's). */
gs_heap *gs_devices_route(gs_devices *d, const gs_event *e);
/* After each event (e): the totals' peaks (of the sums over the devices). */
void gs_devices_after(gs_devices *d, const gs_event *e);
/* Event e (index i) failed: fatal (the run stops) or caught (an oom event gone past). */
void gs_devices_oom(gs_devices *d, const gs_event *e, size_t i, bool caught);
/* Free the live block of slot (between repetitions of the trace). */
void gs_devices_free_slot(gs_devices *d, uint32_t slot, gs_block *b);
/* Fill r's totals and r->devices, then free everything. */
void gs_devices_finish(gs_devices *d, gs_result *r);

G_END_DECLS

#endif
